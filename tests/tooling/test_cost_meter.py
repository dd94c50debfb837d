"""The cost ledger's meter on real boto3 clients (moto in process): what it counts for each request
a turn makes, from botocore's hooks, and what it leaves out (requests outside a measured turn, its
own reads of the stored items)."""

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra.bench.cost.meter import ITEM_STORAGE_OVERHEAD_BYTES, SECONDS_A_MONTH, Meter, item_size

TABLE, REGION = "cost-meter-test", "us-east-1"
RETENTION_MONTHS = 12.0


@pytest.fixture
def metered(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Meter, Any]]:
    """A meter on a session of its own, and a DynamoDB client of that session (the function's)."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        reader = boto3.Session(region_name=REGION).client("dynamodb")
        reader.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        meter = Meter(reader, {TABLE: "expires_at"}, RETENTION_MONTHS)
        session = boto3.Session(region_name=REGION)
        meter.install(session)
        yield meter, session.client("dynamodb")


def _item(key: str, size: int, **extra: Any) -> dict[str, Any]:
    return {"PK": {"S": key}, "text": {"S": "x" * size}, **extra}


def test_a_transaction_counts_two_units_a_kb_for_each_item_where_moto_reports_nothing(
    metered: tuple[Meter, Any],
) -> None:
    meter, client = metered
    with meter.measuring():
        client.transact_write_items(
            TransactItems=[{"Put": {"TableName": TABLE, "Item": _item(f"k{n}", 480)}} for n in range(3)],
            ReturnConsumedCapacity="TOTAL",
        )
    [request] = meter.take()
    assert (request.operation, request.write_units, request.read_units) == ("TransactWriteItems", 6.0, 0.0)
    assert request.reported_units is None


def test_a_put_that_shrinks_an_item_counts_the_item_it_replaced(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    client.put_item(TableName=TABLE, Item=_item("k", 3 * 1024))  # before the turn: not counted
    with meter.measuring():
        client.put_item(TableName=TABLE, Item=_item("k", 10))
    [request] = meter.take()  # the meter's own reads before and after are not in it
    assert request.write_units == 4.0  # the 3 KB item and its key and attribute names: 4 KB rounded up
    assert request.stored_bytes < -3000  # the table holds less than before


def test_a_read_rounds_its_item_up_to_4_kb_and_halves_when_eventually_consistent(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    client.put_item(TableName=TABLE, Item=_item("k", 5 * 1024))
    with meter.measuring():
        client.get_item(TableName=TABLE, Key={"PK": {"S": "k"}}, ConsistentRead=True)
        client.get_item(TableName=TABLE, Key={"PK": {"S": "k"}})
    strong, eventual = meter.take()
    assert (strong.read_units, eventual.read_units) == (2.0, 1.0)


def test_stored_bytes_stay_until_their_ttl_or_the_assumed_retention(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    expires = int(time.time() + SECONDS_A_MONTH)
    kept = _item("ttl", 500, expires_at={"N": str(expires)})
    with meter.measuring():
        client.put_item(TableName=TABLE, Item=kept)
        client.put_item(TableName=TABLE, Item=_item("forever", 500))
    with_ttl, without = meter.take()
    assert with_ttl.stored_bytes == item_size(kept) + ITEM_STORAGE_OVERHEAD_BYTES
    assert with_ttl.stored_byte_months == pytest.approx(with_ttl.stored_bytes, rel=0.01)  # a month
    assert without.stored_byte_months == pytest.approx(without.stored_bytes * RETENTION_MONTHS)


def test_a_write_refused_by_its_condition_still_costs_the_stored_item(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    client.put_item(TableName=TABLE, Item=_item("k", 1500))
    with meter.measuring(), pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(TableName=TABLE, Item=_item("k", 10), ConditionExpression="attribute_not_exists(PK)")
    [request] = meter.take()
    assert request.failed
    assert request.write_units == 2.0
    assert request.stored_bytes == 0


def test_nothing_is_counted_outside_a_measured_turn(metered: tuple[Meter, Any]) -> None:
    meter, client = metered
    client.put_item(TableName=TABLE, Item=_item("k", 10))
    client.get_item(TableName=TABLE, Key={"PK": {"S": "k"}})
    assert meter.take() == []


def test_an_sqs_request_counts_once_per_64_kb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_SQS", raising=False)
    with mock_aws():
        meter = Meter(boto3.Session(region_name=REGION).client("dynamodb"), {}, RETENTION_MONTHS)
        session = boto3.Session(region_name=REGION)
        meter.install(session)
        sqs = session.client("sqs")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        with meter.measuring():
            sqs.send_message(QueueUrl=url, MessageBody="small")
            sqs.send_message(QueueUrl=url, MessageBody="x" * 100_000)
        small, large = meter.take()
    assert (small.billed_requests, large.billed_requests) == (1, 2)
