"""The cost ledger's price arithmetic: measured figures into dollars, line by line, with the
expected dollars worked out by hand from the list prices (so a wrong unit, a price per the wrong
quantity or a memory size read as GB instead of MB shows)."""

import pytest

from infra.bench.cost.ledger import (
    API_REQUESTS,
    BEDROCK_INPUT,
    BEDROCK_OUTPUT,
    DYNAMODB_READS,
    DYNAMODB_STORAGE,
    DYNAMODB_WRITES,
    LAMBDA_DURATION,
    LAMBDA_REQUESTS,
    LINES,
    SQS_REQUESTS,
    Assumptions,
    PeerFigures,
    TurnFigures,
    agentcore_memory_cost,
    compare,
    peer_memory_cost,
    per_thousand,
    turn_cost,
)
from infra.local.prices import PRICES, UnknownModelError, model_prices, price

GEO_MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
MEMORY_MB = {"ApiFunction": 1024, "SmsWebhookFunction": 512, "SmsWorkerFunction": 1024}


def _figures(channel: str = "app", history: int = 20, **values: object) -> TurnFigures:
    defaults: dict[str, object] = {
        "channel": channel,
        "history": history,
        "turns": 1,
        "input_tokens": 0.0,
        "output_tokens": 0.0,
        "model_requests": 0.0,
        "api_requests": 0.0,
        "invocations": {},
        "own_seconds": {},
        "model_requests_in": {},
        "table_requests": 0.0,
        "read_units": 0.0,
        "write_units": 0.0,
        "reported_units": 0.0,
        "unreported_requests": 0.0,
        "failed_requests": 0.0,
        "stored_bytes": 0.0,
        "stored_byte_months": 0.0,
        "sqs_requests": 0.0,
    }
    return TurnFigures(**(defaults | values))  # type: ignore[arg-type]


def _peer(history: int = 20, **values: object) -> PeerFigures:
    defaults: dict[str, object] = {
        "history": history,
        "turns": 1,
        "table_requests": 3.0,
        "read_units": 0.0,
        "write_units": 0.0,
        "reported_units": 0.0,
        "stored_bytes": 0.0,
        "stored_byte_months": 0.0,
    }
    return PeerFigures(**(defaults | values))  # type: ignore[arg-type]


def test_tokens_are_priced_per_thousand_at_the_configured_profile() -> None:
    cost = turn_cost(_figures(input_tokens=3_000, output_tokens=200), Assumptions(GEO_MODEL), MEMORY_MB)
    assert cost[BEDROCK_INPUT] == pytest.approx(3 * 0.0011)  # $1.10 per million input tokens (geographic)
    assert cost[BEDROCK_OUTPUT] == pytest.approx(0.2 * 0.0055)  # $5.50 per million output tokens
    global_cost = turn_cost(
        _figures(input_tokens=1_000_000, output_tokens=1_000_000), Assumptions("global." + GEO_MODEL[3:]), MEMORY_MB
    )
    assert (global_cost[BEDROCK_INPUT], global_cost[BEDROCK_OUTPUT]) == pytest.approx((1.00, 5.00))


def test_lambda_duration_is_own_time_plus_the_models_wait_in_gb_seconds() -> None:
    figures = _figures(
        invocations={"SmsWebhookFunction": 1.0, "SmsWorkerFunction": 1.0},
        own_seconds={"SmsWebhookFunction": 0.1, "SmsWorkerFunction": 0.5},
        model_requests_in={"SmsWorkerFunction": 2.0},
    )
    cost = turn_cost(figures, Assumptions(GEO_MODEL, model_seconds_per_request=1.5), MEMORY_MB)
    # The webhook: 0.1 s at 0.5 GB; the worker: (0.5 + 2 x 1.5) s at 1 GB; $0.0000133334 a GB-s on Arm.
    assert cost[LAMBDA_DURATION] == pytest.approx((0.1 * 0.5 + 3.5 * 1.0) * 0.0000133334)
    assert cost[LAMBDA_REQUESTS] == pytest.approx(2 * 0.20 / 1e6)


def test_requests_units_and_storage_are_priced_per_million_and_per_gb_month() -> None:
    figures = _figures(
        api_requests=1.0, read_units=2.0, write_units=20.0, sqs_requests=3.0, stored_byte_months=12 * 1024**3
    )
    cost = turn_cost(figures, Assumptions(GEO_MODEL), MEMORY_MB)
    assert cost[API_REQUESTS] == pytest.approx(3.50 / 1e6)
    assert cost[DYNAMODB_READS] == pytest.approx(2 * 0.125 / 1e6)
    assert cost[DYNAMODB_WRITES] == pytest.approx(20 * 0.625 / 1e6)
    assert cost[DYNAMODB_STORAGE] == pytest.approx(12 * 0.25)  # 1 GB kept 12 months
    assert cost[SQS_REQUESTS] == pytest.approx(3 * 0.50 / 1e6)


def test_a_thousand_turns_mix_the_channels_by_the_sms_share() -> None:
    app = dict.fromkeys(LINES, 1.0)
    sms = dict.fromkeys(LINES, 3.0)
    mixed = per_thousand(app, sms, sms_share=0.25)
    assert mixed == {line: pytest.approx(1_000 * (0.75 * 1.0 + 0.25 * 3.0)) for line in LINES}


def test_agentcore_memory_is_events_and_retrievals_at_their_published_prices() -> None:
    # 2 new events at $0.25 per 1,000 and 1 retrieval at $0.50 per 1,000, a turn: $1.00 per 1,000 turns.
    assert agentcore_memory_cost(Assumptions(GEO_MODEL)) == pytest.approx(1.00)
    assert agentcore_memory_cost(Assumptions(GEO_MODEL, agentcore_events_per_turn=4)) == pytest.approx(1.50)


def test_the_peers_memory_is_its_units_and_storage_and_none_once_it_fails() -> None:
    peer = _peer(read_units=9.0, write_units=36.0, stored_byte_months=0.0)
    assert peer_memory_cost(peer) == pytest.approx(1_000 * (9 * 0.125 + 36 * 0.625) / 1e6)
    failed = PeerFigures(5_000, 0, None, None, None, None, None, None, "fails: Item size has exceeded")
    assert peer_memory_cost(failed) is None


def test_the_comparison_swaps_only_the_memory() -> None:
    app = _figures(input_tokens=3_000, write_units=20.0, api_requests=1.0)
    sms = _figures("sms", input_tokens=3_000, write_units=30.0, sqs_requests=3.0, api_requests=1.0)
    comparison = compare(app, sms, _peer(write_units=36.0), Assumptions(GEO_MODEL), MEMORY_MB)
    ours_writes = 1_000 * (0.8 * 20 + 0.2 * 30) * 0.625 / 1e6
    assert comparison.ours_memory == pytest.approx(ours_writes)
    assert comparison.total == pytest.approx(sum(comparison.lines.values()))
    assert comparison.peer_total == pytest.approx(comparison.total - ours_writes + 1_000 * 36 * 0.625 / 1e6)
    assert comparison.agentcore_total == pytest.approx(comparison.total - ours_writes + 1.00)
    failing = compare(
        app, sms, PeerFigures(20, 0, None, None, None, None, None, None, "fails"), Assumptions(GEO_MODEL), MEMORY_MB
    )
    assert failing.peer_total is None
    with pytest.raises(ValueError, match="different history lengths"):
        compare(app, _figures("sms", history=200), _peer(), Assumptions(GEO_MODEL), MEMORY_MB)


def test_a_model_without_a_price_is_refused_by_name() -> None:
    with pytest.raises(UnknownModelError, match=r"amazon\.nova-lite-v1:0"):
        model_prices("amazon.nova-lite-v1:0")
    assert model_prices(GEO_MODEL) == (price("bedrock_haiku_4_5_input_geo"), price("bedrock_haiku_4_5_output_geo"))


def test_bad_assumptions_are_refused() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        Assumptions(GEO_MODEL, sms_share=1.5)
    with pytest.raises(ValueError, match="cannot be negative"):
        Assumptions(GEO_MODEL, model_seconds_per_request=-1)


def test_every_price_is_sourced_and_dated_and_keyed_once() -> None:
    keys = [entry.key for entry in PRICES]
    assert len(keys) == len(set(keys))
    for entry in PRICES:
        assert entry.usd > 0, entry.key
        assert entry.per > 0, entry.key
        assert entry.source.startswith("https://aws.amazon.com/"), entry.key
        assert entry.seen, entry.key
    with pytest.raises(KeyError):
        price("no-such-price")


def test_check_ins_cost_what_their_parts_cost() -> None:
    """A month of weekly check-ins for 1,000 users: 4,333 firings, each a Scheduler invocation and a
    model call; by SMS two segments each; daily is seven times weekly."""
    from infra.bench.cost.ledger import check_in_cost

    weekly_app = check_in_cost(GEO_MODEL, "weekly", by_sms=False)
    weekly_sms = check_in_cost(GEO_MODEL, "weekly", by_sms=True)
    assert weekly_app["SMS (Twilio, carriers)"] == 0
    assert weekly_app["EventBridge Scheduler"] == pytest.approx(1000 * 52 / 12 / 1_000_000)
    assert weekly_app["Bedrock"] == pytest.approx(1000 * 52 / 12 * (900 * 0.0011 + 80 * 0.0055) / 1000)
    assert weekly_sms["SMS (Twilio, carriers)"] == pytest.approx(1000 * 52 / 12 * 2 * (0.0083 + 0.003))
    daily = check_in_cost(GEO_MODEL, "daily", by_sms=True)
    assert sum(daily.values()) == pytest.approx(sum(weekly_sms.values()) * 365 / 52)
