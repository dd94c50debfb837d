"""Owns the circuit breaker, one class with an instance per thing it guards: the model (turns
whose model call failed after all retries) and the turn's read of the store (`name="store"`,
decision 0010).

After enough failures in a row it opens: for a while turns do not call what it guards at all (the
model: they are answered at once that the coach is unavailable; the store: they go on degraded
without reading), instead of each one waiting out the retries. It is per Lambda instance (in
memory), which is the usual trade-off: an instance that sees an outage stops hammering the
service; no shared state to read on every turn. Written here rather than taken from a library:
pybreaker's async support needs Tornado, and what counts as a failure (a stream that fails before
its first token) is ours to define anyway. See docs/decisions/0010-reliability.md.
"""

import math
import time
from collections.abc import Callable
from typing import Literal

from aws_lambda_powertools import Logger

from onboarding.config import BreakerPolicy
from onboarding.metrics import count_metric

logger = Logger(child=True)


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
