"""Owns the fold after a turn: what left the window goes into the rolling summary (seed 002).

It reads the unsummarized messages itself (the turn read only the newest ones), and only when a
fold is due, so most turns stay one read. It never raises: a failed fold loses nothing, because
the next turn computes the same fold from what is stored.
"""

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from onboarding.config.flags import MemoryFeatures
from onboarding.memory.conversations import conversation_start
from onboarding.memory.fold import fold_candidates, fold_due
from onboarding.metrics import count_metric
from onboarding.model.messages import Message
from onboarding.model.records import ConversationSummary
from onboarding.orchestrator import PreparedTurn

if TYPE_CHECKING:
    from onboarding.turn import TurnDependencies

logger = Logger(child=True)


async def fold_summary(
    deps: "TurnDependencies", prepared: PreparedTurn, new: tuple[Message, ...], since_ms: int
) -> None:
    """Fold what left the window into the summary, given what the turn read and what it stored."""
    if prepared.loaded.degraded:
        return
    loaded = prepared.loaded
    user_id = prepared.agent.context.user_id
    await fold_if_due(deps, user_id, [*loaded.messages, *new], loaded.summary, prepared.features, since_ms)


async def fold_if_due(
    deps: "TurnDependencies",
    user_id: str,
    messages: Sequence[Message],
    summary: ConversationSummary | None,
    features: MemoryFeatures,
    since_ms: int,
) -> None:
    """The fold a turn makes when `messages` (the newest stored, oldest first) and `summary` are what
    it saw: only when one is due, at `deps.clock()`. Never raises."""
    if deps.summarizer is None or not features.summary:
        return
    limits = deps.limits
    through = summary.through_message_id if summary else None
    rules = features.conversation_rules(limits.conversations)
    start = conversation_start(messages, deps.clock(), rules)
    if not fold_due(messages, start, through, limits.fold):
        return
    try:
        unsummarized = await asyncio.to_thread(
            deps.store.conversations.messages_after, user_id, summary, limits.fold_read_limit
        )
        start = conversation_start(unsummarized, deps.clock(), rules)
        due = fold_candidates(unsummarized, start, None, limits.fold)
        if not due:
            return
        folded = await deps.summarizer.summarize(due, summary)
        await asyncio.to_thread(deps.store.writes.save_summary, user_id, folded, since_ms)
    except Exception as error:  # best effort: the next turn folds the same messages
        logger.warning("Summary fold failed", extra={"reason": type(error).__name__})
        count_metric("SummaryFoldFailed")
        return
    logger.info("Folded messages into the summary", extra={"folded": len(due)})
