"""The Bedrock emulator: wire format, Bedrock's validation rules, and the scripted coach."""

import io
import json
from collections.abc import Iterable
from typing import Any, cast

import boto3
import pytest
from botocore.config import Config
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import ClientError

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.coach import CoachReply, coach_respond
from infra.local.bedrock_emulator.reading import corrected_value
from infra.local.bedrock_emulator.rules import (
    DUPLICATE_TOOL_NAMES,
    TOOL_CONFIG_REQUIRED,
    ConverseValidationError,
    validate_converse_request,
)
from onboarding.llm.event_stream import encode_event, encode_exception
from onboarding.llm.prompt import render_system_prompt
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.model.state import OnboardingAgentType
from tests.tooling.test_coach_phrases import product_tools


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
        == "Hi, I'm your coach! Let's start with your onboarding. What would you like to work on next?"
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
TARGET_Q = STEP_PROMPTS[OnboardingAgentType.GOAL_SETTING].fields[1].question


def test_coach_asks_the_first_question_first() -> None:
    assert coach_respond(SYSTEM, [_user("hi")]).text.endswith(QUESTIONS[0])


def test_coach_without_the_history_re_asks() -> None:
    """The point of the scripted coach: lose the history and it visibly asks again."""
    assert coach_respond(SYSTEM, [_user("I swim")]).text.endswith(QUESTIONS[0])


def test_coach_counts_already_known_fields_as_answered() -> None:
    system = render_system_prompt(
        OnboardingAgentType.FITNESS_ASSESSMENT, {"fitness_assessment": {"fitness_level": "beginner"}}
    )
    assert coach_respond(system, [_user("hi")]).text.endswith(QUESTIONS[1])


def test_coach_says_when_the_step_is_complete() -> None:
    known = {"fitness_level": "beginner", "current_activity": "I swim", "limitations": "none", "age_and_body": "34"}
    system = render_system_prompt(OnboardingAgentType.FITNESS_ASSESSMENT, {"fitness_assessment": known})
    conversation = [_user("hi"), _assistant("Hi!"), _user("ok")]
    assert (
        coach_respond(system, conversation).text
        == "Great. That's everything I need for the fitness assessment step, thank you!"
    )


# --- Tool use: Bedrock's validation rules -------------------------------------------------------

FITNESS_FIELDS = STEP_PROMPTS[OnboardingAgentType.FITNESS_ASSESSMENT].fields


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


# The app's conventions: one optional string per field, described by its question, and step_complete.
SAVE_SCHEMA = _schema(
    {field.key: {"type": "string", "description": field.question} for field in FITNESS_FIELDS}
    | {"step_complete": {"type": "boolean", "description": "True once every item of the step is known."}}
)
REMEMBER_SCHEMA = _schema(
    {
        "kind": {
            "type": "string",
            "enum": ["name", "preferred_name", "goals", "level", "limitations", "preferences", "other"],
        },
        "value": {"type": "string"},
    }
)
ASK_FOR_SCHEMA = _schema({"field": {"type": "string"}})
TOOL_SCHEMAS = {
    "save_fitness_assessment": SAVE_SCHEMA,
    "remember_fact": REMEMBER_SCHEMA,
    "ask_for": ASK_FOR_SCHEMA,
}


def _tool_config(*names: str) -> dict[str, Any]:
    """The app's tools in Converse's `toolConfig` form (all three unless `names` picks some)."""
    return {
        "tools": [
            {"toolSpec": {"name": name, "description": f"The {name} tool.", "inputSchema": {"json": schema}}}
            for name, schema in TOOL_SCHEMAS.items()
            if not names or name in names
        ]
    }


def _tool_use(tool_use_id: str, name: str = "ask_for", tool_input: Any = None) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tool_use_id, "name": name, "input": {} if tool_input is None else tool_input}}


def _tool_result(tool_use_id: str, content: Any = None, status: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"toolUseId": tool_use_id, "content": [{"text": "ok"}] if content is None else content}
    if status is not None:
        result["status"] = status
    return {"toolResult": result}


def _tool_exchange(uses: list[str], results: list[str]) -> list[dict[str, Any]]:
    return [
        _user("hi"),
        {"role": "assistant", "content": [{"text": "Let me note that."}, *(_tool_use(i) for i in uses)]},
        {"role": "user", "content": [_tool_result(i) for i in results] or [{"text": "and?"}]},
    ]


def _error(body: dict[str, Any]) -> str:
    with pytest.raises(ConverseValidationError) as raised:
        validate_converse_request("m", body)
    return str(raised.value)


def test_tool_blocks_need_a_tool_config_through_the_real_client(emulator: BedrockEmulator) -> None:
    with pytest.raises(ClientError) as raised:
        _client(emulator).converse_stream(modelId="m", messages=_tool_exchange(["tooluse_1"], ["tooluse_1"]))
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert raised.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
    }


def test_a_tool_result_alone_also_needs_the_tool_config() -> None:
    # toolResult first: the missing toolConfig is reported before the unmatched result.
    assert _error({"messages": [{"role": "user", "content": [_tool_result("tooluse_1")]}]}) == TOOL_CONFIG_REQUIRED


EXCEEDS = "The number of toolResult blocks at messages.2.content exceeds the number of toolUse blocks of previous turn."


@pytest.mark.parametrize(
    ("uses", "results", "message"),
    [
        (["a"], [], "Expected toolResult blocks at messages.2.content for the following Ids: a"),
        (["a", "b"], ["a"], "Expected toolResult blocks at messages.2.content for the following Ids: b"),
        (["a"], ["b"], "Expected toolResult blocks at messages.2.content for the following Ids: a"),
        (
            ["a"],
            ["a", "b"],
            EXCEEDS,
        ),
        (
            [],
            ["a"],
            EXCEEDS,
        ),
    ],
)
def test_tool_results_must_answer_exactly_the_previous_tool_uses(
    uses: list[str], results: list[str], message: str
) -> None:
    assert _error({"messages": _tool_exchange(uses, results), "toolConfig": _tool_config()}) == message


def test_a_tool_result_in_the_first_message_answers_nothing() -> None:
    body = {"messages": [{"role": "user", "content": [_tool_result("a")]}], "toolConfig": _tool_config()}
    assert _error(body) == (
        "The number of toolResult blocks at messages.0.content exceeds the number of toolUse blocks of previous turn."
    )


@pytest.mark.parametrize(
    ("uses", "results", "message"),
    [
        (["a", "a"], ["a", "a"], "The toolUse blocks at messages.1.content contain duplicate Ids: a"),
        (["a"], ["a", "a"], "The toolResult blocks at messages.2.content contain duplicate Ids: a"),
    ],
)
def test_tool_ids_must_be_unique(uses: list[str], results: list[str], message: str) -> None:
    assert _error({"messages": _tool_exchange(uses, results), "toolConfig": _tool_config()}) == message


def test_a_tool_id_used_again_in_a_later_turn_is_refused() -> None:
    """The poisoned history of a reply stored twice: the same call, answered, twice."""
    once = _tool_exchange(["a"], ["a"])
    twice = [*once, *once[1:]]  # user, assistant [a], user [result a], assistant [a], user [result a]
    assert _error({"messages": twice, "toolConfig": _tool_config()}) == (
        "The toolUse blocks at messages.3.content contain duplicate Ids: a"
    )


def test_matching_tool_results_in_any_order_pass() -> None:
    validate_converse_request("m", {"messages": _tool_exchange(["a", "b"], ["b", "a"]), "toolConfig": _tool_config()})


def _spec(name: Any = "save_x", schema: Any = None) -> dict[str, Any]:
    return {"toolSpec": {"name": name, "inputSchema": {"json": _schema({}) if schema is None else schema}}}


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (
            [_spec(), _spec("has space")],
            "1 validation error detected: Value 'has space' at 'toolConfig.tools.2.member.toolSpec.name' "
            "failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+",
        ),
        (
            [_spec("x" * 65)],
            f"1 validation error detected: Value '{'x' * 65}' at 'toolConfig.tools.1.member.toolSpec.name' "
            "failed to satisfy constraint: Member must have length less than or equal to 64",
        ),
        (
            [_spec("")],
            "1 validation error detected: Value '' at 'toolConfig.tools.1.member.toolSpec.name' "
            "failed to satisfy constraint: Member must have length greater than or equal to 1",
        ),
        (
            [_spec(None)],
            "1 validation error detected: Value null at 'toolConfig.tools.1.member.toolSpec.name' "
            "failed to satisfy constraint: Member must not be null",
        ),
        (
            [_spec(), _spec("y", ["not", "an", "object"])],
            "The format of the value at toolConfig.tools.1.toolSpec.inputSchema.json is invalid. "
            "Provide a json object for the field and try again.",
        ),
        (
            [_spec("y", {"type": "array"})],
            "The value at toolConfig.tools.0.toolSpec.inputSchema.json.type must be one of the following: object.",
        ),
        (
            [_spec("y", {"properties": {}})],
            "The value at toolConfig.tools.0.toolSpec.inputSchema.json.type must be one of the following: object.",
        ),
        ([_spec("same"), _spec("same")], DUPLICATE_TOOL_NAMES),
        (
            [],
            "1 validation error detected: Value '[]' at 'toolConfig.tools' "
            "failed to satisfy constraint: Member must have length greater than or equal to 1",
        ),
    ],
)
def test_tool_specs_are_checked_like_bedrock(tools: list[dict[str, Any]], message: str) -> None:
    assert _error({"messages": [_user("hi")], "toolConfig": {"tools": tools}}) == message


def test_duplicate_tool_names_are_rejected_through_the_real_client(emulator: BedrockEmulator) -> None:
    with pytest.raises(ClientError) as raised:
        _client(emulator).converse(
            modelId="m", messages=[_user("hi")], toolConfig={"tools": [_spec("same"), _spec("same")]}
        )
    assert raised.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "The model returned the following errors: tools: Tool names must be unique.",
    }


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            _tool_use("a", tool_input=["not", "an", "object"]),
            "The format of the value at messages.1.content.1.toolUse.input is invalid. "
            "Provide a json object for the field and try again.",
        ),
        (
            _tool_use("a", name="bad name"),
            "1 validation error detected: Value 'bad name' at 'messages.2.member.content.2.member.toolUse.name' "
            "failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+",
        ),
        (
            _tool_use("bad id!"),
            "1 validation error detected: Value 'bad id!' at 'messages.2.member.content.2.member.toolUse.toolUseId' "
            "failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.:-]+",
        ),
        (
            {"toolUse": {"toolUseId": "a", "name": "ask_for"}},
            "The format of the value at messages.1.content.1.toolUse.input is invalid. "
            "Provide a json object for the field and try again.",
        ),
    ],
)
def test_tool_use_blocks_are_checked(block: dict[str, Any], message: str) -> None:
    messages = [_user("hi"), {"role": "assistant", "content": [{"text": "Noting."}, block]}]
    assert _error({"messages": messages, "toolConfig": _tool_config()}) == message


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            _tool_result("a", [{"json": [1, 2]}]),
            "The format of the value at messages.2.content.0.toolResult.content.0.json is invalid. "
            "Provide a json object for the field and try again.",
        ),
        (
            _tool_result("a", status="failed"),
            "1 validation error detected: Value 'failed' at 'messages.3.member.content.1.member.toolResult.status' "
            "failed to satisfy constraint: Member must satisfy enum value set: [success, error]",
        ),
        (
            _tool_result("a", [], status="error"),
            "The content field at messages.2.content.0.toolResult cannot be empty when status value is error.",
        ),
    ],
)
def test_tool_result_blocks_are_checked(block: dict[str, Any], message: str) -> None:
    messages = [_user("hi"), {"role": "assistant", "content": [_tool_use("a")]}, {"role": "user", "content": [block]}]
    assert _error({"messages": messages, "toolConfig": _tool_config()}) == message


def test_tool_results_with_json_or_text_and_a_status_pass() -> None:
    messages = [
        _user("hi"),
        {"role": "assistant", "content": [_tool_use("a"), _tool_use("b")]},
        {
            "role": "user",
            "content": [
                _tool_result("a", [{"json": {"saved": True}}], status="success"),
                _tool_result("b", [{"text": "failed"}], status="error"),
                {"text": "and here is more"},
            ],
        },
    ]
    validate_converse_request("m", {"messages": messages, "toolConfig": _tool_config()})


def test_tool_blocks_belong_to_their_role_and_other_blocks_are_refused() -> None:
    config = _tool_config()
    tool_use_from_user = {"messages": [{"role": "user", "content": [_tool_use("a")]}], "toolConfig": config}
    assert "must be in an assistant message" in _error(tool_use_from_user)
    result_from_assistant = [_user("hi"), {"role": "assistant", "content": [_tool_result("a")]}]
    assert "must be in a user message" in _error({"messages": result_from_assistant, "toolConfig": config})
    image = {"image": {"format": "png", "source": {"bytes": "AA=="}}}
    assert "does not support the image member" in _error({"messages": [{"role": "user", "content": [image]}]})


# --- Tool use: what the emulator streams --------------------------------------------------------

SYSTEM_WITH_TOOLS = render_system_prompt(OnboardingAgentType.FITNESS_ASSESSMENT, {})
ANSWER_FIRST_QUESTION = [_user("hi"), _assistant(QUESTIONS[0]), _user("beginner, and my name is Sam")]


def test_a_tool_call_streams_as_bedrock_streams_it(emulator: BedrockEmulator) -> None:
    response = _client(emulator).converse_stream(
        modelId="m", system=[{"text": SYSTEM_WITH_TOOLS}], messages=ANSWER_FIRST_QUESTION, toolConfig=_tool_config()
    )
    events = [(name, payload) for event in response["stream"] for name, payload in event.items()]
    names = [name for name, _ in events]
    assert names[0] == "messageStart"
    assert names[-2:] == ["messageStop", "metadata"]
    assert events[-2][1] == {"stopReason": "tool_use"}
    # The tool round says nothing: the coach speaks once, after the tools answered.
    assert not [p for n, p in events if n == "contentBlockDelta" and "text" in p["delta"]]
    starts = [p for n, p in events if n == "contentBlockStart"]
    assert [(s["contentBlockIndex"], s["start"]["toolUse"]["name"]) for s in starts] == [
        (0, "save_fitness_assessment"),
        (1, "remember_fact"),
    ]
    assert all(s["start"]["toolUse"]["toolUseId"].startswith("tooluse_") for s in starts)
    inputs: dict[int, list[str]] = {}
    for name, payload in events:
        if name == "contentBlockDelta" and "toolUse" in payload["delta"]:
            inputs.setdefault(payload["contentBlockIndex"], []).append(payload["delta"]["toolUse"]["input"])
    assert len(inputs[0]) > 1  # the input comes in fragments, as Bedrock sends it
    # The name is a fact about the client, not part of the answer.
    assert json.loads("".join(inputs[0])) == {"fitness_level": "beginner", "step_complete": False}
    assert json.loads("".join(inputs[1])) == {"kind": "name", "value": "Sam"}
    # Every block is closed once, in order, before messageStop.
    assert [p["contentBlockIndex"] for n, p in events if n == "contentBlockStop"] == [0, 1]


def test_converse_without_streaming_returns_the_same_tool_calls(emulator: BedrockEmulator) -> None:
    response = _client(emulator).converse(
        modelId="m", system=[{"text": SYSTEM_WITH_TOOLS}], messages=ANSWER_FIRST_QUESTION, toolConfig=_tool_config()
    )
    assert response["stopReason"] == "tool_use"
    content = response["output"]["message"]["content"]
    assert [block["toolUse"]["name"] for block in content] == ["save_fitness_assessment", "remember_fact"]
    assert content[1]["toolUse"]["input"] == {"kind": "name", "value": "Sam"}


def _langchain_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": name, "description": f"The {name} tool.", "parameters": schema}}
        for name, schema in TOOL_SCHEMAS.items()
    ]


def _chat(emulator: BedrockEmulator) -> Any:
    from langchain_aws import ChatBedrockConverse

    return ChatBedrockConverse(model_id="us.anthropic.claude-haiku-4-5-20251001-v1:0", region_name="us-east-1")


@pytest.mark.parametrize("streaming", [True, False])
def test_langchain_parses_the_tool_calls(emulator: BedrockEmulator, streaming: bool) -> None:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

    model = _chat(emulator).bind_tools(_langchain_tools())
    prompt = [
        SystemMessage(SYSTEM_WITH_TOOLS),
        HumanMessage("hi"),
        AIMessage(QUESTIONS[0]),
        HumanMessage("beginner. Call me Sammy, I have a bad knee injury"),
    ]
    if streaming:
        chunks = list(model.stream(prompt))
        reply: BaseMessage = chunks[0]
        for chunk in chunks[1:]:
            reply = reply + chunk
    else:
        reply = model.invoke(prompt)
    assert isinstance(reply, AIMessage)
    assert emulator.requests[-1].operation == ("converse-stream" if streaming else "converse")
    assert [(call["name"], call["args"]) for call in reply.tool_calls] == [
        (
            "save_fitness_assessment",  # each part under its own item; the name is a fact, not an answer
            {"fitness_level": "beginner", "limitations": "I have a bad knee injury", "step_complete": False},
        ),
        ("remember_fact", {"kind": "preferred_name", "value": "Sammy"}),
    ]
    assert all(str(call["id"]).startswith("tooluse_") for call in reply.tool_calls)


def test_langchain_drives_a_whole_step_with_tools(emulator: BedrockEmulator) -> None:
    """The test plays the app: it runs each tool call and sends the results back, as the
    orchestrator will; the coach saves every answer and ends the step with step_complete."""
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

    model = _chat(emulator).bind_tools(_langchain_tools())
    history: list[BaseMessage] = [SystemMessage(SYSTEM_WITH_TOOLS), HumanMessage("hi")]
    saved: dict[str, Any] = {}
    answers = ["advanced", "I swim twice a week", "none", "34, 180 cm, 75 kg"]
    first = model.invoke(history)
    assert isinstance(first, AIMessage)
    history.append(first)
    for answer in answers:
        history.append(HumanMessage(answer))
        call_message = model.invoke(history)
        assert isinstance(call_message, AIMessage)
        assert [call["name"] for call in call_message.tool_calls] == ["save_fitness_assessment"]
        history.append(call_message)
        args = call_message.tool_calls[0]["args"]
        saved.update(args)
        result = {"next_question": "What is your main goal?"} if args["step_complete"] else {"saved": True}
        history.append(ToolMessage(json.dumps(result), tool_call_id=call_message.tool_calls[0]["id"]))
        text_reply = model.invoke(history)
        assert isinstance(text_reply, AIMessage)
        assert text_reply.tool_calls == []
        history.append(text_reply)
    assert saved == {
        "fitness_level": "advanced",
        "current_activity": "I swim twice a week",
        "limitations": "none",
        "age_and_body": "34, 180 cm, 75 kg",
        "step_complete": True,
    }
    assert (
        history[-1].content
        == "Noted your age and body: “34, 180 cm, 75 kg”. That step is done. What is your main goal?"
    )


# --- Tool use: the scripted coach's choices ------------------------------------------------------


def _calls(reply: CoachReply) -> list[tuple[str, dict[str, Any]]]:
    return [(call.name, call.input) for call in reply.tool_calls]


def test_an_answer_is_saved_with_the_field_the_previous_message_asked() -> None:
    messages = [_user("hi"), _assistant(f"Thanks! {QUESTIONS[1]}"), _user("I run")]
    reply = coach_respond(SYSTEM_WITH_TOOLS, messages, _tool_config())
    assert _calls(reply) == [("save_fitness_assessment", {"current_activity": "I run", "step_complete": False})]
    assert reply.text == ""  # acknowledged once, after the save


def test_the_step_is_complete_when_known_and_saved_fields_cover_the_rest() -> None:
    system = render_system_prompt(
        OnboardingAgentType.FITNESS_ASSESSMENT, {"fitness_assessment": {"fitness_level": "beginner"}}
    )
    messages = [
        _user("hi"),
        {"role": "assistant", "content": [_tool_use("t1", "save_fitness_assessment", {"current_activity": "I run"})]},
        {"role": "user", "content": [_tool_result("t1")]},
        _assistant(QUESTIONS[2]),
        _user("no injuries"),
    ]
    # Two of four known: not complete yet.
    assert _calls(coach_respond(system, messages, _tool_config())) == [
        ("save_fitness_assessment", {"limitations": "no injuries", "step_complete": False})
    ]
    messages[1]["content"].append(_tool_use("t2", "save_fitness_assessment", {"age_and_body": "30, 170 cm"}))
    messages[2]["content"].append(_tool_result("t2"))
    assert _calls(coach_respond(system, messages, _tool_config())) == [
        ("save_fitness_assessment", {"limitations": "no injuries", "step_complete": True})
    ]


def test_waiting_for_names_the_field_when_the_history_does_not_show_the_question() -> None:
    system = SYSTEM_WITH_TOOLS + "\n\nWaiting for: limitations\nYou asked for limitations (asked 1 time(s))."
    reply = coach_respond(system, [_user("a sore shoulder")], _tool_config())
    assert _calls(reply) == [("save_fitness_assessment", {"limitations": "a sore shoulder", "step_complete": False})]


@pytest.mark.parametrize("answer", ["Not sure yet", "I don't know", "let me check", "Later!", "no idea, sorry"])
def test_an_evasive_answer_asks_for_the_field_instead_of_saving(answer: str) -> None:
    messages = [_user("hi"), _assistant(QUESTIONS[3]), _user(answer)]
    assert _calls(coach_respond(SYSTEM_WITH_TOOLS, messages, _tool_config())) == [
        ("ask_for", {"field": "age_and_body"})
    ]
    # Without ask_for on offer, it is still no age or body: nothing saved, asked again.
    reply = coach_respond(SYSTEM_WITH_TOOLS, messages, _tool_config("save_fitness_assessment"))
    assert _calls(reply) == []
    assert reply.text.endswith(QUESTIONS[3])


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("Hi, my name is Alex", [("name", "Alex")]),
        ("please call me Al", [("preferred_name", "Al")]),
        ("I have a torn ligament injury from skiing", []),
        ("my shoulder is injured", []),
        ("hello there 👋", []),
        ("你好 💪", []),
        ("My name is Alexandra but call me Sasha", [("name", "Alexandra"), ("preferred_name", "Sasha")]),
        ("hello there", []),
    ],
)
def test_facts_are_remembered_without_a_question_to_answer(text: str, facts: list[tuple[str, str]]) -> None:
    reply = coach_respond(SYSTEM_WITH_TOOLS, [_user(text)], _tool_config())
    remembered: list[tuple[str, dict[str, Any]]] = [
        ("remember_fact", {"kind": kind, "value": value}) for kind, value in facts
    ]
    if "injur" in text:  # the answer to an item of this step (the profile keeps it from the answer)
        remembered.insert(0, ("save_fitness_assessment", {"limitations": text, "step_complete": False}))
    assert _calls(reply) == remembered


def test_without_a_tool_to_call_the_coach_talks_as_before() -> None:
    for config in (_tool_config(), _tool_config("remember_fact")):
        reply = coach_respond(SYSTEM_WITH_TOOLS, [_user("hi")], config)
        assert reply == coach_respond(SYSTEM_WITH_TOOLS, [_user("hi")])


def _after(
    calls: list[tuple[str, str, dict[str, Any]]], results: list[tuple[str, str]], system: str = SYSTEM_WITH_TOOLS
) -> CoachReply:
    """The coach's answer to tool results: `calls` are (id, name, input), `results` (id, text)."""
    messages = [
        _user("hi"),
        _assistant(QUESTIONS[0]),
        _user("beginner, my name is Sam"),
        {
            "role": "assistant",
            "content": [{"text": "Noted."}, *(_tool_use(i, name, tool_input) for i, name, tool_input in calls)],
        },
        {"role": "user", "content": [_tool_result(i, [{"text": text}]) for i, text in results]},
    ]
    return coach_respond(system, messages, _tool_config())


SAVE_LEVEL = ("t1", "save_fitness_assessment", {"fitness_level": "beginner", "step_complete": False})
REMEMBER_NAME = ("t2", "remember_fact", {"kind": "name", "value": "Sam"})


def test_after_tool_results_the_coach_answers_in_text_with_the_next_open_question() -> None:
    reply = _after([SAVE_LEVEL, REMEMBER_NAME], [("t1", '{"saved": true}'), ("t2", "remembered")])
    assert reply == CoachReply(f"Nice to meet you, Sam! Noted your fitness level: “beginner”. {QUESTIONS[1]}")


def test_a_next_question_in_a_tool_result_is_asked() -> None:
    reply = _after([SAVE_LEVEL], [("t1", '{"step_complete": true, "next_question": "What is your main goal?"}')])
    assert reply == CoachReply("Noted your fitness level: “beginner”. That step is done. What is your main goal?")


def test_a_complete_onboarding_is_announced_with_a_recap() -> None:
    system = render_system_prompt(
        OnboardingAgentType.FITNESS_ASSESSMENT, {"goal_setting": {"primary_goal": "run a 10k"}}
    )
    reply = _after([SAVE_LEVEL], [("t1", '{"onboarding_complete": true}')], system)
    assert reply == CoachReply(
        "Noted your fitness level: “beginner”. That's everything — your onboarding is complete! "
        "Here's what I have: primary goal: run a 10k; fitness level: beginner."
    )


def test_an_ask_for_result_tells_the_client_to_answer_when_they_know() -> None:
    reply = _after([("t1", "ask_for", {"field": "limitations"})], [("t1", '{"waiting_for": "limitations"}')])
    assert reply == CoachReply(f"No problem — when you know, just tell me: {QUESTIONS[2]}")


def test_tool_results_never_lead_to_more_tool_calls() -> None:
    # The last user message holds results only; the earlier "my name is Sam" is not acted on again.
    assert _after([REMEMBER_NAME], [("t2", "ok")]).tool_calls == ()


# --- Summary requests ---------------------------------------------------------------------------

SUMMARY_SYSTEM = "You keep a running summary of a fitness coach's conversation with a client. Answer with it."


@pytest.mark.parametrize(
    ("request_text", "summary"),
    [
        (
            "Current summary:\n(none)\n\nNew messages:\nClient: I am a beginner runner\nCoach: Great! How often?\n"
            "Client: ok thanks\nClient: Three times a week",
            "- Client said: I am a beginner runner\n- Client said: Three times a week",
        ),
        (
            "Current summary:\n- Client said: I am a beginner runner\n\nNew messages:\nCoach: Any injuries?\n"
            "Client: no\nClient: Thank you!",
            "- Client said: I am a beginner runner\n- Client said: no",
        ),
        (
            "Current summary:\n- Name: Sam\n\nNew messages:\nClient: my knee hurts\nwhen I run downhill\nCoach: Noted.",
            "- Name: Sam\n- Client said: my knee hurts when I run downhill",
        ),
        ("Current summary:\n(none)\n\nNew messages:\nClient: cool\nCoach: Anything else?", "(none)"),
    ],
)
def test_a_summary_request_gets_the_updated_summary(request_text: str, summary: str) -> None:
    reply = coach_respond(SUMMARY_SYSTEM, [_user(request_text)], None)
    assert reply == CoachReply(summary)


def test_a_summary_request_through_langchain_is_answered_as_a_summary(emulator: BedrockEmulator) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage

    request_text = "Current summary:\n(none)\n\nNew messages:\nClient: I want to lose 5 kg\nCoach: By when?"
    reply = _chat(emulator).invoke([SystemMessage(SUMMARY_SYSTEM), HumanMessage(request_text)])
    assert reply.content == "- Client said: I want to lose 5 kg"


@pytest.mark.parametrize(
    ("field", "old", "said", "new"),
    [
        ("age_and_body", "34, 180 cm, 85 kg", "actually I'm 80 kg now", "34, 180 cm, 80 kg"),  # only the part given
        (
            "dietary_pattern",
            "vegetarian",
            "oh wait, I'm actually vegan not vegetarian",
            "vegan",
        ),  # not the one ruled out
        ("dietary_pattern", "vegan", "not vegan any more, vegetarian", "vegetarian"),
        ("timezone", "Europe/London", "correction: I'm in Lisbon, not London", "I'm in Lisbon"),
        ("primary_goal", "lose fat", "sorry, my goal is to build muscle, not lose fat", "build muscle"),
        ("limitations", "none", "the knee is my injury", "the knee"),  # the words that name the item left out
    ],
)
def test_a_correction_keeps_what_it_names(field: str, old: str, said: str, new: str) -> None:
    assert corrected_value(field, old, said) == new


def test_an_answer_out_of_turn_leaves_the_question_asked_open() -> None:
    """Asked for age and body (limitations still open too), the client names a condition: it is
    filed as the limitation, and the age question, not the first open one, is asked again."""
    asked = [_user("hi"), _assistant(QUESTIONS[3]), _user("I have asthma")]
    reply = coach_respond(SYSTEM_WITH_TOOLS, asked, _tool_config())
    assert _calls(reply) == [("save_fitness_assessment", {"limitations": "I have asthma", "step_complete": False})]
    (call,) = reply.tool_calls
    answered = [
        *asked,
        {"role": "assistant", "content": [_tool_use(call.tool_use_id, call.name, call.input)]},
        {"role": "user", "content": [_tool_result(call.tool_use_id, [{"text": '{"saved": ["limitations"]}'}])]},
    ]
    assert coach_respond(SYSTEM_WITH_TOOLS, answered, _tool_config()).text == (
        f"Noted your limitations: “I have asthma”. {QUESTIONS[3]}"
    )


def test_a_misfiled_answer_is_moved_by_a_self_correction() -> None:
    """The memory holds an injury as the goal; "sorry, my goal is to lose fat, and the knee is my
    injury" corrects both items, and the injury keeps the words it was said in."""
    system = render_system_prompt(
        OnboardingAgentType.GOAL_SETTING,
        {
            "fitness_assessment": {"limitations": "none"},
            "goal_setting": {"primary_goal": "I have a bad left knee"},
        },
    )
    messages = [_user("hi"), _assistant(TARGET_Q), _user("sorry, my goal is to lose fat, and the knee is my injury")]
    assert _calls(coach_respond(system, messages, product_tools(OnboardingAgentType.GOAL_SETTING))) == [
        ("correct_answer", {"item": "fitness_assessment.limitations", "value": "I have a bad left knee"}),
        ("correct_answer", {"item": "goal_setting.primary_goal", "value": "lose fat"}),
    ]


def test_where_two_readings_claim_the_same_words_the_longer_wins_over_the_item_asked() -> None:
    """At the equipment question, "I love kettlebells" is an exercise the client loves (the whole
    part), not their equipment (one word of it, though equipment was asked)."""
    step = OnboardingAgentType.WORKOUT_PLANNING
    equipment_q = STEP_PROMPTS[step].fields[2].question
    messages = [_user("hi"), _assistant(equipment_q), _user("at home, and I love kettlebells")]
    assert _calls(coach_respond(render_system_prompt(step, {}), messages, product_tools(step))) == [
        (
            "save_workout_planning",
            {"equipment": "at home", "exercise_preferences": "I love kettlebells", "step_complete": False},
        )
    ]
