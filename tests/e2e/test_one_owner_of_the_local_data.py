"""One owner for the local data. With `infra.local_stack` running, the other tools
use its table instead of starting their own on the same file (which the running stack would then
overwrite); a second stack on the file refuses and says what to do; a killed stack leaves neither
its server nor its lock behind."""

import json
import os
import signal
import socket
import time
from pathlib import Path

import httpx

from infra.local.data import DataLock, StackState, state_path, write_state
from tests.support.processes import run, running_stack, stack_state, wait_gone

FIRST_QUESTION = "How would you describe your current fitness level"


def _body(completed_stdout: str) -> dict[str, object]:
    response = json.loads(completed_stdout[completed_stdout.index("{\n") :])
    body: dict[str, object] = json.loads(response["body"])
    return body


def test_invoke_and_chat_use_the_running_stack_so_nothing_is_lost(tmp_path: Path) -> None:
    data_file = tmp_path / "shared.jsonl"
    with running_stack(data_file) as stack:
        said = run("infra.invoke", "ApiFunction", "-e", "events/api_chat.json", "--data-file", str(data_file))
        assert said.returncode == 0, said.stderr[-2000:]
        assert f"Using the local stack (pid {stack.process.pid}) that infra.local_stack started" in said.stderr
        history = run("infra.invoke", "ApiFunction", "-e", "events/api_history.json", "--data-file", str(data_file))
        assert history.returncode == 0, history.stderr[-2000:]
        messages = _body(history.stdout)["messages"]
        assert isinstance(messages, list)
        assert [m["role"] for m in messages] == ["assistant", "user"]
        # The chat's turns land in the running stack too: its HTTP API sees them at once.
        chat = run("infra.chat", "--data-file", str(data_file), "--user", "cat", "--script", "-", stdin="Hi\n")
        assert chat.returncode == 0, chat.stderr[-2000:]
        seen = httpx.get(f"{stack.api_url}/history", headers={"Authorization": "Bearer cat"}, timeout=30).json()
        assert len(seen["messages"]) == 2
        code, _ = stack.stop()
    assert code == 0
    saved = [json.loads(line) for line in data_file.read_text(encoding="utf-8").splitlines()]
    # Both users' turns, saved by the one owner (the event's message is an answer: its tool call
    # and result are saved with it).
    assert [item["role"]["S"] for item in saved if "role" in item].count("user") == 2
    assert not state_path(data_file).exists()


def test_a_second_stack_on_the_same_data_file_refuses_and_says_what_to_do(tmp_path: Path) -> None:
    data_file = tmp_path / "shared.jsonl"
    with running_stack(data_file) as stack:
        started = time.monotonic()
        second = run("infra.local_stack", "--data-file", str(data_file), "--dynamodb-port", "0", "--api-port", "0",
                     "--bedrock-port", "0", "--twilio-port", "0", "--s3vectors-port", "0")  # fmt: skip
        elapsed = time.monotonic() - started
        assert second.returncode == 2
        assert f"is in use by infra.local_stack (pid {stack.process.pid})" in second.stderr
        assert "--data-file" in second.stderr
        assert "Traceback" not in second.stderr
        assert elapsed < 10, elapsed


def test_a_killed_stack_leaves_no_server_and_no_lock_behind(tmp_path: Path) -> None:
    data_file = tmp_path / "shared.jsonl"
    with running_stack(data_file) as stack:
        children = stack_state(data_file)["children"]
        stack.process.send_signal(signal.SIGKILL)
        stack.process.wait()
    assert children
    assert wait_gone(children, timeout_s=10) == []  # the DynamoDB server ends with the stack that started it
    # The kill left its state file; the next tool sees no live owner and starts its own stack.
    chat = run("infra.chat", "--data-file", str(data_file), "--script", "-", stdin="Hi\n")
    assert chat.returncode == 0, chat.stderr[-2000:]
    assert FIRST_QUESTION in chat.stdout


def test_a_stack_that_does_not_answer_is_reported_within_seconds(tmp_path: Path) -> None:
    """The lock is held and the state names a server that accepts connections and never answers."""
    data_file = tmp_path / "shared.jsonl"
    lock = DataLock(data_file)
    assert lock.try_acquire()
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        write_state(data_file, StackState(os.getpid(), "a test", {"AWS_ENDPOINT_URL_DYNAMODB": url}, url))
        started = time.monotonic()
        completed = run("infra.invoke", "ApiFunction", "-e", "events/api_chat.json", "--data-file", str(data_file))
        elapsed = time.monotonic() - started
    lock.release()
    assert completed.returncode == 2
    assert f"did not answer within 3 s; stop it (kill {os.getpid()})" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert elapsed < 15, elapsed


def test_interrupted_stack_process_saves(tmp_path: Path) -> None:
    """SIGTERM (as a service manager stops it) and Ctrl-C both save and end the server."""
    for number in (signal.SIGTERM, signal.SIGINT):
        data_file = tmp_path / f"stop-{number}.jsonl"
        with running_stack(data_file) as stack:
            children = stack_state(data_file)["children"]
            httpx.post(
                f"{stack.api_url}/chat", json={"message": "Hi"}, headers={"Authorization": "Bearer me"}, timeout=60
            )
            code, stderr = stack.stop(number)
        assert code == 0
        assert stderr.strip().endswith("Stopped; the table is saved.")
        assert "Traceback" not in stderr
        assert wait_gone(children) == []
        assert len(data_file.read_text(encoding="utf-8").splitlines()) >= 2
