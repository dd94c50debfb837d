"""Owns counting what the table's requests cost: every request asks DynamoDB for the capacity it
consumed (`ReturnConsumedCapacity`, which costs nothing), and each answer's units are reported to
the running turn's ledger (`onboarding.telemetry`)."""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from onboarding.telemetry import record_table_request

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_READS = ("Query", "GetItem")
_OPERATIONS = (*_READS, "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")


def _ask_for_capacity(params: dict[str, Any], **_: Any) -> None:
    params.setdefault("ReturnConsumedCapacity", "TOTAL")


def _count_capacity(parsed: Mapping[str, Any], model: Any, **_: Any) -> None:
    consumed = parsed.get("ConsumedCapacity")
    entries = consumed if isinstance(consumed, list) else [consumed or {}]
    units = sum(float(entry.get("CapacityUnits", 0) or 0) for entry in entries)
    read = model.name in _READS
    record_table_request(units if read else 0.0, 0.0 if read else units)


def count_capacity(client: "DynamoDBClient") -> None:
    """Every request of `client` reports the capacity it consumed to the running turn's ledger."""
    for operation in _OPERATIONS:
        client.meta.events.register(
            f"provide-client-params.dynamodb.{operation}", _ask_for_capacity, unique_id=f"capacity-ask-{operation}"
        )
        client.meta.events.register(
            f"after-call.dynamodb.{operation}", _count_capacity, unique_id=f"capacity-count-{operation}"
        )
