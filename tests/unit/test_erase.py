"""Erase: one call deletes everything stored for a user, touches nobody else, and reports counts."""

import itertools
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

import onboarding.persistence.calls as partitions_module
from functions.api.mobile_api.routes import create_app
from onboarding.account import AccountService
from onboarding.config import RateLimit, Settings
from onboarding.model.errors import RateLimitedError, StoreError, UserErasedError
from onboarding.model.history import ConversationSummary
from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingAgentType, OnboardingState
from onboarding.model.users import ErasureReport
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService
from tests.support.clock import FakeClock
from tests.support.seed import commit
from tests.unit.conftest import TABLE

pytestmark = pytest.mark.unit

PHONE = "+15551230001"
OTHER_PHONE = "+15551230002"
LIMIT = RateLimit(messages=100, window_s=60)
# What `_fill` stores: 2 messages, state + profile + summary, 1 phone, 1 client id, 1 code (all
# deleted), and 1 rate window (kept: an erase must not reset the rate limit).
FILLED = ErasureReport(messages=2, state_items=3, phone_numbers=1, dedupe_records=1, link_codes=1, kept_rate_counters=1)


def _fill(store: Repositories, user_id: str, phone: str) -> str:
    """Store one of everything for `user_id`; returns the pending link code."""
    claimed = store.writes.lease_user_message(user_id, "client-1", "I want to run a 5k", rate_limit=LIMIT)
    (reply,) = commit(
        store,
        user_id,
        [Message("assistant", "Great goal!")],
        client_id="client-1",
        state=OnboardingState(current_agent=OnboardingAgentType.GOAL_SETTING, agent_context={"k": 1}),
        profile=UserProfile(name="Sam", goals="5k"),
    ).messages
    assert store.writes.save_summary(user_id, ConversationSummary("wants a 5k", claimed.user_message.message_id))
    assert reply.content == "Great goal!"
    store.phones.link(phone, user_id)
    return store.phones.create_link_code(user_id).code


def _items(dynamodb: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=TABLE, ConsistentRead=True):
        items.extend(page["Items"])
    return items


def _belongs_to(item: dict[str, Any], user_id: str) -> bool:
    return bool(item["pk"]["S"] == f"USER#{user_id}" or item.get("user_id", {}).get("S") == user_id)


def _left_of(dynamodb: Any, user_id: str) -> list[str]:
    """Sort keys of what is still stored for `user_id`, but the rate counters an erase keeps."""
    kept = [item["sk"]["S"] for item in _items(dynamodb) if _belongs_to(item, user_id)]
    return [sk for sk in kept if not sk.startswith("LIMIT#")]


def _failing(dynamodb: Any, operation: str) -> None:
    def fail(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, operation)

    setattr(dynamodb, operation, fail)


def test_erase_deletes_everything_of_the_user_and_nothing_of_anyone_else(store: Repositories, dynamodb: Any) -> None:
    _fill(store, "erased", PHONE)
    other_code = _fill(store, "other", OTHER_PHONE)
    others_before = sorted(str(item) for item in _items(dynamodb) if _belongs_to(item, "other"))

    report = store.erasure.erase("erased")

    assert report == FILLED
    assert report.total == 8
    left = _items(dynamodb)
    kept = [item["sk"]["S"] for item in left if _belongs_to(item, "erased")]
    assert len(kept) == 1
    assert kept[0].startswith("LIMIT#")  # only the rate counter
    others_after = sorted(str(item) for item in left if _belongs_to(item, "other"))
    assert others_after == others_before  # the other user's items, untouched
    assert store.phones.find_owner(PHONE) is None
    assert store.phones.find_owner(OTHER_PHONE) is not None
    assert store.phones.link_by_code("+15551230003", other_code) is not None  # their code still works


def test_the_next_turn_starts_from_scratch(store: Repositories) -> None:
    code = _fill(store, "erased", PHONE)
    store.erasure.erase("erased")

    loaded = store.conversations.load_turn("erased", 20)
    assert loaded.state == OnboardingState.initial()
    assert loaded.messages == ()
    assert loaded.profile == UserProfile()
    assert loaded.summary is None
    assert store.conversations.history_page("erased", 20).messages == ()
    assert store.phones.phones_of("erased") == ()
    assert store.phones.link_by_code(OTHER_PHONE, code) is None  # the erased user's code is gone
    # A text from the erased user's old number starts a new user; it does not revive the old one.
    assert store.phones.find_or_create_owner(PHONE, lambda: "fresh").user_id == "fresh"


def test_erasing_twice_or_an_unknown_user_reports_zeros(store: Repositories) -> None:
    _fill(store, "erased", PHONE)
    assert store.erasure.erase("erased").total == 8
    assert store.erasure.erase("erased") == ErasureReport(kept_rate_counters=1)
    assert store.erasure.erase("never-seen") == ErasureReport()
    assert ErasureReport().total == 0


def test_partition_items_of_an_unknown_kind_are_deleted_and_counted_as_other(
    store: Repositories, dynamodb: Any
) -> None:
    """A newer version may store kinds this one does not know; they are the user's all the same."""
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "USER#erased"}, "sk": {"S": "FACT#1"}})
    store.writes.append_message("erased", "user", "hello")
    assert store.erasure.erase("erased") == ErasureReport(messages=1, other_items=1)
    assert _left_of(dynamodb, "erased") == []


def test_a_phone_relinked_to_someone_else_meanwhile_is_theirs_and_stays(store: Repositories, dynamodb: Any) -> None:
    """The number moves to another user between erase's read of the partition and its deletes."""
    _fill(store, "erased", PHONE)
    real_query = dynamodb.query

    def query_then_relink(**request: Any) -> Any:
        page = real_query(**request)
        dynamodb.query = real_query
        store.phones.link(PHONE, "new-owner")
        return page

    dynamodb.query = query_then_relink
    report = store.erasure.erase("erased")

    assert report.phone_numbers == 0
    assert report.total == FILLED.total - 1
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert owner.user_id == "new-owner"
    assert store.phones.phones_of("new-owner") == (PHONE,)
    assert _left_of(dynamodb, "erased") == []


def test_hundreds_of_messages_over_several_pages_are_all_deleted_25_at_a_time(
    store: Repositories, dynamodb: Any
) -> None:
    for n in range(300):
        store.writes.append_message("erased", "user", f"message {n}")
    store.writes.append_message("other", "user", "not erased")
    real_query, real_batch = dynamodb.query, dynamodb.batch_write_item
    queries: list[dict[str, Any]] = []
    batch_sizes: list[int] = []

    def small_pages(**request: Any) -> Any:
        # DynamoDB cuts pages at 1 MB; smaller pages here make erase follow LastEvaluatedKey.
        queries.append(request)
        return real_query(**request, Limit=70)

    def counting_batch(**request: Any) -> Any:
        batch_sizes.append(sum(len(writes) for writes in request["RequestItems"].values()))
        return real_batch(**request)

    dynamodb.query, dynamodb.batch_write_item = small_pages, counting_batch
    report = store.erasure.erase("erased")
    dynamodb.query, dynamodb.batch_write_item = real_query, real_batch

    assert report == ErasureReport(messages=300)
    assert len(queries) >= 5
    assert all(request["ConsistentRead"] and request["ProjectionExpression"] == "pk, sk" for request in queries)
    assert batch_sizes == [25] * 12
    assert store.conversations.history_page("erased", limit=100).messages == ()
    assert [m.content for m in store.conversations.load_turn("other", 20).messages] == ["not erased"]


def test_unprocessed_items_are_resent_after_a_backoff(
    store: Repositories, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(30):
        store.writes.append_message("erased", "user", f"message {n}")
    delays: list[float] = []
    monkeypatch.setattr("onboarding.persistence.calls.time.sleep", delays.append)
    real_batch = dynamodb.batch_write_item
    throttled = itertools.count()

    def half_processed(**request: Any) -> Any:
        # Like a throttled table: the first two requests process only part of their batch.
        if next(throttled) >= 2:
            return real_batch(**request)
        writes = request["RequestItems"][TABLE]
        real_batch(RequestItems={TABLE: writes[:5]})
        return {"UnprocessedItems": {TABLE: writes[5:]}}

    dynamodb.batch_write_item = half_processed
    assert store.erasure.erase("erased").messages == 30
    assert store.conversations.history_page("erased", limit=100).messages == ()
    assert len(delays) == 2
    assert all(0 <= delay <= partitions_module._BATCH_BACKOFF_MAX_S for delay in delays)


def test_items_left_unprocessed_every_time_end_in_a_store_error(
    store: Repositories, dynamodb: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.writes.append_message("erased", "user", "hello")
    delays: list[float] = []
    monkeypatch.setattr("onboarding.persistence.calls.time.sleep", delays.append)
    calls = itertools.count(1)

    def never_processed(**request: Any) -> Any:
        next(calls)
        return {"UnprocessedItems": request["RequestItems"]}

    dynamodb.batch_write_item = never_processed
    with pytest.raises(StoreError, match="unprocessed"):
        store.erasure.erase("erased")
    assert next(calls) == settings.erase_batch_attempts + 1  # bounded: no endless loop
    assert len(delays) == settings.erase_batch_attempts - 1
    assert all(delay <= partitions_module._BATCH_BACKOFF_MAX_S for delay in delays)


@pytest.mark.parametrize("operation", ["query", "delete_item", "batch_write_item"])
def test_table_failures_are_store_errors(store: Repositories, dynamodb: Any, operation: str) -> None:
    _fill(store, "erased", PHONE)
    _failing(dynamodb, operation)
    with pytest.raises(StoreError, match="erase"):
        store.erasure.erase("erased")


def test_a_link_code_and_its_pointer_are_written_together_and_stay_out_of_turns(
    store: Repositories, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A colliding code is retried with a new one; the failed try leaves no pointer behind."""
    dynamodb.put_item(
        TableName=TABLE,
        Item={"pk": {"S": "LINK#AAAAAAAAAA"}, "sk": {"S": "~LINK"}, "user_id": {"S": "other"}},
    )
    letters = itertools.chain(["A"] * 10, itertools.repeat("B"))
    monkeypatch.setattr("onboarding.persistence.schema.secrets.choice", lambda _: next(letters))
    store.writes.append_message("erased", "user", "hello")

    code = store.phones.create_link_code("erased")

    assert code.code == "B" * 10
    pointers = [item for item in _items(dynamodb) if item["sk"]["S"].startswith("LINKCODE#")]
    assert [(p["pk"]["S"], p["sk"]["S"]) for p in pointers] == [("USER#erased", "LINKCODE#BBBBBBBBBB")]
    assert int(pointers[0]["expires_at"]["N"]) == int(code.expires_at.timestamp())
    assert [m.content for m in store.conversations.load_turn("erased", message_limit=5).messages] == ["hello"]
    assert [m.content for m in store.conversations.history_page("erased", 20).messages] == ["hello"]
    assert store.erasure.erase("erased") == ErasureReport(messages=1, link_codes=1)
    assert any(item["pk"]["S"] == "LINK#AAAAAAAAAA" for item in _items(dynamodb))  # not theirs: kept


@pytest.fixture
async def client(service: TurnService, account: AccountService) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(service, account))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        yield http


def _identity(sub: str) -> dict[str, str]:
    """The header Lambda Web Adapter builds from API Gateway's request context."""
    return {"x-amzn-request-context": json.dumps({"requestId": "req-1", "authorizer": {"claims": {"sub": sub}}})}


async def test_delete_me_erases_the_caller_and_returns_the_report(
    client: httpx.AsyncClient, store: Repositories
) -> None:
    _fill(store, "user-1", PHONE)
    store.writes.append_message("user-2", "user", "not yours")

    response = await client.delete("/me", headers=_identity("user-1"))

    assert response.status_code == 200
    assert response.json() == {
        "deleted": {
            "messages": 2,
            "stateItems": 3,
            "phoneNumbers": 1,
            "dedupeRecords": 1,
            "linkCodes": 1,
            "otherItems": 0,
            "checkInSchedules": 0,
        },
        "total": 8,
        "kept": {"rateCounters": 1},
    }
    assert store.conversations.load_turn("user-1", 20).messages == ()
    assert [m.content for m in store.conversations.load_turn("user-2", 20).messages] == ["not yours"]
    again = await client.delete("/me", headers=_identity("user-1"))
    assert again.json()["total"] == 0


async def test_delete_me_is_503_when_the_table_fails(
    client: httpx.AsyncClient, store: Repositories, dynamodb: Any
) -> None:
    _failing(dynamodb, "batch_write_item")
    store.writes.append_message("user-1", "user", "hello")
    response = await client.delete("/me", headers=_identity("user-1"))
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"] == "store_unavailable"


# --- an erase is final: nothing in flight re-creates the user, and the rate limit is not reset ---


async def test_a_turn_that_began_before_the_erase_stores_nothing_after_it(
    service: TurnService, store: Repositories, dynamodb: Any
) -> None:
    """The turn stored its message, then the user was erased while the model answered: its reply,
    state and profile are refused (409 user_erased over HTTP), so the user is not re-created."""
    turn = await service.start_turn("user-1", "I'm a beginner and I run twice a week")
    store.erasure.erase("user-1")
    with pytest.raises(UserErasedError):
        await turn.collect()
    assert _left_of(dynamodb, "user-1") == []
    # What the user says after the erase is a fresh start, stored as usual.
    await (await service.start_turn("user-1", "Hi again")).collect()
    assert next(m.content for m in store.conversations.load_turn("user-1", 20).messages) == "Hi again"


async def test_a_message_received_before_the_erase_is_not_stored_after_it(
    service: TurnService, store: Repositories, dynamodb: Any
) -> None:
    """A queued text that arrived before the erase (its Twilio id still unknown after the erase)."""
    received = datetime.now(UTC) - timedelta(seconds=5)
    store.erasure.erase("user-1")
    with pytest.raises(UserErasedError):
        await service.start_turn("user-1", "Hello from the queue", "SM-before", received)
    assert _left_of(dynamodb, "user-1") == []
    # The same text sent again now (after the erase) is a new message, and is stored.
    await service.start_turn("user-1", "Hello again", "SM-after")
    assert _left_of(dynamodb, "user-1") != []


async def test_the_summary_of_a_turn_from_before_the_erase_is_not_stored(store: Repositories, dynamodb: Any) -> None:
    before_ms = int(datetime.now(UTC).timestamp() * 1000) - 1000
    store.erasure.erase("user-1")
    summary = ConversationSummary("wants a 5k", "0000000000001-000000000000")
    assert not store.writes.save_summary("user-1", summary, before_ms)
    assert _left_of(dynamodb, "user-1") == []


def test_an_erase_does_not_reset_the_rate_limit(dynamodb: Any, settings: Settings) -> None:
    clock = FakeClock()  # one window, wherever the real clock is in its hour
    store = Repositories.over(dynamodb, TABLE, settings, clock=clock)
    limit = RateLimit(messages=3, window_s=3600)
    for text in ("one", "two", "three"):
        store.writes.append_message("user-1", "user", text, limit)
    assert store.erasure.erase("user-1").kept_rate_counters == 1
    clock.advance(1)  # a message after the erase, not one it cut short
    with pytest.raises(RateLimitedError):
        store.writes.append_message("user-1", "user", "four", limit)
