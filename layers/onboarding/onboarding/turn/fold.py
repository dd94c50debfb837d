"""Owns the summary fold after a turn: what left the window goes into the summary, by the rules of
onboarding/summary.py, after the reply reached the person and before the invocation ends.

Handlers call `Turn.fold_summary` once the reply is out, so the fold finishes inside the
invocation that answered (a task left running after the response would be frozen with the Lambda
sandbox). The fold reads the oldest unsummarized messages itself (the turn read only the newest
ones), and only when one is due (`summary.fold_reach`), so most turns stay one read, and a
backlog's folds at most once an interval (`summary.backlog_fold_due`). It never raises: a failed
fold loses nothing, because the next turn computes the same fold from what is stored.
"""

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from aws_lambda_powertools import Logger

from onboarding.config import Limits
from onboarding.flags import MemoryFlags
from onboarding.metrics import count_metric
from onboarding.model.history import ConversationSummary
from onboarding.model.messages import Message
from onboarding.summary import Summarizer, arrived_since, backlog_fold_due, fold_batch, fold_reach, read_reached_summary
from onboarding.turn.orchestrator import PreparedTurn
from onboarding.turn.store import TurnStore

logger = Logger(child=True)


class FoldDependencies(Protocol):
    """What a fold needs of the turns' shared dependencies (`run.TurnDependencies`)."""

    @property
    def store(self) -> TurnStore: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def summarizer(self) -> Summarizer | None: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...


async def fold_after_turn(
    deps: FoldDependencies, prepared: PreparedTurn, new: tuple[Message, ...], since_ms: int, reset: bool
) -> None:
    """The fold after a turn over what it read (`prepared`) and what it stored (`new`). The
    current conversation starts where the turn's prompt started it, or after the turn's own
    messages when they were a reset."""
    loaded = prepared.loaded
    if loaded.degraded:
        return
    messages = [*loaded.messages, *new]
    start = len(messages) if reset else prepared.conversation_start
    user_id = prepared.agent.context.user_id
    await fold_if_due(deps, user_id, messages, start, loaded.summary, prepared.flags, since_ms, new)


async def fold_if_due(
    deps: FoldDependencies,
    user_id: str,
    messages: Sequence[Message],
    start: int,
    summary: ConversationSummary | None,
    flags: MemoryFlags,
    since_ms: int,
    new: Sequence[Message] = (),
) -> None:
    """The fold a turn makes when `messages` (what its read returned, then the `new` ones it stored,
    oldest first, the current conversation from index `start`) and `summary` are what it saw: only
    when one is due, at `deps.clock()`. The memory benchmark calls it with a read and nothing new.
    Never raises."""
    if deps.summarizer is None or not flags.summary:
        return
    limits, now = deps.limits, deps.clock()
    read = messages[: len(messages) - len(new)]
    through = summary.through_message_id if summary else None
    reached = read_reached_summary(read, limits.history_load_limit, through)
    reach = fold_reach(messages, start, through, limits.fold, reached)
    if reach is None or not (reached or backlog_fold_due(summary, read, now, limits.fold)):
        return
    try:
        oldest = await deps.store.oldest_unsummarized(user_id, summary, limits.fold_read_limit)
        read_all = len(oldest) < limits.fold_read_limit
        # More than arrived since the last fold, so a backlog shrinks every fold, however large its messages.
        more = arrived_since(messages, summary, new) + 1
        due = fold_batch(oldest, reach, limits.fold_max_tokens, read_all, min_units=more)
        if not due:
            return
        folded = await deps.summarizer.summarize(due, summary)
        await deps.store.save_summary(user_id, folded, since_ms)
    except Exception as error:  # best effort: the next turn folds the same messages
        logger.warning("Summary fold failed", extra={"reason": type(error).__name__})
        count_metric("SummaryFoldFailed")
        return
    logger.info("Folded messages into the summary", extra={"folded": len(due), "backlog": not reached})
