"""Owns the keys that seal a user's queued texts (decision 0031; the sealing itself is
`sms.sealing`'s).

A text key is one per user, made with the first text of theirs that is queued, kept in their
partition (`KEY#<user>`): the erase that deletes the partition deletes the key, so every text of
theirs still in the queue or the dead-letter queue is unreadable after the erase, wherever it is. A
link's merge copies an SMS-only user's key into the app user's partition with the texts
(`merger`), so a text queued before the link is still answered.
"""

import secrets
from typing import TYPE_CHECKING, Any

from onboarding.model.errors import StoreError
from onboarding.model.users import TextKey
from onboarding.persistence.calls import Transaction, TransactionCancelled, store_call
from onboarding.persistence.erasure import ERASED_CHECK, erasure_guard
from onboarding.persistence.schema import phone_key, text_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


KEY_BYTES = 32  # AES-256


KEY_ITEM, OWNER_CHECK = "key", "owner"


_TRIES = 3  # of making a key, when another transaction touched the same items at the same moment


class TextKeys:
    def __init__(self, client: "DynamoDBClient", table_name: str) -> None:
        self._client = client
        self._table = table_name

    def stored(self, holder: str, made_for: str) -> TextKey | None:
        """The key of `made_for`'s texts kept in `holder`'s partition (their own, or the app user's
        their memory joined), if there is one."""
        with store_call("could not read the key of the user's texts"):
            item = self._client.get_item(
                TableName=self._table, Key=text_key(holder, made_for), ConsistentRead=True
            ).get("Item")
        return _parsed(made_for, item) if item else None

    def for_queueing(self, phone: str, user_id: str, received_ms: int) -> TextKey | None:
        """The key that seals a text `phone` sent to `user_id` (its owner when the text came in),
        made with the first such text. None when the key cannot be made because the number is no
        longer `user_id`'s (linked to another user since: ask its owner again) or `user_id` was
        erased at or after `received_ms` (the text is answered as nobody).

        Made only while both hold, in one transaction: a key made after the erase would make the
        text readable again; one made after a link could be missed by the link's merge, which
        copies the keys it finds, and the text would become unreadable instead of answered."""
        for _ in range(_TRIES):
            if (key := self.stored(user_id, user_id)) is not None:
                return key
            # A random key from the OS's generator; it is used only through `cryptography`'s AES-GCM.
            made = TextKey(user_id, secrets.token_hex(8), secrets.token_bytes(KEY_BYTES))
            try:
                self._store_new(phone, made, received_ms)
            except TransactionCancelled as cancelled:
                if cancelled.failed & {OWNER_CHECK, ERASED_CHECK}:
                    return None
                continue  # made by another text at the same moment, or a colliding write: read again
            return made
        raise StoreError("could not make the key of the user's texts: other writes kept colliding")

    def _store_new(self, phone: str, made: TextKey, received_ms: int) -> None:
        item = {**text_key(made.made_for, made.made_for), "key_id": {"S": made.key_id}, "secret": {"B": made.secret}}
        transaction = Transaction(self._table)
        transaction.add(KEY_ITEM, "Put", {"Item": item, "ConditionExpression": "attribute_not_exists(pk)"})
        transaction.add(
            OWNER_CHECK,
            "ConditionCheck",
            {
                "Key": phone_key(phone),
                "ConditionExpression": "user_id = :user",
                "ExpressionAttributeValues": {":user": {"S": made.made_for}},
            },
        )
        erasure_guard(transaction, made.made_for, received_ms)
        transaction.run(self._client, "could not make the key of the user's texts")


def _parsed(made_for: str, item: dict[str, Any]) -> TextKey:
    return TextKey(made_for, str(item["key_id"]["S"]), bytes(item["secret"]["B"]))
