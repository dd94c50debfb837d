"""Owns the fold after a turn: what left the window goes into the rolling summary (seed 002).

It reads the oldest unsummarized messages itself (the turn read only the newest ones), and only
when a fold is due, so most turns stay one read; the read is at most FOLD_READ_LIMIT messages and
the fold at most FOLD_MAX_TOKENS of them, oldest first (`memory.fold_rules.fold_batch`). A backlog (folds
that failed, the memory or the summary switched off for a while) is due whenever the turn's read
did not reach back to the summary, and is caught up over as many turns as it needs, in order. It
never raises: a failed fold loses nothing, because the next turn computes the same fold from what
is stored.
"""

import asyncio
from collections.abc import Sequence

from aws_lambda_powertools import Logger

from onboarding.config.flags import MemoryFeatures
from onboarding.memory.conversations import conversation_start
from onboarding.memory.fold_rules import fold_batch, fold_reach, read_reached_summary
from onboarding.memory.window import units_of
from onboarding.metrics import count_metric
from onboarding.model.history import ConversationSummary
from onboarding.model.messages import Message
from onboarding.turn.orchestrator import PreparedTurn
from onboarding.turn.parts import TurnDependencies

logger = Logger(child=True)


async def fold_summary(deps: TurnDependencies, prepared: PreparedTurn, new: tuple[Message, ...], since_ms: int) -> None:
    """Fold what left the window into the summary, given what the turn read and what it stored."""
    if prepared.loaded.degraded:
        return
    loaded = prepared.loaded
    user_id = prepared.agent.context.user_id
    await fold_if_due(deps, user_id, [*loaded.messages, *new], loaded.summary, prepared.features, since_ms, new)


async def fold_if_due(
    deps: TurnDependencies,
    user_id: str,
    messages: Sequence[Message],
    summary: ConversationSummary | None,
    features: MemoryFeatures,
    since_ms: int,
    new: Sequence[Message] = (),
) -> None:
    """The fold a turn makes when `messages` (what its read returned, then the `new` ones it stored,
    oldest first) and `summary` are what it saw: only when one is due, at `deps.clock()`. The
    memory benchmark calls it with a read and nothing new. Never raises."""
    if deps.summarizer is None or not features.summary:
        return
    limits = deps.limits
    read = messages[: len(messages) - len(new)]
    through = summary.through_message_id if summary else None
    start = conversation_start(messages, deps.clock(), features.conversation_rules(limits.conversations))
    reached = read_reached_summary(read, limits.history_load_limit, through)
    reach = fold_reach(messages, start, through, limits.fold, reached)
    if reach is None:
        return
    try:
        oldest = await asyncio.to_thread(
            deps.store.conversations.oldest_unsummarized, user_id, summary, limits.fold_read_limit
        )
        read_all = len(oldest) < limits.fold_read_limit
        # More than this turn added, so a backlog shrinks every turn, however large its messages.
        due = fold_batch(oldest, reach, limits.fold_max_tokens, read_all, min_units=len(units_of(new)) + 1)
        if not due:
            return
        folded = await deps.summarizer.summarize(due, summary)
        await asyncio.to_thread(deps.store.writes.save_summary, user_id, folded, since_ms)
    except Exception as error:  # best effort: the next turn folds the same messages
        logger.warning("Summary fold failed", extra={"reason": type(error).__name__})
        count_metric("SummaryFoldFailed")
        return
    logger.info("Folded messages into the summary", extra={"folded": len(due), "backlog": not reached})
