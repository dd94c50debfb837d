"""Owns reading a user's conversation: the turn's one Query, history pages, and the fold's read
(the oldest unsummarized messages)."""

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from onboarding.model.history import ConversationSummary, HistoryPage, Memory, TurnContext
from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingState
from onboarding.persistence.calls import store_call
from onboarding.persistence.codec import parse_message, parse_profile, parse_state, parse_summary, version_of
from onboarding.persistence.schema import (
    HEAD_ITEMS,
    MESSAGE_PREFIX,
    PROFILE_SORT_KEY,
    STATE_SORT_KEY,
    SUMMARY_SORT_KEY,
    decode_cursor,
    encode_cursor,
    message_sort_key,
    partition,
    user_key,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

Item = Mapping[str, Any]


def _memory_of(items: Sequence[Item]) -> Memory:
    """The state and profile among `items` (defaults where absent or malformed), with versions."""
    by_key = {item.get("sk", {}).get("S", ""): item for item in items}
    state_item, profile_item = by_key.get(STATE_SORT_KEY), by_key.get(PROFILE_SORT_KEY)
    return Memory(
        state=(parse_state(state_item) if state_item else None) or OnboardingState(),
        profile=(parse_profile(profile_item) if profile_item else None) or UserProfile(),
        state_version=version_of(state_item),
        profile_version=version_of(profile_item),
    )


class Conversations:
    """Reads a user's messages, state, profile and summary."""

    def __init__(self, client: "DynamoDBClient", table_name: str, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock

    def load_turn(self, user_id: str, message_limit: int, exclude_message_id: str | None = None) -> TurnContext:
        """The user's state, profile, summary and newest `message_limit` messages (oldest first), in
        one Query. `exclude_message_id` is the turn's own message when it was stored before the
        read (a turn with a client message id): it is read past, not counted as history.

        A second page is read only when DynamoDB's 1 MB page limit cut the first one short.
        Items that cannot be understood are skipped with a warning, never fatal.
        """
        summary = None
        newest_first: list[Message] = []
        extra = 1 if exclude_message_id else 0
        items, _ = self._query_newest(user_id, message_limit + len(HEAD_ITEMS) + extra)
        now = self._clock()
        for item in items:
            sort_key = item.get("sk", {}).get("S", "")
            if sort_key == SUMMARY_SORT_KEY:
                summary = parse_summary(item)
            elif (
                sort_key.startswith(MESSAGE_PREFIX)
                and len(newest_first) < message_limit
                and (message := parse_message(item, now)) is not None
                and message.message_id != exclude_message_id
            ):
                newest_first.append(message)
        memory = _memory_of(items)
        return TurnContext(
            state=memory.state,
            messages=tuple(reversed(newest_first)),
            profile=memory.profile,
            summary=summary,
            state_version=memory.state_version,
            profile_version=memory.profile_version,
        )

    def load_memory(self, user_id: str) -> Memory:
        """The state and profile with their versions, read consistently (one Query): what a turn
        re-reads when another turn saved first."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
            "ExpressionAttributeValues": {
                ":pk": partition(user_id),
                ":first": {"S": PROFILE_SORT_KEY},
                ":last": {"S": STATE_SORT_KEY},
            },
            "ConsistentRead": True,
        }
        with store_call("could not read the onboarding state"):
            items = self._client.query(**request).get("Items", [])
        return _memory_of(items)

    def load_summary(self, user_id: str) -> ConversationSummary | None:
        """The rolling summary, read consistently."""
        with store_call("could not read the summary"):
            item = self._client.get_item(
                TableName=self._table, Key=user_key(user_id, SUMMARY_SORT_KEY), ConsistentRead=True
            ).get("Item")
        return parse_summary(item) if item else None

    def history_page(self, user_id: str, limit: int, cursor: str | None = None) -> HistoryPage:
        """One page of the user's messages, newest first, continuing after `cursor`."""
        start = user_key(user_id, decode_cursor(cursor)) if cursor else None
        items, more = self._query_newest(user_id, limit, messages_only=True, exclusive_start_key=start)
        now = self._clock()
        messages = tuple(message for item in items if (message := parse_message(item, now)) is not None)
        next_cursor = encode_cursor(items[-1]["sk"]["S"]) if more and items else None
        return HistoryPage(messages=messages, next_cursor=next_cursor)

    def oldest_unsummarized(self, user_id: str, summary: ConversationSummary | None, limit: int) -> tuple[Message, ...]:
        """The OLDEST `limit` messages the summary does not cover yet, oldest first (the fold's read:
        a fold takes them in order, so a backlog is caught up without passing any over)."""
        lower = message_sort_key(summary.through_message_id) if summary else MESSAGE_PREFIX
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :after AND :last",
            "ExpressionAttributeValues": {
                ":pk": partition(user_id),
                ":after": {"S": lower + "\x00"},  # strictly after the covered message
                ":last": {"S": MESSAGE_PREFIX + "\U0010ffff"},
            },
            "ScanIndexForward": True,
        }
        items, _ = self._paged(request, limit)
        now = self._clock()
        return tuple(m for item in items if (m := parse_message(item, now)) is not None)

    def message_before(self, user_id: str, message_id: str, look_back: int = 6) -> Message | None:
        """The last user or coach message with text before `message_id` (tool calls and results
        skipped, up to `look_back` messages back): what a message answers, for the recall index."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :before",
            "ExpressionAttributeValues": {
                ":pk": partition(user_id),
                ":first": {"S": MESSAGE_PREFIX},
                ":before": {"S": message_sort_key(message_id)},
            },
            "ScanIndexForward": False,
        }
        items, _ = self._paged(request, look_back + 1)
        now = self._clock()
        earlier = (m for item in items if (m := parse_message(item, now)) is not None and m.message_id != message_id)
        return next((m for m in earlier if m.role != "tool" and m.content.strip()), None)

    def _query_newest(
        self,
        user_id: str,
        limit: int,
        messages_only: bool = False,
        exclusive_start_key: dict[str, Any] | None = None,
    ) -> tuple[list[Item], bool]:
        """Up to `limit` items of the partition, highest sort key first, and whether more may follow."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk" + (" AND begins_with(sk, :messages)" if messages_only else ""),
            "ExpressionAttributeValues": {":pk": partition(user_id)}
            | ({":messages": {"S": MESSAGE_PREFIX}} if messages_only else {}),
            "ScanIndexForward": False,
        }
        if exclusive_start_key:
            request["ExclusiveStartKey"] = exclusive_start_key
        return self._paged(request, limit)

    def _paged(self, request: dict[str, Any], limit: int) -> tuple[list[Item], bool]:
        """Up to `limit` items of `request`: usually one Query, another only when DynamoDB's 1 MB
        page limit cut a page short."""
        items: list[Item] = []
        while len(items) < limit:
            with store_call("could not read the conversation"):
                page = self._client.query(**request, Limit=limit - len(items))
            items.extend(page.get("Items", []))
            start_key = page.get("LastEvaluatedKey")
            if not start_key:
                return items, False
            request = request | {"ExclusiveStartKey": start_key}
        return items, True
