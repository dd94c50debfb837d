"""Two Lambdas answering one user at the same moment (the app and an SMS, say), as two processes
against the local DynamoDB server over HTTP: each turn's tools save a different answer and a
different fact, and both must be kept. Each process has its own model (a Bedrock
emulator scripted with that process's tool calls); a barrier starts each pair of turns together,
so both read the state before either stores it."""

import asyncio
import json
import multiprocessing
import os
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from infra.local.stack import LocalStack
from onboarding.model.answers import answer_value

pytestmark = pytest.mark.integration

RUNS = 200  # the slow tier's race; the default run races a tenth of it (every behaviour, fewer pairs)
ANSWERS = {
    "a": ({"fitness_level": "beginner"}, {"kind": "name", "value": "Sam"}),
    "b": ({"current_activity": "runs twice a week"}, {"kind": "other", "value": "hates treadmills"}),
}


def _answer_turns(
    side: str, env: dict[str, str], users: list[str], barrier: Any, results: "multiprocessing.Queue[Any]"
) -> None:
    """One 'Lambda': a turn per user, each saving this side's answer and fact (runs in a child)."""
    os.environ.update(env)
    from infra.local.bedrock_emulator import BedrockEmulator
    from infra.local.bedrock_emulator.coach import CoachReply, ToolCall
    from onboarding.composition import build_turn_service
    from onboarding.config import Settings

    conflicts = 0

    def count_conflicts(parsed: dict[str, Any], **_: Any) -> None:
        nonlocal conflicts
        conflicts += parsed.get("Error", {}).get("Code") == "TransactionCanceledException"

    boto3.setup_default_session()
    assert boto3.DEFAULT_SESSION is not None
    boto3.DEFAULT_SESSION.events.register("after-call.dynamodb.TransactWriteItems", count_conflicts)
    answer, fact = ANSWERS[side]
    with BedrockEmulator(chunk_delay_s=0.005) as model:
        os.environ["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] = model.url
        service = build_turn_service(Settings.from_env())
        for user in users:
            calls = (
                ToolCall(f"save-{side}-{user}", "save_fitness_assessment", answer),
                ToolCall(f"fact-{side}-{user}", "remember_fact", fact),
            )
            model.script(CoachReply("", calls))
            model.script(CoachReply("Noted, thanks."))
            barrier.wait(timeout=60)
            asyncio.run(_turn(service, user))
    results.put((side, conflicts))


async def _turn(service: Any, user: str) -> None:
    await (await service.start_turn(user, "Here is my answer")).collect()


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack() as running:
        yield running


@pytest.mark.parametrize(
    "runs", [pytest.param(RUNS // 10, id="20-pairs"), pytest.param(RUNS, marks=pytest.mark.slow, id="200-pairs")]
)
def test_two_turns_saving_different_answers_at_once_keep_both(stack: LocalStack, runs: int) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    users = [f"race-{uuid.uuid4().hex[:8]}-{i}" for i in range(runs)]
    env = {**stack.process_environment("ApiFunction"), "RATE_LIMIT_MESSAGES": "0"}
    sides = [context.Process(target=_answer_turns, args=(side, env, users, barrier, results)) for side in ANSWERS]
    for process in sides:
        process.start()
    for process in sides:
        process.join(600)
        assert process.exitcode == 0
    conflicts = dict(results.get(timeout=10) for _ in sides)

    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=stack.dynamodb.url)
    kept_both = 0
    for user in users:
        items = {
            item["sk"]["S"]: item
            for item in client.query(
                TableName=stack.table_name,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :a AND :b",
                ExpressionAttributeValues={
                    ":pk": {"S": f"USER#{user}"},
                    ":a": {"S": "~PROFILE"},
                    ":b": {"S": "~STATE"},
                },
                ConsistentRead=True,
            )["Items"]
        }
        answers = json.loads(items["~STATE"]["agent_context"]["S"])["fitness_assessment"]
        profile = json.loads(items["~PROFILE"]["profile"]["S"])
        if (
            answer_value(answers.get("fitness_level")) == "beginner"
            and answer_value(answers.get("current_activity")) == "runs twice a week"
            and profile["name"] == "Sam"
            and profile["other_facts"] == ["hates treadmills"]
        ):
            kept_both += 1
    print(f"\n{runs} runs of two concurrent turns: {kept_both} kept both answers and both facts; "
          f"write conflicts met and resolved: {sum(conflicts.values())}")  # fmt: skip
    assert kept_both == runs
    assert sum(conflicts.values()) >= runs // 2  # the turns really raced (else this shows nothing)
