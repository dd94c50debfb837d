"""Owns talking to DynamoDB safely: every failure becomes the store's, a cancelled transaction's
reasons are read by the item they belong to, and whole partitions are read and written in batches.

botocore raises two families: `ClientError` (the service answered: a failed condition, throttling
after botocore's retries, a missing table) and `BotoCoreError` (no answer: connection refused,
connect or read timeout, a closed connection). Both are store failures to the rest of the code.
A failed condition is not a failure but an answer, so it gets exceptions of its own, which the
repositories handle. Transaction items are added by name; a cancellation says which names failed,
so adding an item never shifts what another reason means.

botocore retries a failed request, but not the UnprocessedItems of a successful BatchWriteItem,
so they are resent here, with botocore's full-jitter exponential backoff.
"""

import secrets
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from onboarding.model.errors import StoreError
from onboarding.persistence.schema import partition

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


T = TypeVar("T")


class ConditionFailed(Exception):  # noqa: N818  (an answer, not an error)
    """A single-item write's condition did not hold."""


class TransactionCancelled(StoreError):  # noqa: N818  (an answer to read; a StoreError if left unread)
    """A transaction was cancelled by a failed condition or a conflicting transaction; `failed`
    names the items whose condition did not hold. Left unhandled, it is a store failure."""

    def __init__(self, failed: frozenset[str], codes: dict[str, str]) -> None:
        super().__init__(f"transaction cancelled: {sorted(failed) or sorted(set(codes.values()))}")
        self.failed = failed
        self.codes = codes

    @property
    def conflicted(self) -> bool:
        """Another transaction touched one of the items at the same moment (nothing was written)."""
        return "TransactionConflict" in self.codes.values()


class KeyCollision(Exception):  # noqa: N818
    """A new key was taken already (two writers chose the same random key): try fresh keys."""


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


@contextmanager
def store_call(what: str) -> Iterator[None]:
    """Around one DynamoDB request: a failed condition raises ConditionFailed; every other failure,
    service or network, raises StoreError(`what`), with the botocore error as its cause."""
    try:
        yield
    except ClientError as error:
        if _code(error) == "ConditionalCheckFailedException":
            raise ConditionFailed from error
        raise StoreError(what) from error
    except BotoCoreError as error:
        raise StoreError(what) from error


class Transaction:
    """A TransactWriteItems request whose items have names, and one `ClientRequestToken` for all
    its tries: DynamoDB answers a retried request with the same token as if it had run once."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.token = uuid.uuid4().hex
        self._names: list[str] = []
        self._items: list[Any] = []

    def add(self, name: str, kind: str, body: dict[str, Any]) -> "Transaction":
        """Add a `Put`, `Update`, `Delete` or `ConditionCheck` of this table, named `name`."""
        if name in self._names:
            raise ValueError(f"two transaction items named {name!r}")
        self._names.append(name)
        self._items.append({kind: {"TableName": self.table, **body}})
        return self

    def __len__(self) -> int:
        return len(self._items)

    def put_of(self, name: str) -> dict[str, Any]:
        """The item the Put named `name` writes."""
        item: dict[str, Any] = self._items[self._names.index(name)]["Put"]["Item"]
        return item

    def run(self, client: "DynamoDBClient", what: str) -> None:
        """Write every item or none. TransactionCancelled names the items whose condition failed;
        StoreError for any other failure."""
        try:
            client.transact_write_items(TransactItems=self._items, ClientRequestToken=self.token)
        except ClientError as error:
            if _code(error) != "TransactionCanceledException":
                raise StoreError(what) from error
            reasons = error.response.get("CancellationReasons") or []
            codes = {name: str(r.get("Code", "None")) for name, r in zip(self._names, reasons, strict=False)}
            failed = frozenset(name for name, code in codes.items() if code == "ConditionalCheckFailed")
            if not failed and "TransactionConflict" not in codes.values():  # throttled, ...
                raise StoreError(what) from error
            raise TransactionCancelled(failed, codes) from error
        except BotoCoreError as error:
            raise StoreError(what) from error


def with_fresh_keys(attempts: int, what: str, attempt: Callable[[], T]) -> T:
    """Run `attempt` (which draws new random keys each time) until it does not collide."""
    for _ in range(attempts):
        try:
            return attempt()
        except KeyCollision:
            continue
    raise StoreError(f"could not find a free key for {what}")


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


_CONFLICT_BACKOFF_S = (0.01, 0.05)  # between tries of a transaction another transaction collided with


def versioned_put(item: Mapping[str, Any], read_version: int) -> dict[str, Any]:
    """A Put of `item` (which carries version `read_version + 1`) that holds only if the stored
    item is still at `read_version` (0: there was none, or one written before versions)."""
    if read_version == 0:
        return {"Item": dict(item), "ConditionExpression": "attribute_not_exists(version)"}
    return {
        "Item": dict(item),
        "ConditionExpression": "version = :read",
        "ExpressionAttributeValues": {":read": {"N": str(read_version)}},
    }


def stored_as_written(client: "DynamoDBClient", table: str, item: Mapping[str, Any]) -> bool:
    """True when the item at `item`'s key is exactly `item`: our own write landed before."""
    key = {"pk": item["pk"], "sk": item["sk"]}
    with store_call("could not read back a write"):
        stored = client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    return stored == dict(item)


def run_once(client: "DynamoDBClient", transaction: Transaction, what: str, probe: str) -> None:
    """Run `transaction`, one of whose Puts, named `probe`, writes a new key. If it is cancelled
    because that key is taken and the stored item is exactly ours, our own earlier try landed (its
    answer was lost): that is success, and nothing is written twice. The same holds when no try got
    an answer at all: the store looks before it reports a failure. Any other cancellation is raised
    for the caller to read (after a short pause when it was only a conflict with another
    transaction, which wrote nothing)."""
    try:
        transaction.run(client, what)
    except TransactionCancelled as cancelled:
        if probe in cancelled.failed and stored_as_written(client, transaction.table, transaction.put_of(probe)):
            return
        if cancelled.conflicted and not cancelled.failed:
            time.sleep(_JITTER.uniform(*_CONFLICT_BACKOFF_S))
        raise
    except StoreError:
        # No answer at all (every try's answer lost, or a 500 after it landed): the outcome is
        # unknown, so look. If that read fails too, the write is reported as failed.
        try:
            landed = stored_as_written(client, transaction.table, transaction.put_of(probe))
        except StoreError:
            landed = False
        if not landed:
            raise
