"""ruff and mypy are part of the test command, so a lint or type error fails the suite."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("command", [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy"]])
def test_clean(command: list[str]) -> None:
    completed = subprocess.run(  # noqa: S603 - tools from this environment
        [str(BIN / command[0]), *command[1:]], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
