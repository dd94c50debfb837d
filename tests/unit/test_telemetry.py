"""Redacted telemetry: one `turn_received` and one `turn_responded` line per turn, with
counts and names only; the per-turn metrics the dashboard reads; the capacity a turn consumed."""

import json
from typing import Any

import boto3
import pytest

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.recorded import Fault
from onboarding.config import RateLimit, Settings
from onboarding.model.errors import ModelUnavailableError
from onboarding.persistence import Repositories
from onboarding.persistence.capacity import TableAnswer, count_capacity
from onboarding.telemetry import TurnLedger, counting
from onboarding.turn.service import TurnService
from tests.unit.conftest import TABLE

PERSONAL_ANSWER = "I'm a beginner who runs on Tuesdays"


FIELDS = (
    "channel",
    "step",
    "history_messages",
    "waiting_for",
    "memory_unavailable",
    "outcome",
    "answer_keys",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "first_token_ms",
    "duration_ms",
    "read_units",
    "write_units",
    "table_requests",
)


def _lines(caplog: pytest.LogCaptureFixture, event: str) -> list[dict[str, Any]]:
    """The structured fields of each `event` line (what the JSON log line carries)."""
    return [
        {name: getattr(r, name) for name in FIELDS if hasattr(r, name)}
        for r in caplog.records
        if r.getMessage() == event
    ]


def _metrics(output: str) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for line in output.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            blob = json.loads(line)
            for metric in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
                value = blob[metric["Name"]]
                found.setdefault(metric["Name"], []).extend(value if isinstance(value, list) else [value])
    return found


async def test_each_turn_logs_received_and_responded_with_counts_and_names_only(
    service: TurnService,
    emulator: BedrockEmulator,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    await (await service.start_turn("u", "Hi")).collect()
    capsys.readouterr()
    caplog.clear()
    await (await service.start_turn("u", PERSONAL_ANSWER)).collect()  # the coach saves the answer
    out = capsys.readouterr().out
    (received,) = _lines(caplog, "turn_received")
    (responded,) = _lines(caplog, "turn_responded")
    assert received["step"] == "fitness_assessment"
    assert received["history_messages"] == 2
    assert received["channel"] == "app"
    assert responded["outcome"] == "completed"
    assert responded["answer_keys"]  # the saved items' names...
    assert set(responded["answer_keys"]) <= {"fitness_level", "current_activity", "limitations", "age_and_body"}
    assert responded["tool_calls"] >= 1
    assert responded["input_tokens"] > 0
    assert responded["output_tokens"] > 0
    assert responded["duration_ms"] >= responded["first_token_ms"] >= 0
    assert responded["read_units"] > 0  # moto reports a Query's units (not a transaction's: see below)
    assert responded["table_requests"] >= 1
    assert "Tuesdays" not in json.dumps([received, responded])  # ... never what the person said
    metrics = _metrics(out)
    for name in ("TurnCompleted", "TurnLatency", "FirstTokenLatency", "InputTokens", "OutputTokens"):
        assert name in metrics, name
    assert metrics["ConsumedReadCapacity"][0] == responded["read_units"]


async def test_a_failed_turn_counts_its_kind(
    service: TurnService,
    emulator: BedrockEmulator,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    emulator.queue_fault(Fault("throttle"))
    with pytest.raises(ModelUnavailableError):
        await (await service.start_turn("u", "Hello")).collect()
    out = capsys.readouterr().out
    (responded,) = _lines(caplog, "turn_responded")
    assert responded["outcome"] == "model_failed"
    failed = [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"TurnFailed"' in line]
    assert [blob["kind"] for blob in failed] == ["model_failed"]
    assert "TurnCompleted" not in _metrics(out)


async def test_a_replayed_turn_is_logged_as_replayed(
    service: TurnService, emulator: BedrockEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    await (await service.start_turn("u", "Hello", "app-1")).collect()
    caplog.clear()
    await (await service.start_turn("u", "Hello", "app-1")).collect()
    (responded,) = _lines(caplog, "turn_responded")
    assert responded["outcome"] == "replayed"


def test_a_transactions_units_count_as_writes_of_the_running_turn(store: Repositories, dynamodb: Any) -> None:
    """DynamoDB answers a transaction with a list of ConsumedCapacity (moto with an empty one): the
    ledger adds what DynamoDB says, reads and writes apart, and only while a turn is counting."""

    def answered_with_units(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        assert json.loads(params["body"])["ReturnConsumedCapacity"] == "TOTAL"
        http = type("Http", (), {"status_code": 200, "headers": {}})()
        return http, {"ConsumedCapacity": [{"TableName": TABLE, "CapacityUnits": 6.0}], "ResponseMetadata": {}}

    dynamodb.meta.events.register("before-call.dynamodb.TransactWriteItems", answered_with_units)
    ledger = TurnLedger("app")
    with counting(ledger):
        store.writes.append_message("u", "user", "hello", RateLimit(10, 60))
        store.conversations.load_turn("u", 20)
    store.writes.append_message("u", "user", "not counted", RateLimit(10, 60))
    assert (ledger.write_units, ledger.requests) == (6.0, 2)
    assert ledger.read_units > 0


def test_a_tools_recorder_on_the_session_and_the_turns_on_the_client_both_count_every_answer(
    dynamodb: Any, settings: Settings
) -> None:
    """The local tools count a turn's answers with the product's own hooks, on the session the
    functions' clients are made from; the turn's ledger, on the client, still counts each one."""
    session = boto3.Session(region_name="us-east-1")
    seen: list[TableAnswer] = []
    count_capacity(session.events, seen.append, "a-tool")
    store = Repositories.over(session.client("dynamodb"), TABLE, settings)
    ledger = TurnLedger("app")
    with counting(ledger):
        store.writes.append_message("u", "user", "hello", RateLimit(10, 60))
        store.conversations.load_turn("u", 20)
    assert [answer.operation for answer in seen] == ["TransactWriteItems", "Query"]
    assert seen[0].units is None  # moto reports nothing for a transaction; the Query's units it does
    assert ledger.requests == len(seen)
    assert seen[1].units is not None
    assert ledger.read_units == seen[1].units > 0
