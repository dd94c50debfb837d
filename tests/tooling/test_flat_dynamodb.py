"""The flat-cost layer over moto's DynamoDB (infra/local/flat_dynamodb.py) answers exactly as moto
does: the same Query results, counts and LastEvaluatedKeys on random partitions, key conditions,
limits, directions and start keys; the same table after random transactions, cancelled or not. It
fails if a moto upgrade changes what the layer wraps (install checks the methods' parameters)."""

import copy
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from infra.local import flat_dynamodb
from tests.unit.conftest import MOTO_SERVED

TABLE = "flat"
SORT_KEYS = st.text(alphabet="abc~#0", min_size=1, max_size=4)
PARTITIONS = ("p1", "p2")


@pytest.fixture(autouse=True)
def _restore_the_layer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This module switches the layer on and off; the process gets it back as it was. Its clients
    are moto's in process: an endpoint a local stack of another module on this worker left set
    would send them to that stack's server, which refuses their credentials."""
    for name in MOTO_SERVED:
        monkeypatch.delenv(name, raising=False)
    was_installed = bool(flat_dynamodb._originals)
    yield
    if was_installed:
        flat_dynamodb.install()
    else:
        flat_dynamodb.uninstall()


def _client(stream: bool = False) -> Any:
    client: Any = boto3.client("dynamodb", region_name="us-east-1")
    streaming: dict[str, Any] = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}}
    client.create_table(
        **(streaming if stream else {}),
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return client


def _item(pk: str, sk: str, n: int = 0) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}, "n": {"N": str(n)}}


QUERIES = st.fixed_dictionaries(
    {
        "pk": st.sampled_from(PARTITIONS),
        "condition": st.sampled_from(["", "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"]),
        "bounds": st.lists(SORT_KEYS, min_size=2, max_size=2).map(sorted),
        "limit": st.none() | st.integers(1, 5),
        "forward": st.booleans(),
        "start": st.none() | SORT_KEYS,
        "filter": st.booleans(),
    }
)


def _query(client: Any, query: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {"TableName": TABLE, "ScanIndexForward": query["forward"]}
    values: dict[str, Any] = {":pk": {"S": query["pk"]}}
    low, high = query["bounds"]
    condition = {
        "": "",
        "BETWEEN": " AND sk BETWEEN :low AND :high",
        "begins_with": " AND begins_with(sk, :low)",
    }.get(query["condition"], f" AND sk {query['condition']} :low")
    if ":low" in condition:
        values[":low"] = {"S": low}
    if ":high" in condition:
        values[":high"] = {"S": high}
    if query["filter"]:
        request["FilterExpression"] = "n > :zero"
        values[":zero"] = {"N": "0"}
    request |= {"KeyConditionExpression": "pk = :pk" + condition, "ExpressionAttributeValues": values}
    if query["limit"] is not None:
        request["Limit"] = query["limit"]
    if query["start"] is not None:
        request["ExclusiveStartKey"] = {"pk": {"S": query["pk"]}, "sk": {"S": query["start"]}}
    answer = client.query(**request)
    return {key: answer.get(key) for key in ("Items", "Count", "ScannedCount", "LastEvaluatedKey")}


def _answers(layer: bool, items: list[tuple[str, str, int]], queries: list[dict[str, Any]]) -> list[Any]:
    (flat_dynamodb.install if layer else flat_dynamodb.uninstall)()
    with mock_aws():
        client = _client()
        for pk, sk, n in items:
            client.put_item(TableName=TABLE, Item=_item(pk, sk, n))
        client.delete_item(TableName=TABLE, Key={"pk": {"S": "p1"}, "sk": {"S": "a"}})  # a hole, kept sorted
        return [_query(client, query) for query in queries]


# Each check draws EXAMPLES cases in the default run and SLOW_EXAMPLES in the slow tier.
EXAMPLES, SLOW_EXAMPLES = 12, 60
ITEMS = st.lists(st.tuples(st.sampled_from(PARTITIONS), SORT_KEYS, st.integers(0, 2)), max_size=25)


def _same_answers(items: list[tuple[str, str, int]], queries: list[dict[str, Any]]) -> None:
    assert _answers(True, items, queries) == _answers(False, items, queries)


@settings(max_examples=EXAMPLES)
@given(items=ITEMS, queries=st.lists(QUERIES, min_size=1, max_size=6))
def test_queries_answer_as_moto_does(items: list[tuple[str, str, int]], queries: list[dict[str, Any]]) -> None:
    _same_answers(items, queries)


@pytest.mark.slow
@settings(max_examples=SLOW_EXAMPLES)
@given(items=ITEMS, queries=st.lists(QUERIES, min_size=1, max_size=6))
def test_queries_answer_as_moto_does_at_scale(items: list[tuple[str, str, int]], queries: list[dict[str, Any]]) -> None:
    _same_answers(items, queries)


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["Put", "Update", "Delete", "ConditionCheck"]),
        st.sampled_from(PARTITIONS),
        SORT_KEYS,
        st.sampled_from(["", "attribute_exists(pk)", "attribute_not_exists(pk)"]),
    ),
    min_size=1,
    max_size=5,
    unique_by=lambda operation: (operation[1], operation[2]),  # DynamoDB refuses two items on one key
)


def _transaction(operations: list[tuple[str, str, str, str]], round_: int) -> list[dict[str, Any]]:
    items = []
    for kind, pk, sk, condition in operations:
        body: dict[str, Any] = {"TableName": TABLE}
        if kind == "Put":
            body["Item"] = _item(pk, sk, round_)
        else:
            body["Key"] = {"pk": {"S": pk}, "sk": {"S": sk}}
        if kind == "Update":
            body |= {"UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {":n": {"N": str(round_)}}}
        if condition:
            body["ConditionExpression"] = condition
        elif kind == "ConditionCheck":
            body["ConditionExpression"] = "attribute_exists(pk)"
        items.append({kind: body})
    return items


def _stream_records(client: Any) -> list[tuple[str, str, str]]:
    """What the table's stream holds: (event, partition, sort key) of every record, in order. Read
    from moto's backend: its in-process DynamoDB Streams API does not route (the local server's does)."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    shard = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[TABLE].stream_shard
    assert shard is not None
    records = [record.record for record in shard.items]
    return [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in records]


def _after_transactions(layer: bool, transactions: list[list[tuple[str, str, str, str]]], stream: bool = False) -> Any:
    (flat_dynamodb.install if layer else flat_dynamodb.uninstall)()
    with mock_aws():
        client = _client(stream)
        outcomes: list[Any] = []
        for round_, operations in enumerate(transactions, start=1):
            try:
                client.transact_write_items(TransactItems=_transaction(operations, round_))
                outcomes.append("done")
            except client.exceptions.TransactionCanceledException as cancelled:
                outcomes.append([reason.get("Code") for reason in cancelled.response["CancellationReasons"]])
        table = sorted(client.scan(TableName=TABLE)["Items"], key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
        newest = [_query(client, {"pk": pk, "condition": "", "bounds": ["a", "b"], "limit": 2, "forward": False,
                                  "start": None, "filter": False}) for pk in PARTITIONS]  # fmt: skip
        return outcomes, table, newest, _stream_records(client) if stream else None


def _same_tables(transactions: list[list[tuple[str, str, str, str]]], stream: bool = False) -> None:
    """A cancelled transaction leaves nothing, in the table or (`stream`) in its stream, which the
    recall indexer reads: as moto's own copies leave nothing, and as on DynamoDB."""
    assert _after_transactions(True, transactions, stream) == _after_transactions(False, transactions, stream)


@settings(max_examples=EXAMPLES)
@given(st.lists(OPERATIONS, min_size=1, max_size=6))
def test_transactions_leave_the_table_as_moto_does(transactions: list[list[tuple[str, str, str, str]]]) -> None:
    _same_tables(transactions)


@settings(max_examples=EXAMPLES)
@given(st.lists(OPERATIONS, min_size=1, max_size=6))
def test_a_streamed_table_and_its_stream_end_as_moto_leaves_them(
    transactions: list[list[tuple[str, str, str, str]]],
) -> None:
    _same_tables(transactions, stream=True)


@pytest.mark.slow
@settings(max_examples=SLOW_EXAMPLES)
@given(st.lists(OPERATIONS, min_size=1, max_size=6), st.booleans())
def test_transactions_and_streams_as_moto_at_scale(
    transactions: list[list[tuple[str, str, str, str]]], stream: bool
) -> None:
    _same_tables(transactions, stream)


def test_a_cancelled_transaction_takes_back_its_stream_records() -> None:
    flat_dynamodb.install()
    with mock_aws():
        client = _client(stream=True)
        client.put_item(TableName=TABLE, Item=_item("p1", "kept"))
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(
                TransactItems=_transaction([("Put", "p1", "new", ""), ("Put", "p2", "x", "attribute_exists(pk)")], 1)
            )
        assert _stream_records(client) == [("INSERT", "p1", "kept")]


def test_a_cancelled_transaction_copies_no_table() -> None:
    """The cost: with the layer a transaction's rollback deep-copies nothing but the items it touches."""
    flat_dynamodb.install()
    copies: list[Any] = []
    original = copy.deepcopy

    def counting(value: Any, memo: Any = None) -> Any:
        copies.append(type(value).__name__)
        return original(value, memo)

    with mock_aws(), pytest.MonkeyPatch.context() as patch:
        client = _client()
        for number in range(50):
            client.put_item(TableName=TABLE, Item=_item("p1", f"k{number:03}"))
        patch.setattr(copy, "deepcopy", counting)
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(TransactItems=_transaction([("Put", "p2", "x", "attribute_exists(pk)")], 1))
    assert "Table" not in copies


def test_install_refuses_a_moto_whose_methods_changed() -> None:
    flat_dynamodb.uninstall()
    relied_on = flat_dynamodb.RELIED_ON["Table.delete_item"]
    flat_dynamodb.RELIED_ON["Table.delete_item"] = ["self", "hash_key"]
    try:
        with pytest.raises(RuntimeError, match=r"moto's Table\.delete_item changed"):
            flat_dynamodb.install()
    finally:
        flat_dynamodb.RELIED_ON["Table.delete_item"] = relied_on
