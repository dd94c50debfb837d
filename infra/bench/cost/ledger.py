"""Measured turns into dollars: what 1,000 turns cost at the prices of infra/local/prices.py.

Pure arithmetic over the averages infra/bench/cost/turns.py measures, and the few figures no local run
can measure, which are `Assumptions` (each said in docs/cost.md):

- how long the model keeps a function waiting per request (the emulator answers at once; Lambda
  bills the wait for Bedrock's stream as duration);
- the share of turns that come by SMS (the rest come from the app);
- how long an item without a TTL stays stored (the peer's one item has none);
- how a managed memory service would be used per turn (its events and retrievals).
"""

from collections.abc import Mapping
from dataclasses import dataclass

from infra.bench.cost.figures import PeerFigures, TurnFigures
from infra.local.prices import Price, model_prices, price

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
    """Dollars per 1,000 turns of LangChain's store (None where its item no longer fits)."""
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
