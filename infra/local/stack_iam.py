"""The local stack's part of decision 0023: the template's policies turned into the gate every local
server checks requests against, what the gates refused and granted, and a policy reloaded without a
restart."""

import argparse
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from infra.local.deployment import LocalDeployment
from infra.local.dynamodb_process import FIRST_ANSWER_TIMEOUT_S

# The gate and its wire protocol are imported when a stack starts, not with this module: so that
# `python -m infra.local_stack` checks its ports (and says which one is taken) within a second.
if TYPE_CHECKING:
    from infra.local.iam.gate import Gate


@dataclass(frozen=True)
class IamDecisions:
    refusals: list[str]  # each as AWS words it
    granted: dict[tuple[str, str, str], int]  # (function, action, resource) -> how often it was allowed


def start_gate(deployment: LocalDeployment, folder: Path) -> tuple["Gate", Path]:
    """The gate of the template's policies, for the in-process servers, and the same policies
    written to a file in `folder` for the DynamoDB server's process."""
    from infra.local.iam.gate import gate_from, gate_settings

    settings = gate_settings(deployment)
    policies = folder / "policies.json"
    policies.write_text(json.dumps(settings), encoding="utf-8")
    return gate_from(settings), policies


def iam_decisions(gate: "Gate | None", dynamodb_url: str) -> IamDecisions:
    """What the template's policies refused (the latest few hundred of each server, as AWS words
    each) and granted so far (how often each function used each action)."""
    if gate is None:
        return IamDecisions([], {})
    import httpx

    from infra.local.iam.wsgi import DECISIONS_PATH, decisions

    granted: dict[tuple[str, str, str], int] = {}
    refusals: list[str] = []
    for server in (httpx.get(dynamodb_url + DECISIONS_PATH, timeout=FIRST_ANSWER_TIMEOUT_S).json(),
                   decisions(gate)):  # fmt: skip
        refusals += server["refusals"]
        for logical_id, action, resource, count in server["granted"]:
            grant = (logical_id, action, resource)
            granted[grant] = granted.get(grant, 0) + count
    return IamDecisions(refusals, granted)


def reload_policies(gate: "Gate", deployment: LocalDeployment, dynamodb_url: str, template_path: Path | None) -> None:
    """Enforce the policies of `template_path` (default: template.yaml as it is now) from now on, in
    the DynamoDB server's process and in this one's servers."""
    import httpx

    from infra.local.iam.gate import gate_from, gate_settings
    from infra.local.iam.wsgi import POLICIES_PATH
    from infra.local.template import TEMPLATE_PATH, load_template

    path = template_path or TEMPLATE_PATH
    load_template.cache_clear()
    settings = gate_settings(dataclasses.replace(deployment, template_path=path))
    httpx.put(
        dynamodb_url + POLICIES_PATH, content=json.dumps(settings), timeout=FIRST_ANSWER_TIMEOUT_S
    ).raise_for_status()
    gate.replace(gate_from(settings))


def add_iam_option(parser: argparse.ArgumentParser) -> None:
    """The option that turns the template's policies off, the same on every local tool."""
    parser.add_argument(
        "--no-iam",
        action="store_true",
        help="do not enforce the template's IAM policies on the local stack (for experiments; docs/deploy.md)",
    )


def describe_iam(enforced: bool) -> str:
    if not enforced:
        return "IAM: off (--no-iam): every function may do anything here, which AWS would not allow."
    return (
        "IAM: each function's requests are checked against its policy in template.yaml (--no-iam turns this off);\n"
        "  the keys above are the operator's, who may do anything; AWS_ACCESS_KEY_ID=LOCALFN<Function> acts as one."
    )
