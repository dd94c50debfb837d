"""Owns keeping the recall index in step with the table, off the hot path: each change the table's
stream reports for a message (functions/recall_indexer hands them over) is applied to the index.

A new message is embedded with the message it answers (read from the table: one small Query) and
written; a removed one (an erase, a linked phone's merge, a TTL expiry) is deleted. Tool calls,
tool results and blank messages are not indexed. A failure raises, so the stream's record is
retried (Lambda's event source mapping keeps the order per user).

A message is embedded with the message it answers ("what does my plan say?" with the coach's
answer), so that a reply is found by the question it answers and a short answer ("yes, twice a
week") by what was asked.
"""

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from onboarding.config import RecallPolicy
from onboarding.model.messages import Message
from onboarding.persistence.changes import MessageChange, message_change
from onboarding.recall.recaller import Embedder
from onboarding.recall.vectors import INDEXED_ROLES, IndexEntry, VectorIndex

Outcome = Literal["indexed", "removed", "skipped"]


def is_indexed(message: Message) -> bool:
    """Only what the client and the coach said: tool calls and results are the coach's bookkeeping."""
    return message.role in INDEXED_ROLES and bool(message.content.strip())


def embedded_text(message: Message, answers: Message | None, max_chars: int) -> str:
    """The text embedded for `message`: what it answers, then itself, within `max_chars` (its own
    text kept first, the context cut first)."""
    own = " ".join(message.content.split())[:max_chars]
    context = " ".join(answers.content.split()) if answers is not None else ""
    room = max_chars - len(own) - 1
    return f"{context[-room:]} {own}" if context and room > 0 else own


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
        text = embedded_text(message, answers, self._policy.max_chars)
        vector = self._embeddings.embed_documents([text])[0]
        self._index.put([IndexEntry(change.user_id, message, vector)])
        return "indexed"
