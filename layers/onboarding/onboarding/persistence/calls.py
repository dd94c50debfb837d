"""Owns talking to DynamoDB safely: every failure becomes the store's, and a cancelled transaction's
reasons are read by the item they belong to.

botocore raises two families: `ClientError` (the service answered: a failed condition, throttling
after botocore's retries, a missing table) and `BotoCoreError` (no answer: connection refused,
connect or read timeout, a closed connection). Both are store failures to the rest of the code.
A failed condition is not a failure but an answer, so it gets exceptions of its own, which the
repositories handle. Transaction items are added by name; a cancellation says which names failed,
so adding an item never shifts what another reason means.
"""

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from onboarding.model.errors import StoreError

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
