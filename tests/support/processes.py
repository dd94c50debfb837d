"""The local tools as a person runs them: new processes, read as they print, stopped with signals."""

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.local.data import process_alive, state_path

REPO = Path(__file__).resolve().parents[2]


def run(*arguments: str, stdin: str = "", timeout_s: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter and modules
        [sys.executable, "-m", *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout_s,
        check=False,
        env={**os.environ, **env},
    )


def read_until(process: "subprocess.Popen[bytes]", marker: bytes, timeout_s: float = 120) -> bytes:
    """What `process` printed on stdout until `marker` appeared (AssertionError if it never did)."""
    assert process.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout_s
    # A selector, not select(): a worker that has run many tests holds descriptors past 1024.
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while marker not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"{marker!r} never came; printed: {seen[-2000:]!r}"
            if selector.select(left):
                chunk = os.read(process.stdout.fileno(), 65536)
                assert chunk, f"the process ended before {marker!r}; printed: {seen[-2000:]!r}"
                seen += chunk
    return seen


def stack_state(data_file: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(state_path(data_file).read_text(encoding="utf-8"))
    return state


def wait_gone(pids: list[int], timeout_s: float = 15) -> list[int]:
    """The processes of `pids` still alive after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(process_alive(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if process_alive(pid)]


@dataclass
class RunningStack:
    process: "subprocess.Popen[bytes]"
    data_file: Path
    ports: dict[str, int]

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['api']}"

    banner: str = ""  # what it printed when it started
    stdout: str = ""  # what it printed after its banner, once stopped

    def stop(self, signal_number: int = signal.SIGINT) -> tuple[int, str]:
        self.process.send_signal(signal_number)
        stdout, stderr = self.process.communicate(timeout=60)
        self.stdout = stdout.decode()
        return self.process.returncode, stderr.decode()


# Every server of the stack on a port of its own choosing (0): a port left at its default (8003 for
# the recall index) is taken whenever another test, or another suite on the machine, runs a stack.
STACK_PORT_OPTIONS = ("--dynamodb-port", "--bedrock-port", "--api-port", "--twilio-port", "--s3vectors-port")


# The servers as the banner's "Ports:" line names them.
_BANNER_NAMES = {
    "DynamoDB": "dynamodb",
    "Bedrock": "bedrock",
    "API": "api",
    "Twilio": "twilio",
    "S3 Vectors": "s3vectors",
}


def ports_in_banner(banner: str) -> dict[str, int]:
    """The ports the stack's servers got (the system chose those given as 0), from its banner."""
    line = re.search(r"^Ports: (.*)\.$", banner, re.M)
    assert line is not None, banner
    named = dict(re.findall(r"([A-Za-z0-9 ]+?) (\d+)(?:, |$)", line.group(1)))
    return {_BANNER_NAMES[name]: int(port) for name, port in named.items()}


@contextmanager
def running_stack(data_file: Path, timeout_s: float = 120) -> Iterator[RunningStack]:
    """`python -m infra.local_stack` on `data_file` and free ports, until the block ends."""
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "infra.local_stack", "--data-file", str(data_file)]
        + [argument for option in STACK_PORT_OPTIONS for argument in (option, "0")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        try:
            banner = read_until(process, b"Ctrl-C stops it", timeout_s).decode()
        except AssertionError as error:
            if process.poll() is None:
                raise
            assert process.stderr is not None
            raise AssertionError(f"{error}; stderr: {process.stderr.read().decode()[-2000:]}") from None
        yield RunningStack(process, data_file, ports_in_banner(banner), banner)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
