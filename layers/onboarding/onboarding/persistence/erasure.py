"""Owns erasing a user: the whole partition, the phone owners and link codes that still name them."""

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from onboarding.config import Limits
from onboarding.model.errors import StoreError
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
    partition,
    stored_phone_key,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = Logger(child=True)

_BATCH_WRITE_ITEMS = 25  # BatchWriteItem's limit per request (DynamoDB's, not ours to tune)
# botocore retries a failed request, but not the UnprocessedItems of a successful one, so erase
# resends those itself, with botocore's full-jitter exponential backoff.
_BATCH_BACKOFF_BASE_S = 0.05
_BATCH_BACKOFF_MAX_S = 2.0
_JITTER = secrets.SystemRandom()  # for spreading retries, not for secrets; avoids the global RNG


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
        every_key = self._partition_keys(user_id)
        sort_keys = [key["sk"]["S"] for key in every_key]
        keys = [key for key in every_key if not key["sk"]["S"].startswith(RATE_PREFIX)]
        phones = [sk.removeprefix(CONTACT_PREFIX) for sk in sort_keys if sk.startswith(CONTACT_PREFIX)]
        codes = [sk.removeprefix(LINK_POINTER_PREFIX) for sk in sort_keys if sk.startswith(LINK_POINTER_PREFIX)]
        # Unchecked keys: a malformed CONTACT# item must not stop the erase; its key matches nothing.
        phone_numbers = sum(self._delete_if_owned(stored_phone_key(p), user_id) for p in phones)
        link_codes = sum(self._delete_if_owned(link_key(c), user_id) for c in codes)
        self._batch_delete(keys)

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

    def _partition_keys(self, user_id: str) -> list[dict[str, Any]]:
        """The key of every item in the user's partition, all pages, read consistently (an item
        written just before the erase must not be missed)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": partition(user_id)},
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
        }
        keys: list[dict[str, Any]] = []
        while True:
            with store_call("could not read the user's data to erase it"):
                page = self._client.query(**request)
            keys.extend({"pk": item["pk"], "sk": item["sk"]} for item in page.get("Items", []))
            if not (start_key := page.get("LastEvaluatedKey")):
                return keys
            request["ExclusiveStartKey"] = start_key

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

    def _batch_delete(self, keys: Sequence[Mapping[str, Any]]) -> None:
        """Delete `keys`, 25 to a request, resending what DynamoDB left unprocessed (it does so
        when throttled) after a backoff; gives up with StoreError after the configured tries."""
        for start in range(0, len(keys), _BATCH_WRITE_ITEMS):
            batch = keys[start : start + _BATCH_WRITE_ITEMS]
            pending: Mapping[str, Any] = {self._table: [{"DeleteRequest": {"Key": key}} for key in batch]}
            for attempt in range(self._attempts):
                if attempt:
                    # botocore's standard mode: a random delay up to base * 2^attempt, capped.
                    time.sleep(_JITTER.random() * min(_BATCH_BACKOFF_BASE_S * 2**attempt, _BATCH_BACKOFF_MAX_S))
                with store_call("could not erase the user's data"):
                    pending = self._client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break
            else:
                raise StoreError("the table kept leaving some of the user's items unprocessed")
