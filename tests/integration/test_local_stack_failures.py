"""A server the stack started that accepts connections and never answers is
reported within seconds (botocore's retries used to take about 100 s), and the stack cleans up."""

import socket
import time

import pytest

from infra.local.dynamodb_process import FIRST_ANSWER_TIMEOUT_S, LocalDynamoDB
from infra.local.errors import LocalToolError
from infra.local.stack import LocalStack


def test_a_fresh_server_that_never_answers_is_reported_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        stack = LocalStack()
        stack.dynamodb.port = int(silent.getsockname()[1])
        monkeypatch.setattr(LocalDynamoDB, "launch", lambda self, **_: self)  # "started", but it never answers
        monkeypatch.setattr(LocalDynamoDB, "wait_listening", lambda self, *_: self)
        started = time.monotonic()
        with pytest.raises(LocalToolError, match=rf"did not answer within {FIRST_ANSWER_TIMEOUT_S:g} s"):
            stack.__enter__()
        elapsed = time.monotonic() - started
    assert elapsed < FIRST_ANSWER_TIMEOUT_S + 3, elapsed
