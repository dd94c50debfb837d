"""Owns the recall index: an Amazon S3 Vectors index, one vector per message, read one user at a
time, and what a message becomes in it (its key and metadata) and what comes back of it.

The only code that speaks S3 Vectors. Each message is stored with its embedding and, as metadata,
its own words (`text`, what is shown when it is recalled), its role and time, the message it
answers (`before`: the neighbouring turn, shown beside it), and `said`: the answered message's
words and its own, which the index searches by BM25 (its full-text search, `textSearchConfigurations`
in template.yaml). A query is filtered to one user (the filterable `user` key; the index is in
ENHANCED mode, which filters before it searches) and ranks by the embedding, by the words, or by
both, which the index fuses itself (reciprocal rank fusion): one request whatever the mode
(docs/decisions/0033-hybrid-recall.md). Writes and deletes go in batches of the service's 500;
a delete takes a message's words with its vector. Every botocore failure, an answer or none,
becomes `RecallUnavailableError`.
"""

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from onboarding.model.errors import RecallUnavailableError
from onboarding.model.messages import Message

KEY_SEPARATOR = "#"

USER_KEY = "user"  # the one filterable key: every query is filtered to one user

# Non-filterable (template.yaml's index says so): stored with the vector, never a filter.
TEXT_KEY, ROLE_KEY, AT_KEY, BEFORE_KEY, SAID_KEY = "text", "role", "at", "before", "said"

NON_FILTERABLE_KEYS = (TEXT_KEY, ROLE_KEY, AT_KEY, BEFORE_KEY, SAID_KEY)

SEARCHED_KEY = SAID_KEY  # the full-text searchable key

QUERY_TEXT_MAX_CHARS = 1024  # a query text's documented maximum
# S3 Vectors takes at most 40 KB of metadata a vector, counted in bytes: a message's metadata is
# fitted to that, less a margin for however the service counts keys, quotes and escapes.
METADATA_MAX_BYTES = 40 * 1024
METADATA_MARGIN_BYTES = 2 * 1024

INDEXED_ROLES = ("user", "assistant")


def vector_key(user_id: str, message_id: str) -> str:
    """The vector's key: the user and the message (unique across users, as message ids are not)."""
    return f"{user_id}{KEY_SEPARATOR}{message_id}"


def _said_parts(message: Message, answers: Message | None, max_chars: int) -> tuple[str, str]:
    own = " ".join(message.content.split())[:max_chars]
    context = " ".join(answers.content.split()) if answers is not None else ""
    room = max_chars - len(own) - 1
    return (context[-room:] if context and room > 0 else ""), own


def _joined(context: str, own: str) -> str:
    return f"{context} {own}" if context else own


def said_text(message: Message, answers: Message | None, max_chars: int) -> str:
    """What a message is embedded and searched as: what it answers, then itself, within `max_chars`
    (its own text kept first, the context cut first), so that a reply is found by the question it
    answers and a short answer ("yes, twice a week") by what was asked."""
    return _joined(*_said_parts(message, answers, max_chars))


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def head_bytes(text: str, limit: int) -> str:
    """The start of `text` within `limit` UTF-8 bytes, cut on a character boundary."""
    return text.encode("utf-8")[: max(limit, 0)].decode("utf-8", errors="ignore")


def tail_bytes(text: str, limit: int) -> str:
    """The end of `text` within `limit` UTF-8 bytes, cut on a character boundary."""
    encoded = text.encode("utf-8")
    return encoded[max(len(encoded) - max(limit, 0), 0) :].decode("utf-8", errors="ignore")


def metadata_bytes(found: Mapping[str, Any]) -> int:
    return _bytes(json.dumps(found, ensure_ascii=False))


def _at(message: Message) -> str:
    return message.created_at.isoformat() if message.created_at else ""


def metadata(user_id: str, message: Message, answers: Message | None, max_chars: int) -> dict[str, Any]:
    """A message's metadata, within METADATA_MAX_BYTES less the margin whatever its script. What
    gives way, in this order, each cut on a character boundary: the answered message's words that
    are searched (in `said`), then those shown beside the hit (`before`, its end kept: a question
    ends there), then the message's own searched words, and last the words the prompt shows of it
    (`text`)."""
    context, own = _said_parts(message, answers, max_chars)
    parts = {
        "context": context,
        "before": answers.content[:max_chars] if answers is not None else "",
        "own": own,
        "text": message.content[:max_chars],
    }

    def built() -> dict[str, Any]:
        found: dict[str, Any] = {
            USER_KEY: user_id,
            TEXT_KEY: parts["text"],
            ROLE_KEY: message.role,
            AT_KEY: _at(message),
            SAID_KEY: _joined(parts["context"], parts["own"]),
        }
        if answers is not None:
            found[BEFORE_KEY] = [answers.message_id, answers.role, _at(answers), parts["before"]]
        return found

    budget = METADATA_MAX_BYTES - METADATA_MARGIN_BYTES
    for part, cut in (("context", tail_bytes), ("before", tail_bytes), ("own", head_bytes), ("text", head_bytes)):
        excess = metadata_bytes(built()) - budget
        if excess <= 0:
            break
        parts[part] = cut(parts[part], _bytes(parts[part]) - excess)
    return built()


def _message(message_id: Any, role: Any, at: Any, text: Any) -> Message | None:
    if not message_id or not isinstance(text, str) or role not in INDEXED_ROLES or not isinstance(at, str):
        return None
    try:
        created_at = datetime.fromisoformat(at) if at else None
    except ValueError:
        return None
    return Message("user" if role == "user" else "assistant", text, str(message_id), created_at)


def recalled_messages(key: str, found: Mapping[str, Any]) -> tuple[Message, ...]:
    """The message a query found (from its key and metadata) and the message it answers; nothing
    for metadata that is not ours."""
    hit = _message(key.rpartition(KEY_SEPARATOR)[2], found.get(ROLE_KEY), found.get(AT_KEY), found.get(TEXT_KEY))
    if hit is None:
        return ()
    before = found.get(BEFORE_KEY)
    neighbour = _message(*before) if isinstance(before, list) and len(before) == 4 else None
    return (hit,) if neighbour is None else (hit, neighbour)


BATCH = 500  # vectors per PutVectors or DeleteVectors request (the service's maximum)
# An index takes at most 2,500 vectors written or deleted a second (and 1,000 requests): a long
# erase keeps to 80 % of that, so it is not throttled by its own pace (botocore's standard tries
# still back off from a throttle that other writes cause).
PACED_VECTORS_PER_S = 2_000


@dataclass(frozen=True)
class IndexEntry:
    """A message of `user_id`, its embedding, and the message it answers, ready to be written."""

    user_id: str
    message: Message
    vector: Sequence[float]
    answers: Message | None = None


@contextmanager
def _index_call(what: str) -> Iterator[None]:
    try:
        yield
    except (ClientError, BotoCoreError) as error:
        raise RecallUnavailableError(what) from error


class VectorIndex:
    """The index at `index_arn`, through an `s3vectors` client (made by onboarding.composition)."""

    def __init__(self, client: Any, index_arn: str, max_chars: int) -> None:
        self._client = client
        self._connect: Callable[[], Any] | None = None
        self._index_arn = index_arn
        self._max_chars = max_chars

    @classmethod
    def connecting_when_used(cls, connect: Callable[[], Any], index_arn: str, max_chars: int) -> "VectorIndex":
        """An index whose client `connect` makes at its first call: for code that rarely uses it (an
        erase), so that a cold start does not pay for building a client it may never call."""
        index = cls(None, index_arn, max_chars)
        index._connect = connect
        return index

    @property
    def client(self) -> Any:
        if self._client is None and self._connect is not None:
            self._client = self._connect()
        return self._client

    def put(self, entries: Sequence[IndexEntry]) -> None:
        for start in range(0, len(entries), BATCH):
            vectors = [
                {
                    "key": vector_key(entry.user_id, entry.message.message_id),
                    "data": {"float32": [float(value) for value in entry.vector]},
                    "metadata": metadata(entry.user_id, entry.message, entry.answers, self._max_chars),
                }
                for entry in entries[start : start + BATCH]
            ]
            with _index_call("could not write to the recall index"):
                self.client.put_vectors(indexArn=self._index_arn, vectors=vectors)

    def delete(self, user_id: str, message_ids: Sequence[str]) -> int:
        """Delete the vectors of these messages (absent ones are no error), at most
        PACED_VECTORS_PER_S a second; how many were asked."""
        keys = [vector_key(user_id, message_id) for message_id in message_ids]
        for start in range(0, len(keys), BATCH):
            began, batch = time.monotonic(), keys[start : start + BATCH]
            with _index_call("could not delete from the recall index"):
                self.client.delete_vectors(indexArn=self._index_arn, keys=batch)
            if start + BATCH < len(keys):  # the next batch waits for this one's share of the second
                time.sleep(max(0.0, len(batch) / PACED_VECTORS_PER_S - (time.monotonic() - began)))
        return len(keys)

    def query(
        self, user_id: str, top_k: int, vector: Sequence[float] | None = None, text: str | None = None
    ) -> tuple[Message, ...]:
        """The user's `top_k` messages ranked by `vector`, by the words of `text`, or by both fused,
        best first, each followed by the message it answers (one may come twice: shown once)."""
        return tuple(message for pair in self.matches(user_id, top_k, vector, text) for message in pair)

    def matches(
        self, user_id: str, top_k: int, vector: Sequence[float] | None = None, text: str | None = None
    ) -> tuple[tuple[Message, ...], ...]:
        """`query`'s hits, best first, each as a pair: the hit and the message it answers (or the
        hit alone, when it answers none)."""
        request: dict[str, Any] = {"indexArn": self._index_arn, "topK": top_k, "filter": {USER_KEY: user_id}}
        if vector is not None:
            request["queryVector"] = {"float32": [float(value) for value in vector]}
        if text:
            request["queryTexts"] = [{"text": text[:QUERY_TEXT_MAX_CHARS], "metadataKey": SEARCHED_KEY}]
        with _index_call("could not query the recall index"):
            answer = self.client.query_vectors(**request, returnMetadata=True)
        found = (recalled_messages(str(v.get("key", "")), v.get("metadata") or {}) for v in answer.get("vectors", []))
        return tuple(pair for pair in found if pair)
