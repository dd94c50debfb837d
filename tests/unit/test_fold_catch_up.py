"""A fold never passes a backlog over. With 1,500 messages waiting unsummarized (folds
that failed, or the memory switched off for a while), the fold read the newest 200 and moved the
summary's `through` past the 1,300 older ones, which then never reached the model again. Now each
fold summarises the oldest unsummarized messages, in order, at most FOLD_READ_LIMIT read and
FOLD_MAX_TOKENS folded a turn, and the turns catch up: every message is in some fold, once, in order.
A backlog's folds come at most once every FOLD_BACKLOG_INTERVAL_S (since the summary was stored), so
a person chatting fast does not wait on a model call after every reply while it lasts.

The turns run the product's turn service on moto, with the real langchain-aws client talking to the
Bedrock emulator (the summaries are its answers; the requests show what each fold summarised)."""

import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.composition import build_turn_service
from onboarding.config import Settings
from onboarding.llm.wording import SUMMARY_SYSTEM_PROMPT
from onboarding.model.messages import Message, Role
from onboarding.persistence.codec import message_item
from onboarding.persistence.schema import SUMMARY_SORT_KEY, USER_PREFIX, new_message_id
from tests.support.setting_effects import observes
from tests.support.setting_runs import query_limits, repositories, run_turn, settings_with
from tests.unit.conftest import TABLE

pytestmark = pytest.mark.unit

_FOLDED = re.compile(r"^Client: backlog message (\d+)$", re.MULTILINE)


def seed_backlog(dynamodb: Any, user: str, count: int) -> None:
    """`count` messages stored an hour ago, one a second, none of them summarised."""
    first = time.time() - 3600 - count
    items = []
    for i in range(count):
        at_ms = int((first + i) * 1000)
        role: Role = "user" if i % 2 == 0 else "assistant"
        text = f"backlog message {i}" if role == "user" else f"Noted {i}."
        message = Message(role, text, new_message_id(at_ms), datetime.fromtimestamp(at_ms / 1000, UTC))
        items.append(message_item(user, message, None))
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        assert not dynamodb.batch_write_item(RequestItems={TABLE: batch}).get("UnprocessedItems")


def folded_per_fold(emulator: BedrockEmulator, since: int) -> list[list[int]]:
    """The backlog messages each summary request since request `since` folded, in its order."""
    return [
        [int(n) for n in _FOLDED.findall(request.body["messages"][0]["content"][0]["text"])]
        for request in emulator.requests[since:]
        if request.system_text.startswith(SUMMARY_SYSTEM_PROMPT[:40])
    ]


async def catch_up(
    dynamodb: Any, emulator: BedrockEmulator, backlog: int, settings: Settings
) -> tuple[int, list[list[int]]]:
    """Turns after a backlog until the summary covers it; how many turns, and what each fold took."""
    user = f"backlog-{backlog}"
    seed_backlog(dynamodb, user, backlog)
    store = repositories(dynamodb, settings)
    service = build_turn_service(settings, store)
    since, limits = len(emulator.requests), query_limits(dynamodb)
    for turn in range(1, 60):
        await run_turn(service, user, f"and now turn {turn}")
        folds = folded_per_fold(emulator, since)
        if folds and folds[-1] and max(n for fold in folds for n in fold) == backlog - 2:
            break
    dynamodb.meta.events.unregister("provide-client-params.dynamodb.Query")
    assert max(limits) <= settings.fold_read_limit + 4  # the turn's read, and the fold's: bounded
    return turn, folds


@observes("fold_max_tokens")
@pytest.mark.parametrize("backlog", [450, pytest.param(1_500, marks=pytest.mark.slow)])
async def test_a_backlog_is_folded_oldest_first_and_caught_up(
    dynamodb: Any, emulator: BedrockEmulator, backlog: int
) -> None:
    every_turn = settings_with(fold_backlog_interval_s=0)  # turns here come faster than any interval
    turns, folds = await catch_up(dynamodb, emulator, backlog, every_turn)
    every = [n for fold in folds for n in fold]
    print(f"\n{backlog} messages waiting: caught up in {turns} turns, {len(folds)} folds of {[len(f) for f in folds]}")
    assert every[0] == 0, "the first fold takes the oldest message"
    assert every == list(range(0, backlog, 2)), "every client message folded once, in order: none passed over"
    # FOLD_MAX_TOKENS bounds a fold: a smaller one takes fewer messages a turn, and more turns.
    small = settings_with(fold_max_tokens=200, fold_backlog_interval_s=0)
    small_turns, small_folds = await catch_up(dynamodb, emulator, 120, small)
    assert max(len(fold) for fold in small_folds) < 60
    assert [n for fold in small_folds for n in fold] == list(range(0, 120, 2))
    assert small_turns > 1


@observes("fold_backlog_interval_s")
async def test_a_backlog_is_folded_at_most_once_an_interval(dynamodb: Any, emulator: BedrockEmulator) -> None:
    """Turns that come faster than FOLD_BACKLOG_INTERVAL_S fold a backlog once: the turns after
    it neither read for a fold nor call the model, until the summary is that old."""
    settings = settings_with(fold_backlog_interval_s=60)
    user = "backlog-paced"
    seed_backlog(dynamodb, user, 600)  # more than one fold takes
    service = build_turn_service(settings, repositories(dynamodb, settings))
    since, limits = len(emulator.requests), query_limits(dynamodb)
    await run_turn(service, user, "first turn")
    assert len(folded_per_fold(emulator, since)) == 1  # no summary yet: the first turn folds
    for turn in range(3):
        await run_turn(service, user, f"a quick one {turn}")
    assert len(folded_per_fold(emulator, since)) == 1  # stored seconds ago: no model call...
    assert limits.count(settings.fold_read_limit) == 1  # ...and no fold's read
    summary_key = {"pk": {"S": f"{USER_PREFIX}{user}"}, "sk": {"S": SUMMARY_SORT_KEY}}
    a_minute_ago = datetime.fromtimestamp(time.time() - 61, UTC).isoformat()
    dynamodb.update_item(
        TableName=TABLE,
        Key=summary_key,
        UpdateExpression="SET updated_at = :then",
        ExpressionAttributeValues={":then": {"S": a_minute_ago}},
    )
    await run_turn(service, user, "a minute later")
    assert len(folded_per_fold(emulator, since)) == 2  # the interval passed: the backlog folds again
    dynamodb.meta.events.unregister("provide-client-params.dynamodb.Query")
