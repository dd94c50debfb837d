"""A pytest plugin that audits everything the test suite writes for personal data.

After each test, every line it wrote to stdout or stderr, and every record of any logger (what
pytest captured in all three), is checked. Any line at all: no phone number (E.164-like) and no
text a user said in that test, so a stray `print(message)` or `logging.warning("user said %s",
message)` fails the test. A structured (Powertools JSON) log line is checked more closely:

- no phone number (E.164-like, `+` and 7 to 15 digits) anywhere in the line, tracebacks included;
- no text a user said in that test (what reached `validate_message` for a turn, or the webhook's
  intake as an SMS body), whatever field it hides in;
- `message` is one of the log messages written in our code (a literal), so no value is ever
  formatted into it;
- every other field we add is a number, a boolean, or a short token without spaces (a count, a
  reason's class name, a key shape), never free text.

A test that logs personal data fails with the offending line's field names (not its content).
The spies only record what passes through; they do not change it.
"""

import ast
import json
import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
SOURCES = [ROOT / "layers" / "onboarding" / "onboarding", ROOT / "functions", ROOT / "infra"]
PHONE = re.compile(r"\+[1-9]\d{6,14}(?!\d)")
TOKEN = re.compile(r"^[A-Za-z0-9_.:/#@\[\]-]{0,80}$")
MIN_TEXT = 6  # shorter texts ("Hi", "yes") are ordinary words and would match anything
MIN_LETTERS = 3  # a fuzzed text of digits and signs ("0: 153") is found in any count a test prints
# pytest's own prefix of a captured log record ("INFO     onboarding-memory-test:errors.py:146 "):
# the level, our logger's name, the file and line; nothing a user sent.
CAPTURED_LOG_PREFIX = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +\S+:\S+\.py:\d+ ")
POWERTOOLS_KEYS = {
    "level",
    "location",
    "message",
    "timestamp",
    "service",
    "sampling_rate",
    "cold_start",
    "function_name",
    "function_memory_size",
    "function_arn",
    "function_request_id",
    "correlation_id",
    "xray_trace_id",
    "exception",
    "exception_name",
    "stack_trace",
}
# Set by Powertools and the Lambda context, never from what a user sent: searching them for user texts
# only finds coincidences (a fuzzed "000000" inside the local function ARN).
ENVELOPE_KEYS = {
    "timestamp",
    "level",
    "location",
    "service",
    "sampling_rate",
    "cold_start",
    "function_name",
    "function_memory_size",
    "function_arn",
    "function_request_id",
    "xray_trace_id",
}
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}
SAID = pytest.StashKey[list[str]]()


def _literal_log_messages() -> set[str]:
    """Every string literal passed as the first argument of a `logger.<level>(...)` call in our code."""
    messages = set()
    for source in SOURCES:
        for path in source.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in LOG_METHODS
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    messages.add(node.args[0].value)
    return messages


KNOWN_MESSAGES = _literal_log_messages()


def _string_literals() -> set[str]:
    """Every string literal in our code: a log field whose value is one of them (`"limit":
    "messages"`) was written by our code, not filled from a request."""
    literals = set()
    for source in SOURCES:
        for path in source.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    literals.add(node.value)
    return literals


CODE_LITERALS = _string_literals()


def _captured_lines(report: pytest.TestReport) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Every line the test wrote (stdout, stderr, logging), with its record if it is a structured log line."""
    for _, content in report.sections:
        for line in content.splitlines():
            record = None
            if line.startswith("{"):
                try:
                    parsed = json.loads(line)
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict) and (
                    ("level" in parsed and "message" in parsed) or isinstance(parsed.get("_aws"), dict)
                ):
                    record = parsed
            yield line, record


def metric_problems_in(line: str, record: dict[str, Any], said: list[str]) -> list[str]:
    """What is wrong with one metrics line (CloudWatch's embedded metric format): its `_aws` block
    holds only our metric names and units ("Milliseconds" holds "second" by coincidence), so only
    the values beside it, which a metric call could have filled from a request, are searched."""
    found = []
    if PHONE.search(line):
        found.append("a phone number")
    values = "\n".join(json.dumps(value, ensure_ascii=False) for key, value in record.items() if key != "_aws")
    if any(text in values or json.dumps(text)[1:-1] in values for text in said):
        found.append("a user's message text")
    return found


def _is_text(said: str) -> bool:
    """Long enough, and with letters enough, that finding it in a line is not a coincidence."""
    return len(said.strip()) >= MIN_TEXT and sum(c.isalpha() for c in said) >= MIN_LETTERS


def plain_problems_in(line: str, said: list[str], known: set[str] = KNOWN_MESSAGES) -> list[str]:
    """What is wrong with a line that is not one of our structured log lines (a print, a library's
    log record): a phone number, or a user's text (unless it only appears inside one of our own
    literal log messages, which pytest's log capture prints as they are)."""
    found = []
    if PHONE.search(line):
        found.append("a phone number")
    outside_literals = CAPTURED_LOG_PREFIX.sub("", line)
    for literal in known:
        outside_literals = outside_literals.replace(literal, "")
    if any(text in outside_literals for text in said):
        found.append("a user's message text")
    return found


def problems_in(line: str, record: dict[str, Any], said: list[str]) -> list[str]:
    """What is wrong with one log line, named without repeating its content."""
    found = []
    if PHONE.search(line):
        found.append("a phone number")
    # Only the values a log call could have filled from a request: not the envelope, not the keys or
    # the JSON syntax around them, and not a `message` that is one of our own literals (a fuzzed
    # "urn co" is in "Turn completed" by coincidence).
    searchable = "\n".join(
        f"{value}\n{json.dumps(value)[1:-1]}" if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        for key, value in record.items()
        if key not in ENVELOPE_KEYS
        and not (key == "message" and value in KNOWN_MESSAGES)
        and not (key != "message" and isinstance(value, str) and value in CODE_LITERALS)
    )
    if any(text in searchable or json.dumps(text)[1:-1] in searchable for text in said):
        found.append("a user's message text")
    if record.get("message") not in KNOWN_MESSAGES:
        found.append("a `message` that is not a literal in our code")
    for key, value in record.items():
        if key in POWERTOOLS_KEYS or value is None or isinstance(value, bool | int | float):
            continue
        if not (isinstance(value, str) and TOKEN.match(value)) and not _all_tokens(value):
            found.append(f"free text in field `{key}`")
    return found


def _all_tokens(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return all(isinstance(v, bool | int | float) or (isinstance(v, str) and TOKEN.match(v)) for v in value)
    return False


@pytest.fixture(autouse=True)
def _record_what_users_say(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spy on the two doors user text comes in by: a turn's message, and an SMS at the webhook."""
    said: list[str] = []
    request.node.stash[SAID] = said
    from onboarding.sms import intake
    from onboarding.turn import service as turns

    validate = turns.validate_message
    accept = intake.SmsIntake.accept

    def validate_spy(message: str, max_bytes: int) -> None:
        if isinstance(message, str) and _is_text(message):
            said.append(message)
        validate(message, max_bytes)

    def accept_spy(self: intake.SmsIntake, sms: Any) -> str | None:
        if _is_text(sms.body):
            said.append(sms.body)
        return accept(self, sms)

    monkeypatch.setattr(turns, "validate_message", validate_spy)
    monkeypatch.setattr(intake.SmsIntake, "accept", accept_spy)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when != "teardown":  # the teardown report carries the output of every phase
        return report
    said = item.stash.get(SAID, [])
    findings: list[str] = []
    for line, record in _captured_lines(report):
        if record is None:
            findings.extend(
                f"a line that is not a structured log line: {problem}" for problem in plain_problems_in(line, said)
            )
            continue
        if "_aws" in record and "message" not in record:
            findings.extend(f"a metrics line: {problem}" for problem in metric_problems_in(line, record, said))
            continue
        for problem in problems_in(line, record, said):
            findings.append(f"{record.get('level')} {record.get('message')!r} ({sorted(record)}): {problem}")
    if findings and report.passed:
        report.outcome = "failed"
        report.longrepr = "The test's logs contain personal data:\n" + "\n".join(sorted(set(findings)))
    return report
