"""What the cost ledger prices: a channel's measured turns (infra/bench/cost/turns.py) averaged per
turn, LangChain's store's turns beside them, and a timing's spread."""

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from infra.bench.cost.turns import PeerTurn, Turn

# The averages the ledger prices


@dataclass(frozen=True)
class TurnFigures:
    """One channel's measured turns at one history length, averaged per turn."""

    channel: str
    history: int
    turns: int
    input_tokens: float
    output_tokens: float
    model_requests: float
    api_requests: float
    invocations: dict[str, float]  # function: invocations per turn
    own_seconds: dict[str, float]  # function: its own seconds per turn
    model_requests_in: dict[str, float]  # function: model requests it waited on per turn
    table_requests: float
    read_units: float  # computed
    write_units: float  # computed
    reported_units: float  # what the local server reported, over the requests it reported for
    unreported_requests: float  # DynamoDB requests the server reported nothing for
    failed_requests: float
    stored_bytes: float
    stored_byte_months: float
    sqs_requests: float
    by_operation: dict[str, float] = field(default_factory=dict)  # DynamoDB requests per turn
    # function: its own milliseconds over the turns as (median, lowest, highest): a timing, so its
    # spread is shown; the ledger bills the mean (`own_seconds`), as Lambda's bill adds them up
    own_ms_spread: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def _per_turn(values: Iterable[float], turns: int) -> float:
    return sum(values) / turns


def summarize(channel: str, history: int, turns: list[Turn]) -> TurnFigures:
    if not turns:
        raise ValueError("no turns to summarize")
    count = len(turns)
    table = [request for turn in turns for request in turn.requests if request.service == "dynamodb"]
    queue = [request for turn in turns for request in turn.requests if request.service == "sqs"]
    invocations: Counter[str] = Counter()
    own: defaultdict[str, float] = defaultdict(float)
    own_each: defaultdict[str, list[float]] = defaultdict(list)
    model_in: defaultdict[str, float] = defaultdict(float)
    for turn in turns:
        for invocation in turn.invocations:
            invocations[invocation.function] += 1
            own[invocation.function] += invocation.own_s
            own_each[invocation.function].append(invocation.own_s * 1000)
            model_in[invocation.function] += invocation.model_requests
    operations = Counter(request.operation for request in table)
    return TurnFigures(
        channel=channel,
        history=history,
        turns=count,
        input_tokens=_per_turn((turn.input_tokens for turn in turns), count),
        output_tokens=_per_turn((turn.output_tokens for turn in turns), count),
        model_requests=_per_turn((turn.model_requests for turn in turns), count),
        api_requests=_per_turn((turn.api_requests for turn in turns), count),
        invocations={name: n / count for name, n in invocations.items()},
        own_seconds={name: seconds / count for name, seconds in own.items()},
        model_requests_in={name: n / count for name, n in model_in.items()},
        table_requests=len(table) / count,
        read_units=_per_turn((request.read_units for request in table), count),
        write_units=_per_turn((request.write_units for request in table), count),
        reported_units=_per_turn((request.reported_units or 0.0 for request in table), count),
        unreported_requests=sum(1 for request in table if request.reported_units is None) / count,
        failed_requests=sum(1 for request in table if request.failed) / count,
        stored_bytes=_per_turn((request.stored_bytes for request in table), count),
        stored_byte_months=_per_turn((request.stored_byte_months for request in table), count),
        sqs_requests=_per_turn((request.billed_requests for request in queue), count),
        by_operation={name: n / count for name, n in sorted(operations.items())},
        own_ms_spread={name: spread(values) for name, values in own_each.items()},
    )


def spread(values: list[float]) -> tuple[float, float, float]:
    """(median, lowest, highest) of measured values."""
    return statistics.median(values), min(values), max(values)


@dataclass(frozen=True)
class PeerFigures:
    """The peer's measured turns at one history length, averaged per turn (None: its item failed)."""

    history: int
    turns: int
    table_requests: float | None
    read_units: float | None
    write_units: float | None
    reported_units: float | None
    stored_bytes: float | None
    stored_byte_months: float | None
    failure: str | None = None


def summarize_peer(history: int, turns: list[PeerTurn], failure: str | None) -> PeerFigures:
    if failure is not None or not turns:
        return PeerFigures(history, 0, None, None, None, None, None, None, failure or "no turns")
    count = len(turns)
    table = [request for turn in turns for request in turn.requests if request.service == "dynamodb"]
    return PeerFigures(
        history=history,
        turns=count,
        table_requests=len(table) / count,
        read_units=statistics.fmean(sum(r.read_units for r in turn.requests) for turn in turns),
        write_units=statistics.fmean(sum(r.write_units for r in turn.requests) for turn in turns),
        reported_units=statistics.fmean(sum(r.reported_units or 0.0 for r in turn.requests) for turn in turns),
        stored_bytes=statistics.fmean(sum(r.stored_bytes for r in turn.requests) for turn in turns),
        stored_byte_months=statistics.fmean(sum(r.stored_byte_months for r in turn.requests) for turn in turns),
    )
