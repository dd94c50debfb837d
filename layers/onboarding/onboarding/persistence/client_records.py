"""Owns the records of client (and Twilio) message ids, `CLIENT#<id>` in the user's partition: which
message an id stored, the reply it got, whether that reached the person, and the lease of the
delivery answering it (which a failed turn releases and which runs out on its own: decision 0009).
`TurnWriter` writes a record with the user's message and records the reply in it; everything else
done to a record (reading it, taking a lease over, releasing it, marking the reply delivered) is
here."""

import math
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from onboarding.config import Limits
from onboarding.model.errors import ClientIdConflictError, StoreError, TurnInProgressError
from onboarding.model.history import LeasedTurn
from onboarding.model.messages import Message
from onboarding.persistence.calls import ConditionFailed, Transaction, TransactionCancelled, store_call
from onboarding.persistence.codec import parse_message
from onboarding.persistence.erasure import erasure_guard
from onboarding.persistence.schema import check_in_id, client_key, message_sort_key, user_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


logger = Logger(child=True)

RECORD_ITEM = "client-record"
"""The name of a client id's record in a transaction (see `calls.Transaction`)."""


class ClientRecords:
    def __init__(
        self, client: "DynamoDBClient", table_name: str, limits: Limits, clock: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._table = table_name
        self._limits = limits
        self._clock = clock

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def lease_until_ms(self) -> int:
        return self._now_ms() + int(self._limits.turn_lease_s * 1000)

    def refuse_while_leased(self, earlier: LeasedTurn) -> None:
        """TurnInProgressError while another delivery's lease on the id runs (it calls no model). The
        copy is told to poll again after `IN_PROGRESS_RETRY_AFTER_S` (never past the lease's end), not
        after the lease: the reply is usually stored within seconds, the lease lasts the turn's deadline."""
        if (left_ms := earlier.lease_until_ms - self._now_ms()) > 0:
            logger.info("A copy of a message being answered arrived; told to try again")
            left_s = max(1, math.ceil(left_ms / 1000))
            raise TurnInProgressError(min(self._limits.in_progress_retry_after_s, left_s))

    def take_over(
        self, user_id: str, client_id: str, earlier: LeasedTurn, since_ms: int, run: Callable[[Transaction], None]
    ) -> LeasedTurn:
        """Take the lease of an abandoned id for this delivery, in one transaction that `run` also counts by the
        rate limit (and runs, reading its refusals: rate limited, erased)."""
        lease, until, now_ms = secrets.token_hex(8), self.lease_until_ms(), self._now_ms()
        transaction = Transaction(self._table).add(
            RECORD_ITEM,
            "Update",
            {
                "Key": client_key(user_id, client_id),
                "UpdateExpression": "SET lease = :lease, lease_until_ms = :until",
                "ConditionExpression": (
                    "attribute_exists(sk) AND attribute_not_exists(reply_message_id) AND "
                    "(attribute_not_exists(lease_until_ms) OR lease_until_ms <= :now)"
                ),
                "ExpressionAttributeValues": {
                    ":lease": {"S": lease},
                    ":until": {"N": str(until)},
                    ":now": {"N": str(now_ms)},
                },
            },
        )
        erasure_guard(transaction, user_id, since_ms)
        try:
            run(transaction)
        except (TransactionCancelled, StoreError) as error:
            # Another copy took it over first, or its reply was stored, or our own write landed
            # and its answer was lost (a server that ignores the request token says the
            # condition failed): read what is stored now.
            if isinstance(error, TransactionCancelled) and RECORD_ITEM not in error.failed:
                raise
            now = self.earlier_turn(user_id, client_id, None)
            if now.reply is not None or now.lease != lease:
                if now.reply is not None:
                    return now
                self.refuse_while_leased(now)
                raise
        logger.info("An abandoned message is answered again (counted by the rate limit)")
        return replace(earlier, lease=lease, lease_until_ms=until)

    def release(self, user_id: str, client_id: str, lease: str) -> None:
        """Give up this delivery's lease on an id whose turn failed or was abandoned without a reply,
        so that a retry need not wait for the lease to run out (it is then counted again)."""
        try:
            with store_call("could not release the message id"):
                self._client.update_item(
                    TableName=self._table,
                    Key=client_key(user_id, client_id),
                    UpdateExpression="SET lease_until_ms = :free",
                    ConditionExpression="lease = :lease AND attribute_not_exists(reply_message_id)",
                    ExpressionAttributeValues={":free": {"N": "0"}, ":lease": {"S": lease}},
                )
        except ConditionFailed:
            pass  # answered after all, or taken over: nothing of ours to release

    def earlier_turn(self, user_id: str, client_id: str, content: str | None) -> LeasedTurn:
        """What an earlier delivery of `client_id` stored; ClientIdConflictError when its message
        differs from `content`."""
        with store_call("could not read the earlier delivery"):
            record = self._client.get_item(
                TableName=self._table, Key=client_key(user_id, client_id), ConsistentRead=True
            ).get("Item")
        if record is None:
            raise StoreError("the turn's record is missing")
        user_message = self._get_message(user_id, record["user_message_id"]["S"])
        reply_id = record.get("reply_message_id", {}).get("S")
        reply = self._get_message(user_id, reply_id) if reply_id else None
        delivered = bool(record.get("delivered", {}).get("BOOL", False))
        reply_text = record.get("reply_text", {}).get("S")
        if user_message is None:
            raise StoreError("the earlier delivery's message is missing")
        if content is not None and user_message.content != content:
            raise ClientIdConflictError("this client message id was already used for a different message")
        return LeasedTurn(
            user_message,
            reply,
            first=False,
            delivered=delivered,
            reply_text=reply_text,
            lease=record.get("lease", {}).get("S"),
            lease_until_ms=int(record.get("lease_until_ms", {}).get("N", "0")),
        )

    def _get_message(self, user_id: str, message_id: str) -> Message | None:
        with store_call("could not read the earlier delivery"):
            item = self._client.get_item(
                TableName=self._table, Key=user_key(user_id, message_sort_key(message_id)), ConsistentRead=True
            ).get("Item")
        return None if item is None else parse_message(item, self._clock())

    def lease_check_in(self, user_id: str, fire_key: str) -> bool:
        """Take the sending of a stored, undelivered check-in whose earlier sender's lease ran out
        (a firing that failed after storing it). False when it was delivered or is still leased."""
        now_ms = self._now_ms()
        try:
            with store_call("could not lease the check-in"):
                self._client.update_item(
                    TableName=self._table,
                    Key=client_key(user_id, check_in_id(fire_key)),
                    UpdateExpression="SET lease_until_ms = :until",
                    ConditionExpression="attribute_exists(sk) AND delivered = :no AND lease_until_ms <= :now",
                    ExpressionAttributeValues={
                        ":until": {"N": str(self.lease_until_ms())},
                        ":no": {"BOOL": False},
                        ":now": {"N": str(now_ms)},
                    },
                )
        except ConditionFailed:
            return False
        return True

    def mark_delivered(self, user_id: str, client_id: str) -> None:
        """Record that the reply to a client message id reached the person (so a retry sends nothing)."""
        try:
            with store_call("could not record the delivery"):
                self._client.update_item(
                    TableName=self._table,
                    Key=client_key(user_id, client_id),
                    UpdateExpression="SET delivered = :yes",
                    ConditionExpression="attribute_exists(sk)",
                    ExpressionAttributeValues={":yes": {"BOOL": True}},
                )
        except ConditionFailed as error:
            raise StoreError("could not record the delivery: the turn's record is missing") from error
