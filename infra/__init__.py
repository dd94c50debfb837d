"""Local stack and developer tools: nothing here is deployed.

A Ctrl-C while a tool is still importing its modules (seconds, before its `main` and its own
handling run) ends it with one line instead of a traceback of whatever import it interrupted.
Until then, every Ctrl-C is also remembered: one that lands where Python cannot raise it (it
prints "Exception ignored" and goes on, as when it interrupts some imports' cleanup) would
otherwise leave the tool running to its prompt; `run_tool` stops the tool on it instead."""

import signal
import sys
import threading
from types import FrameType, TracebackType

_interrupted_at_start: list[int] = []


def _stopped_quietly(kind: type[BaseException], value: BaseException, traceback: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        print("\nStopped.", file=sys.stderr)  # Python then ends the process as SIGINT does (code 130)
        return
    sys.__excepthook__(kind, value, traceback)


def _remembered_interrupt(number: int, frame: FrameType | None) -> None:
    _interrupted_at_start.append(number)
    raise KeyboardInterrupt


def interrupted_at_start() -> bool:
    """Whether a Ctrl-C came before the tool's `main` (even one Python could not raise); from here on
    Ctrl-C is Python's own again, which asyncio's runner replaces to cancel a running turn."""
    if signal.getsignal(signal.SIGINT) is _remembered_interrupt:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return bool(_interrupted_at_start)


if sys.excepthook is sys.__excepthook__:  # a debugger's or a test runner's own hook stays
    sys.excepthook = _stopped_quietly
if (
    threading.current_thread() is threading.main_thread()
    and signal.getsignal(signal.SIGINT) is signal.default_int_handler
):
    signal.signal(signal.SIGINT, _remembered_interrupt)
