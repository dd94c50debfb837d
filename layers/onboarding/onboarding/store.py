"""The only module that speaks DynamoDB: one table, one partition per user.

Layout of a user's partition (`pk = USER#<user id>`), in sort-key order:

    CLIENT#<client message id>         which messages a client's (or Twilio's) message id produced
    CONTACT#<E.164 phone>              a phone number linked to this user (sorts before messages)
    LIMIT#<window number>              how many messages the user sent in one rate-limit window
    LINKCODE#<code>                    a link code this user created (expires with it), so erase finds it
    MSG#<13-digit epoch ms>#<random>   one item per message (user, assistant or tool), immutable
    ~PROFILE                           what the user told about themself (outlives conversations)
    ~STATE                             onboarding state (current agent, agent_context, waiting field)
    ~SUMMARY                           rolling summary of the messages that left the prompt window

Items a turn does not need sort before `MSG#`, so the newest-first Query never meets them.
Outside the user partitions:

    pk = PHONE#<E.164>, sk = ~OWNER    which user a phone number belongs to, and its SMS opt-out
    pk = LINK#<code>,   sk = ~LINK     a one-time code that links a phone to a user (expires)

Sort keys starting with `~` sort after every message, so ONE descending Query with
`Limit = messages + len(HEAD_ITEMS)` returns the per-user head items and the newest messages
together. The random suffix makes two messages written in the same millisecond distinct, and
every message write is conditional, so nothing is ever overwritten silently. Within one process
the millisecond part is also strictly increasing (a burst moves it forward by 1 ms a message), so
messages written one after another keep their order even inside one millisecond.
"""

import base64
import binascii
import json
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError
from pydantic import ValidationError

from onboarding.frozen import deep_freeze, thaw
from onboarding.profile import UserProfile
from onboarding.state import OnboardingState, WaitingFor

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

logger = Logger(child=True)

Role = Literal["user", "assistant", "tool"]
USER_PREFIX = "USER#"
MESSAGE_PREFIX = "MSG#"
STATE_SORT_KEY = "~STATE"
PROFILE_SORT_KEY = "~PROFILE"
SUMMARY_SORT_KEY = "~SUMMARY"
HEAD_ITEMS = (PROFILE_SORT_KEY, STATE_SORT_KEY, SUMMARY_SORT_KEY)
CONTACT_PREFIX = "CONTACT#"
CLIENT_PREFIX = "CLIENT#"
CLIENT_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
CLIENT_RECORD_LIFETIME_S = 7 * 24 * 3600  # deliveries are retried for minutes or hours, not weeks
RATE_PREFIX = "LIMIT#"
PHONE_PREFIX = "PHONE#"
PHONE_OWNER_SORT_KEY = "~OWNER"
LINK_PREFIX = "LINK#"
LINK_SORT_KEY = "~LINK"
LINK_POINTER_PREFIX = "LINKCODE#"
LINK_CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: codes are typed on phones
LINK_CODE_LENGTH = 10  # 31**10 ≈ 8e14 codes: guessing one inside its lifetime is hopeless
_WRITE_ATTEMPTS = 3
_BATCH_WRITE_ITEMS = 25  # BatchWriteItem's limit per request
# botocore retries a failed request, but not the UnprocessedItems of a successful one, so erase
# resends those itself, with botocore's full-jitter exponential backoff, a bounded number of times.
_BATCH_ATTEMPTS = 8
_BATCH_BACKOFF_BASE_S = 0.05
_BATCH_BACKOFF_MAX_S = 2.0
_JITTER = secrets.SystemRandom()  # for spreading retries, not for secrets; avoids the global RNG


_MESSAGE_SORT_KEY = re.compile(r"^MSG#\d{13}#[0-9a-f]{12}$")


class StoreError(Exception):
    """The table could not be read or written (after botocore's own retries)."""


@dataclass(frozen=True)
class RateLimit:
    """At most `messages` user messages per `window_s` seconds, counted in fixed windows."""

    messages: int
    window_s: int


class RateLimitedError(Exception):
    """The user sent more messages than the rate limit allows; this one was not stored."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many messages; try again in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class InvalidCursorError(ValueError):
    """A history cursor that this store did not hand out."""


@dataclass(frozen=True)
class ToolCall:
    """A tool the model called inside a turn: Converse's `toolUse` block."""

    call_id: str
    name: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class StoredMessage:
    """One message. An assistant message may carry tool calls (its text may then be empty); a
    `tool` message is the result of the call `tool_call_id` names."""

    message_id: str
    role: Role
    content: str
    created_at: datetime
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class NewMessage:
    """A message a turn produced, before the store gives it an id and a time."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class ConversationSummary:
    """The rolling summary; it covers every message up to and including `through_message_id`."""

    text: str
    through_message_id: str


@dataclass(frozen=True)
class HistoryPage:
    """Messages newest first; `next_cursor` continues after the last one (None at the end)."""

    messages: tuple[StoredMessage, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class ClaimedTurn:
    """The user's message for a client message id; `first` is False when an earlier delivery of the
    same id already stored it, and `reply` is the coach's stored reply to it, if there is one."""

    user_message: StoredMessage
    reply: StoredMessage | None
    first: bool
    delivered: bool = False  # the reply reached the person (recorded by `mark_delivered`)


class ClientIdConflictError(ValueError):
    """A client message id that was already used for a different message."""


@dataclass(frozen=True)
class PhoneOwner:
    """The user a phone number belongs to, and whether the number opted out of SMS."""

    phone: str
    user_id: str
    opted_out: bool


@dataclass(frozen=True)
class LinkCode:
    code: str
    expires_at: datetime


@dataclass(frozen=True)
class ErasureReport:
    """What `erase_user` deleted, counted by kind. A phone's CONTACT# item and a link code's
    pointer are halves of the phone and the code, not counted on their own."""

    messages: int = 0
    state_items: int = 0  # onboarding state, profile and summary
    phone_numbers: int = 0  # PHONE# owner items that still named this user
    dedupe_records: int = 0  # CLIENT# items: which message a client or Twilio message id produced
    rate_counters: int = 0  # LIMIT# items
    link_codes: int = 0  # LINK# codes this user created that were still stored
    other_items: int = 0  # partition items of a kind this version does not know (deleted all the same)

    @property
    def total(self) -> int:
        return (
            self.messages
            + self.state_items
            + self.phone_numbers
            + self.dedupe_records
            + self.rate_counters
            + self.link_codes
            + self.other_items
        )


@dataclass(frozen=True)
class LoadedTurnContext:
    """What a turn needs from the table: state, profile, summary and the newest messages, oldest first."""

    state: OnboardingState
    messages: tuple[StoredMessage, ...]
    profile: UserProfile = field(default_factory=UserProfile)
    summary: ConversationSummary | None = None


def _partition(user_id: str) -> "AttributeValueTypeDef":
    return {"S": f"{USER_PREFIX}{user_id}"}


_E164 = re.compile(r"^\+[1-9]\d{6,14}$")


class InvalidPhoneError(ValueError):
    """Not a phone number in E.164 form (`+` and 7 to 15 digits)."""


def normalize_link_code(text: str) -> str | None:
    """The code in `text` as stored (typed loosely: any case, spaces or dashes), or None if it is
    not shaped like one."""
    normalized = re.sub(r"[\s-]", "", text).upper()
    if len(normalized) != LINK_CODE_LENGTH or any(c not in LINK_CODE_ALPHABET for c in normalized):
        return None
    return normalized


def _phone_key(phone: str) -> dict[str, Any]:
    if not _E164.match(phone):
        raise InvalidPhoneError("a phone number must be in E.164 form, like +15551234567")
    return {"pk": {"S": f"{PHONE_PREFIX}{phone}"}, "sk": {"S": PHONE_OWNER_SORT_KEY}}


def _message_sort_key(message_id: str) -> str:
    created_ms, suffix = message_id.split("-", 1)
    return f"{MESSAGE_PREFIX}{created_ms}#{suffix}"


def _message_id(sort_key: str) -> str:
    created_ms, suffix = sort_key.removeprefix(MESSAGE_PREFIX).split("#", 1)
    return f"{created_ms}-{suffix}"


def _new_message_id(created_ms: int) -> str:
    return f"{created_ms:013d}-{secrets.token_hex(6)}"


def _encode_cursor(sort_key: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"v": 1, "after": sort_key}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    """The message sort key a cursor continues after. Only a message key is accepted; the
    partition always comes from the caller's user id, so a cursor cannot reach another user."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        sort_key = decoded.get("after") if isinstance(decoded, dict) and decoded.get("v") == 1 else None
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise InvalidCursorError("the cursor is not one this API handed out") from error
    if not isinstance(sort_key, str) or not _MESSAGE_SORT_KEY.match(sort_key):
        raise InvalidCursorError("the cursor is not one this API handed out")
    return sort_key


class ConversationStore:
    """Reads and writes a user's messages and onboarding state."""

    def __init__(
        self,
        client: "DynamoDBClient",
        table_name: str,
        clock: Callable[[], float] = time.time,
        message_ttl_s: int | None = None,
    ) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock
        # Messages expire this long after they were written (DynamoDB's TTL removes them days
        # later, so reads skip expired ones themselves). None keeps them until erased.
        self._message_ttl_s = message_ttl_s
        self._last_ms = 0
        self._clock_lock = threading.Lock()

    def _next_ms(self) -> int:
        with self._clock_lock:
            self._last_ms = max(int(self._clock() * 1000), self._last_ms + 1)
            return self._last_ms

    def load_turn_context(self, user_id: str, message_limit: int = 20) -> LoadedTurnContext:
        """The user's state and newest `message_limit` messages (oldest first), in one Query.

        A second page is read only when DynamoDB's 1 MB page limit cut the first one short.
        Items that cannot be understood are skipped with a warning, never fatal.
        """
        state = OnboardingState.initial()
        profile = UserProfile()
        summary: ConversationSummary | None = None
        newest_first: list[StoredMessage] = []
        items, _ = self._query_newest(user_id, message_limit + len(HEAD_ITEMS))
        for item in items:
            sort_key = item.get("sk", {}).get("S", "")
            if sort_key == STATE_SORT_KEY:
                state = self._parse_state(item) or state
            elif sort_key == PROFILE_SORT_KEY:
                profile = self._parse_profile(item) or profile
            elif sort_key == SUMMARY_SORT_KEY:
                summary = self._parse_summary(item)
            elif (
                sort_key.startswith(MESSAGE_PREFIX)
                and len(newest_first) < message_limit
                and (message := self._parse_message(item)) is not None
            ):
                newest_first.append(message)
        return LoadedTurnContext(state=state, messages=tuple(reversed(newest_first)), profile=profile, summary=summary)

    def append_message(
        self, user_id: str, role: Role, content: str, rate_limit: RateLimit | None = None
    ) -> StoredMessage:
        """Store one message after every message this store wrote before; never overwrites.

        With a `rate_limit`, the message is counted in the same transaction that stores it, so a
        refused message is not stored and a stored one is always counted (RateLimitedError).
        """
        for _ in range(_WRITE_ATTEMPTS):
            message = self._new_message(role, content)
            try:
                if rate_limit is None:
                    self._client.put_item(**self._message_put(user_id, message)["Put"])
                else:
                    self._client.transact_write_items(
                        TransactItems=[self._message_put(user_id, message), self._rate_count(user_id, rate_limit)]
                    )
                return message
            except ClientError as error:
                reasons = [r.get("Code") for r in error.response.get("CancellationReasons") or []]
                if rate_limit is not None and reasons[1:2] == ["ConditionalCheckFailed"]:
                    raise self._refusal(rate_limit) from None
                collided = reasons[:1] == ["ConditionalCheckFailed"] or (
                    error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
                )
                if not collided:
                    raise StoreError(f"could not store the {role} message") from error
                logger.warning("Message key collision, retrying with a new key")
        raise StoreError(f"could not find a free key for the {role} message")

    def _rate_window(self, rate_limit: RateLimit) -> tuple[int, float]:
        """The current window's number, and the time it ends."""
        now = self._clock()
        window = int(now // rate_limit.window_s)
        return window, (window + 1) * rate_limit.window_s

    def _rate_count(self, user_id: str, rate_limit: RateLimit) -> Any:
        """A transaction item that counts one message, and fails when the window is full."""
        window, ends = self._rate_window(rate_limit)
        return {
            "Update": {
                "TableName": self._table,
                "Key": {"pk": _partition(user_id), "sk": {"S": f"{RATE_PREFIX}{window}"}},
                "UpdateExpression": "ADD #count :one SET expires_at = :expires",
                "ConditionExpression": "attribute_not_exists(#count) OR #count < :max",
                "ExpressionAttributeNames": {"#count": "message_count"},
                "ExpressionAttributeValues": {
                    ":one": {"N": "1"},
                    ":max": {"N": str(rate_limit.messages)},
                    # Kept an hour past its window, then DynamoDB's TTL removes it.
                    ":expires": {"N": str(int(ends) + 3600)},
                },
            }
        }

    def _refusal(self, rate_limit: RateLimit) -> RateLimitedError:
        _, ends = self._rate_window(rate_limit)
        logger.info("Message refused by the rate limit")
        return RateLimitedError(max(1, math.ceil(ends - self._clock())))

    def claim_rate_notice(self, user_id: str, rate_limit: RateLimit) -> bool:
        """True the first time it is called in a full window: the one refusal the user is told
        about over SMS, so a burst of texts is not answered by a burst of warnings."""
        window, _ = self._rate_window(rate_limit)
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": _partition(user_id), "sk": {"S": f"{RATE_PREFIX}{window}"}},
                UpdateExpression="SET notified = :yes",
                ConditionExpression="attribute_exists(sk) AND attribute_not_exists(notified)",
                ExpressionAttributeValues={":yes": {"BOOL": True}},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise StoreError("could not record the rate-limit notice") from error
        return True

    def append_user_message_once(
        self, user_id: str, client_id: str, content: str, rate_limit: RateLimit | None = None
    ) -> ClaimedTurn:
        """Store the user's message once per `client_id`: a second delivery of the same id stores
        nothing and gets the first one's message (and the reply, once stored). Only a first
        delivery counts against `rate_limit`."""
        if not CLIENT_ID_PATTERN.match(client_id):
            raise ValueError("a client message id is 1 to 128 letters, digits or _.:-")
        for _ in range(_WRITE_ATTEMPTS):
            message = self._new_message("user", content)
            claim: Any = {
                "Put": {
                    "TableName": self._table,
                    "Item": {
                        **self._client_key(user_id, client_id),
                        "user_message_id": {"S": message.message_id},
                        "expires_at": {"N": str(int(self._clock()) + CLIENT_RECORD_LIFETIME_S)},
                    },
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            }
            items = [self._message_put(user_id, message), claim]
            if rate_limit is not None:
                items.append(self._rate_count(user_id, rate_limit))
            try:
                self._client.transact_write_items(TransactItems=items)
                return ClaimedTurn(message, reply=None, first=True)
            except ClientError as error:
                reasons = [r.get("Code") for r in error.response.get("CancellationReasons") or []]
                if reasons[1:2] == ["ConditionalCheckFailed"]:
                    return self._earlier_turn(user_id, client_id, content)
                if rate_limit is not None and reasons[2:3] == ["ConditionalCheckFailed"]:
                    raise self._refusal(rate_limit) from None
                if reasons[:1] != ["ConditionalCheckFailed"]:
                    raise StoreError("could not store the user message") from error
                logger.warning("Message key collision, retrying with a new key")
        raise StoreError("could not find a free key for the user message")

    def append_reply_once(self, user_id: str, client_id: str, content: str) -> StoredMessage:
        """Store the reply to a client message id's turn, unless one is stored already (then that one)."""
        return self.append_reply(user_id, [NewMessage("assistant", content)], client_id=client_id)[-1]

    def append_reply(
        self,
        user_id: str,
        messages: Sequence[NewMessage],
        client_id: str | None = None,
        state: OnboardingState | None = None,
        profile: UserProfile | None = None,
    ) -> tuple[StoredMessage, ...]:
        """Store what a turn produced in ONE transaction: its tool calls and results, its reply, and
        the state and profile its tools changed. Either all of it is stored or none of it.

        With a `client_id`, the last message is recorded as the reply to that client message id,
        unless an earlier delivery recorded one already: then nothing of this turn is stored and
        the earlier reply is returned (as a one-message tuple).
        """
        if not messages:
            raise ValueError("a reply needs at least one message")
        for _ in range(_WRITE_ATTEMPTS):
            stored = tuple(self._new_message(m.role, m.content, m.tool_calls, m.tool_call_id) for m in messages)
            items: list[Any] = [self._message_put(user_id, message) for message in stored]
            if client_id is not None:
                items.append(
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": self._client_key(user_id, client_id),
                            "UpdateExpression": "SET reply_message_id = :reply",
                            "ConditionExpression": "attribute_exists(sk) AND attribute_not_exists(reply_message_id)",
                            "ExpressionAttributeValues": {":reply": {"S": stored[-1].message_id}},
                        }
                    }
                )
            if state is not None:
                items.append({"Put": {"TableName": self._table, "Item": self._state_item(user_id, state)}})
            if profile is not None:
                items.append({"Put": {"TableName": self._table, "Item": self._profile_item(user_id, profile)}})
            try:
                if len(items) == 1:
                    self._client.put_item(**items[0]["Put"])
                else:
                    self._client.transact_write_items(TransactItems=items)
                return stored
            except ClientError as error:
                reasons = [r.get("Code") for r in error.response.get("CancellationReasons") or []]
                if client_id is not None and reasons[len(stored) : len(stored) + 1] == ["ConditionalCheckFailed"]:
                    earlier = self._earlier_turn(user_id, client_id, None).reply
                    if earlier is None:
                        raise StoreError("the turn's record is missing") from error
                    return (earlier,)
                collided = "ConditionalCheckFailed" in reasons[: len(stored)] or (
                    error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
                )
                if not collided:
                    raise StoreError("could not store the assistant message") from error
                logger.warning("Message key collision, retrying with new keys")
        raise StoreError("could not find a free key for the assistant message")

    def _earlier_turn(self, user_id: str, client_id: str, content: str | None) -> ClaimedTurn:
        try:
            record = self._client.get_item(
                TableName=self._table, Key=self._client_key(user_id, client_id), ConsistentRead=True
            ).get("Item")
            if record is None:
                raise StoreError("the turn's record is missing")
            user_message = self._get_message(user_id, record["user_message_id"]["S"])
            reply_id = record.get("reply_message_id", {}).get("S")
            reply = self._get_message(user_id, reply_id) if reply_id else None
            delivered = bool(record.get("delivered", {}).get("BOOL", False))
        except ClientError as error:
            raise StoreError("could not read the earlier delivery") from error
        if user_message is None:
            raise StoreError("the earlier delivery's message is missing")
        if content is not None and user_message.content != content:
            raise ClientIdConflictError("this client message id was already used for a different message")
        return ClaimedTurn(user_message, reply, first=False, delivered=delivered)

    def mark_delivered(self, user_id: str, client_id: str) -> None:
        """Record that the reply to a client message id reached the person (so a retry sends nothing)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._client_key(user_id, client_id),
                UpdateExpression="SET delivered = :yes",
                ConditionExpression="attribute_exists(sk)",
                ExpressionAttributeValues={":yes": {"BOOL": True}},
            )
        except ClientError as error:
            raise StoreError("could not record the delivery") from error

    def _get_message(self, user_id: str, message_id: str) -> StoredMessage | None:
        item = self._client.get_item(
            TableName=self._table,
            Key={"pk": _partition(user_id), "sk": {"S": _message_sort_key(message_id)}},
            ConsistentRead=True,
        ).get("Item")
        return None if item is None else self._parse_message(item)

    def _new_message(
        self, role: Role, content: str, tool_calls: tuple[ToolCall, ...] = (), tool_call_id: str | None = None
    ) -> StoredMessage:
        created_ms = self._next_ms()
        return StoredMessage(
            message_id=_new_message_id(created_ms),
            role=role,
            content=content,
            created_at=datetime.fromtimestamp(created_ms / 1000, UTC),
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
        )

    def _message_put(self, user_id: str, message: StoredMessage) -> Any:
        item: dict[str, Any] = {
            "pk": _partition(user_id),
            "sk": {"S": _message_sort_key(message.message_id)},
            "role": {"S": message.role},
            "content": {"S": message.content},
            "created_at": {"S": message.created_at.isoformat()},
        }
        if message.tool_calls:
            calls = [{"id": c.call_id, "name": c.name, "args": thaw(c.args)} for c in message.tool_calls]
            item["tool_calls"] = {"S": json.dumps(calls, ensure_ascii=False)}
        if message.tool_call_id is not None:
            item["tool_call_id"] = {"S": message.tool_call_id}
        if self._message_ttl_s is not None:
            item["expires_at"] = {"N": str(int(message.created_at.timestamp()) + self._message_ttl_s)}
        return {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(sk)"}}

    @staticmethod
    def _client_key(user_id: str, client_id: str) -> dict[str, Any]:
        return {"pk": _partition(user_id), "sk": {"S": f"{CLIENT_PREFIX}{client_id}"}}

    def history_page(self, user_id: str, limit: int = 20, cursor: str | None = None) -> HistoryPage:
        """One page of the user's messages, newest first, continuing after `cursor`."""
        if not 1 <= limit <= 100:
            raise ValueError("limit must be between 1 and 100")
        start = {"pk": _partition(user_id), "sk": {"S": _decode_cursor(cursor)}} if cursor else None
        items, more = self._query_newest(user_id, limit, messages_only=True, exclusive_start_key=start)
        messages = tuple(message for item in items if (message := self._parse_message(item)) is not None)
        next_cursor = _encode_cursor(items[-1]["sk"]["S"]) if more and items else None
        return HistoryPage(messages=messages, next_cursor=next_cursor)

    def save_state(self, user_id: str, state: OnboardingState) -> None:
        """Replace the user's onboarding state."""
        try:
            self._client.put_item(TableName=self._table, Item=self._state_item(user_id, state))
        except ClientError as error:
            raise StoreError("could not store the onboarding state") from error

    def save_profile(self, user_id: str, profile: UserProfile) -> None:
        """Replace the user's profile."""
        try:
            self._client.put_item(TableName=self._table, Item=self._profile_item(user_id, profile))
        except ClientError as error:
            raise StoreError("could not store the profile") from error

    def save_summary(self, user_id: str, summary: ConversationSummary) -> bool:
        """Store `summary` unless a summary that covers more is stored already (a later fold that
        finished first wins; this one is dropped). True if it was stored."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    "pk": _partition(user_id),
                    "sk": {"S": SUMMARY_SORT_KEY},
                    "text": {"S": summary.text},
                    "through": {"S": summary.through_message_id},
                    "updated_at": {"S": datetime.fromtimestamp(self._clock(), UTC).isoformat()},
                },
                ConditionExpression="attribute_not_exists(sk) OR through < :through",
                ExpressionAttributeValues={":through": {"S": summary.through_message_id}},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise StoreError("could not store the summary") from error
        return True

    def _state_item(self, user_id: str, state: OnboardingState) -> dict[str, Any]:
        dumped = state.model_dump(mode="json")
        item: dict[str, Any] = {
            "pk": _partition(user_id),
            "sk": {"S": STATE_SORT_KEY},
            "current_agent": {"S": state.current_agent.value},
            "agent_context": {"S": json.dumps(dumped["agent_context"], ensure_ascii=False)},
            "skipped": {"S": json.dumps(dumped["skipped"])},
            "updated_at": {"S": datetime.fromtimestamp(self._clock(), UTC).isoformat()},
        }
        if state.waiting_for is not None:
            item["waiting_for"] = {"S": json.dumps(dumped["waiting_for"])}
        if state.completed_at is not None:
            item["completed_at"] = {"S": state.completed_at.isoformat()}
        return item

    def _profile_item(self, user_id: str, profile: UserProfile) -> dict[str, Any]:
        return {
            "pk": _partition(user_id),
            "sk": {"S": PROFILE_SORT_KEY},
            "profile": {"S": profile.model_dump_json()},
            "updated_at": {"S": datetime.fromtimestamp(self._clock(), UTC).isoformat()},
        }

    def phone_owner(self, phone: str) -> PhoneOwner | None:
        """Who `phone` belongs to, or None if it never wrote to us nor was linked."""
        try:
            item = self._client.get_item(TableName=self._table, Key=_phone_key(phone), ConsistentRead=True).get("Item")
        except ClientError as error:
            raise StoreError("could not read the phone number's owner") from error
        if item is None:
            return None
        try:
            return PhoneOwner(phone, item["user_id"]["S"], item.get("opted_out", {}).get("BOOL", False))
        except (KeyError, TypeError) as error:
            raise StoreError("the phone number's owner item is malformed") from error

    def owner_for_phone(self, phone: str, new_user_id: Callable[[], str]) -> PhoneOwner:
        """The phone's owner; a number we have never seen becomes a new user `new_user_id()`."""
        for _ in range(_WRITE_ATTEMPTS):
            if (owner := self.phone_owner(phone)) is not None:
                return owner
            user_id = new_user_id()
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": {**_phone_key(phone), "user_id": {"S": user_id}, "opted_out": {"BOOL": False}},
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                        {"Put": {"TableName": self._table, "Item": self._contact_item(user_id, phone)}},
                    ]
                )
                return PhoneOwner(phone, user_id, opted_out=False)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise StoreError("could not record the phone number's owner") from error
                logger.info("Phone number claimed concurrently; reading the winner")
        raise StoreError("could not settle the phone number's owner")

    def link_phone(self, phone: str, user_id: str) -> PhoneOwner:
        """Make `phone` belong to `user_id`; keeps its opt-out. (Callers prove possession first:
        see `link_phone_by_code`.)"""
        previous = self.phone_owner(phone)
        try:
            self._client.transact_write_items(TransactItems=self._link_items(phone, user_id, previous))
        except ClientError as error:
            raise StoreError("could not link the phone number") from error
        return PhoneOwner(phone, user_id, previous.opted_out if previous else False)

    def link_phone_by_code(self, phone: str, code: str) -> PhoneOwner | None:
        """Link `phone` to the user a one-time code was made for, using the code up in the same
        transaction: a failed link leaves the code usable, and a code links one phone only once.
        An unknown, expired or already used code gives None."""
        normalized = normalize_link_code(code)
        if normalized is None:
            return None
        code_key = {"pk": {"S": f"{LINK_PREFIX}{normalized}"}, "sk": {"S": LINK_SORT_KEY}}
        try:
            item = self._client.get_item(TableName=self._table, Key=code_key, ConsistentRead=True).get("Item")
        except ClientError as error:
            raise StoreError("could not read the link code") from error
        now = int(self._clock())
        # TTL deletion lags by days, so the expiry is checked here, and again in the transaction.
        if item is None or int(item.get("expires_at", {}).get("N", "0")) <= now:
            return None
        user_id = item["user_id"]["S"]
        previous = self.phone_owner(phone)
        use_code: Any = {
            "Delete": {
                "TableName": self._table,
                "Key": code_key,
                "ConditionExpression": "user_id = :user AND expires_at > :now",
                "ExpressionAttributeValues": {":user": {"S": user_id}, ":now": {"N": str(now)}},
            }
        }
        try:
            self._client.transact_write_items(TransactItems=[use_code, *self._link_items(phone, user_id, previous)])
        except ClientError as error:
            reasons = error.response.get("CancellationReasons") or []
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                return None  # used (or expired) between our read and the transaction
            raise StoreError("could not link the phone number") from error
        return PhoneOwner(phone, user_id, previous.opted_out if previous else False)

    def _link_items(self, phone: str, user_id: str, previous: PhoneOwner | None) -> list[Any]:
        """The writes that move `phone` to `user_id`, conditional on its owner not having changed."""
        condition: dict[str, Any] = (
            {
                "ConditionExpression": "user_id = :previous",
                "ExpressionAttributeValues": {":previous": {"S": previous.user_id}},
            }
            if previous
            else {"ConditionExpression": "attribute_not_exists(pk)"}
        )
        opted_out = previous.opted_out if previous else False
        items: list[Any] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": {**_phone_key(phone), "user_id": {"S": user_id}, "opted_out": {"BOOL": opted_out}},
                    **condition,
                }
            },
            {"Put": {"TableName": self._table, "Item": self._contact_item(user_id, phone)}},
        ]
        if previous and previous.user_id != user_id:
            items.append(
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": {"pk": _partition(previous.user_id), "sk": {"S": f"{CONTACT_PREFIX}{phone}"}},
                    }
                }
            )
        return items

    def set_opted_out(self, phone: str, opted_out: bool) -> None:
        """Record an SMS opt-out (STOP) or opt-in (START) for a number we know."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_phone_key(phone),
                UpdateExpression="SET opted_out = :opted_out",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":opted_out": {"BOOL": opted_out}},
            )
        except ClientError as error:
            raise StoreError("could not record the SMS opt-out") from error

    def phones_of(self, user_id: str) -> tuple[str, ...]:
        """Every phone number linked to the user."""
        try:
            page = self._client.query(
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :contact)",
                ExpressionAttributeValues={":pk": _partition(user_id), ":contact": {"S": CONTACT_PREFIX}},
            )
        except ClientError as error:
            raise StoreError("could not read the user's phone numbers") from error
        return tuple(item["sk"]["S"].removeprefix(CONTACT_PREFIX) for item in page.get("Items", []))

    def create_link_code(self, user_id: str, lifetime_s: int = 600) -> LinkCode:
        """A one-time code the user texts from a phone to link that phone to their account."""
        now = self._clock()
        for _ in range(_WRITE_ATTEMPTS):
            code = "".join(secrets.choice(LINK_CODE_ALPHABET) for _ in range(LINK_CODE_LENGTH))
            expires = int(now) + lifetime_s
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": {
                                    "pk": {"S": f"{LINK_PREFIX}{code}"},
                                    "sk": {"S": LINK_SORT_KEY},
                                    "user_id": {"S": user_id},
                                    "expires_at": {"N": str(expires)},
                                },
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                        # The code lives outside the user's partition; this pointer (gone with it by
                        # TTL) is how `erase_user` finds it. Same transaction: never one without the other.
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": {
                                    "pk": _partition(user_id),
                                    "sk": {"S": f"{LINK_POINTER_PREFIX}{code}"},
                                    "expires_at": {"N": str(expires)},
                                },
                            }
                        },
                    ]
                )
                return LinkCode(code, datetime.fromtimestamp(expires, UTC))
            except ClientError as error:
                reasons = [r.get("Code") for r in error.response.get("CancellationReasons") or []]
                if reasons[:1] != ["ConditionalCheckFailed"]:
                    raise StoreError("could not store the link code") from error
        raise StoreError("could not find a free link code")

    @staticmethod
    def _contact_item(user_id: str, phone: str) -> dict[str, Any]:
        return {"pk": _partition(user_id), "sk": {"S": f"{CONTACT_PREFIX}{phone}"}}

    def _query_newest(
        self,
        user_id: str,
        limit: int,
        messages_only: bool = False,
        exclusive_start_key: dict[str, Any] | None = None,
    ) -> tuple[list[Mapping[str, Any]], bool]:
        """Up to `limit` items of the partition, highest sort key first, and whether more may follow.

        Usually one request; another only when DynamoDB's 1 MB page limit cut a page short.
        """
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk" + (" AND begins_with(sk, :messages)" if messages_only else ""),
            "ExpressionAttributeValues": {":pk": _partition(user_id)}
            | ({":messages": {"S": MESSAGE_PREFIX}} if messages_only else {}),
            "ScanIndexForward": False,
        }
        items: list[Mapping[str, Any]] = []
        start_key = exclusive_start_key
        while len(items) < limit:
            page_request = request | {"Limit": limit - len(items)}
            if start_key:
                page_request["ExclusiveStartKey"] = start_key
            try:
                page = self._client.query(**page_request)
            except ClientError as error:
                raise StoreError("could not read the conversation") from error
            items.extend(page.get("Items", []))
            start_key = page.get("LastEvaluatedKey")
            if not start_key:
                return items, False
        return items, True

    def _parse_message(self, item: Mapping[str, Any]) -> StoredMessage | None:
        """The message in `item`; None for an expired one (TTL deletion lags by days) or, with a
        warning, for one that cannot be understood."""
        try:
            expires_at = item.get("expires_at", {}).get("N")
            if expires_at is not None and int(expires_at) <= self._clock():
                return None
            role = item["role"]["S"]
            if role not in ("user", "assistant", "tool"):
                raise ValueError("unknown role")
            calls = json.loads(item["tool_calls"]["S"]) if "tool_calls" in item else []
            tool_call_id = item.get("tool_call_id", {}).get("S")
            if role == "tool" and not tool_call_id:
                raise ValueError("a tool result without its call id")
            return StoredMessage(
                message_id=_message_id(item["sk"]["S"]),
                role=role,
                content=item["content"]["S"],
                created_at=datetime.fromisoformat(item["created_at"]["S"]),
                tool_calls=tuple(ToolCall(c["id"], c["name"], deep_freeze(c["args"])) for c in calls),
                tool_call_id=tool_call_id,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            logger.warning("Skipping malformed message item", extra={"reason": type(error).__name__})
            return None

    @staticmethod
    def _parse_profile(item: Mapping[str, Any]) -> UserProfile | None:
        try:
            return UserProfile.model_validate_json(item["profile"]["S"])
        except (KeyError, TypeError, ValidationError) as error:
            logger.warning("Ignoring malformed profile item", extra={"reason": type(error).__name__})
            return None

    @staticmethod
    def _parse_summary(item: Mapping[str, Any]) -> ConversationSummary | None:
        try:
            return ConversationSummary(text=item["text"]["S"], through_message_id=item["through"]["S"])
        except (KeyError, TypeError) as error:
            logger.warning("Ignoring malformed summary item", extra={"reason": type(error).__name__})
            return None

    @staticmethod
    def _parse_state(item: Mapping[str, Any]) -> OnboardingState | None:
        try:
            waiting = item.get("waiting_for", {}).get("S")
            completed = item.get("completed_at", {}).get("S")
            return OnboardingState(
                current_agent=item["current_agent"]["S"],
                agent_context=json.loads(item.get("agent_context", {}).get("S", "{}")),
                waiting_for=WaitingFor.model_validate_json(waiting) if waiting else None,
                skipped=json.loads(item.get("skipped", {}).get("S", "[]")),
                completed_at=datetime.fromisoformat(completed) if completed else None,
            )
        except (KeyError, TypeError, ValueError, ValidationError) as error:
            logger.warning("Ignoring malformed onboarding state item", extra={"reason": type(error).__name__})
            return None

    def erase_user(self, user_id: str) -> ErasureReport:
        """Delete everything stored for the user and report what was deleted: the whole partition
        (messages, state, profile, summary, dedupe records, rate counters, phone links, link-code
        pointers), the PHONE# owner items that still name the user, and the link codes they made.
        An unknown user, or a second erase, deletes nothing and reports zeros.

        Phone owners and link codes go first: a text arriving mid-erase then starts a new user
        instead of writing into the partition being emptied. A phone re-linked to someone else
        since is theirs now and stays. A turn already in flight can still write after the
        partition was read (this is not one transaction); erasing again removes what it wrote.

        Deliberately NOT deleted: the Powertools idempotency records of the SMS webhook (another
        table, keyed by a hash of Twilio's MessageSid, holding only the canned reply, expiring
        within 24 h). Deleting them would let a late Twilio retry of an erased text be processed
        again and re-create the user.
        """
        try:
            keys = self._partition_keys(user_id)
            sort_keys = [key["sk"]["S"] for key in keys]
            phones = [sk.removeprefix(CONTACT_PREFIX) for sk in sort_keys if sk.startswith(CONTACT_PREFIX)]
            codes = [sk.removeprefix(LINK_POINTER_PREFIX) for sk in sort_keys if sk.startswith(LINK_POINTER_PREFIX)]
            # Not `_phone_key`: a malformed CONTACT# item must not stop the erase; its key matches nothing.
            phone_keys = [{"pk": {"S": f"{PHONE_PREFIX}{p}"}, "sk": {"S": PHONE_OWNER_SORT_KEY}} for p in phones]
            code_keys = [{"pk": {"S": f"{LINK_PREFIX}{c}"}, "sk": {"S": LINK_SORT_KEY}} for c in codes]
            phone_numbers = sum(self._delete_if_owned(key, user_id) for key in phone_keys)
            link_codes = sum(self._delete_if_owned(key, user_id) for key in code_keys)
            self._batch_delete(keys)
        except ClientError as error:
            raise StoreError("could not erase the user's data") from error

        def count(prefix: str) -> int:
            return sum(sk.startswith(prefix) for sk in sort_keys)

        known = (MESSAGE_PREFIX, CLIENT_PREFIX, RATE_PREFIX, CONTACT_PREFIX, LINK_POINTER_PREFIX)
        report = ErasureReport(
            messages=count(MESSAGE_PREFIX),
            state_items=sum(sk in HEAD_ITEMS for sk in sort_keys),
            phone_numbers=phone_numbers,
            dedupe_records=count(CLIENT_PREFIX),
            rate_counters=count(RATE_PREFIX),
            link_codes=link_codes,
            other_items=sum(not sk.startswith(known) and sk not in HEAD_ITEMS for sk in sort_keys),
        )
        # Counts only: the user id and phone numbers are personal data.
        logger.info("Erased a user's data", extra={"erased_items": report.total, "partition_items": len(sort_keys)})
        return report

    def _partition_keys(self, user_id: str) -> list[dict[str, Any]]:
        """The key of every item in the user's partition, all pages, read consistently (an item
        written just before the erase must not be missed)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": _partition(user_id)},
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
        }
        keys: list[dict[str, Any]] = []
        while True:
            page = self._client.query(**request)
            keys.extend({"pk": item["pk"], "sk": item["sk"]} for item in page.get("Items", []))
            if not (start_key := page.get("LastEvaluatedKey")):
                return keys
            request["ExclusiveStartKey"] = start_key

    def _delete_if_owned(self, key: Mapping[str, Any], user_id: str) -> bool:
        """Delete the item at `key` if it still names `user_id`; False when it is gone or is
        someone else's now (a phone re-linked since)."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=key,
                ConditionExpression="user_id = :user",
                ExpressionAttributeValues={":user": {"S": user_id}},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _batch_delete(self, keys: Sequence[Mapping[str, Any]]) -> None:
        """Delete `keys`, 25 to a request, resending what DynamoDB left unprocessed (it does so
        when throttled) after a backoff; gives up with StoreError after `_BATCH_ATTEMPTS` tries."""
        for start in range(0, len(keys), _BATCH_WRITE_ITEMS):
            batch = keys[start : start + _BATCH_WRITE_ITEMS]
            pending: Mapping[str, Any] = {self._table: [{"DeleteRequest": {"Key": key}} for key in batch]}
            for attempt in range(_BATCH_ATTEMPTS):
                if attempt:
                    # botocore's standard mode: a random delay up to base * 2^attempt, capped.
                    time.sleep(_JITTER.random() * min(_BATCH_BACKOFF_BASE_S * 2**attempt, _BATCH_BACKOFF_MAX_S))
                pending = self._client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break
            else:
                raise StoreError("the table kept leaving some of the user's items unprocessed")
