"""TurnService: a whole turn, its writes, and every error path."""

import pytest

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.recorded import Fault
from onboarding.model.errors import InvalidMessageError, MessageTooLargeError, ModelUnavailableError
from onboarding.model.messages import Message, ToolCall
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService
from tests.support.seed import commit


async def test_a_turn_stores_both_messages_and_streams_the_reply(service: TurnService, store: Repositories) -> None:
    turn = await service.start_turn("u", "Hello coach")
    chunks = [chunk async for chunk in turn]
    assert turn.result is not None
    assert turn.result.reply == "".join(chunks)
    stored = store.conversations.load_turn("u", 20).messages
    assert [(m.role, m.content) for m in stored] == [("user", "Hello coach"), ("assistant", turn.result.reply)]
    assert turn.result.assistant_message is not None
    assert stored[1].message_id == turn.result.assistant_message.message_id


async def test_the_reply_is_stored_only_after_the_stream_completes(service: TurnService, store: Repositories) -> None:
    turn = await service.start_turn("u", "Hello")
    stream = turn.__aiter__()
    await anext(stream)
    assert [m.role for m in store.conversations.load_turn("u", 20).messages] == ["user"]
    async for _ in stream:
        pass
    assert [m.role for m in store.conversations.load_turn("u", 20).messages] == ["user", "assistant"]


async def test_the_next_turn_sees_the_previous_ones(service: TurnService, emulator: BedrockEmulator) -> None:
    for text in ["Hi", "I'm a beginner", "I run twice a week"]:
        first_request_of_turn = len(emulator.requests)
        await (await service.start_turn("u", text)).collect()
    last = emulator.requests[first_request_of_turn].conversation
    assert [t.role for t in last][::2] == ["user"] * ((len(last) + 1) // 2)  # alternating, user first
    assert [t.text for t in last if t.role == "user" and t.text] == ["Hi", "I'm a beginner", "I run twice a week"]


@pytest.mark.parametrize(
    "message", ["", "   \n\t", "\u3000", "\u0000", "\u200b\u200b", "\u2060", "\ufeff", "\u200b \u200c\u200d\u00ad"]
)
async def test_blank_messages_are_rejected_and_nothing_is_stored(
    service: TurnService, store: Repositories, message: str
) -> None:
    with pytest.raises(InvalidMessageError, match="some text"):
        await service.start_turn("u", message)
    assert store.conversations.load_turn("u", 20).messages == ()


async def test_oversized_messages_are_rejected(service: TurnService, store: Repositories) -> None:
    with pytest.raises(MessageTooLargeError, match="limit is 32768"):
        await service.start_turn("u", "é" * 20_000)
    assert store.conversations.load_turn("u", 20).messages == ()


async def test_lone_surrogates_are_rejected(service: TurnService) -> None:
    with pytest.raises(InvalidMessageError, match="lone surrogate"):
        await service.start_turn("u", "bad \ud800 text")


async def test_a_missing_user_id_is_rejected(service: TurnService) -> None:
    with pytest.raises(InvalidMessageError, match="user id"):
        await service.start_turn("", "hello")


async def test_stream_failure_keeps_the_user_turn_and_stores_no_half_reply(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    emulator.queue_fault(Fault("stream_error", after_chunks=3))
    turn = await service.start_turn("u", "Hello")
    received: list[str] = []

    async def consume() -> None:
        async for chunk in turn:
            received.append(chunk)

    with pytest.raises(ModelUnavailableError):
        await consume()
    assert len(received) == 3
    assert [(m.role, m.content) for m in store.conversations.load_turn("u", 20).messages] == [("user", "Hello")]
    assert turn.result is None


async def test_throttling_after_botocores_retries_is_a_model_error(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    emulator.queue_fault(Fault("throttle"))  # the fixture's model makes one attempt
    turn = await service.start_turn("u", "Hello")
    with pytest.raises(ModelUnavailableError):
        await turn.collect()
    assert [m.role for m in store.conversations.load_turn("u", 20).messages] == ["user"]


async def test_after_a_failed_reply_the_next_turn_is_still_valid_for_bedrock(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    """Two user turns in a row in the table are merged, so Bedrock accepts the next request."""
    emulator.queue_fault(Fault("throttle"))
    with pytest.raises(ModelUnavailableError):
        await (await service.start_turn("u", "first try")).collect()
    result = await (await service.start_turn("u", "second try")).collect()
    assert result.assistant_message is not None
    last = emulator.requests[-1].conversation
    assert [t.role for t in last] == ["user"]
    assert last[0].text == "first try\nsecond try"


async def test_a_turn_streams_only_once(service: TurnService) -> None:
    turn = await service.start_turn("u", "Hello")
    await turn.collect()
    with pytest.raises(RuntimeError, match="only once"):
        await turn.collect()


async def test_an_empty_reply_is_not_stored(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    """Bedrock would reject an empty assistant turn later, so only the user's turn is kept."""
    emulator.queue_fault(Fault("empty_reply"))
    result = await (await service.start_turn("u", "Hello")).collect()
    assert result.reply == ""
    assert result.assistant_message is None
    assert [m.role for m in store.conversations.load_turn("u", 20).messages] == ["user"]


async def test_a_history_with_a_reply_stored_twice_never_blocks_the_user(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    """A reply written twice under new keys (a defect once): the same toolUse id, answered,
    twice. Bedrock refuses repeated ids, so the history sent keeps each call once with one result."""
    call = ToolCall("tooluse-X", "save_fitness_assessment", {"fitness_level": "beginner"})
    store.writes.append_message("u", "user", "I'm a beginner")
    reply = [
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", '{"saved": ["fitness_level"]}', tool_call_id="tooluse-X"),
        Message("assistant", "Noted, a beginner."),
    ]
    commit(store, "u", reply)
    commit(store, "u", reply)
    result = await (await service.start_turn("u", "I walk most days")).collect()
    assert result.assistant_message is not None  # the emulator, like Bedrock, accepted the request
    sent = emulator.requests[-1].body["messages"]
    uses = [block["toolUse"]["toolUseId"] for m in sent for block in m["content"] if "toolUse" in block]
    results = [block["toolResult"]["toolUseId"] for m in sent for block in m["content"] if "toolResult" in block]
    assert uses.count("tooluse-X") == 1
    assert results.count("tooluse-X") == 1
