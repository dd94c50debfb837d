"""Owns one conversation turn: validate → load (and recall) → prepare → stream → commit → fold.

`TurnService` is the domain entry point handlers call. It stores the user's message, loads the
turn's context (one Query) while the recall index is asked for the older messages nearest the new
one (one embedding, one query: onboarding.recall), lets the orchestrator build the agent, and hands
back the `Turn` (turn/run.py), which streams the reply, commits what it produced in one
transaction and folds what left the window into the summary (turn/fold.py), all inside the
invocation. Every table call of the service and of its turns goes through one door, `TurnStore`
(turn/store.py). `preview` builds the same prompt without storing anything (the inspect tool, the
benchmark).
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeAlias

from aws_lambda_powertools import Logger

from onboarding.audit import Caller, context_counts, record_access
from onboarding.breaker import CircuitBreaker
from onboarding.config import Limits
from onboarding.flags import DEFAULT_FLAGS, MemoryFlags
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from onboarding.memory.window import is_reset_command
from onboarding.metrics import count_metric
from onboarding.model.errors import (
    ClientIdConflictError,
    DuplicateMessageIdError,
    InvalidMessageError,
    MessageOverBudgetError,
    MessageTooLargeError,
    StoreError,
)
from onboarding.model.history import TurnContext
from onboarding.model.normalization import is_blank, normalized_text
from onboarding.persistence import Repositories
from onboarding.persistence.schema import CLIENT_ID_PATTERN
from onboarding.recall.recaller import NOT_TRIED, Recall, Recaller
from onboarding.replies import reset_reply
from onboarding.summary import Summarizer
from onboarding.telemetry import TurnLedger, counting, turn_received
from onboarding.turn.orchestrator import (
    OnboardingAgentOrchestrator,
    PreparedTurn,
    degraded_context,
    single_prompt_context,
)
from onboarding.turn.run import Deadline, Delivery, Turn, TurnDependencies, TurnResult, TurnWatch
from onboarding.turn.store import TurnStore

if TYPE_CHECKING:
    from onboarding.checkins.outreach import CheckInService

logger = Logger(child=True)

__all__ = ["Preview", "Turn", "TurnResult", "TurnService", "validate_message"]

Recalling: TypeAlias = "asyncio.Task[Recall] | None"


def _cancel(recalling: Recalling) -> None:
    """A turn that failed before its prompt was built needs no recall: stop waiting for it."""
    if recalling is not None:
        recalling.cancel()


@dataclass(frozen=True)
class Preview:
    """What a turn for a message would send the model now, and what recall found for it."""

    prepared: PreparedTurn
    recall: Recall


def validate_message(message: str, max_bytes: int) -> None:
    if is_blank(message):
        raise InvalidMessageError("message must contain some text")
    try:
        size = len(message.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise InvalidMessageError("message is not valid Unicode text (it contains a lone surrogate)") from error
    if size > max_bytes:
        raise MessageTooLargeError(f"message is {size} bytes of UTF-8; the limit is {max_bytes}")


class TurnService:
    """One method per turn; the breakers it holds outlive the turns they guard (one per instance):
    `breaker` guards the model, `store_breaker` the turn's read of the memory (decision 0010)."""

    def __init__(
        self,
        orchestrator: OnboardingAgentOrchestrator,
        store: Repositories,
        breaker: CircuitBreaker,
        summarizer: Summarizer | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        flags: Callable[[str], MemoryFlags] = lambda user_id: DEFAULT_FLAGS,
        *,
        store_breaker: CircuitBreaker,
        recaller: Recaller | None = None,
        check_ins: "CheckInService | None" = None,
    ) -> None:
        """`recaller`: the recall index and its embeddings (None: no recall, as without an index).
        `check_ins`: keeps the user's check-in schedule in step with the answers (None: no schedules)."""
        self._orchestrator = orchestrator
        self._recaller = recaller
        self._flags = flags  # the user's memory flags (onboarding/flags/rollout.py); never raises
        self._limits = orchestrator.limits
        self._store_breaker = store_breaker
        self._deps = TurnDependencies(TurnStore(store), self._limits, breaker, summarizer, clock, check_ins)

    @property
    def limits(self) -> Limits:
        return self._limits

    def _check(self, message: str) -> None:
        validate_message(message, self._limits.max_message_bytes)
        tokens = count_tokens(message) + MESSAGE_OVERHEAD_TOKENS
        if tokens > (most := self._limits.prompt.max_message_tokens):
            raise MessageOverBudgetError(tokens, most)

    async def start_turn(
        self,
        user_id: str,
        message: str,
        client_message_id: str | None = None,
        received_at: datetime | None = None,
        channel: str = "app",
        caller: Caller | None = None,
    ) -> Turn:
        """Store the user's message and return the turn, ready to stream the reply.

        Without a client message id the context is loaded before the message is stored, so the
        current message is not also part of its own history. With one (the app's own id for the
        message, or Twilio's MessageSid), a repeated delivery stores nothing: it replays the
        stored reply; while the first delivery is still answering, TurnInProgressError (no model
        call); if the first delivery failed or was abandoned, it answers the stored message,
        counted by the rate limit (decision 0009).
        `received_at` is when the message reached us (a queued text's arrival; now by default):
        if the user was erased since, nothing of the turn is stored (UserErasedError).
        Raises RateLimitedError, storing nothing, when the user is over the rate limit, and
        MessageOverBudgetError when the message alone is over the prompt's token budget.
        `caller` is who asks, for the audit trail (by default this function, for a `channel` turn).
        The message is normalised first (`normalized_text`): a message blank without its controls
        is refused like any blank one.
        """
        deadline, ledger = Deadline(self._limits.turn_deadline_s), TurnLedger(channel)
        watch = TurnWatch(deadline, ledger)
        if not user_id:
            raise InvalidMessageError("a user id is required")
        # Normalised once, here where every channel's turn comes in: what is checked, stored and
        # sent to the model is the same text (controls and bidi overrides removed; model/normalization.py).
        message = normalized_text(message)
        self._check(message)
        since_ms = int((received_at or self._deps.clock()).timestamp() * 1000)
        store, rate_limit = self._deps.store, self._limits.rate_limit
        caller = caller or Caller.function(f"{channel}-turn")
        flags = await asyncio.to_thread(self._flags, user_id)  # AppConfig's fetch blocks, once per max age
        ledger.arm = flags.arm
        with counting(ledger):
            if client_message_id is None:
                recalling = self._start_recall(user_id, message, flags, deadline)
                try:
                    loaded = await self._context(user_id, flags, caller, None)
                    user_message = await store.append_message(user_id, message, rate_limit, since_ms)
                except BaseException:
                    _cancel(recalling)
                    raise
                recall = await self._finish_recall(recalling, user_id, caller, ledger)
                return self._turn(user_id, loaded, Delivery(user_message, message, since_ms), watch, flags, recall)
            if not CLIENT_ID_PATTERN.match(client_message_id):
                raise InvalidMessageError("a client message id is 1 to 128 letters, digits or _.:-")
            try:
                leased = await store.lease_message(user_id, client_message_id, message, rate_limit, since_ms)
            except ClientIdConflictError as error:
                raise DuplicateMessageIdError(str(error)) from error
            if leased.reply is not None:
                logger.info("Repeated delivery of an answered message; replaying the stored reply")
                turn_received(ledger)
                return Turn.replay(self._deps, leased, watch)
            recalling = self._start_recall(user_id, message, flags, deadline)
            try:
                loaded = await self._context(user_id, flags, caller, leased.user_message.message_id)
            except BaseException:
                _cancel(recalling)
                raise
            recall = await self._finish_recall(recalling, user_id, caller, ledger)
        delivery = Delivery(leased.user_message, message, since_ms, client_message_id, leased.lease)
        return self._turn(user_id, loaded, delivery, watch, flags, recall)

    async def mark_delivered(self, user_id: str, message_id: str) -> None:
        """Record that the reply to the message with client id `message_id` reached the person
        (a text's MessageSid): a repeated delivery then sends nothing again."""
        await self._deps.store.mark_delivered(user_id, message_id)

    async def take_rate_notice(self, user_id: str) -> bool:
        """Whether to tell the person they are over the rate limit: once per window (a burst of
        refused texts gets one warning, not one each). False when there is no rate limit."""
        limit = self._limits.rate_limit
        return limit is not None and await self._deps.store.take_rate_notice(user_id, limit)

    async def preview(self, user_id: str, message: str, caller: Caller, flags: MemoryFlags | None = None) -> Preview:
        """What a turn for `message` would send the model now: the same read, recall and agent,
        with nothing stored (the message is not written, so it is not in its own history). The
        reads are in the audit trail as `caller`'s. `flags`: the memory's parts to preview with
        (an operator's comparison of arms); the user's flags by default."""
        if flags is None:
            flags = await asyncio.to_thread(self._flags, user_id)
        ledger = TurnLedger("preview")
        recalling = self._start_recall(user_id, message, flags, Deadline(self._limits.turn_deadline_s))
        try:
            loaded = await self._context(user_id, flags, caller, None)
        except BaseException:
            _cancel(recalling)
            raise
        recall = await self._finish_recall(recalling, user_id, caller, ledger)
        kept = recall if not loaded.degraded else NOT_TRIED
        return Preview(self._orchestrator.prepare(user_id, loaded, None, flags, kept.messages), recall)

    def _start_recall(self, user_id: str, message: str, flags: MemoryFlags, deadline: Deadline) -> Recalling:
        """The turn's recall, started beside its table calls: one embedding and one index query, cut
        at RECALL_TIMEOUT_S or what the turn's model phase leaves. None when the turn recalls
        nothing (no index, the memory or recall flag off)."""
        if self._recaller is None or not (flags.memory and flags.recall):
            return None
        wait_s = deadline.left(self._limits.store_reserve_s)
        return asyncio.create_task(self._recaller.recall(user_id, message, wait_s))

    @staticmethod
    async def _finish_recall(recalling: Recalling, user_id: str, caller: Caller, ledger: TurnLedger) -> Recall:
        """What the recall found, once the turn's own reads are done: how long the turn still
        waited for it is the latency recall added. A successful index read is audited."""
        if recalling is None:
            return NOT_TRIED
        started = time.monotonic()
        recall = await recalling  # never raises (Recaller.recall)
        ledger.recall_wait_ms = (time.monotonic() - started) * 1000
        ledger.recall_ms, ledger.recall_failed = recall.elapsed_ms, recall.failed
        ledger.recalled = len(recall.messages)
        if not recall.failed:
            record_access(caller, user_id, {"recalled": len(recall.messages)})
        return recall

    async def _context(
        self, user_id: str, flags: MemoryFlags, caller: Caller, exclude_message_id: str | None
    ) -> TurnContext:
        """Single-prompt mode (the memory flag off) loads nothing; otherwise the turn's one Query."""
        return await self._load(user_id, caller, exclude_message_id) if flags.memory else single_prompt_context()

    async def _load(self, user_id: str, caller: Caller, exclude_message_id: str | None = None) -> TurnContext:
        """The turn's one Query; on a failed read, a degraded context (the turn goes on without its memory). While
        the store's breaker is open the read is not even tried: the turn goes on degraded at once
        instead of waiting out the client's retries (its writes are still tried; decision 0010)."""
        breaker = self._store_breaker
        if not breaker.allows_call():
            logger.warning("Store circuit open; the turn goes on without reading its memory")
            count_metric("HistoryLoadSkipped")
            return TurnContext(degraded=True)
        try:
            loaded = await self._deps.store.load(user_id, self._limits.history_load_limit, exclude_message_id)
        except StoreError as error:
            breaker.record_failure()
            return degraded_context(error)
        breaker.record_success()
        record_access(caller, user_id, context_counts(loaded))
        return loaded

    def _turn(
        self,
        user_id: str,
        loaded: TurnContext,
        delivery: Delivery,
        watch: TurnWatch,
        flags: MemoryFlags,
        recall: Recall = NOT_TRIED,
    ) -> Turn:
        # A turn that could not read its memory does not pretend to remember, recalled or not.
        recalled = () if loaded.degraded else recall.messages
        prepared = self._orchestrator.prepare(user_id, loaded, delivery.user_message, flags, recalled)
        fixed_reply = None
        if is_reset_command(delivery.text, self._limits.reset_keywords):
            logger.info("Reset requested: a new conversation starts")
            complete = prepared.agent.context.completed_at is not None and not loaded.degraded
            fixed_reply = reset_reply(prepared.agent.agent_type, complete)
        context, ledger = prepared.agent.context, watch.ledger
        ledger.step = prepared.agent.agent_type.value
        ledger.history_messages = len(context.conversation_history)
        ledger.waiting_for = context.waiting_for.field if context.waiting_for else None
        ledger.memory_unavailable = prepared.memory_unavailable
        turn_received(ledger)
        return Turn(self._deps, delivery, watch, prepared, fixed_reply)
