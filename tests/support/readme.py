"""The documented commands (README.md and docs/local-development.md, where the README's reference
material lives), exactly as written, for the tests that run them.

Every line of a ```sh block is a command a newcomer types. A block whose first line is
`# needs AWS` is not run by the tests; every other line is, by a test that names it in
`tests/e2e/test_readme_commands.py`'s table. The tests run a line through bash in a sandbox folder
(the README's relative paths, `.local/` and `events/`, resolve there, so a developer's own
`.local/` is never touched), with `uv run python` standing for the interpreter the suite runs
with (the same environment `uv run` would use).
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCUMENTED = (README, REPO / "docs" / "local-development.md")
NEEDS_AWS = "# needs AWS"


def sh_blocks(text: str | None = None) -> list[list[str]]:
    if text is None:
        text = "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTED)
    return [block.strip("\n").splitlines() for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)]


def commands_run_by_tests() -> list[str]:
    """Every command line of the README that is not marked as needing AWS."""
    lines: list[str] = []
    for block in sh_blocks():
        if block and block[0].strip() == NEEDS_AWS:
            continue
        lines += [line for line in block if line.strip() and not line.lstrip().startswith("#")]
    return list(dict.fromkeys(lines))  # a command the README and docs/ both show is one command


def readme_line(starting: str) -> str:
    """The README command `starting`, or the one that starts with it (a test breaks when the README changes it)."""
    commands = commands_run_by_tests()
    if starting in commands:
        return starting
    found = [line for line in commands if line.startswith(starting)]
    if len(found) != 1:
        raise LookupError(f"the README has {len(found)} commands starting with {starting!r}")
    return found[0]


def sandbox(folder: Path) -> Path:
    """A folder to run README lines in: the repository's events/ reachable as the README names it."""
    events = folder / "events"
    if not events.exists():
        events.symlink_to(REPO / "events")
    return folder


def shell(line: str) -> str:
    return line.replace("uv run python", shlex.quote(sys.executable))


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def run_line(
    line: str, cwd: Path, stdin: str = "", timeout_s: float = 180, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - bash running a line of our own README
        ["bash", "-c", shell(line)],  # noqa: S607 - the system's bash
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout_s,
        check=False,
        env=environment(**extra_env),
    )


def start_line(line: str, cwd: Path) -> "subprocess.Popen[bytes]":
    return subprocess.Popen(  # noqa: S603 - bash running a line of our own README
        ["bash", "-c", "exec " + shell(line)],  # noqa: S607 - the system's bash
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=environment(),
    )
