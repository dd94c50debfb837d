"""Owns what a turn tells operators, redacted: one `turn_received` and one
`turn_responded` log line per turn, with counts and names only (never a value the person gave),
and the per-turn metrics the dashboard and the cost ledger read.

The DynamoDB capacity a turn consumes is counted by hooks on the table's client
(persistence/capacity.py), into the ledger of the turn that is running: a context variable, which
`asyncio.to_thread` carries into its thread.
"""

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from onboarding.metrics import emit

logger = Logger(child=True)


@dataclass
class TurnLedger:
    """What one turn did, counted as it goes."""

    channel: str
    started: float = field(default_factory=time.monotonic)
    step: str = ""
    history_messages: int = 0
    waiting_for: str | None = None
    memory_unavailable: bool = False
    arm: str = ""  # the memory flags the turn ran with (`MemoryFlags.arm`, onboarding/flags)
    first_token_s: float | None = None
    answer_keys: tuple[str, ...] = ()
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_estimated: bool = False  # a model call cut off mid-reply: our estimate, Bedrock sent no count
    read_units: float = 0.0
    write_units: float = 0.0
    requests: int = 0
    # Recall (onboarding.recall): how many older messages the index found, how long the embedding and
    # the query took, how long the turn then still waited for them (they run beside its table
    # calls), and whether recall failed. None: not tried.
    recalled: int = 0
    recall_ms: float | None = None
    recall_wait_ms: float | None = None
    recall_failed: bool = False

    def token_arrived(self) -> None:
        if self.first_token_s is None:
            self.first_token_s = time.monotonic() - self.started

    def add_usage(self, usage: Mapping[str, Any] | None) -> None:
        if usage:
            self.input_tokens += int(usage.get("input_tokens", 0))
            self.output_tokens += int(usage.get("output_tokens", 0))


_current: ContextVar[TurnLedger | None] = ContextVar("turn_ledger", default=None)


@contextmanager
def counting(ledger: TurnLedger) -> Iterator[TurnLedger]:
    """The table requests made inside count for `ledger`."""
    token = _current.set(ledger)
    try:
        yield ledger
    finally:
        _current.reset(token)


def record_table_request(read_units: float, write_units: float) -> None:
    """One table request of the running turn, and the capacity it consumed (persistence/capacity.py)."""
    if (ledger := _current.get()) is not None:
        ledger.requests += 1
        ledger.read_units += read_units
        ledger.write_units += write_units


def record_usage(usage: Mapping[str, Any] | None) -> None:
    """Model tokens spent for the running turn (the summary's model call reports through this)."""
    if (ledger := _current.get()) is not None:
        ledger.add_usage(usage)


def turn_received(ledger: TurnLedger) -> None:
    logger.info(
        "turn_received",
        extra={
            "event": "turn_received",
            "channel": ledger.channel,
            "step": ledger.step,
            "history_messages": ledger.history_messages,
            "waiting_for": ledger.waiting_for,
            "memory_unavailable": ledger.memory_unavailable,
            "arm": ledger.arm,
        },
    )


def turn_responded(ledger: TurnLedger, outcome: str) -> None:
    """The turn's end: one log line and its metrics. `outcome` is `completed`, `replayed`, or the
    kind of failure (`model_failed`, `timed_out`, `store_failed`, `erased`, ...)."""
    duration_s = time.monotonic() - ledger.started
    logger.info(
        "turn_responded",
        extra={
            "event": "turn_responded",
            "channel": ledger.channel,
            "outcome": outcome,
            "arm": ledger.arm,
            "step": ledger.step,
            "answer_keys": list(ledger.answer_keys),
            "tool_calls": ledger.tool_calls,
            "input_tokens": ledger.input_tokens,
            "output_tokens": ledger.output_tokens,
            "tokens_estimated": ledger.tokens_estimated,
            "first_token_ms": None if ledger.first_token_s is None else round(ledger.first_token_s * 1000),
            "duration_ms": round(duration_s * 1000),
            "read_units": ledger.read_units,
            "write_units": ledger.write_units,
            "table_requests": ledger.requests,
            "recalled": ledger.recalled,
            "recall_ms": None if ledger.recall_ms is None else round(ledger.recall_ms),
            "recall_wait_ms": None if ledger.recall_wait_ms is None else round(ledger.recall_wait_ms),
            "recall_failed": ledger.recall_failed,
        },
    )
    _emit_metrics(ledger, outcome, duration_s)


def _emit_metrics(ledger: TurnLedger, outcome: str, duration_s: float) -> None:
    if outcome not in ("completed", "replayed"):
        emit({"TurnFailed": (MetricUnit.Count, 1)}, {"kind": outcome}, {"arm": ledger.arm})
        # What a failed or abandoned turn spent is spent all the same: the cost metrics count it.
        emit(_costs(ledger), properties={"arm": ledger.arm})
        return
    values = {
        "TurnCompleted": (MetricUnit.Count, 1.0),
        "TurnLatency": (MetricUnit.Milliseconds, duration_s * 1000),
        **_costs(ledger),
    }
    if ledger.first_token_s is not None:
        values["FirstTokenLatency"] = (MetricUnit.Milliseconds, ledger.first_token_s * 1000)
    if ledger.recall_wait_ms is not None:
        values["RecallAddedLatency"] = (MetricUnit.Milliseconds, ledger.recall_wait_ms)
    emit(values, properties={"arm": ledger.arm})


def _costs(ledger: TurnLedger) -> dict[str, tuple[MetricUnit, float]]:
    return {
        "InputTokens": (MetricUnit.Count, ledger.input_tokens),
        "OutputTokens": (MetricUnit.Count, ledger.output_tokens),
        "ConsumedReadCapacity": (MetricUnit.Count, ledger.read_units),
        "ConsumedWriteCapacity": (MetricUnit.Count, ledger.write_units),
    }


def fold_accounted(ledger: TurnLedger) -> None:
    """What a summary fold after a turn cost: its capacity and tokens count for the turn's cost,
    but not for its latency (the person already has the reply)."""
    if not ledger.requests:
        return
    logger.info(
        "summary_fold_cost",
        extra={
            "event": "summary_fold_cost",
            "input_tokens": ledger.input_tokens,
            "output_tokens": ledger.output_tokens,
            "read_units": ledger.read_units,
            "write_units": ledger.write_units,
            "table_requests": ledger.requests,
        },
    )
    emit(_costs(ledger))
