"""The suite-wide log audit (tests/support/log_audit.py) catches what it is meant to catch."""

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools import Logger

from tests.support.log_audit import (
    CODE_LITERALS,
    KNOWN_MESSAGES,
    TESTS,
    RecordSpy,
    _is_text,
    metric_problems_in,
    problems_in,
    record_problems_in,
)

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


@pytest.fixture
def spy() -> Iterator[RecordSpy]:
    """A spy of its own, which keeps the records a test logs (the suite's skips them)."""
    records = RecordSpy()
    records.start()
    try:
        yield records
    finally:
        records.stop()


def test_a_standard_library_record_of_what_a_user_said_is_found(spy: RecordSpy) -> None:
    logging.getLogger("audit-probe").warning("user said %s", "my knee clicks")
    logging.getLogger("audit-probe").error("failed", exc_info=ValueError("my knee clicks"), extra={"n": 3})
    (said_it, traceback_of_it) = spy.plain
    assert record_problems_in(said_it[1], said=["my knee clicks"]) == ["a user's message text"]
    assert record_problems_in(traceback_of_it[1], said=["my knee clicks"]) == ["a user's message text"]
    assert "n=3" in traceback_of_it[1]


def test_a_record_of_a_logger_that_does_not_propagate_is_read(spy: RecordSpy) -> None:
    """The local gateway's uvicorn loggers write to their own handler and never reach the root."""
    quiet = logging.getLogger("audit-probe.quiet")
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    try:
        quiet.error("Exception in ASGI application: my knee clicks")
    finally:
        quiet.propagate = True
        quiet.handlers.clear()
    assert [source for source, _ in spy.plain] == ["audit-probe.quiet ERROR"]


def test_a_powertools_record_is_read_as_the_json_line_its_formatter_writes(spy: RecordSpy) -> None:
    unseen = logging.StreamHandler(io.StringIO())  # its line is read by the spy, not from the test's stdout
    Logger(service="audit-probe-json", logger_handler=unseen).info(
        "Turn completed", extra={"text": "my knee clicks", "turns": 2}
    )
    ((text, record),) = spy.lines
    assert (record["message"], record["service"], record["turns"]) == ("Turn completed", "audit-probe-json", 2)
    assert problems_in(text, record, said=["my knee clicks"]) == [
        "a user's message text",
        "free text in field `text`",
    ]
    assert spy.plain == []


def test_the_suites_spy_leaves_out_what_a_test_logs_itself() -> None:
    suites = RecordSpy(skip_under=TESTS)
    suites.start()
    try:
        logging.getLogger("audit-probe").warning("user said %s", "my knee clicks")
        unseen = logging.StreamHandler(io.StringIO())
        Logger(service="audit-probe-own", logger_handler=unseen).info("A test's own line", extra={"text": "knee"})
    finally:
        suites.stop()
    assert (suites.lines, suites.plain) == ([], [])


def test_a_planted_phone_number_in_a_plain_record_is_found() -> None:
    assert record_problems_in("sending to +15551234567", said=[]) == ["a phone number"]


def test_our_own_literal_message_in_a_plain_record_is_not_reported() -> None:
    assert record_problems_in("Turn completed", said=["urn com"]) == []
    assert record_problems_in("Turn completed: my knee clicks", said=["my knee clicks"]) != []


A_TESTS_OWN_OUTPUT = """
import io
import json
import logging
import sys

from aws_lambda_powertools import Logger
from onboarding.turn import service

TEXT = "my knee clicks after squats"


def test_prints_it():
    service.validate_message(TEXT, 1000)
    print(f"POST /chat: status codes {{200: 51}} after {TEXT}")
    print(TEXT, file=sys.stderr)


def test_logs_it_with_powertools():
    service.validate_message(TEXT, 1000)
    Logger(service="inner").info("Turn completed", extra={"note": TEXT})


def test_logs_it_with_the_standard_library():
    service.validate_message(TEXT, 1000)
    logging.getLogger("a.library").warning("user said %s", TEXT)


def test_a_local_servers_process_logs_it():
    service.validate_message(TEXT, 1000)
    print(json.dumps({"level": "INFO", "message": "Turn completed", "note": TEXT}))
"""


def test_a_tests_own_print_of_a_users_text_passes_and_a_logged_one_fails(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slow tier once failed on the fuzz test's own print of its status counts, which held a
    fuzzed message by coincidence. A print is not a log record; a record is read wherever it comes from."""
    pytester.makepyfile(test_inner=A_TESTS_OWN_OUTPUT)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the audit alone: a run of a second, not several
    result = pytester.runpytest_subprocess("-p", "tests.support.log_audit", "-p", "no:cacheprovider", timeout=120)
    capsys.readouterr()  # pytester echoes the inner run's log lines; they are its records, not this test's
    result.assert_outcomes(passed=4, errors=3)
    output = result.stdout.str()
    assert "ERROR at teardown of test_prints_it" not in output
    # Only the errors' own section: the short summary repeats each message when the terminal is wide enough
    findings = output.split("= ERRORS =")[1].split("short test summary info")[0]
    assert findings.count("The test's logs contain personal data") == 3
    assert "INFO 'Turn completed' (['level', 'location', 'message', 'note', 'service', 'timestamp'])" in findings
    assert "a record of a.library WARNING: a user's message text" in findings
    assert "INFO 'Turn completed' (['level', 'message', 'note']): a user's message text" in findings


def test_only_texts_with_letters_are_searched_for() -> None:
    """A fuzzed "0: 153" is in any count a test prints; it is no one's words."""
    assert not _is_text("0: 153,")
    assert not _is_text("Hi")  # too short to be told from ordinary words
    assert _is_text("my knee clicks")


def test_a_text_that_is_one_of_our_string_literals_is_not_searched_for() -> None:
    """Hypothesis draws our code's string constants as messages ("Retry-After", "status"); our code
    writes them itself, in values the audit searches (an exception's text, a traceback's source)."""
    assert "Retry-After" in CODE_LITERALS
    assert not _is_text("Retry-After")


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
