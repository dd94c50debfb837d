"""DynamoDB write failures against the local DynamoDB server over HTTP: botocore's standard retry mode
(the store's client is built with it) retries a failed write; when every try fails the store raises
StoreError and nothing is half-written. The failures are injected where botocore would send the
request, so the retry logic under test is botocore's own, unchanged."""

import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from infra.local.stack import LocalStack
from onboarding.composition import build_repositories
from onboarding.config import Settings
from onboarding.model.errors import StoreError, TurnInProgressError
from onboarding.persistence import Repositories

pytestmark = pytest.mark.integration


class _Raw:
    """The raw body botocore reads from an HTTP response."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def server_errors(operation: str, failures: int) -> tuple[Callable[..., Any], list[str]]:
    """A before-send hook answering the first `failures` sends of `operation` with DynamoDB's 500."""
    sent: list[str] = []

    def answer(request: Any, **_: Any) -> AWSResponse | None:
        sent.append(operation)
        if len(sent) > failures:
            return None  # send it for real
        body = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "down"})
        return AWSResponse(request.url, 500, {"x-amzn-RequestId": "fault"}, _Raw(body.encode()))  # type: ignore[arg-type]

    return answer, sent


@pytest.fixture
def store_with_faults(local_stack: LocalStack) -> Iterator[Callable[[str, int], tuple[Repositories, list[str]]]]:
    """A store built by the product's factory (its retry config), with a fault hook on its session."""
    boto3.setup_default_session()

    def build(operation: str, failures: int) -> tuple[Repositories, list[str]]:
        hook, sent = server_errors(operation, failures)
        assert boto3.DEFAULT_SESSION is not None
        boto3.DEFAULT_SESSION.events.register(f"before-send.dynamodb.{operation}", hook)
        return build_repositories(Settings.from_env()), sent

    yield build
    boto3.setup_default_session()  # later tests get a session without the hook


def user_items(local_stack: LocalStack, user_id: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=local_stack.dynamodb.url)
    return client.query(
        TableName=local_stack.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"USER#{user_id}"}},
        ConsistentRead=True,
    )["Items"]


def test_a_message_write_that_fails_twice_is_retried_and_stored_once(
    store_with_faults: Callable[[str, int], tuple[Repositories, list[str]]],
    local_stack: LocalStack,
    user_id: str,
) -> None:
    """A message is written in a transaction (with its erasure guard), so its faults are there."""
    store, sent = store_with_faults("TransactWriteItems", 2)
    message = store.writes.append_message(user_id, "user", "I'm a beginner")
    assert len(sent) == 3
    assert [item["sk"]["S"] for item in user_items(local_stack, user_id)] == [
        f"MSG#{message.message_id.replace('-', '#')}"
    ]


def test_a_transaction_that_fails_twice_is_retried_and_stored_once(
    store_with_faults: Callable[[str, int], tuple[Repositories, list[str]]],
    local_stack: LocalStack,
    user_id: str,
) -> None:
    store, sent = store_with_faults("TransactWriteItems", 2)
    leased = store.writes.lease_user_message(user_id, "client-1", "hello")
    assert (leased.first, len(sent)) == (True, 3)
    # The stored lease keeps the id for the turn answering it (decision 0009): a copy is told so.
    with pytest.raises(TurnInProgressError):
        store.writes.lease_user_message(user_id, "client-1", "hello")
    assert sorted(item["sk"]["S"][:4] for item in user_items(local_stack, user_id)) == ["CLIE", "MSG#"]


def test_a_write_that_keeps_failing_raises_store_error_and_writes_nothing(
    store_with_faults: Callable[[str, int], tuple[Repositories, list[str]]],
    local_stack: LocalStack,
    user_id: str,
) -> None:
    store, sent = store_with_faults("TransactWriteItems", 1000)
    with pytest.raises(StoreError):
        store.writes.lease_user_message(user_id, "client-1", "hello")
    assert len(sent) == Settings.from_env().dynamodb_max_attempts
    assert user_items(local_stack, user_id) == []
