"""A client that hangs up before a stand-in has answered (a cancelled stream, a closed tab, a test
that stops early) is the client's business, as it is to AWS: the stand-in prints no traceback."""

import json
import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.twilio_emulator import LOCAL_ACCOUNT_SID, TwilioEmulator


def _hang_up(url: str, request: bytes, after: Callable[[socket.socket], object]) -> None:
    """Send `request`, let `after` read what it wants, then reset the connection (no orderly close)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as client:
        client.sendall(request)
        after(client)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _post(path: str, body: bytes, content_type: str) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: local\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _handled(threads_before: set[threading.Thread]) -> None:
    """Wait until the stand-in's request thread has started and finished (its last write failed)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not set(threading.enumerate()) - threads_before:
        time.sleep(0.01)
    while time.monotonic() < deadline and set(threading.enumerate()) - threads_before:
        time.sleep(0.05)


def test_a_stream_the_client_left_mid_reply_prints_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "Hi"}]}]}).encode()
    request = _post("/model/us.anthropic.claude-haiku-4-5-20251001-v1:0/converse-stream", body, "application/json")
    with BedrockEmulator(chunk_delay_s=0.05) as emulator:
        before = set(threading.enumerate())
        _hang_up(emulator.url, request, lambda client: client.recv(200))  # the headers and a first chunk
        _handled(before)
    printed = capsys.readouterr().err
    assert "Traceback" not in printed, printed
    assert "BrokenPipeError" not in printed, printed
    assert "ConnectionResetError" not in printed, printed


def test_a_send_the_client_left_before_its_answer_prints_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    body = b"To=%2B15551230001&From=%2B15550000000&Body=hi"
    request = _post(
        f"/2010-04-01/Accounts/{LOCAL_ACCOUNT_SID}/Messages.json", body, "application/x-www-form-urlencoded"
    )
    with TwilioEmulator() as twilio:
        twilio.delay_s = 0.3  # the answer comes after the client is gone
        before = set(threading.enumerate())
        _hang_up(twilio.url, request, lambda client: None)
        _handled(before)
    printed = capsys.readouterr().err
    assert "Traceback" not in printed, printed


def test_a_stopped_stand_in_closes_the_connections_its_clients_keep_alive() -> None:
    """A client's pool keeps its connection after an answer; when the stand-in stops, its end of
    that connection closes too, so no stopped stand-in leaves both ends open in the process."""
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "Hi"}]}]}).encode()
    request = _post("/model/us.anthropic.claude-haiku-4-5-20251001-v1:0/converse", body, "application/json")
    with BedrockEmulator() as emulator:
        host, port = emulator.url.removeprefix("http://").split(":")
        client = socket.create_connection((host, int(port)), timeout=10)
        client.sendall(request)
        answer = client.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    with client:
        client.settimeout(5)  # a connection left open would hold this read until the timeout
        while client.recv(65536):  # the rest of the answer, if any, then the stand-in's close
            pass
