"""Owns the table side of joining an SMS-only user to an app user: reading the SMS partition,
copying its messages, message-id records and the key of its queued texts (so a text queued before
the link can still be read, and answered as the app user), and writing the merged state, profile and summary
(the rules and the steps are `onboarding.linking`'s).

Every write into the app user's partition carries the erasure guard (`erasure.erasure_guard`): an
erase of the app user after the link refuses it (UserErasedError), so a merge still running can
never write back what the erase removed."""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onboarding.config import Limits
from onboarding.model.errors import MemoryChangedError, UserErasedError
from onboarding.model.history import ConversationSummary, Memory
from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingState
from onboarding.persistence.calls import Transaction, TransactionCancelled, partition_items, versioned_put
from onboarding.persistence.codec import (
    parse_message,
    parse_profile,
    parse_state,
    parse_summary,
    profile_item,
    state_item,
    summary_item,
    version_of,
)
from onboarding.persistence.erasure import ERASED_CHECK, erasure_guard
from onboarding.persistence.schema import (
    CLIENT_PREFIX,
    MESSAGE_PREFIX,
    PROFILE_SORT_KEY,
    STATE_SORT_KEY,
    SUMMARY_SORT_KEY,
    TEXT_KEY_PREFIX,
    partition,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


Item = dict[str, Any]

# A transaction holds at most 100 items and 4 MB: the copies go 99 at a time (and the guard), and
# under 3 MB of items (a message is at most MAX_MESSAGE_BYTES, 256 KB at most, plus its keys).
COPIES_PER_TRANSACTION = 99
COPY_BYTES_PER_TRANSACTION = 3_000_000
# A copied message-id record is answered by the merged user; the lease of a delivery that was
# answering it as the SMS-only user does not come along (that turn is refused, and the text is
# answered again as the app user: onboarding.sms.responder).
_NOT_COPIED = ("lease", "lease_until_ms")


@dataclass(frozen=True)
class JoiningPartition:
    """What an SMS-only user has stored: the items to copy, their memory and their messages."""

    # MSG# and CLIENT# items, and the key that seals the texts still queued (KEY#), as stored
    copies: tuple[Item, ...]
    memory: Memory
    summary: ConversationSummary | None
    messages: tuple[Message, ...]  # oldest first


class Merger:
    def __init__(
        self, client: "DynamoDBClient", table_name: str, limits: Limits, clock: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock

    def read(self, user_id: str) -> JoiningPartition:
        items = partition_items(self._client, self._table, user_id, "could not read the texted conversation")
        by_key = {item["sk"]["S"]: item for item in items}
        state, profile = by_key.get(STATE_SORT_KEY), by_key.get(PROFILE_SORT_KEY)
        summary = by_key.get(SUMMARY_SORT_KEY)
        now = self._clock()
        messages = [
            m for sk, item in by_key.items() if sk.startswith(MESSAGE_PREFIX) if (m := parse_message(item, now))
        ]
        return JoiningPartition(
            copies=tuple(
                item for sk, item in by_key.items() if sk.startswith((MESSAGE_PREFIX, CLIENT_PREFIX, TEXT_KEY_PREFIX))
            ),
            memory=Memory(
                state=(parse_state(state) if state else None) or OnboardingState(),
                profile=(parse_profile(profile) if profile else None) or UserProfile(),
                state_version=version_of(state),
                profile_version=version_of(profile),
            ),
            summary=parse_summary(summary) if summary else None,
            messages=tuple(sorted(messages, key=lambda m: m.message_id)),
        )

    def copy(self, user_id: str, copies: tuple[Item, ...], since_ms: int) -> None:
        """The items into `user_id`'s partition under the same sort keys (message ids are unique
        across users, so nothing is overwritten; copying again writes the same items), in
        transactions that each hold only if `user_id` was not erased at or after `since_ms`
        (UserErasedError otherwise)."""
        chunk: list[Item] = []
        size = 0
        for item in copies:
            moved = {key: value for key, value in item.items() if key not in _NOT_COPIED} | {"pk": partition(user_id)}
            item_size = len(repr(moved))
            if chunk and (len(chunk) == COPIES_PER_TRANSACTION or size + item_size > COPY_BYTES_PER_TRANSACTION):
                self._copy_chunk(user_id, chunk, since_ms)
                chunk, size = [], 0
            chunk.append(moved)
            size += item_size
        if chunk:
            self._copy_chunk(user_id, chunk, since_ms)

    def _copy_chunk(self, user_id: str, items: list[Item], since_ms: int) -> None:
        transaction = Transaction(self._table)
        for index, item in enumerate(items):
            transaction.add(f"copy-{index}", "Put", {"Item": item})
        erasure_guard(transaction, user_id, since_ms)
        try:
            transaction.run(self._client, "could not copy the texted conversation")
        except TransactionCancelled as cancelled:
            if ERASED_CHECK in cancelled.failed:
                raise UserErasedError("the app user was erased while the phone's texts joined it") from None
            raise

    def write_merged(
        self,
        user_id: str,
        read: Memory,
        read_summary: ConversationSummary | None,
        state: OnboardingState,
        profile: UserProfile,
        summary: ConversationSummary | None,
        since_ms: int,
    ) -> None:
        """The merged state, profile and summary, in one transaction, each only if unchanged since
        `read` (MemoryChangedError otherwise: a turn of the app user saved meanwhile), and only if
        the app user was not erased at or after `since_ms` (UserErasedError otherwise)."""
        now = self._clock()
        transaction = Transaction(self._table)
        transaction.add(
            "state", "Put", versioned_put(state_item(user_id, state, now, read.state_version + 1), read.state_version)
        )
        new_profile = profile_item(user_id, profile, now, read.profile_version + 1)
        transaction.add("profile", "Put", versioned_put(new_profile, read.profile_version))
        if summary is not None:
            unchanged: dict[str, Any] = (
                {
                    "ConditionExpression": "through = :read",
                    "ExpressionAttributeValues": {":read": {"S": read_summary.through_message_id}},
                }
                if read_summary
                else {"ConditionExpression": "attribute_not_exists(sk)"}
            )
            transaction.add("summary", "Put", {"Item": summary_item(user_id, summary, now), **unchanged})
        erasure_guard(transaction, user_id, since_ms)
        try:
            transaction.run(self._client, "could not store the joined memory")
        except TransactionCancelled as cancelled:
            if ERASED_CHECK in cancelled.failed:
                raise UserErasedError("the app user was erased while the phone's texts joined it") from None
            if cancelled.failed or cancelled.conflicted:
                raise MemoryChangedError("the app user's memory changed while the phone was joined") from None
            raise
