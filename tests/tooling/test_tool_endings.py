"""How a local tool ends on a Ctrl-C that comes while it starts (infra/__init__.py,
infra/local/errors.py): one line and the shell's code for an interrupt, even when Python could not
raise it where it landed."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A tool whose import is interrupted inside a finaliser, where Python prints "Exception ignored"
# and goes on (as a Ctrl-C that lands in some imports' cleanup does); its `main` would return 0.
SWALLOWED_AT_IMPORT = """
import os
import signal

import infra
from infra.local.errors import run_tool


class _Cleanup:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100_000):  # the handler runs here, inside the finaliser
            pass


_Cleanup()
print("imported", flush=True)
raise SystemExit(run_tool(lambda: 0))
"""


def _run(script: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_ctrl_c_python_swallowed_while_the_tool_imported_still_stops_it() -> None:
    ended = _run(SWALLOWED_AT_IMPORT)
    assert "Exception ignored" in ended.stderr, ended.stderr  # Python could not raise it there
    assert ended.stdout == "imported\n"
    assert ended.stderr.rstrip().splitlines()[-1] == "Stopped."
    assert ended.returncode == 130, ended.stderr


# A tool's `main` answers 3 when Ctrl-C is Python's own handler again, as asyncio's runner needs it.
WHOSE_CTRL_C = """
import signal

import infra
from infra.local.errors import run_tool

raise SystemExit(run_tool(lambda: 3 if signal.getsignal(signal.SIGINT) is signal.default_int_handler else 4))
"""


def test_without_a_ctrl_c_the_tool_runs_and_ctrl_c_is_python_s_own_again() -> None:
    ended = _run(WHOSE_CTRL_C)
    assert ended.returncode == 3, ended.stderr
