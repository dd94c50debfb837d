"""Owns reading the table's change stream (DynamoDB Streams): which message a record adds or removes.

The recall indexer (functions/recall_indexer) is handed Lambda's DynamoDB stream records. Only
message items matter to it (the template's filter passes only `MSG#` keys): a new one is indexed,
a removed one (an erase, a phone's merge, a TTL expiry) is taken out of the index.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onboarding.model.messages import Message
from onboarding.persistence.codec import parse_message
from onboarding.persistence.schema import MESSAGE_PREFIX, USER_PREFIX, message_id_of


@dataclass(frozen=True)
class MessageChange:
    """A message of `user_id` added (`message` set) or removed (`message` None)."""

    user_id: str
    message_id: str
    message: Message | None = None

    @property
    def removed(self) -> bool:
        return self.message is None


def message_change(record: Mapping[str, Any], now_s: float) -> MessageChange | None:
    """The change a stream record makes to a user's messages; None for any other item (or a message
    item that cannot be understood, skipped with the codec's warning). A removed record needs only
    its keys (a stream's view of a delete)."""
    change = record.get("dynamodb") or {}
    keys = change.get("Keys") or {}
    partition, sort_key = keys.get("pk", {}).get("S", ""), keys.get("sk", {}).get("S", "")
    if not partition.startswith(USER_PREFIX) or not sort_key.startswith(MESSAGE_PREFIX):
        return None
    try:
        user_id, message_id = partition.removeprefix(USER_PREFIX), message_id_of(sort_key)
    except ValueError:
        return None
    if record.get("eventName") == "REMOVE":
        return MessageChange(user_id, message_id)
    image = change.get("NewImage")
    message = parse_message(image, now_s) if image else None
    return None if message is None else MessageChange(user_id, message_id, message)
