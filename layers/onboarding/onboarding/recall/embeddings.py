"""Owns the embedding model: Amazon Titan Text Embeddings V2, called with its documented
InvokeModel body (`inputText`, `dimensions`, `normalize`) and read from its documented answer
(`embedding`). The only code that embeds text; the chat model is llm/bedrock.py's.

Not langchain-aws's `BedrockEmbeddings`: it imports numpy (about 50 MB unzipped, and its import on
every cold start of a function that recalls) for what is one JSON body and one JSON answer.

The client is the function's one bedrock-runtime client: the chat model's where the function has
one (the API and the SMS worker: onboarding.composition passes it), so recall builds no client of
its own on their cold path; a turn stops waiting for it at RECALL_TIMEOUT_S (recall/recaller.py),
and the call itself ends within that client's own timeout. The indexer, which has no chat model,
gets its own client with botocore's standard tries, off the hot path. The endpoint comes from the
standard `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` (the local emulator serves embeddings too).
"""

import json
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from onboarding.config import Settings

INDEXER_ATTEMPTS = 3
# Titan Text Embeddings V2 takes at most 8,192 tokens (and 50,000 characters) of input. The
# product counts tokens as no tokenizer would fall short of (`estimated_tokens`), keeps a margin,
# and if Titan still says "Too many input tokens" tries once more with half the estimate.
TITAN_MAX_TOKENS = 8_192
TOKEN_MARGIN = 192
_TOO_MANY_TOKENS = "too many input tokens"


def estimated_tokens(text: str) -> int:
    """At least the tokens Titan counts in `text`: a token for every 3 ASCII characters (English
    runs about 4.7 a token) and one for every 2 UTF-8 bytes of anything else (a CJK character is
    3 bytes, an emoji 4)."""
    ascii_chars = sum(1 for character in text if ord(character) < 128)
    other_bytes = len(text.encode("utf-8")) - ascii_chars
    return -(-ascii_chars // 3) + -(-other_bytes // 2)


def within_tokens(text: str, limit: int) -> str:
    """The end of `text` whose estimate is within `limit` tokens (a message's own words end what
    is embedded: the words of the message it answers come first, and give way first)."""
    if estimated_tokens(text) <= limit:
        return text
    low, high = 0, len(text)  # the smallest start whose tail fits
    while low < high:
        middle = (low + high) // 2
        if estimated_tokens(text[middle:]) <= limit:
            high = middle
        else:
            low = middle + 1
    return text[low:]


def embeddings_client_config(settings: Settings, hot_path: bool) -> Config:
    """The recall clients' tries and timeouts: on a turn's hot path one try, cut at
    RECALL_TIMEOUT_S (a slow recall costs the turn its recall, never its reply); off it (the
    indexer, an erase) botocore's standard tries."""
    timeout = settings.recall_timeout_s
    attempts = 1 if hot_path else INDEXER_ATTEMPTS
    return Config(
        retries={"mode": "standard", "total_max_attempts": attempts}, connect_timeout=timeout, read_timeout=timeout
    )


class TitanEmbeddings:
    """Titan Text Embeddings V2 (`model_id`) at `dimensions`, normalised (cosine is the index's
    metric), through `client` (a bedrock-runtime client)."""

    def __init__(self, client: Any, model_id: str, dimensions: int) -> None:
        self.client = client
        self._model_id = model_id
        self._dimensions = dimensions

    def embed_query(self, text: str) -> list[float]:
        """`text`'s embedding, of as much of its end as Titan's token limit takes: never refused
        for its length (a text Titan counts longer than estimated is sent again, shorter, once)."""
        fitted = within_tokens(text, TITAN_MAX_TOKENS - TOKEN_MARGIN)
        try:
            return self._embed(fitted)
        except ClientError as error:
            if _TOO_MANY_TOKENS not in str(error.response.get("Error", {}).get("Message", "")).lower():
                raise
            return self._embed(within_tokens(fitted, estimated_tokens(fitted) // 2))

    def _embed(self, text: str) -> list[float]:
        body = json.dumps({"inputText": text, "dimensions": self._dimensions, "normalize": True})
        answer = self.client.invoke_model(
            modelId=self._model_id, body=body, accept="application/json", contentType="application/json"
        )
        return [float(value) for value in json.loads(answer["body"].read())["embedding"]]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One request a text: Titan V2 takes one `inputText` a call."""
        return [self.embed_query(text) for text in texts]


def build_embeddings(settings: Settings, client: Any = None) -> TitanEmbeddings:
    """The embedding model on `client` (the function's bedrock-runtime client), or, without one, on a
    client of its own with the indexer's tries."""
    if client is None:
        import boto3

        config = embeddings_client_config(settings, hot_path=False)
        client = boto3.client("bedrock-runtime", region_name=settings.region, config=config)
    return TitanEmbeddings(client, settings.embedding_model_id, settings.embedding_dimensions)
