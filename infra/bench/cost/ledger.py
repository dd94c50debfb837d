"""Measured turns into dollars: what 1,000 turns cost at the prices of infra/local/prices.py.

Pure arithmetic over the measured turns (a channel's averaged per turn, LangChain's store's beside
them), and the few figures no local run can measure, which are `Assumptions` (each said in
docs/cost.md):

- how long the model keeps a function waiting per request (the emulator answers at once; Lambda
  bills the wait for Bedrock's stream as duration);
- the share of turns that come by SMS (the rest come from the app);
- how long an item without a TTL stays stored (the peer's one item has none);
- how a managed memory service would be used per turn (its events and retrievals).
"""

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from infra.bench.cost.meter import Metered
from infra.local.prices import Price, model_prices, price


@dataclass(frozen=True)
class Invocation:
    function: str
    own_s: float  # its duration less the model's wait and the meter's reads
    model_requests: int  # model requests made while it ran


@dataclass(frozen=True)
class Turn:
    channel: str  # "app" or "sms"
    invocations: tuple[Invocation, ...]
    api_requests: int  # requests API Gateway received (the worker's come from the queue)
    input_tokens: int
    output_tokens: int
    requests: tuple[Metered, ...]

    @property
    def model_requests(self) -> int:
        return sum(invocation.model_requests for invocation in self.invocations)


@dataclass(frozen=True)
class PeerTurn:
    requests: tuple[Metered, ...]


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


TURNS = 1_000
GB = 1024**3  # DynamoDB storage is billed in binary gigabytes
MB_PER_GB = 1024  # Lambda's GB-seconds: memory in MB / 1,024


@dataclass(frozen=True)
class Assumptions:
    model_id: str
    model_seconds_per_request: float = 2.0
    sms_share: float = 0.2
    agentcore_events_per_turn: int = 2  # the person's message and the reply, each stored as it happens
    agentcore_retrievals_per_turn: int = 1  # the long-term memory (profile, answers) read for the prompt

    def __post_init__(self) -> None:
        if not 0.0 <= self.sms_share <= 1.0:
            raise ValueError("the SMS share is a fraction between 0 and 1")
        if self.model_seconds_per_request < 0:
            raise ValueError("the model's seconds per request cannot be negative")


# The lines of a turn's cost, in the order the tables show them.
BEDROCK_INPUT, BEDROCK_OUTPUT = "Bedrock input tokens", "Bedrock output tokens"
LAMBDA_DURATION, LAMBDA_REQUESTS = "Lambda duration (GB-s)", "Lambda requests"
API_REQUESTS = "API Gateway requests"
DYNAMODB_READS, DYNAMODB_WRITES, DYNAMODB_STORAGE = "DynamoDB reads", "DynamoDB writes", "DynamoDB storage"
SQS_REQUESTS = "SQS requests"
LINES = (
    BEDROCK_INPUT,
    BEDROCK_OUTPUT,
    LAMBDA_DURATION,
    LAMBDA_REQUESTS,
    API_REQUESTS,
    DYNAMODB_READS,
    DYNAMODB_WRITES,
    DYNAMODB_STORAGE,
    SQS_REQUESTS,
)
MEMORY_LINES = (DYNAMODB_READS, DYNAMODB_WRITES, DYNAMODB_STORAGE)


def _cost(quantity: float, of: Price) -> float:
    return quantity * of.each


def billed_seconds(figures: TurnFigures, function: str, assumptions: Assumptions) -> float:
    """A function's billed seconds per turn: its own measured time and the model's assumed wait."""
    waited = figures.model_requests_in.get(function, 0.0) * assumptions.model_seconds_per_request
    return figures.own_seconds.get(function, 0.0) + waited


def turn_cost(figures: TurnFigures, assumptions: Assumptions, memory_mb: Mapping[str, int]) -> dict[str, float]:
    """Dollars per turn of one channel, by line."""
    tokens_in, tokens_out = model_prices(assumptions.model_id)
    gb_seconds = sum(
        billed_seconds(figures, function, assumptions) * memory_mb[function] / MB_PER_GB
        for function in figures.invocations
    )
    return {
        BEDROCK_INPUT: _cost(figures.input_tokens, tokens_in),
        BEDROCK_OUTPUT: _cost(figures.output_tokens, tokens_out),
        LAMBDA_DURATION: _cost(gb_seconds, price("lambda_gb_second_arm64")),
        LAMBDA_REQUESTS: _cost(sum(figures.invocations.values()), price("lambda_request")),
        API_REQUESTS: _cost(figures.api_requests, price("apigw_rest_request")),
        DYNAMODB_READS: _cost(figures.read_units, price("dynamodb_read_request_unit")),
        DYNAMODB_WRITES: _cost(figures.write_units, price("dynamodb_write_request_unit")),
        DYNAMODB_STORAGE: _cost(figures.stored_byte_months / GB, price("dynamodb_storage_gb_month")),
        SQS_REQUESTS: _cost(figures.sqs_requests, price("sqs_fifo_request")),
    }


def per_thousand(app: dict[str, float], sms: dict[str, float], sms_share: float) -> dict[str, float]:
    """Dollars per 1,000 turns, by line, of a mix of app turns and texts."""
    return {line: TURNS * ((1 - sms_share) * app[line] + sms_share * sms[line]) for line in LINES}


def peer_memory_cost(peer: PeerFigures) -> float | None:
    """Dollars per 1,000 turns of LangChain's store (None where its item is over DynamoDB's 400 KB)."""
    if peer.read_units is None or peer.write_units is None or peer.stored_byte_months is None:
        return None
    return TURNS * (
        _cost(peer.read_units, price("dynamodb_read_request_unit"))
        + _cost(peer.write_units, price("dynamodb_write_request_unit"))
        + _cost(peer.stored_byte_months / GB, price("dynamodb_storage_gb_month"))
    )


def agentcore_memory_cost(assumptions: Assumptions) -> float:
    """Dollars per 1,000 turns of AgentCore Memory's per-turn charges (records stored apart)."""
    return TURNS * (
        _cost(assumptions.agentcore_events_per_turn, price("agentcore_memory_event"))
        + _cost(assumptions.agentcore_retrievals_per_turn, price("agentcore_memory_retrieval"))
    )


@dataclass(frozen=True)
class Comparison:
    """One history length: ours by line, and the three memories side by side (per 1,000 turns)."""

    history: int
    lines: dict[str, float]
    ours_memory: float
    peer_memory: float | None
    agentcore_memory: float
    peer_failure: str | None

    @property
    def total(self) -> float:
        return sum(self.lines.values())

    @property
    def besides_memory(self) -> float:
        """What every one of the three pays alike: the model, Lambda, API Gateway, SQS."""
        return self.total - self.ours_memory

    @property
    def peer_total(self) -> float | None:
        return None if self.peer_memory is None else self.besides_memory + self.peer_memory

    @property
    def agentcore_total(self) -> float:
        return self.besides_memory + self.agentcore_memory


def compare(
    app: TurnFigures,
    sms: TurnFigures,
    peer: PeerFigures,
    assumptions: Assumptions,
    memory_mb: Mapping[str, int],
) -> Comparison:
    if not app.history == sms.history == peer.history:
        raise ValueError("the app, SMS and peer figures are of different history lengths")
    lines = per_thousand(
        turn_cost(app, assumptions, memory_mb), turn_cost(sms, assumptions, memory_mb), assumptions.sms_share
    )
    return Comparison(
        history=app.history,
        lines=lines,
        ours_memory=sum(lines[line] for line in MEMORY_LINES),
        peer_memory=peer_memory_cost(peer),
        agentcore_memory=agentcore_memory_cost(assumptions),
        peer_failure=peer.failure,
    )


# --- check-ins (docs/decisions/0035-check-ins.md): computed from the prices, not measured ---------

USERS = 1_000
FIRINGS_A_MONTH = {"weekly": 52 / 12, "daily": 365 / 12}


@dataclass(frozen=True)
class CheckInAssumptions:
    """One check-in: its prompt (the check-in's instructions and the memory's plan, limitation and
    last messages) and reply in tokens; the function's GB-seconds (1.5 s at 1 GB, mostly waiting on
    the model); the table's read and write request units (the one Query, the firing's record and
    the phone; the transaction of message, record, rate count and guard, and the delivered mark);
    and by SMS its segments, Twilio's US long-code price a segment (not AWS's, so not in
    prices.toml) and about the carriers' fee a segment (0.0025 to 0.0062)."""

    tokens: tuple[int, int] = (900, 80)
    lambda_gb_seconds: float = 1.5
    request_units: tuple[float, float] = (6.0, 9.0)
    sms: tuple[int, float, float] = (2, 0.0083, 0.003)


def check_in_cost(
    model_id: str, how_often: str, by_sms: bool, a: CheckInAssumptions = CheckInAssumptions()
) -> dict[str, float]:
    """Dollars a month for check-ins to 1,000 users, by line."""
    firings = USERS * FIRINGS_A_MONTH[how_often]
    input_price, output_price = model_prices(model_id)
    (reads, writes), (segments, segment_usd, carrier_usd) = a.request_units, a.sms
    table = reads * price("dynamodb_read_request_unit").each + writes * price("dynamodb_write_request_unit").each
    return {
        "EventBridge Scheduler": firings * price("scheduler_invocation").each,
        "Lambda": firings * (a.lambda_gb_seconds * price("lambda_gb_second_arm64").each + price("lambda_request").each),
        "Bedrock": firings * (a.tokens[0] * input_price.each + a.tokens[1] * output_price.each),
        "DynamoDB": firings * table,
        "SMS (Twilio, carriers)": firings * segments * (segment_usd + carrier_usd) if by_sms else 0.0,
    }
