"""Owns the recall index: an Amazon S3 Vectors index, one vector per message, read one user at a
time, and what a message becomes in it (its key and metadata; what is shown when it is recalled is
the message alone, with its day).

The only code that speaks S3 Vectors. Every query is filtered to one user (the index's filterable
`user` key; an index in ENHANCED mode applies the filter before the search, so a user's few vectors
are found among everyone's). Writes and deletes go in batches of the service's 500. Every botocore
failure, an answer or none, becomes `RecallUnavailableError`.
"""

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

TEXT_KEY, ROLE_KEY, AT_KEY = "text", "role", "at"  # non-filterable (template.yaml's index says so)

NON_FILTERABLE_KEYS = (TEXT_KEY, ROLE_KEY, AT_KEY)

INDEXED_ROLES = ("user", "assistant")


def vector_key(user_id: str, message_id: str) -> str:
    """The vector's key: the user and the message (unique across users, as message ids are not)."""
    return f"{user_id}{KEY_SEPARATOR}{message_id}"


def metadata(user_id: str, message: Message, max_chars: int) -> dict[str, str]:
    at = message.created_at.isoformat() if message.created_at else ""
    return {USER_KEY: user_id, TEXT_KEY: message.content[:max_chars], ROLE_KEY: message.role, AT_KEY: at}


def recalled_message(key: str, found: Mapping[str, Any]) -> Message | None:
    """The message a query found, from its key and metadata; None when either is not ours."""
    message_id = key.rpartition(KEY_SEPARATOR)[2]
    text, role, at = found.get(TEXT_KEY), found.get(ROLE_KEY), found.get(AT_KEY)
    if not message_id or not isinstance(text, str) or role not in INDEXED_ROLES or not isinstance(at, str):
        return None
    try:
        created_at = datetime.fromisoformat(at) if at else None
    except ValueError:
        return None
    return Message("user" if role == "user" else "assistant", text, message_id, created_at)


BATCH = 500  # vectors per PutVectors or DeleteVectors request (the service's maximum)


@dataclass(frozen=True)
class IndexEntry:
    """A message of `user_id` and its embedding, ready to be written."""

    user_id: str
    message: Message
    vector: Sequence[float]


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
                    "metadata": metadata(entry.user_id, entry.message, self._max_chars),
                }
                for entry in entries[start : start + BATCH]
            ]
            with _index_call("could not write to the recall index"):
                self.client.put_vectors(indexArn=self._index_arn, vectors=vectors)

    def delete(self, user_id: str, message_ids: Sequence[str]) -> int:
        """Delete the vectors of these messages (absent ones are no error); how many were asked."""
        keys = [vector_key(user_id, message_id) for message_id in message_ids]
        for start in range(0, len(keys), BATCH):
            with _index_call("could not delete from the recall index"):
                self.client.delete_vectors(indexArn=self._index_arn, keys=keys[start : start + BATCH])
        return len(keys)

    def query(self, user_id: str, vector: Sequence[float], top_k: int) -> tuple[Message, ...]:
        """The user's `top_k` messages nearest `vector`, nearest first."""
        with _index_call("could not query the recall index"):
            answer = self.client.query_vectors(
                indexArn=self._index_arn,
                topK=top_k,
                queryVector={"float32": [float(value) for value in vector]},
                filter={USER_KEY: user_id},
                returnMetadata=True,
            )
        found = (recalled_message(str(v.get("key", "")), v.get("metadata") or {}) for v in answer.get("vectors", []))
        return tuple(message for message in found if message is not None)
