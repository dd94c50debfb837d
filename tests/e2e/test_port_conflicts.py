"""A taken port is named, with the option that changes it, at once and without a
traceback, whatever holds it: an HTTP server that answers something else, or a listener that never
answers (which, unnamed, would cost 100 s of silence and leave a `.partial` file behind)."""

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from infra.local.data import DataLock
from infra.local.errors import LocalToolError
from infra.local.stack import LocalStack
from tests.support.ports import unanswered_port
from tests.support.processes import run, running_stack

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
    ports = dict.fromkeys(OPTIONS, "0")  # the others: any free port, which each server binds itself
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
    with unanswered_port() as held:  # a number no other process takes meanwhile
        port = str(held)
        completed = run("infra.local_stack", "--data-file", str(tmp_path / "d.jsonl"), "--api-port", port,
                    "--twilio-port", port, "--dynamodb-port", "0", "--bedrock-port", "0", "--s3vectors-port", "0",
                        timeout_s=60)  # fmt: skip
    assert completed.returncode == 2
    assert f"were both given port {port}" in completed.stderr


@pytest.mark.parametrize("server", ["dynamodb", "api", "s3vectors"])
def test_a_port_our_own_stack_holds_is_named_as_that_stack_with_its_pid(server: str, tmp_path: Path) -> None:
    """moto's server (a child of the stack), the API (the stack's own process) and a stand-in alike."""
    with running_stack(tmp_path / "first.jsonl") as first:
        ports = dict.fromkeys(OPTIONS, "0")
        ports[f"--{server}-port"] = str(first.ports[server])
        second = run("infra.local_stack", "--data-file", str(tmp_path / "second.jsonl"),
                     *(argument for pair in ports.items() for argument in pair), timeout_s=60)  # fmt: skip
    assert second.returncode == 2, second.stderr
    [line] = second.stderr.strip().splitlines()
    assert line.startswith(f"error: port {first.ports[server]} on 127.0.0.1"), line
    assert f"is taken by this project's infra.local_stack (pid {first.process.pid})" in line
    assert f"--{server}-port PORT" in line
    assert "another program" not in line


@pytest.mark.parametrize("server", ["dynamodb", "bedrock", "twilio", "s3vectors", "api"])
def test_a_server_binds_its_own_port_and_names_it_when_taken(server: str, tmp_path: Path) -> None:
    """No check comes before the bind: the bind is the check, so nothing can take the port between
    them. A taken one is one line (not an OSError's traceback), and the stack lets go of what it
    had bound, and of its data file."""
    with silent_listener_on_a_port() as port:
        given = {"dynamodb": 0, "bedrock": 0, "twilio": 0, "s3vectors": 0, "api": 0, server: port}
        with pytest.raises(LocalToolError, match=rf"port {port} on 127.0.0.1 .* is taken by .*--{server}-port PORT"):
            LocalStack(
                tmp_path / "d.jsonl",
                dynamodb_port=given["dynamodb"],
                bedrock_port=given["bedrock"],
                twilio_port=given["twilio"],
                s3vectors_port=given["s3vectors"],
                api_port=given["api"],
            )
    lock = DataLock(tmp_path / "d.jsonl")
    assert lock.try_acquire()  # the failed stack let go of its data file
    lock.release()


def test_a_stack_given_port_0_reports_the_ports_its_servers_bound(tmp_path: Path) -> None:
    stack = LocalStack(tmp_path / "d.jsonl", dynamodb_port=0, api_port=0)
    try:
        got = {name: fixed.port for name, fixed in stack.ports.items()}
        assert all(got.values()), got  # each a real port, read back from its bound socket
        assert len(set(got.values())) == len(got)
        for port in got.values():  # each held: another bind on it fails now, not later
            with pytest.raises(OSError, match="in use"), socket.create_server(("127.0.0.1", port)):
                pass
        assert stack.api_port == got["api"]
        assert stack.dynamodb.url.endswith(f":{got['dynamodb']}")
    finally:
        stack.__exit__(None, None, None)
