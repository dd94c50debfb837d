"""A taken port is named, with the option that changes it, at once and without a
traceback, whatever holds it: an HTTP server that answers something else, or a listener that never
answers (which used to cost 100 s of silence and leave a `.partial` file behind)."""

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from infra.local.ports import free_port
from tests.support.processes import run

OPTIONS = ["--dynamodb-port", "--bedrock-port", "--api-port", "--twilio-port", "--s3vectors-port"]


@contextmanager
def http_server_on_a_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_listener_on_a_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def _start_stack_with(option: str, port: int, data_file: Path) -> tuple[int, str, float]:
    ports = {other: str(free_port()) for other in OPTIONS}
    ports[option] = str(port)
    started = time.monotonic()
    completed = run(
        "infra.local_stack",
        "--data-file",
        str(data_file),
        *(argument for pair in ports.items() for argument in pair),
        timeout_s=60,
    )
    return completed.returncode, completed.stderr, time.monotonic() - started


@pytest.mark.parametrize("option", OPTIONS)
def test_a_port_taken_by_another_http_server_is_named_with_its_option(option: str, tmp_path: Path) -> None:
    with http_server_on_a_port() as port:
        code, stderr, elapsed = _start_stack_with(option, port, tmp_path / "d.jsonl")
    assert code == 2
    assert f"port {port} on 127.0.0.1" in stderr
    assert f"choose another with {option} PORT" in stderr
    assert "Traceback" not in stderr
    # Python's start-up and the check together: well under the 34 s and 100 s of before. (About
    # 0.6 s on the machine this was written on; the bound leaves room for a busy CI machine.)
    assert elapsed < 5, elapsed
    assert list(tmp_path.iterdir()) == []  # nothing written: no data file, no partial, no state


def test_a_listener_that_never_answers_is_named_too(tmp_path: Path) -> None:
    with silent_listener_on_a_port() as port:
        code, stderr, elapsed = _start_stack_with("--dynamodb-port", port, tmp_path / "d.jsonl")
    assert code == 2
    assert f"port {port} on 127.0.0.1 (for the local DynamoDB server) is taken" in stderr
    assert "Traceback" not in stderr
    assert elapsed < 5, elapsed


def test_two_servers_given_one_port_are_refused(tmp_path: Path) -> None:
    port = str(free_port())
    completed = run("infra.local_stack", "--data-file", str(tmp_path / "d.jsonl"), "--api-port", port,
                    "--twilio-port", port, "--dynamodb-port", "0", "--bedrock-port", "0", "--s3vectors-port", "0",
                    timeout_s=60)  # fmt: skip
    assert completed.returncode == 2
    assert f"were both given port {port}" in completed.stderr
