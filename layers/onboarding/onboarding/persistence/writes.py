"""Owns the writes into a user's partition: the user's message (once per client message id, counted
by the rate limit), the reply with its tool exchanges and the versioned state and profile in one
transaction, the delivery mark, and the summary's conditional write; and what every such write
shares: message ids that keep their order, the erasure guard, versioned puts, and recognising our
own write when its answer was lost.

Every message write is conditional on its key being new, so nothing is ever overwritten silently;
every write is guarded against an erase that happened after the turn began (`erasure_guard`).

A write whose response is lost (a dropped connection, a read timeout) is retried by botocore.
On DynamoDB the retried transaction carries the same `ClientRequestToken` and is answered as if it
ran once; a server that ignores the token (or a retry after its 10 minutes) answers that the new
keys are taken. So a taken key is first checked: if the stored item is exactly the one we wrote,
the write landed, and it is not written again under fresh keys.
"""

import secrets
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from onboarding.config import Limits, RateLimit
from onboarding.model.errors import (
    MemoryChangedError,
    StoreError,
    UserErasedError,
)
from onboarding.model.history import CommittedTurn, ConversationSummary, LeasedTurn, TurnCommit
from onboarding.model.messages import Message, Role
from onboarding.persistence.calls import (
    KeyCollision,
    Transaction,
    TransactionCancelled,
    run_once,
    store_call,
    versioned_put,
    with_fresh_keys,
)
from onboarding.persistence.client_records import RECORD_ITEM, ClientRecords
from onboarding.persistence.codec import message_item, profile_item, state_item, summary_item
from onboarding.persistence.erasure import ERASED_CHECK, erasure_guard
from onboarding.persistence.rate_limit import RATE_ITEM, RateLimiter
from onboarding.persistence.schema import CLIENT_ID_PATTERN, check_in_id, client_key, new_message_id

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


logger = Logger(child=True)


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


REPLY_MARK_ITEM, STATE_ITEM, PROFILE_ITEM, SUMMARY_ITEM = (
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
        records: ClientRecords,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._table = table_name
        self._limits = limits
        self._rate_limits = rate_limits
        self._clock = clock
        self._ttl_s = limits.message_ttl_s
        self._stamper = MessageStamper(clock)
        self._records = records

    def _since(self, since_ms: int | None) -> int:
        return int(self._clock() * 1000) if since_ms is None else since_ms

    def _add_message(self, transaction: Transaction, name: str, user_id: str, message: Message) -> None:
        item = message_item(user_id, message, self._ttl_s)
        transaction.add(name, "Put", {"Item": item, "ConditionExpression": "attribute_not_exists(sk)"})

    def _run(
        self, transaction: Transaction, what: str, rate_limit: RateLimit | None = None, new_keys: bool = True
    ) -> None:
        """Run `transaction` once (see `calls.run_once`; `new_keys`: it puts a new message, which
        is looked up when the answer is lost). UserErasedError when the user was erased since the
        turn began; RateLimitedError when the window is full; KeyCollision when a new key was taken
        or another transaction collided (try again with fresh keys); any other cancellation is
        raised for the caller to read."""
        try:
            if new_keys:
                run_once(self._client, transaction, what, _message_name(0))
            else:
                transaction.run(self._client, what)
        except TransactionCancelled as cancelled:
            if ERASED_CHECK in cancelled.failed:
                logger.info("Write refused: the user was erased after this turn began")
                raise UserErasedError("the user's data was erased while this message was being handled") from None
            if RECORD_ITEM in cancelled.failed:
                raise  # a client id recorded before: the caller replays the earlier delivery
            if rate_limit is not None and RATE_ITEM in cancelled.failed:
                raise self._rate_limits.refusal(rate_limit) from None
            if any(name.startswith("message-") for name in cancelled.failed) or not cancelled.failed:
                logger.warning("Message key taken or transaction conflict; retrying with new keys")
                raise KeyCollision from None
            raise

    def _add_record(
        self,
        transaction: Transaction,
        user_id: str,
        record: dict[str, Any],
        rate_limit: RateLimit | None,
        since_ms: int,
        what: str,
    ) -> bool:
        """Run `transaction` with a new client id's `record`, counted by `rate_limit` and guarded
        against an erase since `since_ms`; False when the id was recorded before (nothing stored)."""
        transaction.add(RECORD_ITEM, "Put", {"Item": record, "ConditionExpression": "attribute_not_exists(sk)"})
        if rate_limit is not None:
            self._rate_limits.add_count(transaction, user_id, rate_limit)
        erasure_guard(transaction, user_id, since_ms)
        try:
            self._run(transaction, what, rate_limit)
        except TransactionCancelled as cancelled:
            if RECORD_ITEM in cancelled.failed:
                return False
            raise
        return True

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

    def lease_user_message(
        self,
        user_id: str,
        client_id: str,
        content: str,
        rate_limit: RateLimit | None = None,
        since_ms: int | None = None,
    ) -> LeasedTurn:
        """Store the user's message once per `client_id`, and lease the id to this delivery while it
        answers it (`Limits.turn_lease_s`; decision 0009). A later delivery of the same id stores nothing:

        - the reply stored: it gets the first delivery's message and reply (a replay, no model call);
        - the first still answering: TurnInProgressError (it calls no model; it may ask again);
        - the first abandoned (its lease released by a failed turn, or run out): it takes the id over
          and answers the stored message, counted by `rate_limit` like a new message.

        So every model call is counted, and one id is answered by one model turn at a time."""
        if not CLIENT_ID_PATTERN.match(client_id):
            raise ValueError("a client message id is 1 to 128 letters, digits or _.:-")
        since = self._since(since_ms)

        def attempt() -> LeasedTurn:
            message = self._stamper.stamp(Message("user", content))
            lease, until = secrets.token_hex(8), self._records.lease_until_ms()
            transaction = Transaction(self._table)
            self._add_message(transaction, _message_name(0), user_id, message)
            record = {
                **client_key(user_id, client_id),
                "user_message_id": {"S": message.message_id},
                "expires_at": {"N": str(int(self._clock()) + self._limits.client_record_lifetime_s)},
                "lease": {"S": lease},
                "lease_until_ms": {"N": str(until)},
            }
            if not self._add_record(
                transaction, user_id, record, rate_limit, since, "could not store the user message"
            ):
                return self._leased_before(user_id, client_id, content, rate_limit, since)
            return LeasedTurn(message, reply=None, first=True, lease=lease, lease_until_ms=until)

        leased: LeasedTurn = self._fresh_keys("the user message", attempt)
        return leased

    def _leased_before(
        self, user_id: str, client_id: str, content: str, rate_limit: RateLimit | None, since_ms: int
    ) -> LeasedTurn:
        """A delivery of an id recorded before: the stored reply, in progress, or taken over."""
        earlier = self._records.earlier_turn(user_id, client_id, content)
        if earlier.reply is not None:
            return earlier
        self._records.refuse_while_leased(earlier)
        return self._records.take_over(user_id, client_id, earlier, since_ms, self._counted_run(user_id, rate_limit))

    def _counted_run(self, user_id: str, rate_limit: RateLimit | None) -> Callable[[Transaction], None]:
        """Runs a transaction counted by `rate_limit` (a refusal raised as `_run` raises it)."""

        def run(transaction: Transaction) -> None:
            if rate_limit is not None:
                self._rate_limits.add_count(transaction, user_id, rate_limit)
            self._run(transaction, "could not store the user message", rate_limit, new_keys=False)

        return run

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
                ours = " AND lease = :lease" if commit.lease is not None else ""
                mark = {
                    "Key": client_key(user_id, commit.client_id),
                    "UpdateExpression": "SET reply_message_id = :reply, reply_text = :text",
                    "ConditionExpression": "attribute_exists(sk) AND attribute_not_exists(reply_message_id)" + ours,
                    "ExpressionAttributeValues": {
                        ":reply": {"S": stored[-1].message_id},
                        ":text": {"S": commit.reply_text},
                    }
                    | ({":lease": {"S": commit.lease}} if commit.lease is not None else {}),
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
                    earlier = self._records.earlier_turn(user_id, commit.client_id, None)
                    if earlier.reply is None:  # this turn outlived its lease and another took the id over
                        raise StoreError("another delivery of this message is answering it") from cancelled
                    return CommittedTurn((earlier.reply,), earlier.reply_text or earlier.reply.content, earlier=True)
                if cancelled.failed & {STATE_ITEM, PROFILE_ITEM}:
                    raise MemoryChangedError("the state or profile changed since the turn read them") from None
                raise
            return CommittedTurn(stored, commit.reply_text)

        committed: CommittedTurn = self._fresh_keys("the assistant message", attempt)
        return committed

    def store_check_in(
        self,
        user_id: str,
        fire_key: str,
        text: str,
        since_ms: int,
        delivered: bool,
        rate_limit: RateLimit | None = None,
    ) -> LeasedTurn:
        """Store a check-in once per firing: the assistant message and the record of its key
        (`fire_key`: the schedule's fire time), in one transaction, counted by `rate_limit` like a
        message (RateLimitedError when the window is full). A later firing of the same
        time stores nothing and gets the first one's check-in (`first` False), delivered or not.
        A write that landed but whose answer was lost is recognised as ours (`run_once`), so it is
        neither lost nor stored twice. `delivered`: the check-in needs no sending (the app's).
        UserErasedError when the user was erased since `since_ms`."""
        client_id = check_in_id(fire_key)

        def attempt() -> LeasedTurn:
            message = self._stamper.stamp(Message("assistant", text))
            until = self._records.lease_until_ms()
            transaction = Transaction(self._table)
            self._add_message(transaction, _message_name(0), user_id, message)
            record = {
                **client_key(user_id, client_id),
                "user_message_id": {"S": message.message_id},
                "reply_message_id": {"S": message.message_id},
                "reply_text": {"S": text},
                "delivered": {"BOOL": delivered},
                "lease_until_ms": {"N": str(until)},
                "expires_at": {"N": str(int(self._clock()) + self._limits.client_record_lifetime_s)},
            }
            if not self._add_record(transaction, user_id, record, rate_limit, since_ms, "could not store the check-in"):
                return self._records.earlier_turn(user_id, client_id, None)
            return LeasedTurn(message, message, first=True, delivered=delivered, reply_text=text, lease_until_ms=until)

        stored: LeasedTurn = self._fresh_keys("the check-in", attempt)
        return stored

    def stored_check_in(self, user_id: str, fire_key: str) -> LeasedTurn | None:
        """The check-in stored for a firing, or None (one consistent read)."""
        key = client_key(user_id, check_in_id(fire_key))
        with store_call("could not read the check-in"):
            found = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item")
        return None if found is None else self._records.earlier_turn(user_id, check_in_id(fire_key), None)

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
