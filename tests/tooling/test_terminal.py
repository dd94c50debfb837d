"""A long command's log lines go to a file, its progress to a line on stderr."""

import io
import sys
from pathlib import Path

import pytest
from aws_lambda_powertools import Logger

from infra.local.terminal import Progress, logs_to


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_lines_of_loggers_made_inside_go_to_the_file(tmp_path: Path) -> None:
    log_file = tmp_path / "run.log"
    with logs_to(log_file) as console:
        Logger(service=f"console-test-{tmp_path.name}").info("Made inside")
        assert console is not sys.stdout
    assert '"message":"Made inside"' in log_file.read_text(encoding="utf-8")


def test_a_logger_made_before_writes_to_the_file_inside_and_to_the_console_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module imported at a command's start made its logger on the terminal: inside, its lines
    go to the file too (the console's banner is the first thing a person sees)."""
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stdout", terminal)
    early = Logger(service=f"made-before-{tmp_path.name}")
    log_file = tmp_path / "run.log"
    with logs_to(log_file):
        early.info("Inside")
    early.info("After")
    assert '"message":"Inside"' in log_file.read_text(encoding="utf-8")
    assert '"message":"Inside"' not in terminal.getvalue()
    assert '"message":"After"' in terminal.getvalue()


def test_verbose_keeps_them_on_the_console(tmp_path: Path) -> None:
    with logs_to(None) as console:
        assert console is sys.stdout
    assert list(tmp_path.iterdir()) == []


def test_on_a_terminal_the_line_is_redrawn_in_place() -> None:
    terminal = _Terminal()
    with Progress("task", 4, "steps", stream=terminal) as progress:
        progress.advance(note="first")
        progress.advance()
    drawn = terminal.getvalue()
    assert drawn.count("\r\033[K") >= 3
    assert "task [############------------]  50% 2/4 steps" in drawn
    assert drawn.endswith("100% 2/2 steps  0:00  first\n")  # done: the estimate gives way to the count


def test_elsewhere_one_line_a_tenth() -> None:
    log = io.StringIO()
    with Progress("task", 100, stream=log) as progress:
        for _ in range(100):
            progress.advance()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert 10 <= len(lines) <= 12
    assert lines[-1].startswith("task [########################] 100% 100/100")


def test_an_estimate_short_of_the_work_never_shows_done_early() -> None:
    log = io.StringIO()
    progress = Progress("task", 2, stream=log)
    for _ in range(5):
        progress.advance()
    assert " 99% 5/2" in progress.line()
