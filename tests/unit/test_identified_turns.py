"""Turns with a client message id (the app's own id, or Twilio's MessageSid): however often one
message is delivered, its turn is stored once and answered once."""

from typing import Any

import pytest

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.recorded import Fault
from onboarding.model.errors import (
    DuplicateMessageIdError,
    InvalidMessageError,
    ModelUnavailableError,
    StoreError,
    TurnInProgressError,
)
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService
from tests.support.faults import fail_nth_call


def _roles(store: Repositories, user_id: str = "u") -> list[str]:
    return [m.role for m in store.conversations.load_turn(user_id, 100).messages]


async def test_a_repeated_delivery_replays_the_stored_reply_without_the_model(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    first = await (await service.start_turn("u", "Hello coach", "msg-1")).collect()
    calls = len(emulator.requests)
    again = await (await service.start_turn("u", "Hello coach", "msg-1")).collect()
    assert again.replayed
    assert (again.reply, again.user_message, again.assistant_message) == (
        first.reply,
        first.user_message,
        first.assistant_message,
    )
    assert len(emulator.requests) == calls
    assert _roles(store) == ["user", "assistant"]


async def test_copies_that_arrive_while_the_first_is_answered_run_no_model_and_then_replay_it(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    """Deliveries that all start before the first finishes (interleaved deterministically: in-process
    moto does not make transactions atomic across threads, as DynamoDB does; the concurrent copy is
    tests/integration/test_one_turn_per_message_id.py). Each copy is told to retry, stores nothing,
    calls no model; once the reply is stored a copy replays it."""
    first = await service.start_turn("u", "Hello coach", "msg-1")
    for _ in range(4):
        with pytest.raises(TurnInProgressError) as refused:
            await service.start_turn("u", "Hello coach", "msg-1")
        assert 1 <= refused.value.retry_after_s <= service.limits.turn_lease_s
    calls = len(emulator.requests)
    result = await first.collect()
    assert len(emulator.requests) > calls  # the first delivery's model call, the only one
    replayed = await (await service.start_turn("u", "Hello coach", "msg-1")).collect()
    assert (replayed.replayed, replayed.reply, replayed.assistant_message) == (
        True,
        result.reply,
        result.assistant_message,
    )
    assert _roles(store) == ["user", "assistant"]


async def test_after_a_failed_reply_a_retry_answers_the_stored_message(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    emulator.queue_fault(Fault("stream_error", after_chunks=1))
    with pytest.raises(ModelUnavailableError):
        await (await service.start_turn("u", "Hello coach", "msg-1")).collect()
    retried = await (await service.start_turn("u", "Hello coach", "msg-1")).collect()
    assert not retried.replayed
    assert _roles(store) == ["user", "assistant"]
    # The stored message is the turn's current message, not also its own history.
    assert [t.text for t in emulator.requests[-1].conversation] == ["Hello coach"]


async def test_a_reply_whose_write_failed_is_produced_again_once(
    service: TurnService, store: Repositories, dynamodb: Any
) -> None:
    fail_nth_call(dynamodb, "transact_write_items", 2)  # the reply's write
    with pytest.raises(StoreError):
        await (await service.start_turn("u", "Hello coach", "msg-1")).collect()
    await (await service.start_turn("u", "Hello coach", "msg-1")).collect()
    assert _roles(store) == ["user", "assistant"]


async def test_the_same_id_for_another_message_is_refused(service: TurnService, store: Repositories) -> None:
    await (await service.start_turn("u", "Hello coach", "msg-1")).collect()
    with pytest.raises(DuplicateMessageIdError):
        await service.start_turn("u", "Something else", "msg-1")
    assert _roles(store) == ["user", "assistant"]


async def test_ids_are_per_user(service: TurnService, store: Repositories) -> None:
    await (await service.start_turn("a", "Hello", "msg-1")).collect()
    second = await (await service.start_turn("b", "Hello", "msg-1")).collect()
    assert not second.replayed
    assert _roles(store, "b") == ["user", "assistant"]


@pytest.mark.parametrize("client_id", ["", "has space", "x" * 129, "semi;colon"])
async def test_malformed_ids_are_refused_before_anything_is_stored(
    service: TurnService, store: Repositories, client_id: str
) -> None:
    with pytest.raises(InvalidMessageError, match="client message id"):
        await service.start_turn("u", "Hello", client_id)
    assert _roles(store) == []


async def test_identified_turns_see_the_same_history_as_others(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    first_request_of_turn: list[int] = []
    for index, text in enumerate(["Hi", "I'm a beginner", "I walk 5 km most days"]):
        first_request_of_turn.append(len(emulator.requests))
        await (await service.start_turn("u", text, f"msg-{index}")).collect()
    conversation = emulator.requests[first_request_of_turn[-1]].conversation
    user_texts = [t.text for t in conversation if t.role == "user" and t.text]
    assert user_texts == ["Hi", "I'm a beginner", "I walk 5 km most days"]  # its own message once, last
    assert [t.role for t in conversation][::2] == ["user"] * ((len(conversation) + 1) // 2)
