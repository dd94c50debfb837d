"""The stack that deploys is the stack that runs here: every flow of the functions (each API route,
each SMS command, a merge, the fold, a dead-lettered text, the SnapStart hooks) runs on the local
stack with template.yaml's policies enforced, and nothing may be refused. Every action the
template grants is used by some flow, and without it that flow fails (the mutations)."""

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.local.iam.actions import Authorization
from infra.local.iam.policy import decide
from infra.local.iam.roles import inline_statements
from infra.local.stack import LocalStack
from infra.local.template import load_template
from tests.support.deployed_flows import FLOWS

# What no flow can make a function use, and why the template still grants it.
NOT_EXERCISED = {
    ("SmsWebhookFunction", "Idempotency", "dynamodb:GetItem"): (
        "Powertools Idempotency's documented permissions: it reads a duplicate's record with GetItem only when "
        "DynamoDB returns no old item (ReturnValuesOnConditionCheckFailure makes it do so here)"
    ),
    ("SmsWorkerFunction", "Idempotency", "dynamodb:GetItem"): (
        "Powertools Idempotency's documented permissions, as for the webhook"
    ),
    # Used (the erase flows' REMOVE records reach it), but no flow fails without it yet: the erase
    # deletes the vectors itself first, and the indexer's failed delete is retried, then skipped.
    # It is what deletes the vectors of a message that TTL removes; a flow that waits for one is due.
    ("RecallIndexerFunction", "WriteRecallIndex", "s3vectors:DeleteVectors"): (
        "the indexer's delete backs up the erase's own and serves TTL expiry, which no flow reaches"
    ),
}
# A quick copy of the mutations for the default run: the actions that were missing once.
QUICK_MUTATIONS = [
    ("ApiFunction", "ConversationTableReadWrite", "dynamodb:ConditionCheckItem"),
    ("SmsWebhookFunction", "PhoneOwnersAndLinks", "dynamodb:Query"),
    ("SmsWorkerFunction", "ConversationTableReadWrite", "dynamodb:BatchWriteItem"),
    # QueryVectors with a filter and metadata needs GetVectors as well (S3 Vectors API reference).
    ("ApiFunction", "RecallIndex", "s3vectors:GetVectors"),
]


def granted_actions() -> list[tuple[str, str, str]]:
    """Every (function, statement Sid, action) of the template's inline policies, as written."""
    return [
        (logical_id, str(statement.get("Sid")), action)
        for logical_id, resource in load_template()["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
        for policy in resource["Properties"].get("Policies", [])
        for statement in policy["Statement"]
        for action in (statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])
    ]


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(api_port=0) as running:
        yield running


@pytest.fixture(scope="module")
def usage(stack: LocalStack) -> dict[str, tuple[float, set[tuple[str, str, str]]]]:
    """Each flow, run once under the template's policies: how long it took and what it was granted."""
    found: dict[str, tuple[float, set[tuple[str, str, str]]]] = {}
    for name, flow in FLOWS.items():
        before = stack.decisions().granted
        started = time.monotonic()
        flow(stack)
        after = stack.decisions()
        assert after.refusals == [], f"{name}: refused {after.refusals}"
        found[name] = (
            time.monotonic() - started,
            {grant for grant, n in after.granted.items() if n > before.get(grant, 0)},
        )
    return found


@pytest.mark.parametrize("flow", list(FLOWS))
def test_each_flow_works_with_exactly_what_the_template_allows(stack: LocalStack, flow: str) -> None:
    FLOWS[flow](stack)
    assert stack.decisions().refusals == []


def test_every_action_the_template_grants_is_used_by_a_flow(
    stack: LocalStack, usage: dict[str, tuple[float, set[tuple[str, str, str]]]]
) -> None:
    """Least privilege: an action no flow uses is either missing a flow here or not needed."""
    used = set().union(*(grants for _, grants in usage.values()))
    statements = {
        (logical_id, str(statement.get("Sid"))): statement
        for logical_id in stack.deployment.functions()
        for statement in inline_statements(stack.deployment, logical_id)
    }
    unused = [
        (logical_id, sid, action)
        for logical_id, sid, action in granted_actions()
        if (logical_id, sid, action) not in NOT_EXERCISED
        and not any(
            function == logical_id
            and decide([{**statements[logical_id, sid], "Action": action, "Condition": {}}], Authorization(
                granted, resource)).allowed
            for function, granted, resource in used
        )
    ]  # fmt: skip
    assert unused == []


def _without(logical_id: str, sid: str, action: str, folder: Path) -> Path:
    """A copy of template.yaml (as JSON, which CloudFormation also reads) without one action."""
    template: dict[str, Any] = copy.deepcopy(load_template())
    for policy in template["Resources"][logical_id]["Properties"]["Policies"]:
        for statement in policy["Statement"]:
            if statement.get("Sid") == sid:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                statement["Action"] = [kept for kept in actions if kept != action]
    path = folder / f"without-{logical_id}-{sid}-{action.replace(':', '-')}.json"
    path.write_text(json.dumps(template), encoding="utf-8")
    return path


def _a_flow_fails_without(
    stack: LocalStack,
    usage: dict[str, tuple[float, set[tuple[str, str, str]]]],
    mutation: tuple[str, str, str],
    folder: Path,
) -> None:
    logical_id, sid, action = mutation
    users = sorted(
        (name for name, (_, grants) in usage.items() if any(g[:2] == (logical_id, action) for g in grants)),
        key=lambda name: usage[name][0],
    )
    assert users, f"no flow uses {mutation}"
    stack.reload_policies(_without(logical_id, sid, action, folder))
    try:
        for name in users:
            refused_before = len(stack.decisions().refusals)
            try:
                FLOWS[name](stack)
            except AssertionError:
                return  # what the person sees goes wrong
            if len(stack.decisions().refusals) > refused_before:
                return  # refused, as AWS would: the flow's test fails
        raise AssertionError(f"every flow still passes without {mutation}: {users}")
    finally:
        stack.reload_policies()


@pytest.mark.parametrize(
    "mutation",
    [pytest.param(m, marks=() if m in QUICK_MUTATIONS else pytest.mark.slow) for m in granted_actions()
     if m not in NOT_EXERCISED],
    ids="/".join,
)  # fmt: skip
def test_without_any_one_action_the_template_grants_a_flow_fails(
    stack: LocalStack,
    usage: dict[str, tuple[float, set[tuple[str, str, str]]]],
    mutation: tuple[str, str, str],
    tmp_path: Path,
) -> None:
    """All of them in the slow tier; in the default run, the three that were missing once and the one
    AWS documents as needed beyond the operation's own name."""
    _a_flow_fails_without(stack, usage, mutation, tmp_path)
