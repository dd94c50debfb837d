"""Owns what recall costs per 1,000 turns, from the benchmark's measured figures and dated list
prices, at the capacity plan's load (docs/capacity.md: 20 turns a day per daily active user, 1.8
model requests a turn; messages kept 365 days, so the index holds a year of them).

Per turn: one embedding of the client's message and one index query (the hot path); two messages
indexed (each embedded with the one it answers, one PutVectors each, one small Query for the
context, the indexer's Lambda time); the stored vectors; and, the largest part, the prompt tokens
the recalled messages add to every model request of the turn. Prices: us-east-1, on demand,
checked on CHECKED; the S3 Vectors query's "data processed" is billed on the whole index's size
(every vector's data, key and filterable metadata), so it grows with the users, not with the turn.
"""

from dataclasses import dataclass

CHECKED = "2026-11-26"
TURNS_PER_USER_DAY = 20
REQUESTS_PER_TURN = 1.8  # docs/capacity.md
MESSAGES_PER_TURN = 2  # the client's and the coach's text (tool calls and results are not indexed)
RETENTION_DAYS = 365  # MESSAGE_TTL_DAYS: a message's vector goes with it
KEY_AND_FILTER_BYTES = 100  # a vector's key (user and message id) and its filterable `user`
TEXT_METADATA_BYTES = 300  # its text, role and day (non-filterable: stored, not processed by a query)
PUT_MINIMUM_BYTES = 128 * 1024  # S3 Vectors bills each PutVectors request as at least 128 KB
INDEXER_GB_SECONDS = 0.5 * 0.3  # 512 MB for about 0.3 s a turn (two embeddings, two writes, a Query)

# Dollars. Sources: aws.amazon.com/bedrock/pricing (Titan Text Embeddings V2; Claude Haiku 4.5 as in
# infra/local/prices.py), aws.amazon.com/s3/pricing (S3 Vectors: storage, PUT, query requests and
# query data processed; the first-tier rate used for every index size, the page's lower rates for
# large indexes and its 2026-06 cut above 10 million vectors only lower the figure),
# aws.amazon.com/lambda/pricing, aws.amazon.com/dynamodb/pricing.
TITAN_V2_PER_TOKEN = 0.02 / 1_000_000
HAIKU_INPUT_PER_TOKEN = 1.10 / 1_000_000
S3V_STORAGE_PER_GB_MONTH = 0.06
S3V_PUT_PER_GB = 0.20
S3V_QUERY_PER_REQUEST = 2.50 / 1_000_000
S3V_PROCESSED_PER_TB = 0.004
LAMBDA_PER_GB_SECOND = 0.0000133334
LAMBDA_PER_REQUEST = 0.20 / 1_000_000
DYNAMODB_PER_READ_UNIT = 0.125 / 1_000_000
GB, TB = 1024**3, 1024**4


@dataclass(frozen=True)
class RecallCost:
    """Dollars per 1,000 turns, by part, at `users` daily active users."""

    users: int
    embeddings: float
    index_queries: float
    index_writes_and_storage: float
    indexer: float
    prompt_tokens: float

    @property
    def total(self) -> float:
        return self.embeddings + self.index_queries + self.index_writes_and_storage + self.indexer + self.prompt_tokens


def recall_cost(users: int, added_prompt_tokens: float, message_tokens: float, dimensions: int = 1024) -> RecallCost:
    """Per 1,000 turns, at `users` daily active users, for a turn whose prompt the recalled messages
    make `added_prompt_tokens` longer and whose messages hold `message_tokens` each on average."""
    turns = 1_000
    vector_bytes = 4 * dimensions + KEY_AND_FILTER_BYTES
    index_vectors = users * TURNS_PER_USER_DAY * MESSAGES_PER_TURN * RETENTION_DAYS
    query = S3V_QUERY_PER_REQUEST + index_vectors * vector_bytes / TB * S3V_PROCESSED_PER_TB
    indexed_tokens = MESSAGES_PER_TURN * 2 * message_tokens  # each with the message it answers
    stored_gb_months = MESSAGES_PER_TURN * (vector_bytes + TEXT_METADATA_BYTES) / GB * RETENTION_DAYS / 30
    writes = MESSAGES_PER_TURN * PUT_MINIMUM_BYTES / GB * S3V_PUT_PER_GB + stored_gb_months * S3V_STORAGE_PER_GB_MONTH
    indexer = (
        INDEXER_GB_SECONDS * LAMBDA_PER_GB_SECOND + LAMBDA_PER_REQUEST + MESSAGES_PER_TURN * DYNAMODB_PER_READ_UNIT
    )
    return RecallCost(
        users=users,
        embeddings=turns * (message_tokens + indexed_tokens) * TITAN_V2_PER_TOKEN,
        index_queries=turns * query,
        index_writes_and_storage=turns * writes,
        indexer=turns * indexer,
        prompt_tokens=turns * added_prompt_tokens * REQUESTS_PER_TURN * HAIKU_INPUT_PER_TOKEN,
    )


def cost_rows(added_prompt_tokens: float, message_tokens: float) -> list[str]:
    costs = [recall_cost(users, added_prompt_tokens, message_tokens) for users in (1_000, 10_000, 100_000)]
    rows = [
        "| per 1,000 turns | " + " | ".join(f"{c.users:,} DAU" for c in costs) + " |",
        "|---|" + "---:|" * len(costs),
    ]
    for label, part in (
        ("embeddings (Titan V2: the query, and two messages indexed with their context)", "embeddings"),
        ("index queries (S3 Vectors: the request and the whole index's data processed)", "index_queries"),
        ("index writes and a year's storage (S3 Vectors)", "index_writes_and_storage"),
        ("the indexer (Lambda, and its small Query)", "indexer"),
        (
            f"the recalled messages in the prompt ({added_prompt_tokens:.0f} tokens × 1.8 requests, Haiku 4.5)",
            "prompt_tokens",
        ),
    ):
        rows.append(f"| {label} | " + " | ".join(f"${getattr(c, part):.4f}" for c in costs) + " |")
    rows.append("| **total** | " + " | ".join(f"**${c.total:.2f}**" for c in costs) + " |")
    return rows
