"""Owns keeping the recall index in step with the table, off the hot path: each change the table's
stream reports for a message (functions/recall_indexer hands them over) is applied to the index.

A new message is embedded with the message it answers (read from the table: one small Query) and
written; a removed one (an erase, a linked phone's merge, a TTL expiry) is deleted. Tool calls,
tool results and blank messages are not indexed. A failure raises, so the stream's record is
retried (Lambda's event source mapping keeps the order per user).
"""

from typing import Literal, Protocol

from onboarding.config import RecallPolicy
from onboarding.model.messages import Message
from onboarding.persistence.changes import MessageChange
from onboarding.recall.indexing import embedded_text, is_indexed
from onboarding.recall.recaller import Embedder
from onboarding.recall.vectors import IndexEntry, VectorIndex

Outcome = Literal["indexed", "removed", "skipped"]


class ContextReader(Protocol):
    """What finds the message a message answers (the conversation repository)."""

    def message_before(self, user_id: str, message_id: str, look_back: int = 6) -> Message | None: ...


class MessageIndexer:
    def __init__(self, embeddings: Embedder, index: VectorIndex, context: ContextReader, policy: RecallPolicy) -> None:
        self._embeddings = embeddings
        self._index = index
        self._context = context
        self._policy = policy

    def apply(self, change: MessageChange) -> Outcome:
        if change.message is None:
            self._index.delete(change.user_id, [change.message_id])
            return "removed"
        message = change.message
        if not is_indexed(message):
            return "skipped"
        answers = self._context.message_before(change.user_id, message.message_id)
        text = embedded_text(message, answers, self._policy.max_chars)
        vector = self._embeddings.embed_documents([text])[0]
        self._index.put([IndexEntry(change.user_id, message, vector)])
        return "indexed"
