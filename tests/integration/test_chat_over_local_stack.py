"""The mobile API function end to end over real HTTP: app -> store -> local DynamoDB server,
model -> Bedrock emulator. The function is loaded from template.yaml as Lambda would load it, and
given the event the way Lambda Web Adapter gives it."""

import json
import threading
from pathlib import Path
from typing import Any

import boto3

from infra.local.bedrock_emulator.coach import Turn
from infra.local.lambda_runner import invoke
from infra.local.stack import LocalStack
from onboarding.composition import build_repositories
from onboarding.config import Settings
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.model.state import OnboardingAgentType

SAMPLE_EVENT = json.loads((Path(__file__).parents[2] / "events" / "api_chat.json").read_text(encoding="utf-8"))
QUESTIONS = [field.question for field in STEP_PROMPTS[OnboardingAgentType.FITNESS_ASSESSMENT].fields]


def _chat(user_id: str, message: str) -> dict[str, Any]:
    event = json.loads(json.dumps(SAMPLE_EVENT))
    event["requestContext"]["authorizer"]["claims"]["sub"] = user_id
    event["body"] = json.dumps({"message": message})
    response = invoke("ApiFunction", event)
    assert response["statusCode"] == 200, response["body"]
    body: dict[str, Any] = json.loads(response["body"])
    return body


def test_turn_n_sees_turns_1_to_n_minus_1(local_stack: LocalStack, user_id: str) -> None:
    said = [
        "Hi!",
        "Intermediate, I think",
        "I cycle to work and lift twice a week",
        "A stiff left shoulder",
        "34, 180 cm, 82 kg",
    ]
    replies: list[str] = []
    for turn_number, message in enumerate(said, start=1):
        before = len(local_stack.bedrock.requests)
        replies.append(_chat(user_id, message)["reply"])
        request = local_stack.bedrock.requests[before]  # the turn's first call (tool rounds follow)
        expected = [("user", said[0])]
        for earlier_reply, next_message in zip(replies[: turn_number - 1], said[1:turn_number], strict=True):
            expected += [("assistant", earlier_reply), ("user", next_message)]
        assert _spoken(request.conversation) == expected
    # The coach moved through the questions instead of re-asking them, and quotes what it heard.
    for question, reply in zip(QUESTIONS, replies[:-1], strict=False):
        assert reply.endswith(question)
    assert "“A stiff left shoulder”" in replies[-2]
    # The last answer completed the step: its tool saved it and the coach moved to goal setting.
    assert "That step is done" in replies[-1]
    before = len(local_stack.bedrock.requests)
    _chat(user_id, "Thanks!")
    system = local_stack.bedrock.requests[before].system_text
    assert "Current step: Goal setting" in system
    assert "fitness_assessment.limitations: A stiff left shoulder" in system


def _spoken(conversation: list[Turn]) -> list[tuple[str, str]]:
    """What was said, as the client saw it: tool results (no text) left out, and the texts of one
    reply (before and after its tool calls) joined as the API's reply joins them."""
    spoken: list[tuple[str, str]] = []
    for turn in conversation:
        if not turn.text:
            continue
        if spoken and spoken[-1][0] == turn.role:
            spoken[-1] = (turn.role, f"{spoken[-1][1]} {turn.text}")
        else:
            spoken.append((turn.role, turn.text))
    return spoken


def test_both_turns_are_in_the_table_byte_exact(local_stack: LocalStack, user_id: str) -> None:
    message = "مرحبا 👋🏽 " + "ق" * 4_500
    body = _chat(user_id, message)
    stored = build_repositories(Settings.from_env()).conversations.load_turn(user_id, 20).messages
    assert [(m.message_id, m.role) for m in stored] == [
        (body["userMessageId"], "user"),
        (body["assistantMessageId"], "assistant"),
    ]
    assert stored[0].content.encode() == message.encode()
    assert stored[1].content == body["reply"]


def test_the_table_is_reached_only_through_the_standard_variable(local_stack: LocalStack, user_id: str) -> None:
    _chat(user_id, "hello")
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=local_stack.dynamodb.url)
    items = client.query(
        TableName=local_stack.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"USER#{user_id}"}},
    )["Items"]
    assert sum(item["sk"]["S"].startswith("MSG#") for item in items) == 2


def test_concurrent_turns_for_one_user_lose_nothing(local_stack: LocalStack, user_id: str) -> None:
    """Twenty turns at once for the same user: twenty messages and twenty replies stored (plus the
    tool calls a turn made when its message read as an answer), none overwritten."""
    errors: list[BaseException] = []

    def one_turn(index: int) -> None:
        try:
            _chat(user_id, f"message {index}")
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=one_turn, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    stored = build_repositories(Settings.from_env()).conversations.load_turn(user_id, 100).messages
    assert sorted(m.content for m in stored if m.role == "user") == sorted(f"message {i}" for i in range(20))
    assert sum(m.role == "assistant" and not m.tool_calls for m in stored) == 20
    calls = [call.call_id for m in stored for call in m.tool_calls]
    results = [m.tool_call_id or "" for m in stored if m.role == "tool"]
    assert sorted(calls) == sorted(results)  # every call answered
    tool_bookkeeping = sum(1 for m in stored if m.tool_calls) + len(results)
    assert len({m.message_id for m in stored}) == len(stored) == 40 + tool_bookkeeping


def test_the_table_survives_a_restart(tmp_path: Path) -> None:
    """What the terminal chat relies on: stop the stack, start it again, the memory is there."""
    data_file = tmp_path / "table.jsonl"
    with LocalStack(data_file):
        # A store built inside this stack (the warm chat function still points at the session's).
        store = build_repositories(Settings.from_env())
        written = [
            store.writes.append_message("restart-user", "user", "I'm a beginner 🏃"),
            store.writes.append_message("restart-user", "assistant", "Noted!"),
        ]
    assert data_file.exists()
    with LocalStack(data_file):
        assert build_repositories(Settings.from_env()).conversations.load_turn("restart-user", 20).messages == tuple(
            written
        )
    with LocalStack(None):
        assert build_repositories(Settings.from_env()).conversations.load_turn("restart-user", 20).messages == ()
