"""Owns keeping turns answerable when the model is not: retries before the first token, and a breaker.

botocore already retries a ConverseStream call the model refuses outright (HTTP 429/5xx, with its
standard retry mode). It cannot retry a stream that opens and then fails before any text, e.g. a
`throttlingException` or `modelStreamErrorException` event: that arrives while the stream is read.
`open_stream` retries those with tenacity (exponential backoff with jitter), within a time budget
so the retries end well inside the Lambda's timeout. Once text has reached the user a retry would
repeat it, so failures after the first chunk are never retried.

`CircuitBreaker` counts turns whose model call failed after all retries. After enough failures in
a row it opens: for a while turns do not call the model at all and are answered at once that the
coach is unavailable, instead of each one waiting out the retries. It is per Lambda instance (in
memory), which is the usual trade-off: an instance that sees an outage stops hammering Bedrock;
no shared state to read on every turn. Written here rather than taken from a library: pybreaker's
async support needs Tornado, and what counts as a failure (a stream that fails before its first
token) is ours to define anyway. See docs/decisions/0010-reliability.md.

The same class guards the turn's read of the store (`name="store"`, decision 0010): after reads
that failed in a row, turns go on degraded without trying to read, for `reset_s`.
"""

import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Literal

from aws_lambda_powertools import Logger
from botocore.exceptions import EventStreamError, ReadTimeoutError, ResponseStreamingError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)

from onboarding.config import BreakerPolicy, RetryPolicy
from onboarding.metrics import count_metric

logger = Logger(child=True)

# The ConverseStream event-stream errors that mean "try again later".
TRANSIENT_STREAM_ERRORS = frozenset(
    {"throttlingException", "serviceUnavailableException", "internalServerException", "modelStreamErrorException"}
)


def is_transient_model_error(error: BaseException) -> bool:
    """True for failures inside an opened stream that a later try may not meet.

    An error *response* (HTTP 429/5xx, a refused connection) is not retried here: botocore's
    standard retry mode has already retried it, and retrying its retries would multiply the calls
    an outage costs. A stream that breaks while it is read (an error event, a cut connection, a
    read timeout) is not something botocore can retry.
    """
    if isinstance(error, EventStreamError):
        return error.response.get("Error", {}).get("Code") in TRANSIENT_STREAM_ERRORS
    return isinstance(error, ResponseStreamingError | ReadTimeoutError)


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    logger.warning(
        "Model failed before its first token; retrying",
        extra={"attempt": state.attempt_number, "reason": type(error).__name__, "wait_s": state.upcoming_sleep},
    )
    count_metric("ModelRetry")


async def open_stream(
    start: Callable[[], AsyncIterator[str]], policy: RetryPolicy
) -> tuple[AsyncIterator[str], str | None]:
    """The stream and its first chunk (None if it ended without one), retrying transient failures
    that happen before that first chunk."""
    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.attempts) | stop_before_delay(policy.budget_s),
        wait=wait_exponential_jitter(
            multiplier=policy.first_backoff_s, max=policy.max_backoff_s, jitter=policy.first_backoff_s
        ),
        retry=retry_if_exception(is_transient_model_error),
        before_sleep=_log_retry,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            stream = aiter(start())
            try:
                return stream, await anext(stream)
            except StopAsyncIteration:
                return stream, None
    raise RuntimeError("unreachable: tenacity either returns or re-raises")  # pragma: no cover


BreakerName = Literal["model", "store"]


def _count_opened(name: BreakerName) -> None:
    # Literal metric names: the alarms and the dashboard name them, and a test finds them in the code.
    if name == "store":
        count_metric("StoreCircuitOpened")
    else:
        count_metric("ModelCircuitOpened")


class CircuitBreaker:
    """Closed: calls pass. Open: calls are refused until `reset_s` has passed. Then one call is let
    through (half-open); its success closes the breaker, its failure opens it again. `name` says
    what it guards, in its log lines (`circuit`) and the metric counting its openings."""

    def __init__(
        self, policy: BreakerPolicy, clock: Callable[[], float] = time.monotonic, name: BreakerName = "model"
    ) -> None:
        self._threshold = policy.failure_threshold
        self._reset_s = policy.reset_s
        self._clock = clock
        self._name = name
        self._failures = 0
        self._opened_at: float | None = None

    @property
    def name(self) -> BreakerName:
        return self._name

    @property
    def state(self) -> Literal["closed", "open", "half-open"]:
        if self._opened_at is None:
            return "closed"
        return "half-open" if self._clock() - self._opened_at >= self._reset_s else "open"

    def allows_call(self) -> bool:
        return self.state != "open"

    def retry_after_s(self) -> int:
        """Whole seconds until the breaker lets a call through again (0 when it does now)."""
        if self._opened_at is None:
            return 0
        return max(0, math.ceil(self._opened_at + self._reset_s - self._clock()))

    def record_success(self) -> None:
        if self._opened_at is not None:
            logger.info("Guarded calls succeed again; circuit closed", extra={"circuit": self._name})
        self._failures = 0
        self._opened_at = None

    def record_failure(self) -> None:
        self._failures += 1
        if self.state == "half-open" or self._failures >= self._threshold:
            if self.state != "open":
                logger.warning(
                    "Guarded calls failing; circuit opened",
                    extra={"circuit": self._name, "failures_in_a_row": self._failures},
                )
                _count_opened(self._name)
            self._opened_at = self._clock()
