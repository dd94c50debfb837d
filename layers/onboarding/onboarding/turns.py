"""One conversation turn: validate, build the agent, store the user's message, stream, store the reply."""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aws_lambda_powertools import Logger

from onboarding.agents import BaseOnboardingAgent
from onboarding.metrics import count_metric
from onboarding.orchestrator import OnboardingAgentOrchestrator
from onboarding.resilience import CircuitBreaker, RetryPolicy, open_stream
from onboarding.store import (
    CLIENT_ID_PATTERN,
    ClientIdConflictError,
    ConversationStore,
    RateLimit,
    RateLimitedError,
    StoredMessage,
)
from onboarding.text import is_blank

logger = Logger(child=True)


__all__ = [  # RateLimitedError is re-exported: handlers map it to a 429 or an SMS answer.
    "CoachUnavailableError",
    "DuplicateMessageIdError",
    "InvalidMessageError",
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


class Turn:
    """A turn in progress. Iterate it for the reply's chunks; `result` is set once it finished."""

    def __init__(
        self,
        agent: BaseOnboardingAgent | None,
        store: ConversationStore,
        message: str,
        user_message: StoredMessage,
        client_message_id: str | None = None,
        earlier_reply: StoredMessage | None = None,
        delivered: bool = False,
        *,
        breaker: CircuitBreaker,
        retry_policy: RetryPolicy,
    ) -> None:
        self._agent = agent
        self._breaker = breaker  # the service's: it outlives this turn
        self._retry_policy = retry_policy
        self._store = store
        self._message = message
        self._client_message_id = client_message_id
        self._earlier_reply = earlier_reply
        self._delivered = delivered
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
        if not self._breaker.allows_call():
            logger.warning("Model circuit open; answering without calling it")
            count_metric("ModelCallSkipped")
            raise CoachUnavailableError(self._breaker.retry_after_s())
        agent = self._agent
        parts: list[str] = []
        try:
            stream, first = await open_stream(lambda: agent.stream_response(self._message), self._retry_policy)
            if first is not None:
                parts.append(first)
                yield first
                async for chunk in stream:
                    parts.append(chunk)
                    yield chunk
        except Exception as error:
            self._breaker.record_failure()
            logger.error("Model stream failed", extra={"chunks_received": len(parts)}, exc_info=True)
            count_metric("ModelFailed")
            raise ModelUnavailableError("the coach could not finish its reply; please try again") from error
        self._breaker.record_success()
        reply = "".join(parts)
        assistant_message = None
        if is_blank(reply):
            # Bedrock would reject an empty assistant turn in later requests, so none is stored.
            logger.warning("Model returned an empty reply; nothing stored for it")
        elif self._client_message_id is None:
            assistant_message = await asyncio.to_thread(
                self._store.append_message, self._agent.context.user_id, "assistant", reply
            )
        else:
            # A concurrent delivery of the same message may have stored its reply first: then that
            # one is the turn's reply, and this one is not stored.
            assistant_message = await asyncio.to_thread(
                self._store.append_reply_once, self._agent.context.user_id, self._client_message_id, reply
            )
            reply = assistant_message.content
        self.result = TurnResult(self.user_message, assistant_message, reply)

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
    ) -> None:
        self._orchestrator = orchestrator
        self._store = store
        self._max_message_bytes = max_message_bytes
        self._rate_limit = rate_limit
        # One breaker per service, i.e. per Lambda instance: it outlives the turns it guards.
        self._breaker = breaker or CircuitBreaker()
        self._retry_policy = retry_policy or RetryPolicy()

    @property
    def rate_limit(self) -> RateLimit | None:
        return self._rate_limit

    async def start_turn(self, user_id: str, message: str, client_message_id: str | None = None) -> Turn:
        """Store the user's message and return the turn, ready to stream the reply.

        The context is loaded before the message is stored, so the current message is not
        also part of its own history. With a `client_message_id` (the app's own id for the
        message, or Twilio's MessageSid), a repeated delivery stores nothing: it replays the
        stored reply, or, if the first delivery never finished, answers the stored message.
        Raises RateLimitedError, storing nothing, when the user is over the rate limit.
        """
        if not user_id:
            raise InvalidMessageError("a user id is required")
        validate_message(message, self._max_message_bytes)
        if client_message_id is not None:
            return await self._start_identified_turn(user_id, message, client_message_id)
        agent = await self._orchestrator.get_current_agent(user_id)
        user_message = await asyncio.to_thread(self._store.append_message, user_id, "user", message, self._rate_limit)
        return self._turn(agent, message, user_message)

    def _turn(
        self,
        agent: BaseOnboardingAgent | None,
        message: str,
        user_message: StoredMessage,
        client_message_id: str | None = None,
        earlier_reply: StoredMessage | None = None,
        delivered: bool = False,
    ) -> Turn:
        return Turn(
            agent,
            self._store,
            message,
            user_message,
            client_message_id,
            earlier_reply,
            delivered,
            breaker=self._breaker,
            retry_policy=self._retry_policy,
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
        agent = await self._orchestrator.get_current_agent(user_id, exclude_message_id=claimed.user_message.message_id)
        return self._turn(agent, message, claimed.user_message, client_message_id)
