"""Owns whole-partition work: reading every item of a user's partition, and writing or deleting
many items in batches (erasure, and merging an SMS user into the app user a phone is linked to).

botocore retries a failed request, but not the UnprocessedItems of a successful BatchWriteItem,
so they are resent here, with botocore's full-jitter exponential backoff.
"""

import secrets
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from onboarding.model.errors import StoreError
from onboarding.persistence.calls import store_call
from onboarding.persistence.keys import partition

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

BATCH_WRITE_ITEMS = 25  # BatchWriteItem's limit per request (DynamoDB's, not ours to tune)
_BATCH_BACKOFF_BASE_S = 0.05
_BATCH_BACKOFF_MAX_S = 2.0
_JITTER = secrets.SystemRandom()  # for spreading retries, not for secrets; avoids the global RNG

Item = dict[str, Any]


def partition_items(
    client: "DynamoDBClient", table: str, user_id: str, what: str, keys_only: bool = False
) -> list[Item]:
    """Every item of the user's partition (or only its keys), all pages, read consistently: an
    item written just before must not be missed."""
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": partition(user_id)},
        "ConsistentRead": True,
    }
    if keys_only:
        request["ProjectionExpression"] = "pk, sk"
    items: list[Item] = []
    while True:
        with store_call(what):
            page = client.query(**request)
        items.extend(page.get("Items", []))
        if not (start_key := page.get("LastEvaluatedKey")):
            return items
        request["ExclusiveStartKey"] = start_key


def batch_write(
    client: "DynamoDBClient", table: str, requests: Sequence[Mapping[str, Any]], attempts: int, what: str
) -> None:
    """Send `requests` (`{"PutRequest": ...}` or `{"DeleteRequest": ...}`), 25 to a request,
    resending what DynamoDB left unprocessed (it does so when throttled) after a backoff; gives
    up with StoreError after `attempts` tries of a batch."""
    for start in range(0, len(requests), BATCH_WRITE_ITEMS):
        pending: Mapping[str, Any] = {table: list(requests[start : start + BATCH_WRITE_ITEMS])}
        for attempt in range(attempts):
            if attempt:
                # botocore's standard mode: a random delay up to base * 2^attempt, capped.
                time.sleep(_JITTER.random() * min(_BATCH_BACKOFF_BASE_S * 2**attempt, _BATCH_BACKOFF_MAX_S))
            with store_call(what):
                pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                break
        else:
            raise StoreError(f"{what}: the table kept leaving some items unprocessed")
