"""Owns a turn in progress, and all of its state: what the service's turns share
(`TurnDependencies`), the one message it answers as stored (`Delivery`), its deadline and ledger
(`TurnWatch`), the agent prepared for it, and what it returns (`TurnResult`); its life: streaming
the agent's reply, committing what it produced, and the fold after it (turn/fold.py). A repeated
delivery of an answered message is the other way in, `Turn.replay`, which never calls the model.
Every table call goes through the turn's one door, `TurnStore` (turn/store.py).

Iterate a `Turn` for the reply's chunks; `result` is set once it finished. Then `fold_summary()`
folds what left the window into the summary, before the handler's response ends.

Every wait on the model ends by the turn's deadline (minus the time kept for storing), so a hung
model ends the turn with an error the handler reports, never with the function's timeout.
"""

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from aws_lambda_powertools import Logger

from onboarding.breaker import CircuitBreaker
from onboarding.checkins.cadence import SCHEDULE_ITEMS
from onboarding.config import Limits
from onboarding.llm.bedrock import open_stream
from onboarding.metrics import count_metric
from onboarding.model.answers import Answer, step_answers
from onboarding.model.errors import (
    CoachUnavailableError,
    MemoryChangedError,
    MessageOverBudgetError,
    ModelUnavailableError,
    StoreError,
    UserErasedError,
)
from onboarding.model.history import LeasedTurn, TurnCommit, TurnContext
from onboarding.model.messages import Message
from onboarding.model.normalization import is_blank
from onboarding.model.state import OnboardingState
from onboarding.replies import MEMORY_UNAVAILABLE_NOTICE
from onboarding.summary import Summarizer
from onboarding.telemetry import TurnLedger, counting, fold_accounted, turn_responded
from onboarding.turn.fold import fold_after_turn
from onboarding.turn.orchestrator import PreparedTurn
from onboarding.turn.store import TurnStore

if TYPE_CHECKING:
    from onboarding.checkins.outreach import CheckInService


@dataclass(frozen=True)
class TurnResult:
    user_message: Message
    assistant_message: Message | None
    reply: str
    replayed: bool = False  # an earlier delivery of the same client message id already answered it
    delivered: bool = False  # ... and its reply is recorded as having reached the person


@dataclass(frozen=True)
class TurnDependencies:
    """What every turn of a service shares: its door to the table, the model guards, the memory rules."""

    store: TurnStore
    limits: Limits
    breaker: CircuitBreaker
    summarizer: Summarizer | None
    clock: Callable[[], datetime]
    # The check-in schedules: kept in step with the scheduling answers a turn changes (None: none kept).
    check_ins: "CheckInService | None" = None


@dataclass(frozen=True)
class Delivery:
    """The user's message this turn answers: as stored (`user_message`), its text, when it reached
    us (`since_ms`: nothing is stored if the user was erased since), and, for a message with a
    client id, this delivery's lease on that id (`lease`, decision 0009), released if the turn ends
    without a stored reply, so a retry need not wait for it to run out."""

    user_message: Message
    text: str
    since_ms: int
    client_message_id: str | None = None
    lease: str | None = None


class Deadline:
    """When a turn must be over (`turn_deadline_s` after it began), on the monotonic clock."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._ends = clock() + seconds

    def left(self, keep_s: float = 0.0) -> float:
        """Seconds until the deadline, less `keep_s` (never below zero)."""
        return max(0.0, self._ends - keep_s - self._clock())


@dataclass(frozen=True)
class TurnWatch:
    """What keeps a turn to its time (`deadline`) and counts what it did (`ledger`, the turn's
    `turn_responded` line and metrics)."""

    deadline: Deadline
    ledger: TurnLedger


logger = Logger(child=True)


T = TypeVar("T")


class TurnTimedOutError(ModelUnavailableError):
    """The model did not finish before the turn's deadline."""


_OUTCOMES: tuple[tuple[type[Exception], str], ...] = (
    (CoachUnavailableError, "coach_unavailable"),
    (TurnTimedOutError, "timed_out"),
    (ModelUnavailableError, "model_failed"),
    (MessageOverBudgetError, "over_budget"),
    (UserErasedError, "erased"),
    (StoreError, "store_failed"),
)


def outcome_of(error: Exception) -> str:
    """The kind of a turn's failure, as `turn_responded` and the TurnFailed metric name it."""
    return next((kind for cls, kind in _OUTCOMES if isinstance(error, cls)), "internal_error")


class Turn:
    """A turn in progress (see the module's docstring)."""

    def __init__(
        self,
        deps: TurnDependencies,
        delivery: Delivery,
        watch: TurnWatch,
        prepared: PreparedTurn,
        fixed_reply: str | None = None,
    ) -> None:
        """A turn that answers `delivery` with the agent `prepared` for it, or with `fixed_reply`
        (a reset: said by us, not the model)."""
        self._start(deps, delivery, watch)
        self._prepared: PreparedTurn | None = prepared
        self._fixed_reply = fixed_reply
        self._leased: LeasedTurn | None = None

    @classmethod
    def replay(cls, deps: TurnDependencies, leased: LeasedTurn, watch: TurnWatch) -> "Turn":
        """A repeated delivery of an answered message: the stored reply, without the model. Nothing
        is prepared, committed, folded or released for it."""
        turn = cls.__new__(cls)
        message = leased.user_message
        turn._start(deps, Delivery(message, message.content, 0), watch)
        turn._prepared, turn._fixed_reply, turn._leased = None, None, leased
        return turn

    def _start(self, deps: TurnDependencies, delivery: Delivery, watch: TurnWatch) -> None:
        self._deps = deps
        self._delivery = delivery
        self._deadline, self._ledger = watch.deadline, watch.ledger
        self._started = False
        self._stored: tuple[Message, ...] = ()
        self.user_message = delivery.user_message
        self.result: TurnResult | None = None

    async def _model_wait(self, awaitable: Awaitable[T]) -> T:
        """`awaitable`, cut at the turn's deadline less the time kept for storing the reply."""
        left = self._deadline.left(self._deps.limits.store_reserve_s)
        try:
            async with asyncio.timeout(left):
                return await awaitable
        except TimeoutError:
            raise TurnTimedOutError("the coach took too long to answer; please try again") from None

    async def __aiter__(self) -> AsyncIterator[str]:
        if self.result is not None or self._started:
            raise RuntimeError("a turn can be streamed only once")
        self._started = True
        outcome = "abandoned"  # the client went away mid-reply
        try:
            async for chunk in self._run():
                self._ledger.token_arrived()
                yield chunk
            outcome = "replayed" if self.result is not None and self.result.replayed else "completed"
        except Exception as error:
            outcome = outcome_of(error)
            raise
        finally:
            self._account(outcome)
            self._release_unanswered()

    def _release_unanswered(self) -> None:
        """A turn that ends without a stored reply (failed, or its client went away mid-reply) gives
        up its lease on the client message id: a retry answers it at once, counted by the rate limit.
        A blocking call, on purpose: a turn cancelled with its client's connection cannot await
        anything after the cancellation. Best effort: if it fails, the lease runs out by itself."""
        answered = self.result is not None and self.result.assistant_message is not None
        client_id, lease = self._delivery.client_message_id, self._delivery.lease
        if lease is None or client_id is None or self._prepared is None or answered:
            return
        try:
            self._deps.store.release(self._prepared.agent.context.user_id, client_id, lease)
        except StoreError as error:
            logger.warning("Could not release an unanswered message id", extra={"reason": error.reason})

    def _account(self, outcome: str) -> None:
        """The turn's `turn_responded` line and metrics: what its tools saved, tokens, time, capacity."""
        if self._prepared is not None:
            agent = self._prepared.agent
            self._ledger.answer_keys = agent.working.answer_keys
            self._ledger.tool_calls = sum(len(m.tool_calls) for m in agent.produced)
            self._ledger.input_tokens, self._ledger.output_tokens, self._ledger.tokens_estimated = agent.spent()
        turn_responded(self._ledger, outcome)

    async def _store(self, call: Awaitable[T]) -> T:
        """A table call of this turn, counted in the turn's ledger."""
        with counting(self._ledger):
            return await call

    async def _run(self) -> AsyncIterator[str]:
        if self._prepared is None:
            async for replayed in self._replayed():
                yield replayed
            return
        agent = self._prepared.agent
        if self._fixed_reply is not None:
            # A reset: said by us, not the model. The waited-for field goes with the old conversation
            # (after a completed onboarding, onboarding starts again).
            yield self._fixed_reply
            agent.answer_reset(self._fixed_reply)
            await self._commit(self._fixed_reply)
            return
        breaker = self._deps.breaker
        if not breaker.allows_call():
            logger.warning("Model circuit open; answering without calling it")
            count_metric("ModelCallSkipped")
            raise CoachUnavailableError(breaker.retry_after_s())
        parts: list[str] = []
        if self._prepared.memory_unavailable:
            parts.append(MEMORY_UNAVAILABLE_NOTICE)
            yield MEMORY_UNAVAILABLE_NOTICE
        try:
            opening = open_stream(lambda: agent.stream_response(self._delivery.text), self._deps.limits.retry)
            stream, first = await self._model_wait(opening)
            if first is not None:
                parts.append(first)
                yield first
                while True:
                    try:
                        chunk: str = await self._model_wait(anext(stream))
                    except StopAsyncIteration:
                        break
                    parts.append(chunk)
                    yield chunk
        except MessageOverBudgetError:
            # The instructions (a long summary) leave this message too little of the budget: say so.
            raise
        except Exception as error:
            breaker.record_failure()
            timed_out = isinstance(error, TurnTimedOutError)
            logger.error(
                "Model stream failed", extra={"chunks_received": len(parts), "timed_out": timed_out}, exc_info=True
            )
            count_metric("ModelTimedOut" if timed_out else "ModelFailed")
            if timed_out:
                raise
            raise ModelUnavailableError("the coach could not finish its reply; please try again") from error
        breaker.record_success()
        await self._commit("".join(parts))

    async def _replayed(self) -> AsyncIterator[str]:
        """The reply an earlier delivery stored, exactly as the person was sent it."""
        leased = self._leased
        reply = leased.reply if leased else None
        text = (leased.reply_text if leased else None) or (reply.content if reply else "")
        if text:
            yield text
        self.result = TurnResult(
            self.user_message, reply, text, replayed=True, delivered=bool(leased and leased.delivered)
        )

    async def _commit(self, reply_text: str) -> None:
        """Store what the turn produced, in one transaction; if another turn saved the state or
        profile first, read them again, apply this turn's changes on them, and try again."""
        prepared = self._prepared
        if prepared is None:  # unreachable: only a prepared turn commits
            raise RuntimeError("a replayed turn has nothing to commit")
        agent, loaded = prepared.agent, prepared.loaded
        drafts = tuple(agent.produced)
        if prepared.memory_unavailable and drafts:
            drafts = (Message("assistant", MEMORY_UNAVAILABLE_NOTICE.strip()), *drafts)
        if not drafts:
            # Bedrock would reject an empty assistant turn in later requests, so none is stored.
            logger.warning("Model returned an empty reply; nothing stored for it")
            self.result = TurnResult(self.user_message, None, reply_text)
            return
        user_id, store, working, memory = agent.context.user_id, self._deps.store, agent.working, loaded.memory
        attempts = self._deps.limits.memory_write_attempts
        for attempt in range(1, attempts + 1):
            # A turn that could not read the state and profile never writes them (it would
            # overwrite what it did not see); the messages it stores are the next turn's history.
            commit = TurnCommit(
                user_id=user_id,
                drafts=drafts,
                memory=memory,
                state=working.state if working.state_changed and not loaded.degraded else None,
                profile=working.profile if working.profile_changed and not loaded.degraded else None,
                client_id=self._delivery.client_message_id,
                reply_text=reply_text,
                since_ms=self._delivery.since_ms,
                lease=self._delivery.lease,
            )
            try:
                committed = await self._store(store.commit(commit))
                break
            except MemoryChangedError:
                logger.info("Another turn saved first; applying this turn's changes again", extra={"try": attempt})
                count_metric("MemoryWriteConflict")
                if attempt == attempts:
                    raise StoreError("the onboarding state kept changing while the reply was stored") from None
                memory = await self._store(store.reload_memory(user_id))
                working = working.rebased(memory.state, memory.profile)
        # A concurrent delivery of the same client message id may have stored its reply first: then
        # that one is the turn's reply, and nothing of this one is stored.
        replies = [m for m in committed.messages if m.role == "assistant" and not is_blank(m.content)]
        if not committed.earlier and commit.state is not None:
            await self._replan(user_id, memory.state, commit.state)
        self._stored = () if committed.earlier else committed.messages
        self.result = TurnResult(self.user_message, replies[-1] if replies else None, committed.reply_text)

    async def _replan(self, user_id: str, before: OnboardingState, after: OnboardingState) -> None:
        """The user's check-in schedule made or changed when the turn saved a scheduling answer it
        depends on (check_ins, training days or time, time zone); never fails the turn."""
        check_ins = self._deps.check_ins
        if check_ins is None:
            return
        old, new = (step_answers(s.agent_context, "scheduling") for s in (before, after))
        if all(_value(old.get(key)) == _value(new.get(key)) for key in SCHEDULE_ITEMS):
            return
        await asyncio.to_thread(check_ins.replan, user_id, TurnContext(state=after))

    async def fold_summary(self) -> None:
        """Fold what left the window into the summary (a model call, so after the reply is out),
        within what is left of the turn's deadline. Never raises; nothing to do for a replayed
        turn or one whose reply was not stored."""
        if self._prepared is None or not self._stored:
            return
        try:
            async with asyncio.timeout(self._deadline.left()):
                with counting(ledger := TurnLedger(self._ledger.channel)):
                    new, reset = (self.user_message, *self._stored), self._fixed_reply is not None
                    await fold_after_turn(self._deps, self._prepared, new, self._delivery.since_ms, reset)
                fold_accounted(ledger)
        except TimeoutError:
            logger.warning("Summary fold cut at the turn's deadline; the next turn folds instead")
            count_metric("SummaryFoldFailed")

    async def collect(self) -> TurnResult:
        """Run the whole turn without streaming and return its result."""
        async for _ in self:
            pass
        if self.result is None:  # unreachable: a completed stream always sets the result
            raise RuntimeError("the turn finished without a result")
        return self.result


def _value(answer: Answer | None) -> str | None:
    return None if answer is None else answer.value
