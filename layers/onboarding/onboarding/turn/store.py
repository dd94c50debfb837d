"""Owns a turn's one door to the table: every read and write a turn makes (storing the message,
its one Query, the commit, the fold's read and write, the client id's release and delivery mark,
the rate limit's notice) is a method here, and no other part of a turn holds the repositories.

Each method but `release` runs its call in a worker thread: boto3 blocks, and the event loop
streams the reply meanwhile. The table requests count for the ledger the caller is `counting`
into (the thread runs in a copy of the caller's context).
"""

import asyncio

from onboarding.config.policies import RateLimit
from onboarding.model.history import CommittedTurn, ConversationSummary, LeasedTurn, Memory, TurnCommit, TurnContext
from onboarding.model.messages import Message
from onboarding.persistence import Repositories


class TurnStore:
    """The repositories' calls a turn makes, and nothing else of them."""

    def __init__(self, store: Repositories) -> None:
        self._store = store

    async def append_message(self, user_id: str, text: str, rate_limit: RateLimit | None, since_ms: int) -> Message:
        """Store the user's message (no client id), counted by the rate limit."""
        return await asyncio.to_thread(self._store.writes.append_message, user_id, "user", text, rate_limit, since_ms)

    async def lease_message(
        self, user_id: str, client_id: str, text: str, rate_limit: RateLimit | None, since_ms: int
    ) -> LeasedTurn:
        """Store the user's message under its client id, or find what an earlier delivery stored."""
        return await asyncio.to_thread(
            self._store.writes.lease_user_message, user_id, client_id, text, rate_limit, since_ms
        )

    async def load(self, user_id: str, message_limit: int, exclude_message_id: str | None) -> TurnContext:
        """The turn's one Query: state, profile, summary and the newest `message_limit` messages."""
        return await asyncio.to_thread(self._store.conversations.load_turn, user_id, message_limit, exclude_message_id)

    async def commit(self, commit: TurnCommit) -> CommittedTurn:
        """What the turn produced, in one transaction (MemoryChangedError if the state moved)."""
        return await asyncio.to_thread(self._store.writes.commit_reply, commit)

    async def reload_memory(self, user_id: str) -> Memory:
        """The state and profile again, after another turn saved them first."""
        return await asyncio.to_thread(self._store.conversations.load_memory, user_id)

    def release(self, user_id: str, client_id: str, lease: str) -> None:
        """Give up this delivery's lease on a client id. Blocking, on purpose: a turn cancelled with
        its client's connection cannot await anything after the cancellation."""
        self._store.client_records.release(user_id, client_id, lease)

    async def mark_delivered(self, user_id: str, client_id: str) -> None:
        await asyncio.to_thread(self._store.client_records.mark_delivered, user_id, client_id)

    async def take_rate_notice(self, user_id: str, limit: RateLimit) -> bool:
        return await asyncio.to_thread(self._store.rate_limits.take_notice, user_id, limit)

    async def oldest_unsummarized(
        self, user_id: str, summary: ConversationSummary | None, limit: int
    ) -> tuple[Message, ...]:
        """The fold's read: the oldest messages the summary does not cover yet."""
        return await asyncio.to_thread(self._store.conversations.oldest_unsummarized, user_id, summary, limit)

    async def save_summary(self, user_id: str, summary: ConversationSummary, since_ms: int) -> None:
        await asyncio.to_thread(self._store.writes.save_summary, user_id, summary, since_ms)
