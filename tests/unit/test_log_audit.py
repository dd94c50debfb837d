"""The suite-wide log audit (tests/support/log_audit.py) catches what it is meant to catch."""

import json
from typing import Any

import pytest

from tests.support.log_audit import KNOWN_MESSAGES, problems_in

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
