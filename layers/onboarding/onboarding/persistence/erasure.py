"""Owns erasing a user from the table: the whole partition (with the key of their queued texts,
`text_keys`), the phone owners and link codes that still name them, and the erase mark; and the
guard every write of a turn carries against an erase since the turn began.
"""

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from onboarding.config import Limits
from onboarding.model.users import ErasedMark, ErasureReport
from onboarding.persistence.calls import (
    ConditionFailed,
    Transaction,
    batch_write,
    partition_items,
    store_call,
)
from onboarding.persistence.schema import (
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
    stored_phone_key,
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
