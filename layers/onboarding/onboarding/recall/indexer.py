"""Owns keeping the recall index in step with the table, off the hot path: each change the table's
stream reports for a message (functions/recall_indexer hands them over) is applied to the index.

A new message is embedded with the message it answers (read from the table: one small Query) and
written with it (recall/vectors.py: what it is searched and shown as); a removed one (an erase, a
linked phone's merge, a TTL expiry) is deleted, its words with its vector. Tool calls, tool
results and blank messages are not indexed. A failure raises, so the stream's record is retried
(Lambda's event source mapping keeps the order per user).
"""

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from onboarding.config import RecallPolicy
from onboarding.model.messages import Message
from onboarding.persistence.changes import MessageChange, message_change
from onboarding.recall.recaller import Embedder
from onboarding.recall.vectors import INDEXED_ROLES, IndexEntry, VectorIndex, said_text

Outcome = Literal["indexed", "removed", "skipped"]


def is_indexed(message: Message) -> bool:
    """Only what the client and the coach said: tool calls and results are the coach's bookkeeping."""
    return message.role in INDEXED_ROLES and bool(message.content.strip())


class ContextReader(Protocol):
    """What finds the message a message answers (the conversation repository)."""

    def message_before(self, user_id: str, message_id: str, look_back: int = 6) -> Message | None: ...


class MessageIndexer:
    def __init__(self, embeddings: Embedder, index: VectorIndex, context: ContextReader, policy: RecallPolicy) -> None:
        self._embeddings = embeddings
        self._index = index
        self._context = context
        self._policy = policy

    def apply_record(self, record: Mapping[str, Any], now_s: float) -> Outcome:
        """Apply one record of the table's stream (as Lambda hands it over): the change it makes to
        a user's messages, or nothing for any other item."""
        change = message_change(record, now_s)
        return "skipped" if change is None else self.apply(change)

    def apply(self, change: MessageChange) -> Outcome:
        if change.message is None:
            self._index.delete(change.user_id, [change.message_id])
            return "removed"
        message = change.message
        if not is_indexed(message):
            return "skipped"
        answers = self._context.message_before(change.user_id, message.message_id)
        vector = self._embeddings.embed_documents([said_text(message, answers, self._policy.max_chars)])[0]
        self._index.put([IndexEntry(change.user_id, message, vector, answers)])
        return "indexed"
