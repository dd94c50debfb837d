"""The Bedrock emulator: wire format, Bedrock's validation rules, and the scripted coach."""

import io
from collections.abc import Iterable
from typing import Any, cast

import boto3
import pytest
from botocore.config import Config
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import ClientError

from infra.bedrock_emulator import BedrockEmulator
from infra.bedrock_emulator.coach import Turn, coach_reply
from infra.bedrock_emulator.eventstream import encode_event, encode_exception
from onboarding.prompts import STEP_PROMPTS, render_system_prompt
from onboarding.state import OnboardingAgentType


def test_frames_decode_with_botocores_own_parser() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(
        encode_event("contentBlockDelta", {"delta": {"text": "héllo 😀"}})
        + encode_exception("throttlingException", "slow down")
    )
    first, second = list(cast(Iterable[Any], buffer))
    assert first.headers == {
        ":event-type": "contentBlockDelta",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    assert first.payload.decode() == '{"delta": {"text": "h\\u00e9llo \\ud83d\\ude00"}}'
    assert second.headers[":exception-type"] == "throttlingException"


def _client(emulator: BedrockEmulator) -> Any:
    # Client-side validation off, so that the emulator's own checks are what is tested.
    return boto3.client(
        "bedrock-runtime", region_name="us-east-1", endpoint_url=emulator.url, config=Config(parameter_validation=False)
    )


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}]}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": text}]}


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([], "must start with a user message"),
        ([_assistant("hi"), _user("hello")], "must start with a user message"),
        ([_user("a"), _user("b")], "must alternate between user and assistant"),
        ([_user("a"), _assistant("b"), _assistant("c")], "must alternate between user and assistant"),
        ([_user("")], "is blank"),
        ([_user("   ")], "is blank"),
        ([{"role": "user", "content": []}], "is empty"),
    ],
)
def test_invalid_conversations_are_rejected_like_bedrock(
    emulator: BedrockEmulator, messages: list[dict[str, Any]], fragment: str
) -> None:
    with pytest.raises(ClientError) as raised:
        _client(emulator).converse_stream(modelId="anthropic.test", messages=messages)
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert fragment in raised.value.response["Error"]["Message"]


def test_invalid_inference_config_and_system_are_rejected(emulator: BedrockEmulator) -> None:
    client = _client(emulator)
    with pytest.raises(ClientError, match="maxTokens"):
        client.converse_stream(modelId="m", messages=[_user("hi")], inferenceConfig={"maxTokens": 0})
    with pytest.raises(ClientError, match="temperature"):
        client.converse_stream(modelId="m", messages=[_user("hi")], inferenceConfig={"temperature": 1.5})
    with pytest.raises(ClientError, match="SystemContentBlock"):
        client.converse_stream(modelId="m", messages=[_user("hi")], system=[{"text": " "}])


def test_a_valid_stream_has_bedrocks_event_sequence(emulator: BedrockEmulator) -> None:
    response = _client(emulator).converse_stream(modelId="m", messages=[_user("hi")])
    events = [next(iter(event)) for event in response["stream"]]
    assert events[0] == "messageStart"
    assert set(events[1:-3]) == {"contentBlockDelta"}
    assert events[-3:] == ["contentBlockStop", "messageStop", "metadata"]


def test_converse_without_streaming_answers_too(emulator: BedrockEmulator) -> None:
    response = _client(emulator).converse(modelId="m", messages=[_user("hi")])
    assert (
        response["output"]["message"]["content"][0]["text"]
        == "Hi, I'm your coach! Let's start with your onboarding. How can I help you today?"
    )


def test_unknown_paths_are_404(emulator: BedrockEmulator) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(urllib.request.Request(f"{emulator.url}/nothing", data=b"{}", method="POST"))  # noqa: S310
    assert raised.value.code == 404
    assert io.BytesIO(raised.value.read()).read()


SYSTEM = render_system_prompt(OnboardingAgentType.FITNESS_ASSESSMENT, {})
QUESTIONS = [field.question for field in STEP_PROMPTS[OnboardingAgentType.FITNESS_ASSESSMENT].fields]


def test_coach_asks_the_first_question_first() -> None:
    assert coach_reply(SYSTEM, [Turn("user", "hi")]).endswith(QUESTIONS[0])


def test_coach_moves_on_once_answered_and_quotes_the_answers() -> None:
    conversation = [
        Turn("user", "hi"),
        Turn("assistant", QUESTIONS[0]),
        Turn("user", "advanced"),
        Turn("assistant", QUESTIONS[1]),
        Turn("user", "I swim"),
    ]
    reply = coach_reply(SYSTEM, conversation)
    assert "“advanced”" in reply
    assert "“I swim”" in reply
    assert reply.endswith(QUESTIONS[2])


def test_coach_without_the_history_re_asks() -> None:
    """The point of the scripted coach: lose the history and it visibly asks again."""
    assert coach_reply(SYSTEM, [Turn("user", "I swim")]).endswith(QUESTIONS[0])


def test_coach_counts_already_known_fields_as_answered() -> None:
    system = render_system_prompt(
        OnboardingAgentType.FITNESS_ASSESSMENT, {"fitness_assessment": {"fitness_level": "beginner"}}
    )
    assert coach_reply(system, [Turn("user", "hi")]).endswith(QUESTIONS[1])


def test_coach_says_when_the_step_is_complete() -> None:
    conversation = [Turn("user", "hi")]
    for question in QUESTIONS:
        conversation += [Turn("assistant", question), Turn("user", "answer")]
    assert coach_reply(SYSTEM, conversation).endswith(
        "That's everything I need for the fitness assessment step, thank you!"
    )
