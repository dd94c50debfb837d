"""Owns the named parts a turn is built from, and what it returns.

`TurnDependencies` is what every turn of a service shares; `Delivery` is the one message this turn
answers, as it was stored; `TurnWatch` is what keeps the turn to its time and counts what it did.
Apart from `Turn` (turn/run.py) so that the fold (turn/summary_fold.py) can name the dependencies
without importing the turn that calls it.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from onboarding.config import Limits
from onboarding.llm.resilience import CircuitBreaker
from onboarding.llm.summarizer import Summarizer
from onboarding.model.messages import Message
from onboarding.persistence import Repositories
from onboarding.telemetry import TurnLedger


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


@dataclass(frozen=True)
class Delivery:
    """The user's message this turn answers: as stored (`user_message`), its text, when it reached
    us (`since_ms`: nothing is stored if the user was erased since), and, for a message with a
    client id, this delivery's hold on that id (`lease`, decision 0009), released if the turn ends
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
