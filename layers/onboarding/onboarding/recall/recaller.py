"""Owns a turn's recall: one query of the index for the client's message, ranked by its words and
its embedding (RECALL_MODE: `hybrid`, or either alone; `lexical` makes no embedding), within a
time bound, never failing the turn.

The index's hits are then ordered once more, by what the index and the table hold alone: of two
hits of one speaker that carry much the same words (RECALL_NEAR_DUPLICATE_SHARE of them shared),
the newer comes first, for it may correct the older ("Actually my weight is 74 kg now", then "Update:
my weight is 72 kg"), which BM25 may rank above it for the same words; and a hit said again in
nearly the same words (RECALL_REPEAT_SHARE of them: "How much water should I drink a day?" on eight
days, the coach's recap of every answer at each return) is kept once, its newest, at the best rank
of its copies, so that the copies and their neighbours do not fill the section in its stead.

When either call fails or the bound passes, the turn goes on without the section: a warning with
the reason (a token), the `RecallFailed` metric, and the turn's ledger says so. The bound is the
smaller of `RECALL_TIMEOUT_S` and what the turn's deadline leaves; the clients' own timeouts are
set from the same setting (onboarding.composition), so a call cut here does not run on for long.
"""

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aws_lambda_powertools import Logger

from onboarding.config import RecallPolicy
from onboarding.metrics import count_metric
from onboarding.model.errors import RecallUnavailableError
from onboarding.model.messages import Message
from onboarding.recall.vectors import VectorIndex

logger = Logger(child=True)


class Embedder(Protocol):
    """What embeds text (onboarding.recall.embeddings.TitanEmbeddings)."""

    def embed_query(self, text: str) -> list[float]: ...

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...


@dataclass(frozen=True)
class Recall:
    """What a turn recalled (best first, each hit followed by the message it answers), whether
    recall failed, and how long it took."""

    messages: tuple[Message, ...] = ()
    failed: bool = False
    elapsed_ms: float | None = None  # None: not tried (the flag off, or no index configured)


NOT_TRIED = Recall()


def failure_reason(error: BaseException) -> str:
    """A log token for why recall failed: the kind, and the service's error code when it answered."""
    if isinstance(error, RecallUnavailableError):
        return error.reason
    response: Any = getattr(error, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return f"{type(error).__name__}:{code}" if code else type(error).__name__


_WORD = re.compile(r"\w+")


def _words(message: Message) -> frozenset[str]:
    return frozenset(_WORD.findall(message.content.casefold()))


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def newest_first(pairs: Sequence[tuple[Message, ...]], share: float, repeat: float = 1.0) -> tuple[Message, ...]:
    """The hits of `pairs` (best first, each followed by the message it answers), flattened, with
    near-duplicates newest first: a hit whose words overlap an earlier hit's of the same speaker by
    `share` or more, and which was said after it, moves to just before it; a hit whose words overlap
    another's by `repeat` or more (1.0: the very same words) is kept once, its newest, at the best
    rank of its copies."""
    order: list[tuple[tuple[Message, ...], frozenset[str]]] = []
    for pair in pairs:
        hit, words = pair[0], _words(pair[0])
        alike = [i for i, (kept, _) in enumerate(order) if kept[0].role == hit.role]
        same = next((i for i in alike if _overlap(order[i][1], words) >= repeat), None)
        if same is not None:
            if hit.message_id > order[same][0][0].message_id:
                order[same] = (pair, words)
            continue
        older = (
            i for i in alike if order[i][0][0].message_id < hit.message_id and _overlap(order[i][1], words) >= share
        )
        order.insert(next(older, len(order)), (pair, words))
    return tuple(message for pair, _ in order for message in pair)


class Recaller:
    def __init__(self, embeddings: Embedder, index: VectorIndex, policy: RecallPolicy) -> None:
        self._embeddings = embeddings
        self._index = index
        self._policy = policy

    @property
    def policy(self) -> RecallPolicy:
        return self._policy

    @property
    def clients(self) -> list[Any]:
        """The botocore clients it calls through (SnapStart primes and renews them)."""
        client = getattr(self._embeddings, "client", None)
        return [c for c in (client, self._index.client) if c is not None]

    async def recall(self, user_id: str, text: str, wait_s: float) -> Recall:
        """The user's older messages that bear on `text`, or a failed Recall. Never raises."""
        started = time.monotonic()
        query = " ".join(text.split())[: self._policy.max_chars]
        mode = self._policy.mode
        try:
            if not query or wait_s <= 0:
                raise TimeoutError("no time or no text to recall with")
            async with asyncio.timeout(min(self._policy.timeout_s, wait_s)):
                vector = None if mode == "lexical" else await asyncio.to_thread(self._embeddings.embed_query, query)
                words = None if mode == "dense" else query
                pairs = await asyncio.to_thread(self._index.matches, user_id, self._policy.top_k, vector, words)
                found = newest_first(pairs, self._policy.near_duplicate_share, self._policy.repeat_share)
        except Exception as error:  # recall is an extra: the turn never fails because of it
            logger.warning("Recall failed; the turn goes on without it", extra={"reason": failure_reason(error)})
            count_metric("RecallFailed")
            return Recall(failed=True, elapsed_ms=(time.monotonic() - started) * 1000)
        return Recall(found, elapsed_ms=(time.monotonic() - started) * 1000)
