"""The conversation repositories (reads and a turn's writes) against moto in-process."""

import json
import logging
from typing import Any

import pytest

from onboarding.account import AccountService
from onboarding.config import Settings
from onboarding.model.errors import InvalidCursorError, StoreError
from onboarding.model.messages import Message
from onboarding.model.state import OnboardingAgentType, OnboardingState
from onboarding.persistence import Repositories
from tests.support.seed import commit, save_state

from .conftest import TABLE

FROZEN_CLOCK_S = 1_800_000_000.0


def test_newest_messages_come_back_oldest_first(store: Repositories) -> None:
    """The NEWEST 20, in ascending order: not the first 20 ever stored, not newest first."""
    for i in range(30):
        store.writes.append_message("u1", "user" if i % 2 == 0 else "assistant", f"message {i}")
    loaded = store.conversations.load_turn("u1", message_limit=20)
    assert [m.content for m in loaded.messages] == [f"message {i}" for i in range(10, 30)]


def test_users_do_not_see_each_other(store: Repositories) -> None:
    store.writes.append_message("alice", "user", "alice's secret")
    store.writes.append_message("bob", "user", "bob's note")
    assert [m.content for m in store.conversations.load_turn("alice", 20).messages] == ["alice's secret"]


def test_a_new_user_has_initial_state_and_no_messages(store: Repositories) -> None:
    loaded = store.conversations.load_turn("nobody", 20)
    assert loaded.messages == ()
    assert loaded.state == OnboardingState.initial()


def test_state_comes_back_with_the_messages_in_one_query(store: Repositories, dynamodb: Any) -> None:
    state = OnboardingState(
        current_agent=OnboardingAgentType.DIET_PLANNING, agent_context={"goal_setting": {"primary_goal": "strength"}}
    )
    save_state(dynamodb, TABLE, "u1", state)
    for i in range(25):
        store.writes.append_message("u1", "user", f"m{i}")
    calls: list[str] = []
    dynamodb.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    loaded = store.conversations.load_turn("u1", message_limit=20)
    assert calls == ["Query"]
    assert loaded.state == state
    assert [m.content for m in loaded.messages] == [f"m{i}" for i in range(5, 25)]


def test_same_millisecond_writes_from_two_processes_both_survive(dynamodb: Any, settings: Settings) -> None:
    """Two Lambdas with the same clock reading: distinct keys, both stored."""
    first = Repositories.over(dynamodb, TABLE, settings, clock=lambda: FROZEN_CLOCK_S)
    second = Repositories.over(dynamodb, TABLE, settings, clock=lambda: FROZEN_CLOCK_S)
    a = first.writes.append_message("u1", "user", "from phone")
    b = second.writes.append_message("u1", "user", "from app")
    assert a.message_id != b.message_id
    assert a.created_at == b.created_at
    assert sorted(m.content for m in first.conversations.load_turn("u1", 20).messages) == ["from app", "from phone"]


def test_writes_in_one_process_keep_their_order_within_a_millisecond(dynamodb: Any, settings: Settings) -> None:
    store = Repositories.over(dynamodb, TABLE, settings, clock=lambda: FROZEN_CLOCK_S)
    for i in range(50):
        store.writes.append_message("u1", "user", f"m{i}")
    assert [m.content for m in store.conversations.load_turn("u1", 50).messages] == [f"m{i}" for i in range(50)]


def test_a_key_collision_never_overwrites(dynamodb: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The write is conditional: a colliding key is detected and a fresh one used."""
    store = Repositories.over(dynamodb, TABLE, settings, clock=lambda: FROZEN_CLOCK_S)
    tokens = iter(["aaaaaaaaaaaa", "aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr("onboarding.persistence.schema.secrets.token_hex", lambda _n: next(tokens))
    store.writes._stamper._last_ms = 0
    first = store.writes.append_message("u1", "user", "first")
    store.writes._stamper._last_ms = 0  # force the same millisecond again
    second = store.writes.append_message("u1", "user", "second")
    assert first.message_id != second.message_id
    assert sorted(m.content for m in store.conversations.load_turn("u1", 20).messages) == ["first", "second"]


@pytest.mark.parametrize(
    "content",
    [
        "😀💪🏽 emoji with skin tone",
        "مرحبا، أنا مبتدئ",
        "עברית עם English mixed",
        "a" * 10_000,
        "x\u0000y\ttabs\nnewlines",
        "🏋️" * 2500,
    ],
)
def test_content_is_stored_byte_exact(store: Repositories, content: str) -> None:
    stored = store.writes.append_message("u1", "user", content)
    (loaded,) = store.conversations.load_turn("u1", 20).messages
    assert loaded.content.encode("utf-8") == content.encode("utf-8")
    assert loaded == stored


def test_malformed_items_are_skipped_with_a_warning(
    store: Repositories, dynamodb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store.writes.append_message("u1", "user", "good one")
    for sk, extra in [
        ("MSG#0000000000001#aa", {}),
        (
            "MSG#0000000000002#bb",
            {"role": {"S": "robot"}, "content": {"S": "x"}, "created_at": {"S": "2026-01-01T00:00:00+00:00"}},
        ),
        (
            "MSG#0000000000003#cc",
            {"role": {"S": "user"}, "content": {"N": "1"}, "created_at": {"S": "2026-01-01T00:00:00+00:00"}},
        ),
        (
            "MSG#0000000000004",
            {"role": {"S": "user"}, "content": {"S": "no suffix"}, "created_at": {"S": "2026-01-01T00:00:00+00:00"}},
        ),
    ]:
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "USER#u1"}, "sk": {"S": sk}, **extra})
    with caplog.at_level(logging.WARNING):
        loaded = store.conversations.load_turn("u1", 20)
    assert [m.content for m in loaded.messages] == ["good one"]
    assert sum("Skipping malformed message item" in r.getMessage() for r in caplog.records) == 4


@pytest.mark.parametrize(
    "item",
    [
        {"current_agent": {"S": "not_a_step"}},
        {"current_agent": {"S": "goal_setting"}, "agent_context": {"S": "{not json"}},
        {"agent_context": {"S": "{}"}},
        {"current_agent": {"S": "goal_setting"}, "agent_context": {"S": json.dumps([1, 2])}},
    ],
)
def test_malformed_state_falls_back_to_initial(store: Repositories, dynamodb: Any, item: dict[str, Any]) -> None:
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "USER#u1"}, "sk": {"S": "~STATE"}, **item})
    assert store.conversations.load_turn("u1", 20).state == OnboardingState.initial()


def test_pages_cut_short_by_the_1mb_limit_are_followed(store: Repositories) -> None:
    """Twenty 300 KB messages do not fit one 1 MB Query page; all twenty still come back."""
    big = [f"{i:02d}" + "x" * 300_000 for i in range(20)]
    for content in big:
        store.writes.append_message("u1", "user", content)
    assert [m.content for m in store.conversations.load_turn("u1", 20).messages] == big


def test_read_and_write_failures_raise_store_error(dynamodb: Any, settings: Settings) -> None:
    broken = Repositories.over(dynamodb, "no-such-table", settings)
    with pytest.raises(StoreError):
        broken.conversations.load_turn("u1", 20)
    with pytest.raises(StoreError):
        broken.writes.append_message("u1", "user", "hello")
    with pytest.raises(StoreError):  # the state is written only with a turn's reply now
        commit(broken, "u1", [Message("assistant", "hi")], state=OnboardingState.initial())


def test_repeated_collisions_end_in_a_clear_error(
    dynamodb: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never an overwrite: when every attempt collides, the write fails loudly."""
    store = Repositories.over(dynamodb, TABLE, settings, clock=lambda: FROZEN_CLOCK_S)
    original = store.writes.append_message("u1", "user", "original")
    drawn: list[int] = []

    def the_original_id(created_ms: int) -> str:
        drawn.append(created_ms)
        return original.message_id

    monkeypatch.setattr("onboarding.persistence.writes.new_message_id", the_original_id)
    with pytest.raises(StoreError, match="free key"):
        store.writes.append_message("u1", "user", "would overwrite")
    assert len(drawn) == settings.write_attempts  # bounded: a fresh key per attempt, then it gives up
    assert [m.content for m in store.conversations.load_turn("u1", 20).messages] == ["original"]


def _all_pages(store: Repositories, user_id: str, limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = store.conversations.history_page(user_id, limit, cursor)
        pages.append([m.content for m in page.messages])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def test_history_pages_newest_first_through_every_message(store: Repositories, dynamodb: Any) -> None:
    save_state(dynamodb, TABLE, "u1", OnboardingState.initial())
    for i in range(23):
        store.writes.append_message("u1", "user", f"m{i}")
    pages = _all_pages(store, "u1", 10)
    assert [len(page) for page in pages] == [10, 10, 3]
    assert [text for page in pages for text in page] == [f"m{i}" for i in reversed(range(23))]


def test_an_empty_history_is_one_empty_page(store: Repositories) -> None:
    page = store.conversations.history_page("nobody", 20)
    assert page.messages == ()
    assert page.next_cursor is None


def test_a_cursor_never_reaches_another_users_messages(store: Repositories) -> None:
    for i in range(5):
        store.writes.append_message("alice", "user", f"alice {i}")
        store.writes.append_message("bob", "user", f"bob {i}")
    alices_cursor = store.conversations.history_page("alice", 2).next_cursor
    assert alices_cursor is not None
    page = store.conversations.history_page("bob", 10, alices_cursor)
    assert all(m.content.startswith("bob") for m in page.messages)


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all!",
        "eyJ2IjogMX0",
        "W10",
        "eyJ2IjogMSwgImFmdGVyIjogIn5TVEFURSJ9",
        "eyJ2IjogMiwgImFmdGVyIjogIngifQ",
    ],
)
def test_a_cursor_the_store_did_not_hand_out_is_rejected(store: Repositories, cursor: str) -> None:
    with pytest.raises(InvalidCursorError):
        store.conversations.history_page("u1", 10, cursor)


@pytest.mark.parametrize("limit", [0, 101])
async def test_history_page_limits(account: AccountService, limit: int) -> None:
    """The page limit is the account service's rule now (the repository reads what it is asked)."""
    with pytest.raises(ValueError, match="between 1 and 100"):
        account.history("u1", limit)
