"""Owns putting a conversation into our memory as it happened: LoCoMo's way.

When the data has both speakers (LoCoMo), each turn is stored as the conversation has it, not
generated: the client's (speaker_a) as the user's messages, the other party's (speaker_b) as the
coach's, each session at its own date (a turn every 30 seconds from the session's start), through
the product's own writes. After each of the client's turns, the summary fold runs as a turn's
would at that moment (`folding.fold_if_due`): what left the window goes into the summary. The
table's stream hands every message to the recall indexer, as for any turn.

Our synthetic conversations have the client's lines only: the coach's are the coach's to make,
so they are replayed as turns (replay.py).
"""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from infra.bench.memory_benchmark.dataset import Conversation, DatasetError
from onboarding.breaker import CircuitBreaker
from onboarding.config import Settings
from onboarding.config.flags import DEFAULT_FEATURES
from onboarding.model.messages import Role
from onboarding.persistence import Repositories
from onboarding.summary import Summarizer
from onboarding.turn.run import TurnDependencies, fold_if_due

TURN_SPACING = timedelta(seconds=30)


class Clock:
    """The ingestion's time, moved by hand."""

    def __init__(self) -> None:
        self.now = datetime(2000, 1, 1, tzinfo=UTC)

    def seconds(self) -> float:
        return self.now.timestamp()

    def at(self) -> datetime:
        return self.now


async def ingest(
    conversation: Conversation,
    user_id: str,
    settings: Settings,
    store_over: Callable[[Callable[[], float]], Repositories],
    summarizer: Summarizer,
    progress: Callable[[], None] | None = None,
) -> int:
    """Store `conversation`'s turns for `user_id` as they happened; how many messages were stored."""
    clock = Clock()
    store = store_over(clock.seconds)
    deps = TurnDependencies(store, settings, CircuitBreaker(settings.breaker), summarizer, clock.at)
    stored = 0
    for session in conversation.sessions:
        start = session.when
        if start is None:
            raise DatasetError(f"{conversation.sample_id}: session {session.number} has no date ({session.date!r})")
        for number, dialog in enumerate(session.dialogs):
            clock.now = start.replace(tzinfo=UTC) + number * TURN_SPACING
            role: Role = "user" if dialog.speaker == conversation.client else "assistant"
            store.writes.append_message(user_id, role, dialog.content, None, int(clock.seconds() * 1000))
            stored += 1
            # After each exchange (the other party's answer, before the client speaks again), as a turn folds.
            following = session.dialogs[number + 1] if number + 1 < len(session.dialogs) else None
            if following is None or (following.speaker == conversation.client and role == "assistant"):
                await _fold(deps, store, settings, user_id, int(clock.seconds() * 1000))
            if progress is not None:
                progress()
    return stored


async def _fold(deps: TurnDependencies, store: Repositories, settings: Settings, user_id: str, since_ms: int) -> None:
    loaded = store.conversations.load_turn(user_id, settings.history_load_limit)
    await fold_if_due(deps, user_id, loaded.messages, loaded.summary, DEFAULT_FEATURES, since_ms)
