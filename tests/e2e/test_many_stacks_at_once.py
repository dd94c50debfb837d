"""Eight local stacks started at the same moment, each in its own process with every port left to
the stack (0), as parallel test workers and a person's second terminal do: each must come up and
answer a chat turn. A port chosen first and bound later loses this race now and then (two stacks
handed one number); a port each server binds itself never does. Three rounds."""

import threading
from pathlib import Path

import httpx
import pytest

from tests.support.processes import running_stack

pytestmark = pytest.mark.slow

STACKS = 8
ROUNDS = 3


def _one_stack(data_file: Path, start: threading.Barrier) -> str:
    """'ok', or what went wrong: the stack's own error line, or the turn's answer."""
    start.wait()
    with running_stack(data_file, timeout_s=240) as stack:
        said = httpx.post(
            f"{stack.api_url}/chat", json={"message": "Hi"}, headers={"Authorization": "Bearer me"}, timeout=120
        )
        if said.status_code != 200 or "Hi, I'm your coach!" not in said.json()["reply"]:
            return f"the turn answered {said.status_code}: {said.text[:300]}"
        return "ok"


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
    assert len(results) == STACKS
    failed = {index: result for index, result in results.items() if result != "ok"}
    collisions = sum("is taken" in result or "address already in use" in result for result in failed.values())
    assert not failed, f"round {round_number}: {collisions} port collisions; {failed}"
