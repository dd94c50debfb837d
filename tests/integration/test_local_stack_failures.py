"""A server the stack started that accepts connections and never answers is
reported within seconds (botocore's retries would take about 100 s), and the stack cleans up,
its functions' execution environments too."""

import sys
import time

import pytest

from infra.local import lambda_runner
from infra.local.dynamodb_process import FIRST_ANSWER_TIMEOUT_S, LocalDynamoDB
from infra.local.errors import LocalToolError
from infra.local.stack import LocalStack
from tests.support.deployed_flows import chat, new_user


def test_a_fresh_server_that_never_answers_is_reported_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    stack = LocalStack()  # its DynamoDB socket bound and listening: connections are accepted
    monkeypatch.setattr(LocalDynamoDB, "launch", lambda self, **_: self)  # "started", but nothing serves it
    monkeypatch.setattr(LocalDynamoDB, "wait_listening", lambda self, *_: self)
    started = time.monotonic()
    with pytest.raises(LocalToolError, match=rf"did not answer within {FIRST_ANSWER_TIMEOUT_S:g} s"):
        stack.__enter__()
    elapsed = time.monotonic() - started
    assert elapsed < FIRST_ANSWER_TIMEOUT_S + 3, elapsed


def test_a_server_process_that_dies_before_it_serves_is_reported_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its socket accepts connections from the start, so only its own word on the ready pipe says it
    serves: a process that ends first (the pipe closes) is reported with its exit code, not after
    the start's time-out."""
    server = LocalDynamoDB(flat=False)
    monkeypatch.setattr(sys, "executable", "/bin/false")  # a "server" that exits at once, code 1
    server.launch()
    started = time.monotonic()
    with pytest.raises(LocalToolError, match=r"the local DynamoDB server \(port \d+\) exited with code 1"):
        server.wait_listening(timeout_s=30)
    assert time.monotonic() - started < 5


def test_a_stopped_stack_ends_its_functions_environments() -> None:
    """Its functions' warm modules (and the clients they made, with connections to its servers) go
    with it: kept, every stack a test process started held its clients to the end of the run."""
    with LocalStack(api_port=0) as stack:
        chat(stack, new_user(), "Hi")
        endpoint = ("AWS_ENDPOINT_URL_DYNAMODB", stack.dynamodb.url)
        assert [key for key in lambda_runner._warm_modules if endpoint in key[1]]  # the API's, at least
    assert [key for key in lambda_runner._warm_modules if endpoint in key[1]] == []
