"""Eight local stacks started at the same moment, each in its own process with every port left to
the stack (0), as parallel test workers and a person's second terminal do: each must come up and
answer a chat turn. A port chosen first and bound later loses this race now and then (two stacks
handed one number); a port each server binds itself never does. Three rounds."""

import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.support.processes import REPO, STACK_PORT_OPTIONS, ports_in_banner, read_until

pytestmark = pytest.mark.slow

STACKS = 8
ROUNDS = 3


def _one_stack(data_file: Path, start: threading.Barrier) -> str:
    """'ok', or what went wrong: the stack's own error line, or the turn's answer."""
    start.wait()
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "infra.local_stack", "--data-file", str(data_file),
         *(argument for option in STACK_PORT_OPTIONS for argument in (option, "0"))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    try:
        try:
            banner = read_until(process, b"Ctrl-C stops it and saves the table.", timeout_s=240).decode()
        except AssertionError as error:
            process.kill()
            _, stderr = process.communicate(timeout=60)
            return f"did not come up: {error}; stderr: {stderr.decode()[-500:]}"
        api = f"http://127.0.0.1:{ports_in_banner(banner)['api']}"
        said = httpx.post(f"{api}/chat", json={"message": "Hi"}, headers={"Authorization": "Bearer me"}, timeout=120)
        if said.status_code != 200 or "Hi, I'm your coach!" not in said.json()["reply"]:
            return f"the turn answered {said.status_code}: {said.text[:300]}"
        return "ok"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=120)


@pytest.mark.parametrize("round_number", range(1, ROUNDS + 1))
def test_eight_stacks_started_at_once_all_come_up_and_answer(round_number: int, tmp_path: Path) -> None:
    start = threading.Barrier(STACKS)
    results: dict[int, str] = {}

    def run(index: int) -> None:
        try:
            results[index] = _one_stack(tmp_path / f"stack-{index}.jsonl", start)
        except Exception as error:
            results[index] = f"{type(error).__name__}: {error}"

    threads = [threading.Thread(target=run, args=(index,)) for index in range(STACKS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = {index: result for index, result in results.items() if result != "ok"}
    collisions = [result for result in failed.values() if "is taken" in result or "address already in use" in result]
    assert (len(collisions), failed) == (0, {}), f"round {round_number}"
    assert len(results) == STACKS
