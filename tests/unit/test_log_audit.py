"""The suite-wide log audit (tests/support/log_audit.py) catches what it is meant to catch."""

import json
from typing import Any

import pytest

from tests.support.log_audit import KNOWN_MESSAGES, _is_text, metric_problems_in, plain_problems_in, problems_in

pytestmark = pytest.mark.unit


def line(**fields: Any) -> tuple[str, dict[str, Any]]:
    record = {"level": "INFO", "location": "f:1", "timestamp": "2026-11-22 10:00:00,000+0000", "service": "s"}
    record |= fields
    return json.dumps(record, ensure_ascii=False), record


def test_the_audit_knows_our_literal_log_messages() -> None:
    assert {"Turn completed", "Model stream failed", "Could not load conversation history; continuing with none"} <= (
        KNOWN_MESSAGES
    )


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"message": "Turn completed", "to": "+15551234567"}, "a phone number"),
        ({"message": "Turn completed", "exception": "ValueError: +447700900123 is wrong"}, "a phone number"),
        ({"message": "Turn completed", "exception": "KeyError: 'my knee clicks'"}, "a user's message text"),
        ({"message": "Turn completed", "note": "my knee clicks"}, "free text in field `note`"),
        ({"message": "Stored my knee clicks"}, "a `message` that is not a literal in our code"),
        ({"message": "Turn completed", "note": "ünïcödé knee clicks"}, "free text in field `note`"),
    ],
)
def test_personal_data_in_a_log_line_is_found(fields: dict[str, Any], problem: str) -> None:
    text, record = line(**fields)
    assert problem in problems_in(text, record, said=["my knee clicks"])


def test_an_ordinary_log_line_passes() -> None:
    text, record = line(
        message="Model stream failed", chunks_received=3, reason="EventStreamError", entry_keys=["content", "role"]
    )
    assert problems_in(text, record, said=["my knee clicks"]) == []


def test_a_text_that_only_matches_the_lambda_envelope_is_not_reported() -> None:
    """A fuzzed message like "000000" occurs in the local function ARN by coincidence."""
    text, record = line(message="Turn completed", function_arn="arn:aws:lambda:us-east-1:000000000000:function:F")
    assert problems_in(text, record, said=["000000"]) == []
    text, record = line(message="Turn completed", correlation_id="000000")
    assert "a user's message text" in problems_in(text, record, said=["000000"])


def test_a_text_inside_our_own_literal_message_or_a_key_is_not_reported() -> None:
    text, record = line(message="Turn completed", correlation_id="fuzz", reply_chars=148)
    assert problems_in(text, record, said=["urn com", '"fuzz"', "reply_ch"]) == []


@pytest.mark.parametrize(
    "planted",
    [
        "my knee clicks",  # print(message)
        "WARNING  root:intake.py:40 user said my knee clicks",  # logging.warning("user said %s", message)
        "Traceback: ValueError('my knee clicks')",
        "sending to +15551234567",
    ],
)
def test_a_planted_print_or_plain_log_of_what_a_user_said_is_found(planted: str) -> None:
    assert plain_problems_in(planted, said=["my knee clicks"]) != []


def test_our_own_literal_message_in_a_plain_log_line_is_not_reported() -> None:
    assert plain_problems_in("INFO  onboarding.turn.service:service.py:120 Turn completed", said=["urn com"]) == []


def test_pytests_prefix_of_a_captured_record_is_not_a_users_text_but_what_follows_is() -> None:
    prefix = "INFO     onboarding-memory-test:errors.py:146 "
    assert plain_problems_in(prefix + "Rejected request", said=["memory-test:api"]) == []
    assert plain_problems_in(prefix + "user said my knee clicks", said=["my knee clicks"]) != []


def test_only_texts_with_letters_are_searched_for() -> None:
    """A fuzzed "0: 153" is in any count a test prints; it is no one's words."""
    assert not _is_text("0: 153,")
    assert not _is_text("Hi")  # too short to be told from ordinary words
    assert _is_text("my knee clicks")


def _metrics_line(**values: Any) -> tuple[str, dict[str, Any]]:
    record = {
        "_aws": {
            "Timestamp": 1795604342814,
            "CloudWatchMetrics": [
                {
                    "Namespace": "OnboardingMemory",
                    "Dimensions": [["service"]],
                    "Metrics": [{"Name": "TurnLatency", "Unit": "Milliseconds"}],
                }
            ],
        },
        "service": "onboarding-memory",
        "TurnLatency": [12.5],
    } | values
    return json.dumps(record), record


def test_a_metrics_line_is_not_reported_for_its_metric_names_and_units() -> None:
    """A user who wrote "second" must not match the unit "Milliseconds"."""
    text, record = _metrics_line()
    assert metric_problems_in(text, record, said=["second", "TurnLatency"]) == []


def test_a_metrics_line_carrying_a_user_text_or_phone_is_found() -> None:
    text, record = _metrics_line(service="my knee clicks")
    assert metric_problems_in(text, record, said=["my knee clicks"]) == ["a user's message text"]
    text, record = _metrics_line(phone="+15551234567")
    assert metric_problems_in(text, record, said=[]) == ["a phone number"]


def test_a_field_holding_one_of_our_string_literals_is_not_a_users_text() -> None:
    """A fuzzed message "messages" is not found in `"limit": "messages"`, which our code wrote."""
    text, record = line(message="Refused by the rate limit", limit="messages")
    assert problems_in(text, record, said=["messages"]) == []
    text, record = line(message="Refused by the rate limit", limit="my knee clicks")
    assert "a user's message text" in problems_in(text, record, said=["my knee clicks"])
