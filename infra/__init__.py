"""Local stack and developer tools: nothing here is deployed.

A Ctrl-C while a tool is still importing its modules (seconds, before its `main` and its own
handling run) ends it with one line instead of a traceback of whatever import it interrupted."""

import sys
from types import TracebackType


def _stopped_quietly(kind: type[BaseException], value: BaseException, traceback: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        print("\nStopped.", file=sys.stderr)  # Python then ends the process as SIGINT does (code 130)
        return
    sys.__excepthook__(kind, value, traceback)


if sys.excepthook is sys.__excepthook__:  # a debugger's or a test runner's own hook stays
    sys.excepthook = _stopped_quietly
