"""Owns what every write into a user's partition shares: message ids that keep their order, the
erasure guard, versioned puts, and recognising our own write when its answer was lost.

A write whose response is lost (a dropped connection, a read timeout) is retried by botocore.
On DynamoDB the retried transaction carries the same `ClientRequestToken` and is answered as if it
ran once; a server that ignores the token (or a retry after its 10 minutes) answers that the new
keys are taken. So a taken key is first checked: if the stored item is exactly the one we wrote,
the write landed, and it is not written again under fresh keys.
"""

import secrets
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from onboarding.model.errors import StoreError
from onboarding.model.messages import Message
from onboarding.persistence.calls import Transaction, TransactionCancelled, store_call
from onboarding.persistence.keys import erased_key, new_message_id

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ERASED_CHECK = "not-erased"
"""The name of the erasure guard in a transaction (see `erasure_guard`)."""

_CONFLICT_BACKOFF_S = (0.01, 0.05)  # between tries of a transaction another transaction collided with
_JITTER = secrets.SystemRandom()  # for spreading retries, not for secrets; avoids the global RNG


class MessageStamper:
    """Gives drafts an id and a time. Within one process the millisecond part is strictly
    increasing (a burst moves it forward by 1 ms a message), so messages written one after
    another keep their order; the id's random part keeps two processes' messages apart."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last_ms = 0
        self._lock = threading.Lock()

    def stamp(self, draft: Message) -> Message:
        with self._lock:
            self._last_ms = created_ms = max(int(self._clock() * 1000), self._last_ms + 1)
        return Message(
            role=draft.role,
            content=draft.content,
            message_id=new_message_id(created_ms),
            created_at=datetime.fromtimestamp(created_ms / 1000, UTC),
            tool_calls=draft.tool_calls,
            tool_call_id=draft.tool_call_id,
        )


def erasure_guard(transaction: Transaction, user_id: str, since_ms: int) -> None:
    """Add a check that the user was not erased at or after `since_ms` (when the turn began): a
    turn still running when its user is erased stores nothing, so it cannot re-create the user."""
    transaction.add(
        ERASED_CHECK,
        "ConditionCheck",
        {
            "Key": erased_key(user_id),
            "ConditionExpression": "attribute_not_exists(erased_at_ms) OR erased_at_ms < :since",
            "ExpressionAttributeValues": {":since": {"N": str(since_ms)}},
        },
    )


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
