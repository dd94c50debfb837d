"""Owns how the local tools end: a problem the person can fix is one line on stderr (no traceback),
and Ctrl-C is a clean one-line exit once the data is saved and every child process has ended."""

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

USAGE_ERROR = 2  # as argparse exits for a bad option
INTERRUPTED = 130  # a shell's code for a process ended by SIGINT


class LocalToolError(RuntimeError):
    """Something the person can fix (a taken port, a data file in use): its text says what to do."""


@contextmanager
def uninterrupted() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM while saving and stopping: a second Ctrl-C (or the one a wrapper such as
    `uv run` forwards) must not cut a save short or leave a child server behind. Main thread only
    (signal handlers can be set nowhere else); elsewhere it changes nothing."""
    try:
        saved = {number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


def run_tool(main: Callable[[], int], stopped: str = "Stopped.") -> int:
    """Run a tool's `main`: a LocalToolError becomes `error: ...` and exit code 2, a Ctrl-C the line
    `stopped` and exit code 130. Cleanup (saving, stopping servers) runs in `main`'s own `with`
    blocks before either line is printed. A Ctrl-C that came before (while the tool imported its
    modules) stops it here, even one Python could not raise (infra/__init__.py)."""
    from infra import interrupted_at_start

    try:
        if interrupted_at_start():
            raise KeyboardInterrupt
        return main()
    except LocalToolError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        # The terminal echoed ^C without a newline; the line goes on a line of its own.
        print(f"\n{stopped}", file=sys.stderr)
        return INTERRUPTED
