"""Owns a turn's writes: the user's message (once per client message id, counted by the rate
limit), the reply with its tool exchanges, state and profile in one transaction, the delivery
mark, and the summary's conditional write.

Every message write is conditional on its key being new, so nothing is ever overwritten silently.
Within one process the millisecond part of a message id is strictly increasing (a burst moves it
forward by 1 ms a message), so messages written one after another keep their order.
"""

import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from onboarding.config import Limits, RateLimit
from onboarding.model.errors import ClientIdConflictError, StoreError
from onboarding.model.messages import Message, Role
from onboarding.model.profile import UserProfile
from onboarding.model.records import ClaimedTurn, ConversationSummary
from onboarding.model.state import OnboardingState
from onboarding.persistence.calls import (
    ConditionFailed,
    KeyCollision,
    Transaction,
    TransactionCancelled,
    store_call,
    with_fresh_keys,
)
from onboarding.persistence.codec import message_item, parse_message, profile_item, state_item, summary_item
from onboarding.persistence.keys import CLIENT_ID_PATTERN, client_key, message_sort_key, new_message_id, user_key
from onboarding.persistence.rate_limit import RATE_ITEM, RateLimiter

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = Logger(child=True)

CLAIM_ITEM, REPLY_MARK_ITEM = "claim", "reply-mark"


def _message_name(index: int) -> str:
    return f"message-{index}"


class TurnWriter:
    def __init__(
        self,
        client: "DynamoDBClient",
        table_name: str,
        limits: Limits,
        rate_limits: RateLimiter,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._table = table_name
        self._limits = limits
        self._rate_limits = rate_limits
        self._clock = clock
        self._ttl_s = limits.message_ttl_s
        self._last_ms = 0
        self._clock_lock = threading.Lock()

    def _new(self, draft: Message) -> Message:
        """`draft` with a fresh id and the next strictly increasing time."""
        with self._clock_lock:
            self._last_ms = created_ms = max(int(self._clock() * 1000), self._last_ms + 1)
        return Message(
            role=draft.role,
            content=draft.content,
            message_id=new_message_id(created_ms),
            created_at=datetime.fromtimestamp(created_ms / 1000, UTC),
            tool_calls=draft.tool_calls,
            tool_call_id=draft.tool_call_id,
        )

    def _add_message(self, transaction: Transaction, name: str, user_id: str, message: Message) -> None:
        item = message_item(user_id, message, self._ttl_s)
        transaction.add(name, "Put", {"Item": item, "ConditionExpression": "attribute_not_exists(sk)"})

    def append_message(self, user_id: str, role: Role, content: str, rate_limit: RateLimit | None = None) -> Message:
        """Store one message after every message this writer wrote before; never overwrites.
        With a `rate_limit`, it is counted in the same transaction (RateLimitedError when full)."""

        def attempt() -> Message:
            message = self._new(Message(role, content))
            transaction = Transaction(self._table)
            self._add_message(transaction, _message_name(0), user_id, message)
            if rate_limit is not None:
                self._rate_limits.add_count(transaction, user_id, rate_limit)
            self._write(transaction, f"could not store the {role} message", rate_limit)
            return message

        return with_fresh_keys(self._limits.write_attempts, f"the {role} message", attempt)

    def claim_user_message(
        self, user_id: str, client_id: str, content: str, rate_limit: RateLimit | None = None
    ) -> ClaimedTurn:
        """Store the user's message once per `client_id`: a second delivery of the same id stores
        nothing and gets the first one's message (and the reply, once stored). Only a first
        delivery counts against `rate_limit`."""
        if not CLIENT_ID_PATTERN.match(client_id):
            raise ValueError("a client message id is 1 to 128 letters, digits or _.:-")

        def attempt() -> ClaimedTurn:
            message = self._new(Message("user", content))
            transaction = Transaction(self._table)
            self._add_message(transaction, _message_name(0), user_id, message)
            claim = {
                "Item": {
                    **client_key(user_id, client_id),
                    "user_message_id": {"S": message.message_id},
                    "expires_at": {"N": str(int(self._clock()) + self._limits.client_record_lifetime_s)},
                },
                "ConditionExpression": "attribute_not_exists(sk)",
            }
            transaction.add(CLAIM_ITEM, "Put", claim)
            if rate_limit is not None:
                self._rate_limits.add_count(transaction, user_id, rate_limit)
            try:
                self._write(transaction, "could not store the user message", rate_limit)
            except TransactionCancelled as cancelled:
                if CLAIM_ITEM in cancelled.failed:
                    return self.earlier_turn(user_id, client_id, content)
                raise
            return ClaimedTurn(message, reply=None, first=True)

        return with_fresh_keys(self._limits.write_attempts, "the user message", attempt)

    def commit_reply(
        self,
        user_id: str,
        drafts: Sequence[Message],
        client_id: str | None = None,
        state: OnboardingState | None = None,
        profile: UserProfile | None = None,
    ) -> tuple[Message, ...]:
        """Store what a turn produced in ONE transaction: its tool calls and results, its reply, and
        the state and profile its tools changed. Either all of it is stored or none of it.

        With a `client_id`, the last message is recorded as the reply to that client message id,
        unless an earlier delivery recorded one already: then nothing of this turn is stored and
        the earlier reply is returned (as a one-message tuple).
        """
        if not drafts:
            raise ValueError("a reply needs at least one message")

        def attempt() -> tuple[Message, ...]:
            stored = tuple(self._new(draft) for draft in drafts)
            transaction = Transaction(self._table)
            for index, message in enumerate(stored):
                self._add_message(transaction, _message_name(index), user_id, message)
            if client_id is not None:
                mark = {
                    "Key": client_key(user_id, client_id),
                    "UpdateExpression": "SET reply_message_id = :reply",
                    "ConditionExpression": "attribute_exists(sk) AND attribute_not_exists(reply_message_id)",
                    "ExpressionAttributeValues": {":reply": {"S": stored[-1].message_id}},
                }
                transaction.add(REPLY_MARK_ITEM, "Update", mark)
            now = self._clock()
            if state is not None:
                transaction.add("state", "Put", {"Item": state_item(user_id, state, now)})
            if profile is not None:
                transaction.add("profile", "Put", {"Item": profile_item(user_id, profile, now)})
            try:
                self._write(transaction, "could not store the assistant message")
            except TransactionCancelled as cancelled:
                if client_id is not None and REPLY_MARK_ITEM in cancelled.failed:
                    earlier = self.earlier_turn(user_id, client_id, None).reply
                    if earlier is None:
                        raise StoreError("the turn's record is missing") from cancelled
                    return (earlier,)
                raise
            return stored

        return with_fresh_keys(self._limits.write_attempts, "the assistant message", attempt)

    def _write(self, transaction: Transaction, what: str, rate_limit: RateLimit | None = None) -> None:
        """Run `transaction` (one conditional Put when it is alone); a taken message key raises
        KeyCollision, a full rate-limit window RateLimitedError."""
        try:
            if (put := transaction.single_put()) is not None:
                with store_call(what):
                    self._client.put_item(**put)
            else:
                transaction.run(self._client, what)
        except ConditionFailed:
            raise KeyCollision from None
        except TransactionCancelled as cancelled:
            # A client id claimed before is a redelivery, which is replayed, not refused: it
            # counted against the window when it was first delivered.
            if CLAIM_ITEM in cancelled.failed:
                raise
            if rate_limit is not None and RATE_ITEM in cancelled.failed:
                raise self._rate_limits.refusal(rate_limit) from None
            if any(name.startswith("message-") for name in cancelled.failed):
                logger.warning("Message key collision, retrying with new keys")
                raise KeyCollision from None
            raise

    def earlier_turn(self, user_id: str, client_id: str, content: str | None) -> ClaimedTurn:
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
        if user_message is None:
            raise StoreError("the earlier delivery's message is missing")
        if content is not None and user_message.content != content:
            raise ClientIdConflictError("this client message id was already used for a different message")
        return ClaimedTurn(user_message, reply, first=False, delivered=delivered)

    def _get_message(self, user_id: str, message_id: str) -> Message | None:
        with store_call("could not read the earlier delivery"):
            item = self._client.get_item(
                TableName=self._table, Key=user_key(user_id, message_sort_key(message_id)), ConsistentRead=True
            ).get("Item")
        return None if item is None else parse_message(item, self._clock())

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

    def save_summary(self, user_id: str, summary: ConversationSummary) -> bool:
        """Store `summary` unless a summary that covers more is stored already (a later fold that
        finished first wins; this one is dropped). True if it was stored."""
        try:
            with store_call("could not store the summary"):
                self._client.put_item(
                    TableName=self._table,
                    Item=summary_item(user_id, summary, self._clock()),
                    ConditionExpression="attribute_not_exists(sk) OR through < :through",
                    ExpressionAttributeValues={":through": {"S": summary.through_message_id}},
                )
        except ConditionFailed:
            return False
        return True
