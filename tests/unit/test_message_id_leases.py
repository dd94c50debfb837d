"""Client message ids, the rules on one process (the copies at once, over HTTP, are
tests/integration/test_one_turn_per_message_id.py): the delivery that answers a client message id
leases it; a copy meanwhile runs no model; a turn that ends without a reply gives the id up, and the
retry that answers it is counted by the rate limit, like every model call; a lease nobody released
runs out by itself; a turn cut off mid-reply records the tokens it spent (estimated)."""

from typing import Any

import pytest

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.recorded import Fault
from onboarding.config import RateLimit, Settings
from onboarding.model.errors import ModelUnavailableError, RateLimitedError, StoreError, TurnInProgressError
from onboarding.model.history import TurnCommit
from onboarding.model.messages import Message
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService
from tests.support.clock import FakeClock
from tests.unit.conftest import TABLE

pytestmark = pytest.mark.unit

LIMIT = RateLimit(messages=3, window_s=3600)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


@pytest.fixture
def leased_store(dynamodb: Any, settings: Settings, clock: FakeClock) -> Repositories:
    return Repositories.over(dynamodb, TABLE, settings, clock=clock)


def test_a_copy_is_refused_while_leased_and_takes_over_once_the_lease_runs_out(
    leased_store: Repositories, clock: FakeClock, settings: Settings, dynamodb: Any
) -> None:
    first = leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    assert first.lease is not None
    with pytest.raises(TurnInProgressError) as refused:
        leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    # Told to poll (the reply is usually stored within seconds), not to wait out the whole lease.
    assert refused.value.retry_after_s == settings.in_progress_retry_after_s < settings.turn_lease_s
    clock.now += settings.turn_lease_s - 1
    with pytest.raises(TurnInProgressError) as refused:
        leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    assert refused.value.retry_after_s == 1
    clock.now += 1  # the first delivery died without a word (a Lambda timeout): the lease ran out
    taken = leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    assert (taken.first, taken.user_message, taken.reply) == (False, first.user_message, None)
    assert taken.lease not in (None, first.lease)
    # The first delivery, its lease taken over, cannot store a reply; the one that took over can.
    with pytest.raises(StoreError):
        commit_as(leased_store, first.lease)
    commit_as(leased_store, taken.lease)
    replayed = leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    assert replayed.reply is not None
    assert counted(dynamodb) == 2  # the first lease and the take-over: two model calls, two counted


def test_a_released_id_is_taken_over_at_once_and_counted_and_refused_past_the_limit(
    leased_store: Repositories, dynamodb: Any
) -> None:
    leased = leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    for _ in range(LIMIT.messages - 1):
        assert leased.lease is not None
        leased_store.client_records.release("u", "c1", leased.lease)  # the turn failed, or its client went away
        leased = leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    assert leased.lease is not None
    leased_store.client_records.release("u", "c1", leased.lease)
    with pytest.raises(RateLimitedError):
        leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    assert counted(dynamodb) == LIMIT.messages


def test_a_release_after_the_reply_or_by_another_changes_nothing(leased_store: Repositories) -> None:
    leased = leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    leased_store.client_records.release("u", "c1", "not-the-holder")
    with pytest.raises(TurnInProgressError):
        leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT)
    assert leased.lease is not None
    commit_as(leased_store, leased.lease)
    leased_store.client_records.release("u", "c1", leased.lease)
    assert leased_store.writes.lease_user_message("u", "c1", "hi", LIMIT).reply is not None


async def test_a_turn_cut_off_mid_reply_gives_the_id_up_and_records_what_it_spent(
    service: TurnService,
    store: Repositories,
    emulator: BedrockEmulator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client goes away after the first chunk: the turn stores no reply, its log line counts
    the tokens its model call spent (our estimate: Bedrock's count comes at the stream's end, which
    never came), and a resend answers at once."""
    caplog.clear()
    turn = await service.start_turn("u", "Hello coach, tell me about yourself", "c1")
    stream = aiter(turn)
    assert await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]  # the client's connection closed
    responded = _responded(caplog)
    assert [(r["outcome"], r["tokens_estimated"]) for r in responded] == [("abandoned", True)]
    assert responded[0]["input_tokens"] > 100  # the prompt it read: the instructions at least
    assert responded[0]["output_tokens"] >= 1
    result = await (await service.start_turn("u", "Hello coach, tell me about yourself", "c1")).collect()
    assert not result.replayed
    assert [m.role for m in store.conversations.load_turn("u", 10).messages] == ["user", "assistant"]


async def test_a_turn_whose_stream_broke_records_its_tokens(
    service: TurnService, emulator: BedrockEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    emulator.queue_fault(Fault("stream_error", after_chunks=2))
    caplog.clear()
    with pytest.raises(ModelUnavailableError):
        await (await service.start_turn("u", "Hello coach", "c1")).collect()
    [responded] = _responded(caplog)
    assert (responded["outcome"], responded["tokens_estimated"]) == ("model_failed", True)
    assert responded["input_tokens"] > 100


def _responded(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The fields of each `turn_responded` line (what its JSON log line carries)."""
    fields = ("outcome", "input_tokens", "output_tokens", "tokens_estimated")
    return [{name: getattr(r, name) for name in fields} for r in caplog.records if r.getMessage() == "turn_responded"]


def commit_as(store: Repositories, lease: str | None) -> None:
    """Store a reply to c1 as the delivery with `lease` would."""
    memory = store.conversations.load_memory("u")
    store.writes.commit_reply(
        TurnCommit("u", (Message("assistant", "Noted."),), memory, client_id="c1", reply_text="Noted.", lease=lease)
    )


def counted(dynamodb: Any) -> int:
    """How many messages the user's rate-limit window has counted."""
    items = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :limit)",
        ExpressionAttributeValues={":pk": {"S": "USER#u"}, ":limit": {"S": "LIMIT#"}},
    )["Items"]
    return sum(int(item["message_count"]["N"]) for item in items)
