"""One conversation turn: validate, build the agent, store the user's message, stream, store the reply."""

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from aws_lambda_powertools import Logger

from onboarding.agents import BaseOnboardingAgent
from onboarding.agents.base import PromptLimits
from onboarding.memory import OverBudgetError, conversation_start
from onboarding.metrics import count_metric
from onboarding.orchestrator import MemoryRules, OnboardingAgentOrchestrator, PreparedTurn
from onboarding.profile import UserProfile
from onboarding.prompts import RESET_REPLY_WITH_STEP, STEP_PROMPTS
from onboarding.resilience import CircuitBreaker, RetryPolicy, open_stream
from onboarding.state import OnboardingState
from onboarding.store import (
    CLIENT_ID_PATTERN,
    ClientIdConflictError,
    ConversationStore,
    NewMessage,
    RateLimit,
    RateLimitedError,
    StoredMessage,
)
from onboarding.summary import Summarizer
from onboarding.text import is_blank
from onboarding.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens

logger = Logger(child=True)


__all__ = [  # RateLimitedError is re-exported: handlers map it to a 429 or an SMS answer.
    "CoachUnavailableError",
    "DuplicateMessageIdError",
    "InvalidMessageError",
    "MessageOverBudgetError",
    "MessageTooLargeError",
    "ModelUnavailableError",
    "RateLimitedError",
    "Turn",
    "TurnResult",
    "TurnService",
    "validate_message",
]


class InvalidMessageError(ValueError):
    """The user's message cannot be accepted as it is; nothing was stored."""


class MessageTooLargeError(InvalidMessageError):
    """The user's message is over the configured size limit; nothing was stored."""


class MessageOverBudgetError(MessageTooLargeError):
    """The message alone does not fit the prompt's token budget; nothing was stored."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(
            f"the message is too long for the coach: about {tokens} tokens, and at most {limit} fit in "
            "one message; please send it in shorter parts"
        )
        self.tokens = tokens
        self.limit = limit


class ModelUnavailableError(RuntimeError):
    """The model failed before finishing its reply. The user's message is stored; no reply is."""


class CoachUnavailableError(ModelUnavailableError):
    """The model has been failing, so this turn did not call it. The user's message is stored."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(
            "The coach is taking a short break. Your message is saved; we'll get back to you, "
            "please try again in a minute."
        )
        self.retry_after_s = retry_after_s


class DuplicateMessageIdError(InvalidMessageError):
    """A client message id that was already used for a different message; nothing was stored."""


@dataclass(frozen=True)
class TurnResult:
    user_message: StoredMessage
    assistant_message: StoredMessage | None
    reply: str
    replayed: bool = False  # an earlier delivery of the same client message id already answered it
    delivered: bool = False  # ... and its reply is recorded as having reached the person


def validate_message(message: str, max_bytes: int) -> None:
    if is_blank(message):
        raise InvalidMessageError("message must contain some text")
    try:
        size = len(message.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise InvalidMessageError("message is not valid Unicode text (it contains a lone surrogate)") from error
    if size > max_bytes:
        raise MessageTooLargeError(f"message is {size} bytes of UTF-8; the limit is {max_bytes}")


@dataclass(frozen=True)
class TurnDependencies:
    """What every turn of a service shares: the store, the model guards, the memory rules."""

    store: ConversationStore
    breaker: CircuitBreaker
    retry_policy: RetryPolicy
    summarizer: Summarizer | None = None
    rules: MemoryRules = field(default_factory=MemoryRules)


class Turn:
    """A turn in progress. Iterate it for the reply's chunks; `result` is set once it finished.
    Then `fold_summary()` folds what left the window into the summary (after the reply is out)."""

    def __init__(
        self,
        prepared: PreparedTurn | None,
        deps: TurnDependencies,
        message: str,
        user_message: StoredMessage,
        client_message_id: str | None = None,
        earlier_reply: StoredMessage | None = None,
        delivered: bool = False,
        fixed_reply: str | None = None,
    ) -> None:
        self._prepared = prepared
        self._agent = prepared.agent if prepared else None
        self._deps = deps
        self._message = message
        self._client_message_id = client_message_id
        self._earlier_reply = earlier_reply
        self._delivered = delivered
        self._fixed_reply = fixed_reply
        self._stored: tuple[StoredMessage, ...] = ()
        self.user_message = user_message
        self.result: TurnResult | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        if self.result is not None:
            raise RuntimeError("a turn can be streamed only once")
        if self._earlier_reply is not None or self._agent is None:
            # A repeated delivery of an answered message: the stored reply, without the model.
            reply = self._earlier_reply.content if self._earlier_reply else ""
            if reply:
                yield reply
            self.result = TurnResult(
                self.user_message, self._earlier_reply, reply, replayed=True, delivered=self._delivered
            )
            return
        agent = self._agent
        if self._fixed_reply is not None:
            # A reset: said by us, not the model. The waited-for field goes with the old conversation.
            yield self._fixed_reply
            agent.produced.append(NewMessage("assistant", self._fixed_reply))
            state = agent.memory.state
            await self._store_reply(
                agent, state.model_copy(update={"waiting_for": None}) if state.waiting_for else None
            )
            return
        breaker = self._deps.breaker
        if not breaker.allows_call():
            logger.warning("Model circuit open; answering without calling it")
            count_metric("ModelCallSkipped")
            raise CoachUnavailableError(breaker.retry_after_s())
        parts: list[str] = []
        try:
            stream, first = await open_stream(lambda: agent.stream_response(self._message), self._deps.retry_policy)
            if first is not None:
                parts.append(first)
                yield first
                async for chunk in stream:
                    parts.append(chunk)
                    yield chunk
        except OverBudgetError as error:
            # The instructions grew (a long summary) so that this message no longer fits: say so.
            raise MessageOverBudgetError(error.needed, error.budget) from error
        except Exception as error:
            breaker.record_failure()
            logger.error("Model stream failed", extra={"chunks_received": len(parts)}, exc_info=True)
            count_metric("ModelFailed")
            raise ModelUnavailableError("the coach could not finish its reply; please try again") from error
        breaker.record_success()
        memory = agent.memory
        await self._store_reply(
            agent,
            memory.state if memory.state_changed else None,
            memory.profile if memory.profile_changed else None,
            streamed="".join(parts),
        )

    async def _store_reply(
        self,
        agent: BaseOnboardingAgent,
        state: OnboardingState | None = None,
        profile: UserProfile | None = None,
        streamed: str | None = None,
    ) -> None:
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
            self._deps.store.append_reply,
            agent.context.user_id,
            produced,
            self._client_message_id,
            state,
            profile,
        )
        earlier_won = len(stored) != len(produced) or any(
            m.content != p.content or m.role != p.role for m, p in zip(stored, produced, strict=True)
        )
        self._stored = () if earlier_won else stored
        replies = [m for m in stored if m.role == "assistant" and not is_blank(m.content)]
        assistant_message = replies[-1] if replies else None
        if earlier_won and assistant_message is not None:
            reply = assistant_message.content
        self.result = TurnResult(self.user_message, assistant_message, reply)

    async def fold_summary(self) -> None:
        """Fold what left the window into the summary. Call it after the reply reached the person:
        it is a model call, and the first token must not wait for it. Never raises."""
        summarizer, prepared = self._deps.summarizer, self._prepared
        if summarizer is None or prepared is None or self.result is None or self.result.replayed:
            return
        messages: Sequence[StoredMessage] = [*prepared.loaded.messages, self.user_message, *self._stored]
        rules = self._deps.rules
        start = conversation_start(messages, rules.now(), rules.conversation_gap_s, rules.is_reset)
        await summarizer.fold(prepared.agent.context.user_id, messages, start, prepared.loaded.summary)

    async def collect(self) -> TurnResult:
        """Run the whole turn without streaming and return its result."""
        async for _ in self:
            pass
        if self.result is None:  # unreachable: a completed stream always sets the result
            raise RuntimeError("the turn finished without a result")
        return self.result


class TurnService:
    """The domain entry point handlers call: one method per turn."""

    def __init__(
        self,
        orchestrator: OnboardingAgentOrchestrator,
        store: ConversationStore,
        max_message_bytes: int,
        rate_limit: RateLimit | None = None,
        breaker: CircuitBreaker | None = None,
        retry_policy: RetryPolicy | None = None,
        summarizer: Summarizer | None = None,
        rules: MemoryRules | None = None,
        limits: PromptLimits | None = None,
    ) -> None:
        self._orchestrator = orchestrator
        self._store = store
        self._max_message_bytes = max_message_bytes
        self._rate_limit = rate_limit
        self._limits = limits or PromptLimits()
        # One breaker per service, i.e. per Lambda instance: it outlives the turns it guards.
        self._deps = TurnDependencies(
            store,
            breaker or CircuitBreaker(),
            retry_policy or RetryPolicy(),
            summarizer,
            rules or MemoryRules(),
        )

    @property
    def rate_limit(self) -> RateLimit | None:
        return self._rate_limit

    def _check_budget(self, message: str) -> None:
        tokens = count_tokens(message) + MESSAGE_OVERHEAD_TOKENS
        if tokens > self._limits.max_message_tokens:
            raise MessageOverBudgetError(tokens, self._limits.max_message_tokens)

    async def start_turn(self, user_id: str, message: str, client_message_id: str | None = None) -> Turn:
        """Store the user's message and return the turn, ready to stream the reply.

        The context is loaded before the message is stored, so the current message is not
        also part of its own history. With a `client_message_id` (the app's own id for the
        message, or Twilio's MessageSid), a repeated delivery stores nothing: it replays the
        stored reply, or, if the first delivery never finished, answers the stored message.
        Raises RateLimitedError, storing nothing, when the user is over the rate limit, and
        MessageOverBudgetError when the message alone is over the prompt's token budget.
        """
        if not user_id:
            raise InvalidMessageError("a user id is required")
        validate_message(message, self._max_message_bytes)
        self._check_budget(message)
        if client_message_id is not None:
            return await self._start_identified_turn(user_id, message, client_message_id)
        prepared = await self._orchestrator.prepare_turn(user_id)
        user_message = await asyncio.to_thread(self._store.append_message, user_id, "user", message, self._rate_limit)
        return self._turn(prepared, message, user_message)

    def _turn(
        self,
        prepared: PreparedTurn | None,
        message: str,
        user_message: StoredMessage,
        client_message_id: str | None = None,
        earlier_reply: StoredMessage | None = None,
        delivered: bool = False,
    ) -> Turn:
        fixed_reply = None
        if prepared is not None and self._deps.rules.is_reset(message):
            logger.info("Reset requested: a new conversation starts")
            step = prepared.agent.agent_type
            fixed_reply = RESET_REPLY_WITH_STEP.format(title=STEP_PROMPTS[step].title.lower())
        return Turn(
            prepared, self._deps, message, user_message, client_message_id, earlier_reply, delivered, fixed_reply
        )

    async def _start_identified_turn(self, user_id: str, message: str, client_message_id: str) -> Turn:
        if not CLIENT_ID_PATTERN.match(client_message_id):
            raise InvalidMessageError("a client message id is 1 to 128 letters, digits or _.:-")
        try:
            claimed = await asyncio.to_thread(
                self._store.append_user_message_once, user_id, client_message_id, message, self._rate_limit
            )
        except ClientIdConflictError as error:
            raise DuplicateMessageIdError(str(error)) from error
        if claimed.reply is not None:
            logger.info("Repeated delivery of an answered message; replaying the stored reply")
            return self._turn(None, message, claimed.user_message, client_message_id, claimed.reply, claimed.delivered)
        prepared = await self._orchestrator.prepare_turn(user_id, exclude_message_id=claimed.user_message.message_id)
        return self._turn(prepared, message, claimed.user_message, client_message_id)
