"""Owns a turn's writes: the user's message (once per client message id, counted by the rate
limit), the reply with its tool exchanges and the versioned state and profile in one transaction,
the delivery mark, and the summary's conditional write.

Every message write is conditional on its key being new, so nothing is ever overwritten silently;
every write is guarded against an erase that happened after the turn began (`writing`).
"""

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from onboarding.config import Limits, RateLimit
from onboarding.model.errors import ClientIdConflictError, MemoryChangedError, StoreError, UserErasedError
from onboarding.model.messages import Message, Role
from onboarding.model.records import ClaimedTurn, CommittedTurn, ConversationSummary, TurnCommit
from onboarding.persistence.calls import (
    ConditionFailed,
    KeyCollision,
    Transaction,
    TransactionCancelled,
    store_call,
    with_fresh_keys,
)
from onboarding.persistence.codec import message_item, parse_message, profile_item, state_item, summary_item
from onboarding.persistence.keys import CLIENT_ID_PATTERN, client_key, message_sort_key, user_key
from onboarding.persistence.rate_limit import RATE_ITEM, RateLimiter
from onboarding.persistence.writing import ERASED_CHECK, MessageStamper, erasure_guard, run_once, versioned_put

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = Logger(child=True)

CLAIM_ITEM, REPLY_MARK_ITEM, STATE_ITEM, PROFILE_ITEM, SUMMARY_ITEM = (
    "claim",
    "reply-mark",
    "state",
    "profile",
    "summary",
)


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
        self._stamper = MessageStamper(clock)

    def _since(self, since_ms: int | None) -> int:
        return int(self._clock() * 1000) if since_ms is None else since_ms

    def _add_message(self, transaction: Transaction, name: str, user_id: str, message: Message) -> None:
        item = message_item(user_id, message, self._ttl_s)
        transaction.add(name, "Put", {"Item": item, "ConditionExpression": "attribute_not_exists(sk)"})

    def _run(self, transaction: Transaction, what: str, rate_limit: RateLimit | None = None) -> None:
        """Run `transaction` once (see `writing.run_once`). UserErasedError when the user was erased
        since the turn began; RateLimitedError when the window is full; KeyCollision when a new key
        was taken or another transaction collided (try again with fresh keys); any other
        cancellation is raised for the caller to read."""
        try:
            run_once(self._client, transaction, what, _message_name(0))
        except TransactionCancelled as cancelled:
            if ERASED_CHECK in cancelled.failed:
                logger.info("Write refused: the user was erased after this turn began")
                raise UserErasedError("the user's data was erased while this message was being handled") from None
            if CLAIM_ITEM in cancelled.failed:
                raise  # a client id claimed before: the caller replays the earlier delivery
            if rate_limit is not None and RATE_ITEM in cancelled.failed:
                raise self._rate_limits.refusal(rate_limit) from None
            if any(name.startswith("message-") for name in cancelled.failed) or not cancelled.failed:
                logger.warning("Message key taken or transaction conflict; retrying with new keys")
                raise KeyCollision from None
            raise

    def _fresh_keys(self, what: str, attempt: Callable[[], Any]) -> Any:
        return with_fresh_keys(self._limits.write_attempts, what, attempt)

    def append_message(
        self, user_id: str, role: Role, content: str, rate_limit: RateLimit | None = None, since_ms: int | None = None
    ) -> Message:
        """Store one message after every message this writer wrote before; never overwrites. With a
        `rate_limit`, it is counted in the same transaction (RateLimitedError when full).
        `since_ms`: when the turn began (now by default), for the erasure guard."""
        since = self._since(since_ms)

        def attempt() -> Message:
            message = self._stamper.stamp(Message(role, content))
            transaction = Transaction(self._table)
            self._add_message(transaction, _message_name(0), user_id, message)
            if rate_limit is not None:
                self._rate_limits.add_count(transaction, user_id, rate_limit)
            erasure_guard(transaction, user_id, since)
            self._run(transaction, f"could not store the {role} message", rate_limit)
            return message

        message: Message = self._fresh_keys(f"the {role} message", attempt)
        return message

    def claim_user_message(
        self,
        user_id: str,
        client_id: str,
        content: str,
        rate_limit: RateLimit | None = None,
        since_ms: int | None = None,
    ) -> ClaimedTurn:
        """Store the user's message once per `client_id`: a second delivery of the same id stores
        nothing and gets the first one's message (and the reply, once stored). Only a first
        delivery counts against `rate_limit`."""
        if not CLIENT_ID_PATTERN.match(client_id):
            raise ValueError("a client message id is 1 to 128 letters, digits or _.:-")
        since = self._since(since_ms)

        def attempt() -> ClaimedTurn:
            message = self._stamper.stamp(Message("user", content))
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
            erasure_guard(transaction, user_id, since)
            try:
                self._run(transaction, "could not store the user message", rate_limit)
            except TransactionCancelled as cancelled:
                if CLAIM_ITEM in cancelled.failed:
                    return self.earlier_turn(user_id, client_id, content)
                raise
            return ClaimedTurn(message, reply=None, first=True)

        claimed: ClaimedTurn = self._fresh_keys("the user message", attempt)
        return claimed

    def commit_reply(self, commit: TurnCommit) -> CommittedTurn:
        """Store what a turn produced in ONE transaction: its tool calls and results, its reply, and
        the state and profile its tools changed, each only if still at the version the turn read
        (MemoryChangedError otherwise: re-read, apply the turn's changes again, commit again).
        Either all of it is stored or none of it.

        With a `client_id`, the last message is recorded as the reply to that client message id,
        unless an earlier delivery recorded one already: then nothing of this turn is stored and
        the earlier reply is returned.
        """
        if not commit.drafts:
            raise ValueError("a reply needs at least one message")
        user_id, memory = commit.user_id, commit.memory

        def attempt() -> CommittedTurn:
            stored = tuple(self._stamper.stamp(draft) for draft in commit.drafts)
            transaction = Transaction(self._table)
            for index, message in enumerate(stored):
                self._add_message(transaction, _message_name(index), user_id, message)
            if commit.client_id is not None:
                mark = {
                    "Key": client_key(user_id, commit.client_id),
                    "UpdateExpression": "SET reply_message_id = :reply, reply_text = :text",
                    "ConditionExpression": "attribute_exists(sk) AND attribute_not_exists(reply_message_id)",
                    "ExpressionAttributeValues": {
                        ":reply": {"S": stored[-1].message_id},
                        ":text": {"S": commit.reply_text},
                    },
                }
                transaction.add(REPLY_MARK_ITEM, "Update", mark)
            now = self._clock()
            if commit.state is not None:
                item = state_item(user_id, commit.state, now, memory.state_version + 1)
                transaction.add(STATE_ITEM, "Put", versioned_put(item, memory.state_version))
            if commit.profile is not None:
                item = profile_item(user_id, commit.profile, now, memory.profile_version + 1)
                transaction.add(PROFILE_ITEM, "Put", versioned_put(item, memory.profile_version))
            erasure_guard(transaction, user_id, commit.since_ms)
            try:
                self._run(transaction, "could not store the assistant message")
            except TransactionCancelled as cancelled:
                if commit.client_id is not None and REPLY_MARK_ITEM in cancelled.failed:
                    earlier = self.earlier_turn(user_id, commit.client_id, None)
                    if earlier.reply is None:
                        raise StoreError("the turn's record is missing") from cancelled
                    return CommittedTurn((earlier.reply,), earlier.reply_text or earlier.reply.content, earlier=True)
                if cancelled.failed & {STATE_ITEM, PROFILE_ITEM}:
                    raise MemoryChangedError("the state or profile changed since the turn read them") from None
                raise
            return CommittedTurn(stored, commit.reply_text)

        committed: CommittedTurn = self._fresh_keys("the assistant message", attempt)
        return committed

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
        reply_text = record.get("reply_text", {}).get("S")
        if user_message is None:
            raise StoreError("the earlier delivery's message is missing")
        if content is not None and user_message.content != content:
            raise ClientIdConflictError("this client message id was already used for a different message")
        return ClaimedTurn(user_message, reply, first=False, delivered=delivered, reply_text=reply_text)

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

    def save_summary(self, user_id: str, summary: ConversationSummary, since_ms: int | None = None) -> bool:
        """Store `summary` unless a summary that covers more is stored already (a later fold that
        finished first wins; this one is dropped) or the user was erased since `since_ms`. True if
        it was stored."""
        item = summary_item(user_id, summary, self._clock())
        transaction = Transaction(self._table).add(
            SUMMARY_ITEM,
            "Put",
            {
                "Item": item,
                "ConditionExpression": "attribute_not_exists(sk) OR through < :through",
                "ExpressionAttributeValues": {":through": {"S": summary.through_message_id}},
            },
        )
        erasure_guard(transaction, user_id, self._since(since_ms))
        try:
            run_once(self._client, transaction, "could not store the summary", SUMMARY_ITEM)
        except TransactionCancelled as cancelled:
            if cancelled.failed & {SUMMARY_ITEM, ERASED_CHECK}:
                return False
            raise
        return True
