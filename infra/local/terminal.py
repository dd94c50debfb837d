"""Owns what a long local command (infra.fidelity, infra.benchmark) shows the person: its results
and a progress line on the terminal, its log lines in a file.

The functions it runs in process log with Powertools, whose loggers write to whatever `sys.stdout`
is when they are created; so while a command runs, `sys.stdout` is its log file, a logger made
before (a module imported at start) is pointed at the file too, and the command prints its
results to the console it was given. `-v` keeps the log lines on the terminal.
The progress line is the standard library's (no dependency for one line).
"""

import argparse
import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TextIO, cast

BAR_WIDTH = 24


@contextmanager
def logs_to(log_file: Path | None, mode: str = "w") -> Iterator[TextIO]:
    """Yields the console to print results to; inside, log lines go to `log_file` (None: the console)."""
    console = sys.stdout
    if log_file is None:
        yield console
        return
    made = [folder for folder in (log_file.parent, *log_file.parent.parents) if not folder.exists()]
    new_file = not log_file.exists()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log_file.open(mode, encoding="utf-8") as handle:
            sys.stdout = handle
            made_before = _handlers_writing_to(console)
            for handler in made_before:
                handler.setStream(cast(TextIO, handle))  # opened in a text mode
            try:
                yield console
            finally:
                sys.stdout = console
                for handler in made_before:
                    handler.setStream(console)
    finally:
        if new_file and log_file.exists() and log_file.stat().st_size == 0:
            # Nothing logged (a refusal at start): leave nothing behind, as if the command never ran.
            log_file.unlink()
            for folder in made:
                if folder.exists() and not any(folder.iterdir()):
                    folder.rmdir()


def _handlers_writing_to(stream: TextIO) -> list["logging.StreamHandler[TextIO]"]:
    """The log handlers, of any logger made so far, that write to `stream`."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return [
        handler
        for logger in loggers
        if isinstance(logger, logging.Logger)
        for handler in logger.handlers
        if isinstance(handler, logging.StreamHandler) and handler.stream is stream
    ]


_events_to: list[TextIO] = []  # the terminal of the tool running in this process, if it shows events


def say(line: str) -> None:
    """One human line for an event the person caused (an API request answered, a text handled), on
    the terminal of a tool whose log lines go to a file; nothing where no tool asked for them (tests,
    a library caller)."""
    for stream in _events_to:
        print(line, file=stream, flush=True)


def log_file_of(data_file: Path, tool: str) -> Path:
    """Where a local tool keeps its JSON log lines: `logs/<tool>.log` beside its data file, so the
    default is `.local/logs/` and a stack on another data file keeps its own."""
    return data_file.parent / "logs" / f"{tool}.log"


def logs_line(log_file: Path, verbose: bool) -> str:
    return "Logs: on this terminal (-v)." if verbose else f"Logs: {log_file} (JSON lines; -v shows them here)."


def add_verbose_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show the local servers' JSON log lines here, not in their file"
    )


@contextmanager
def quiet_terminal(log_file: Path, verbose: bool) -> Iterator[TextIO]:
    """The local servers' JSON log lines in `log_file` (appended), and one line per event the person
    caused on the terminal; `verbose` (-v) keeps the JSON on the terminal instead. Yields the
    terminal, for what the command itself prints (with `logs_line` once, where the command says
    what it started: not before, so that a refusal at start stays one line)."""
    terminal = sys.stdout
    _events_to.append(terminal)
    try:
        with logs_to(None if verbose else log_file, mode="a"):
            yield terminal
    finally:
        _events_to.remove(terminal)


class Progress:
    """A progress line on stderr: redrawn in place every second on a terminal; elsewhere (a CI log,
    a pipe) one line at each tenth, so a log is not flooded. `total` may be an estimate: the bar
    stops short of full until `close()`."""

    def __init__(self, label: str, total: int, unit: str = "", stream: TextIO | None = None) -> None:
        self.label, self.total, self.unit = label, max(total, 1), unit
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.note = ""
        self._started = time.monotonic()
        self._tty = self.stream.isatty()
        self._last_tenth = -1
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True, name="progress")
        if self._tty:
            self._ticker.start()

    def __enter__(self) -> "Progress":
        self._draw()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(finished=exc_type is None)

    def advance(self, steps: int = 1, note: str | None = None) -> None:
        with self._lock:
            self.done += steps
            if note is not None:
                self.note = note
        self._draw()

    def close(self, finished: bool = True) -> None:
        self._stop.set()
        if finished:  # the estimate gives way to what was done
            self.total = max(self.done, 1)
        self._draw(final=True)

    def line(self) -> str:
        share = min(self.done / self.total, 1.0 if self._stop.is_set() else 0.99)
        filled = round(share * BAR_WIDTH)
        elapsed = int(time.monotonic() - self._started)
        counts = f"{self.done}/{self.total}{' ' + self.unit if self.unit else ''}"
        note = f"  {self.note}" if self.note else ""
        return (
            f"{self.label} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {share:4.0%} {counts}"
            f"  {elapsed // 60}:{elapsed % 60:02d}{note}"
        )

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self._draw()

    def _draw(self, final: bool = False) -> None:
        with self._lock:
            if self._tty:
                self.stream.write("\r\033[K" + self.line() + ("\n" if final else ""))
            else:
                tenth = int(10 * min(self.done / self.total, 1.0))
                if tenth == self._last_tenth and not final:
                    return
                self._last_tenth = tenth
                self.stream.write(self.line() + "\n")
            self.stream.flush()


def audit_lines_to(stream: TextIO) -> None:
    """Show the audit trail's lines (docs/audit-trail.md) of an operator's tool on `stream`, and no
    other log line: a tool that reads a user's memory leaves its access where the operator (or
    whoever captures the tool's output) can keep it. The library logs through child loggers of the
    service's logger, which only a Lambda handler creates; a tool has none, so it makes one here."""
    from aws_lambda_powertools import Logger

    Logger(stream=stream).registered_handler.addFilter(lambda record: bool(getattr(record, "audit", False)))


@contextmanager
def functions_log_to(log_file: Path) -> Iterator[None]:
    """The log lines of the functions this process runs (the service's Powertools logger, which
    the first `Logger()` configures and later ones reuse) appended to `log_file`, however the
    process prints the rest. A tool that never redirects its terminal (infra.chat, which reads
    the keyboard with `input()`) calls it before a function starts."""
    from aws_lambda_powertools import Logger

    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("a", encoding="utf-8") as handle:
        logger = Logger(stream=handle)
        try:
            yield
        finally:
            logger.registered_handler.flush()
            logger.registered_handler.setStream(sys.stderr)  # type: ignore[attr-defined]  # never a closed file
