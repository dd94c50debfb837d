"""Owns erasing a user: the whole partition, the phone owners and link codes that still name them."""

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from onboarding.config import Limits
from onboarding.model.records import ErasureReport
from onboarding.persistence.calls import ConditionFailed, store_call
from onboarding.persistence.keys import (
    CLIENT_PREFIX,
    CONTACT_PREFIX,
    HEAD_ITEMS,
    LINK_POINTER_PREFIX,
    MESSAGE_PREFIX,
    RATE_PREFIX,
    erased_key,
    link_key,
    message_id_of,
    stored_phone_key,
)
from onboarding.persistence.partitions import batch_write, partition_items

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

    def erase(self, user_id: str) -> ErasureReport:
        """Delete everything stored for the user and report what was deleted: the whole partition
        (messages, state, profile, summary, dedupe records, phone links, link-code pointers), the
        PHONE# owner items that still name the user, and the link codes they made. The rate
        counters stay (counts only, gone within the hour): an erase must not reset the limit.
        An unknown user, or a second erase, deletes nothing and reports zeros.

        Phone owners and link codes go first: a text arriving mid-erase then starts a new user
        instead of writing into the partition being emptied. A phone re-linked to someone else
        since is theirs now and stays.

        Deliberately NOT deleted: the Powertools idempotency records of the SMS webhook (another
        table, keyed by a hash of Twilio's MessageSid, holding only the canned reply, expiring
        within 24 h). Deleting them would let a late Twilio retry of an erased text be processed
        again and re-create the user.
        """
        self._mark_erased(user_id)
        every_key = partition_items(
            self._client, self._table, user_id, "could not read the user's data to erase it", keys_only=True
        )
        sort_keys = [key["sk"]["S"] for key in every_key]
        keys = [key for key in every_key if not key["sk"]["S"].startswith(RATE_PREFIX)]
        phones = [sk.removeprefix(CONTACT_PREFIX) for sk in sort_keys if sk.startswith(CONTACT_PREFIX)]
        codes = [sk.removeprefix(LINK_POINTER_PREFIX) for sk in sort_keys if sk.startswith(LINK_POINTER_PREFIX)]
        # Unchecked keys: a malformed CONTACT# item must not stop the erase; its key matches nothing.
        phone_numbers = sum(self._delete_if_owned(stored_phone_key(p), user_id) for p in phones)
        link_codes = sum(self._delete_if_owned(link_key(c), user_id) for c in codes)
        deletes = [{"DeleteRequest": {"Key": key}} for key in keys]
        batch_write(self._client, self._table, deletes, self._attempts, "could not erase the user's data")

        def count(prefix: str) -> int:
            return sum(sk.startswith(prefix) for sk in sort_keys)

        known = (MESSAGE_PREFIX, CLIENT_PREFIX, RATE_PREFIX, CONTACT_PREFIX, LINK_POINTER_PREFIX)
        report = ErasureReport(
            messages=count(MESSAGE_PREFIX),
            state_items=sum(sk in HEAD_ITEMS for sk in sort_keys),
            phone_numbers=phone_numbers,
            dedupe_records=count(CLIENT_PREFIX),
            link_codes=link_codes,
            other_items=sum(not sk.startswith(known) and sk not in HEAD_ITEMS for sk in sort_keys),
            kept_rate_counters=count(RATE_PREFIX),
            message_ids=tuple(message_id_of(sk) for sk in sort_keys if sk.startswith(MESSAGE_PREFIX)),
        )
        # Counts only: the user id and phone numbers are personal data.
        logger.info("Erased a user's data", extra={"erased_items": report.total, "partition_items": len(sort_keys)})
        return report

    def _mark_erased(self, user_id: str) -> None:
        """Record when the user was erased, first: from now on a write of a turn that began before
        this moment is refused (`writing.erasure_guard`), so nothing in flight re-creates the user.
        The mark outlives any such turn (a queued text can wait days), then expires."""
        now = self._clock()
        item = {
            **erased_key(user_id),
            "erased_at_ms": {"N": str(int(now * 1000))},
            "expires_at": {"N": str(int(now) + self._marker_lifetime_s)},
        }
        with store_call("could not erase the user's data"):
            self._client.put_item(TableName=self._table, Item=item)

    def _delete_if_owned(self, key: Mapping[str, Any], user_id: str) -> bool:
        """Delete the item at `key` if it still names `user_id`; False when it is gone or is
        someone else's now (a phone re-linked since)."""
        try:
            with store_call("could not erase the user's data"):
                self._client.delete_item(
                    TableName=self._table,
                    Key=key,
                    ConditionExpression="user_id = :user",
                    ExpressionAttributeValues={":user": {"S": user_id}},
                )
        except ConditionFailed:
            return False
        return True
