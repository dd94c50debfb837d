"""Owns a turn in progress: streaming the agent's reply, committing what it produced, and the fold.

Iterate a `Turn` for the reply's chunks; `result` is set once it finished. Then `fold_summary()`
folds what left the window into the summary: handlers call it after the reply reached the person
and before their response ends, so it finishes inside the invocation that answered (a task left
running after the response would be frozen with the Lambda sandbox).
"""

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime

from aws_lambda_powertools import Logger

from onboarding.config import Limits
from onboarding.llm.resilience import CircuitBreaker, open_stream
from onboarding.llm.summarizer import Summarizer
from onboarding.memory.conversations import conversation_start
from onboarding.memory.fold import fold_candidates, fold_due
from onboarding.metrics import count_metric
from onboarding.model.errors import CoachUnavailableError, MessageOverBudgetError, ModelUnavailableError
from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.records import ClaimedTurn
from onboarding.model.state import OnboardingState
from onboarding.model.text import is_blank
from onboarding.orchestrator import PreparedTurn
from onboarding.persistence import Repositories

logger = Logger(child=True)


@dataclass(frozen=True)
class TurnResult:
    user_message: Message
    assistant_message: Message | None
    reply: str
    replayed: bool = False  # an earlier delivery of the same client message id already answered it
    delivered: bool = False  # ... and its reply is recorded as having reached the person


@dataclass(frozen=True)
class TurnDependencies:
    """What every turn of a service shares: the repositories, the model guards, the memory rules."""

    store: Repositories
    limits: Limits
    breaker: CircuitBreaker
    summarizer: Summarizer | None
    clock: Callable[[], datetime]

    async def fold(self, prepared: PreparedTurn, new: tuple[Message, ...]) -> None:
        """Fold what left the window into the summary, reading the unsummarized messages when a
        fold is due. Never raises: a failed fold loses nothing (the next turn folds them)."""
        if self.summarizer is None or prepared.loaded.degraded:
            return
        user_id = prepared.agent.context.user_id
        loaded, policy = prepared.loaded, self.limits.fold
        messages = [*loaded.messages, *new]
        through = loaded.summary.through_message_id if loaded.summary else None
        start = conversation_start(messages, self.clock(), self.limits.conversations)
        if not fold_due(messages, start, through, policy):
            return
        try:
            # The turn read only the newest messages; the fold reads every unsummarized one itself.
            unsummarized = await asyncio.to_thread(
                self.store.conversations.messages_after, user_id, loaded.summary, self.limits.fold_read_limit
            )
            start = conversation_start(unsummarized, self.clock(), self.limits.conversations)
            due = fold_candidates(unsummarized, start, None, policy)
            if not due:
                return
            folded = await self.summarizer.summarize(due, loaded.summary)
            await asyncio.to_thread(self.store.writes.save_summary, user_id, folded)
        except Exception as error:  # best effort: the next turn folds the same messages
            logger.warning("Summary fold failed", extra={"reason": type(error).__name__})
            count_metric("SummaryFoldFailed")
            return
        logger.info("Folded messages into the summary", extra={"folded": len(due)})


class Turn:
    """A turn in progress (see the module's docstring)."""

    def __init__(
        self,
        prepared: PreparedTurn | None,
        deps: TurnDependencies,
        message: str,
        user_message: Message,
        client_message_id: str | None = None,
        fixed_reply: str | None = None,
        claimed: ClaimedTurn | None = None,
    ) -> None:
        self._prepared = prepared
        self._deps = deps
        self._message = message
        self._client_message_id = client_message_id
        self._fixed_reply = fixed_reply
        self._claimed = claimed
        self._stored: tuple[Message, ...] = ()
        self.user_message = user_message
        self.result: TurnResult | None = None

    @classmethod
    def replay(cls, deps: TurnDependencies, claimed: ClaimedTurn) -> "Turn":
        """A repeated delivery of an answered message: the stored reply, without the model."""
        return cls(None, deps, claimed.user_message.content, claimed.user_message, claimed=claimed)

    async def __aiter__(self) -> AsyncIterator[str]:
        if self.result is not None:
            raise RuntimeError("a turn can be streamed only once")
        if self._prepared is None:
            claimed = self._claimed
            reply = claimed.reply if claimed else None
            if reply is not None and reply.content:
                yield reply.content
            self.result = TurnResult(
                self.user_message,
                reply,
                reply.content if reply else "",
                replayed=True,
                delivered=bool(claimed and claimed.delivered),
            )
            return
        prepared = self._prepared
        agent = prepared.agent
        if self._fixed_reply is not None:
            # A reset: said by us, not the model. The waited-for field goes with the old conversation.
            yield self._fixed_reply
            agent.produced.append(Message("assistant", self._fixed_reply))
            state = agent.working.state
            await self._commit(state.model_copy(update={"waiting_for": None}) if state.waiting_for else None)
            return
        breaker = self._deps.breaker
        if not breaker.allows_call():
            logger.warning("Model circuit open; answering without calling it")
            count_metric("ModelCallSkipped")
            raise CoachUnavailableError(breaker.retry_after_s())
        parts: list[str] = []
        try:
            stream, first = await open_stream(lambda: agent.stream_response(self._message), self._deps.limits.retry)
            if first is not None:
                parts.append(first)
                yield first
                async for chunk in stream:
                    parts.append(chunk)
                    yield chunk
        except MessageOverBudgetError:
            # The instructions grew (a long summary) so that this message no longer fits: say so.
            raise
        except Exception as error:
            breaker.record_failure()
            logger.error("Model stream failed", extra={"chunks_received": len(parts)}, exc_info=True)
            count_metric("ModelFailed")
            raise ModelUnavailableError("the coach could not finish its reply; please try again") from error
        breaker.record_success()
        working = agent.working
        await self._commit(
            working.state if working.state_changed else None,
            working.profile if working.profile_changed else None,
            streamed="".join(parts),
        )

    async def _commit(
        self, state: OnboardingState | None = None, profile: UserProfile | None = None, streamed: str | None = None
    ) -> None:
        """Store what the turn produced, in one transaction."""
        prepared = self._prepared
        if prepared is None:  # unreachable: only a prepared turn commits
            raise RuntimeError("a replayed turn has nothing to commit")
        agent = prepared.agent
        produced = agent.produced
        reply = streamed if streamed is not None else "".join(m.content for m in produced if m.role == "assistant")
        if not produced:
            # Bedrock would reject an empty assistant turn in later requests, so none is stored.
            logger.warning("Model returned an empty reply; nothing stored for it")
            self.result = TurnResult(self.user_message, None, reply)
            return
        # A concurrent delivery of the same client message id may have stored its reply first: then
        # that one is the turn's reply, and nothing of this one is stored.
        stored = await asyncio.to_thread(
            self._deps.store.writes.commit_reply,
            agent.context.user_id,
            produced,
            self._client_message_id,
            state,
            profile,
        )
        earlier_won = len(stored) != len(produced) or any(
            m.content != p.content or m.role != p.role for m, p in zip(stored, produced, strict=True)
        )
        replies = [m for m in stored if m.role == "assistant" and not is_blank(m.content)]
        assistant_message = replies[-1] if replies else None
        if earlier_won and assistant_message is not None:
            reply = assistant_message.content
        self._stored = () if earlier_won else stored
        self.result = TurnResult(self.user_message, assistant_message, reply)

    async def fold_summary(self) -> None:
        """Fold what left the window into the summary (a model call, so after the reply is out).
        Never raises; nothing to do for a replayed turn or one whose reply was not stored."""
        if self._prepared is not None and self._stored:
            await self._deps.fold(self._prepared, (self.user_message, *self._stored))

    async def collect(self) -> TurnResult:
        """Run the whole turn without streaming and return its result."""
        async for _ in self:
            pass
        if self.result is None:  # unreachable: a completed stream always sets the result
            raise RuntimeError("the turn finished without a result")
        return self.result
