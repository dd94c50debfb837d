"""Owns erasing a user from the table: the whole partition, the phone owners and link codes that
still name them, and the erase mark; and the keys that seal a user's queued texts (decision 0031).

A text key is one per user, made with the first text of theirs that is queued, kept in their
partition (`KEY#<user>`): the erase that deletes the partition deletes the key, so every text of
theirs still in the queue or the dead-letter queue is unreadable after the erase, wherever it is. A link's
merge copies an SMS-only user's key into the app user's partition with the texts (`merging`), so a
text queued before the link is still answered.
"""

import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from onboarding.config import Limits
from onboarding.model.errors import StoreError
from onboarding.model.users import ErasedMark, ErasureReport, TextKey
from onboarding.persistence.calls import (
    ConditionFailed,
    Transaction,
    TransactionCancelled,
    batch_write,
    partition_items,
    store_call,
)
from onboarding.persistence.keys import (
    CLIENT_PREFIX,
    CONTACT_PREFIX,
    HEAD_ITEMS,
    LINK_POINTER_PREFIX,
    MESSAGE_PREFIX,
    RATE_PREFIX,
    TEXT_KEY_PREFIX,
    erased_key,
    link_key,
    message_id_of,
    phone_key,
    stored_phone_key,
    text_key,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


logger = Logger(child=True)


class Eraser:
    def __init__(
        self, client: "DynamoDBClient", table_name: str, limits: Limits, clock: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._table = table_name
        self._attempts = limits.erase_batch_attempts
        self._marker_lifetime_s = limits.erased_marker_lifetime_s
        self._clock = clock

    def erase(self, user_id: str, merged_into: str | None = None) -> ErasureReport:
        """Delete everything stored for the user and report what was deleted: the whole partition
        (messages, state, profile, summary, dedupe records, phone links, link-code pointers, and
        the key of their queued texts, so any text of theirs still queued or dead-lettered can no
        longer be read: onboarding.persistence.erasure), the
        PHONE# owner items that still name the user, and the link codes they made. The rate
        counters stay (counts only, gone within the hour): an erase must not reset the limit.
        An unknown user, or a second erase, deletes nothing and reports zeros.

        A phone of theirs whose link left a merge pending (the texts of the SMS-only user it had
        been, not joined yet) takes that SMS-only user along: their partition is erased too and
        counted in the report (otherwise the texts would outlive the erase).

        `merged_into`: the user is erased because their memory joined that user (a linked phone's
        merge): the erase mark says so, and a text of theirs still queued is answered as that user
        (onboarding.sms.responder) instead of being dropped as erased.

        Phone owners and link codes go first: a text arriving mid-erase then starts a new user
        instead of writing into the partition being emptied. A phone re-linked to someone else
        since is theirs now and stays.

        Deliberately NOT deleted: the Powertools idempotency records of the SMS webhook (another
        table, keyed by a hash of Twilio's MessageSid, holding only the canned reply, expiring
        within 24 h). Deleting them would let a late Twilio retry of an erased text be processed
        again and re-create the user.
        """
        report, pending = self._erase_partition(user_id, merged_into)
        for sms_user in pending:
            joined, _ = self._erase_partition(sms_user, None)
            report = report.plus(joined)
        # Counts only: the user id and phone numbers are personal data.
        logger.info("Erased a user's data", extra={"erased_items": report.total, "pending_merges": len(pending)})
        return report

    def _erase_partition(self, user_id: str, merged_into: str | None) -> tuple[ErasureReport, list[str]]:
        """Erase one user's partition, phones and codes; the SMS-only users whose merge into this
        one their phones' owner items still named (pending)."""
        self._mark_erased(user_id, merged_into)
        every_key = partition_items(
            self._client, self._table, user_id, "could not read the user's data to erase it", keys_only=True
        )
        sort_keys = [key["sk"]["S"] for key in every_key]
        keys = [key for key in every_key if not key["sk"]["S"].startswith(RATE_PREFIX)]
        phones = [sk.removeprefix(CONTACT_PREFIX) for sk in sort_keys if sk.startswith(CONTACT_PREFIX)]
        codes = [sk.removeprefix(LINK_POINTER_PREFIX) for sk in sort_keys if sk.startswith(LINK_POINTER_PREFIX)]
        # Unchecked keys: a malformed CONTACT# item must not stop the erase; its key matches nothing.
        owners = [self._delete_if_owned(stored_phone_key(p), user_id) for p in phones]
        pending = [merge_from for owner in owners if owner and (merge_from := owner.get("merge_from", {}).get("S"))]
        link_codes = sum(self._delete_if_owned(link_key(c), user_id) is not None for c in codes)
        deletes = [{"DeleteRequest": {"Key": key}} for key in keys]
        batch_write(self._client, self._table, deletes, self._attempts, "could not erase the user's data")

        def count(prefix: str) -> int:
            return sum(sk.startswith(prefix) for sk in sort_keys)

        # The key of the queued texts is part of the texts, as a CONTACT# item is of a phone: not counted.
        known = (MESSAGE_PREFIX, CLIENT_PREFIX, RATE_PREFIX, CONTACT_PREFIX, LINK_POINTER_PREFIX, TEXT_KEY_PREFIX)
        report = ErasureReport(
            messages=count(MESSAGE_PREFIX),
            state_items=sum(sk in HEAD_ITEMS for sk in sort_keys),
            phone_numbers=sum(owner is not None for owner in owners),
            dedupe_records=count(CLIENT_PREFIX),
            link_codes=link_codes,
            other_items=sum(not sk.startswith(known) and sk not in HEAD_ITEMS for sk in sort_keys),
            kept_rate_counters=count(RATE_PREFIX),
            message_ids=tuple(message_id_of(sk) for sk in sort_keys if sk.startswith(MESSAGE_PREFIX)),
        )
        return report, pending

    def erased_mark(self, user_id: str) -> ErasedMark | None:
        """When the user was last erased, and into whom their memory was merged if that was why
        (None: no erase in the mark's lifetime). Read consistently: a queued text is checked
        against it (onboarding.sms.responder)."""
        with store_call("could not read the erase mark"):
            item = self._client.get_item(TableName=self._table, Key=erased_key(user_id), ConsistentRead=True).get(
                "Item"
            )
        if item is None:
            return None
        merged_into = item.get("merged_into", {}).get("S")
        return ErasedMark(int(item["erased_at_ms"]["N"]), merged_into)

    def _mark_erased(self, user_id: str, merged_into: str | None = None) -> None:
        """Record when the user was erased, first: from now on a write of a turn that began before
        this moment is refused (`erasure_guard`), so nothing in flight re-creates the user.
        The mark outlives any such turn (a queued text can wait days), then expires."""
        now = self._clock()
        item = {
            **erased_key(user_id),
            "erased_at_ms": {"N": str(int(now * 1000))},
            "expires_at": {"N": str(int(now) + self._marker_lifetime_s)},
        }
        if merged_into is not None:
            item["merged_into"] = {"S": merged_into}
        with store_call("could not erase the user's data"):
            self._client.put_item(TableName=self._table, Item=item)

    def _delete_if_owned(self, key: Mapping[str, Any], user_id: str) -> dict[str, Any] | None:
        """Delete the item at `key` if it still names `user_id`, and return what it held; None when
        it is gone or is someone else's now (a phone re-linked since)."""
        try:
            with store_call("could not erase the user's data"):
                deleted = self._client.delete_item(
                    TableName=self._table,
                    Key=key,
                    ConditionExpression="user_id = :user",
                    ExpressionAttributeValues={":user": {"S": user_id}},
                    ReturnValues="ALL_OLD",
                )
        except ConditionFailed:
            return None
        return dict(deleted.get("Attributes", {}))


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


ERASED_CHECK = "not-erased"
"""The name of the erasure guard in a transaction (see `erasure_guard`)."""


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
