"""A pytest plugin that audits every log record the test suite's code writes for personal data.

It reads log records, and only log records: never a line a test printed itself. A test may print
what it likes (a fuzz run's status counts, a benchmark's figures), and a fuzzed text found in one by
coincidence is no leak. What it reads, after each test (setup, call and teardown):

- every record any logger handled while the test ran, the loggers that do not propagate to the
  root included (the local gateway's uvicorn), except those logged by the tests' own code (a test
  of a logger's formatting logs on purpose): a record written by a Powertools handler as the JSON
  line that handler writes (its own formatter, phone masking included), any other record as its
  message, its extra fields and its traceback;
- every structured line in what the test wrote to stdout or stderr: a Powertools JSON log line or a
  CloudWatch metrics (EMF) line, from our code in process or from a local server's process whose
  output the test captures.

That the product never prints (a stray `print(message)` in a handler) is a static rule instead:
ruff's flake8-print (T20) and a ban on `sys.stdout`, `sys.stderr` and `traceback.print_*` in
layers/ and functions/ (pyproject.toml).

What a structured line must hold:

- no phone number (E.164-like, `+` and 7 to 15 digits) anywhere in the line, tracebacks included;
- no text a user said in that test (what reached `validate_message` for a turn, or the webhook's
  intake as an SMS body), whatever field it hides in;
- `message` is one of the log messages written in our code (a literal), so no value is ever
  formatted into it;
- every other field we add is a number, a boolean, or a short token without spaces (a count, a
  reason's class name, a key shape), never free text.

Any other record (a library's, or a standard-library logger in our code) must hold no phone number
and no text a user said, outside our own literal log messages.

A test whose records hold personal data fails with the offending record's field names or logger
(not its content). The spies only record what passes through; they do not change it.
"""

import ast
import json
import logging
import os
import re
import traceback
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.logging.formatter import BasePowertoolsFormatter

ROOT = Path(__file__).parents[2]
SOURCES = [ROOT / "layers" / "onboarding" / "onboarding", ROOT / "functions", ROOT / "infra"]
PHONE = re.compile(r"\+[1-9]\d{6,14}(?!\d)")
TOKEN = re.compile(r"^[A-Za-z0-9_.:/#@\[\]-]{0,80}$")
MIN_TEXT = 6  # shorter texts ("Hi", "yes") are ordinary words and would match anything
MIN_LETTERS = 3  # a fuzzed text of digits and signs ("0: 153") is found in any count or port a record names
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
# What every LogRecord has; anything else on a record came from the call's `extra`.
RECORD_ATTRIBUTES = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
SAID = pytest.StashKey[list[str]]()
RECORDS = pytest.StashKey["RecordSpy"]()


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


def structured_lines(report: pytest.TestReport) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every structured log or metrics line the test wrote to stdout or stderr, with its record.
    Plain lines (a test's own prints) are not log records and are not read."""
    for title, content in report.sections:
        if not title.startswith(("Captured stdout", "Captured stderr")):
            continue  # pytest's "Captured log" section: the records themselves are audited (RecordSpy)
        for line in content.splitlines():
            record = _structured(line)
            if record is not None:
                yield line, record


def _structured(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        parsed = json.loads(line)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    if ("level" in parsed and "message" in parsed) or isinstance(parsed.get("_aws"), dict):
        return parsed
    return None


def _powertools_formatter(logger: logging.Logger) -> BasePowertoolsFormatter | None:
    """The Powertools formatter that writes `logger`'s records, if one does (on it or an ancestor)."""
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if isinstance(handler.formatter, BasePowertoolsFormatter):
                return handler.formatter
        if not current.propagate:
            return None
        current = current.parent
    return None


def plain_text(record: logging.LogRecord) -> str:
    """A record that no Powertools formatter writes: its message, extra fields and traceback."""
    try:
        message = record.getMessage()
    except (TypeError, ValueError):  # arguments that do not fit the format: what was passed, then
        message = f"{record.msg} {record.args}"
    parts = [message]
    parts += [f"{key}={value}" for key, value in vars(record).items() if key not in RECORD_ATTRIBUTES]
    if record.exc_info and record.exc_info[1] is not None:
        parts.append("".join(traceback.format_exception(record.exc_info[1])))
    parts += [text for text in (record.exc_text, record.stack_info) if text]
    return "\n".join(parts)


TESTS = str(ROOT / "tests") + os.sep


class RecordSpy:
    """Every record any logger handles while a test runs, kept as what it was written as: the JSON
    line of the Powertools formatter that writes it, or the plain text of any other record. It wraps
    `logging.Logger.callHandlers` (which every logger passes each record it handles through) rather
    than adding a handler to the root logger, which the records of non-propagating loggers never reach."""

    def __init__(self, skip_under: str | None = None) -> None:
        """`skip_under`: the folder whose own log calls are not kept (the suite's spy: tests/)."""
        self.skip_under = skip_under
        self.lines: list[tuple[str, dict[str, Any]]] = []
        self.plain: list[tuple[str, str]] = []  # (logger name and level, text)
        self.unreadable: list[str] = []
        self._original: Callable[[logging.Logger, logging.LogRecord], None] | None = None

    def start(self) -> None:
        self._original = original = logging.Logger.callHandlers
        spy = self

        def call_handlers(self: logging.Logger, record: logging.LogRecord) -> None:
            original(self, record)
            try:
                spy.keep(self, record)
            except Exception as error:  # the code under test logs on; the test is told
                spy.unreadable.append(f"a record of {record.name} the audit could not read: {error!r}")

        logging.Logger.callHandlers = call_handlers  # type: ignore[method-assign]

    def stop(self) -> None:
        if self._original is not None:
            logging.Logger.callHandlers = self._original  # type: ignore[method-assign,assignment]
            self._original = None

    def keep(self, logger: logging.Logger, record: logging.LogRecord) -> None:
        if self.skip_under is not None and os.path.abspath(record.pathname).startswith(self.skip_under):
            return
        formatter = _powertools_formatter(logger)
        if formatter is not None:
            line = formatter.format(record)
            parsed = _structured(line)
            if parsed is not None:
                self.lines.append((line, parsed))
                return
        self.plain.append((f"{record.name} {record.levelname}", plain_text(record)))


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
    """Long enough, and with letters enough, that finding it in a line is not a coincidence; and
    not one of our code's own string literals. Hypothesis draws those as inputs (its strategies mix
    the string constants of the project's modules into what they generate: "status", "Retry-After",
    "Rejected request"), and our code writes them itself, so finding one in a line proves nothing."""
    return len(said.strip()) >= MIN_TEXT and sum(c.isalpha() for c in said) >= MIN_LETTERS and said not in CODE_LITERALS


def record_problems_in(text: str, said: list[str], known: set[str] = KNOWN_MESSAGES) -> list[str]:
    """What is wrong with a record no Powertools formatter writes (a library's, a standard-library
    logger's): a phone number, or a user's text (unless it only appears inside one of our own literal
    log messages)."""
    found = []
    if PHONE.search(text):
        found.append("a phone number")
    outside_literals = text
    for literal in known:
        outside_literals = outside_literals.replace(literal, "")
    if any(said_text in outside_literals for said_text in said):
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
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    spy = RecordSpy(skip_under=TESTS)
    item.stash[RECORDS] = spy
    spy.start()
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    try:
        yield
    finally:
        if RECORDS in item.stash:
            item.stash[RECORDS].stop()


def findings_in(report: pytest.TestReport, spy: RecordSpy | None, said: list[str]) -> list[str]:
    """Every problem of the test's log records: those the spy kept and the structured lines it wrote."""
    lines = [*structured_lines(report), *(spy.lines if spy is not None else [])]
    findings: list[str] = []
    for line, record in lines:
        if "_aws" in record and "message" not in record:
            findings.extend(f"a metrics line: {problem}" for problem in metric_problems_in(line, record, said))
            continue
        for problem in problems_in(line, record, said):
            findings.append(f"{record.get('level')} {record.get('message')!r} ({sorted(record)}): {problem}")
    if spy is not None:
        for source, text in spy.plain:
            findings.extend(f"a record of {source}: {problem}" for problem in record_problems_in(text, said))
        findings.extend(spy.unreadable)
    return sorted(set(findings))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when != "teardown":  # the teardown report carries the output of every phase
        return report
    findings = findings_in(report, item.stash.get(RECORDS, None), item.stash.get(SAID, []))
    if findings and report.passed:
        report.outcome = "failed"
        report.longrepr = "The test's logs contain personal data:\n" + "\n".join(findings)
    return report
