"""Owns building the embedding model, Amazon Titan Text Embeddings V2 through langchain-aws's
`BedrockEmbeddings` (the only place that builds one; the chat model is llm/bedrock.py's).

Its client's timeouts and tries come from the settings: on a turn's hot path one try, cut at
RECALL_TIMEOUT_S (a slow embedding costs the turn its recall, never its reply); in the indexer,
off the hot path, botocore's standard tries. The endpoint comes from the standard
`AWS_ENDPOINT_URL_BEDROCK_RUNTIME` (the local emulator serves embeddings too).
"""

from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from onboarding.config import Settings

if TYPE_CHECKING:
    from langchain_aws import BedrockEmbeddings

INDEXER_ATTEMPTS = 3


def embeddings_client_config(settings: Settings, hot_path: bool) -> Config:
    timeout = settings.recall_timeout_s
    attempts = 1 if hot_path else INDEXER_ATTEMPTS
    return Config(
        retries={"mode": "standard", "total_max_attempts": attempts}, connect_timeout=timeout, read_timeout=timeout
    )


def build_embeddings(settings: Settings, hot_path: bool) -> "BedrockEmbeddings":
    from langchain_aws import BedrockEmbeddings

    client = boto3.client(
        "bedrock-runtime", region_name=settings.region, config=embeddings_client_config(settings, hot_path)
    )
    return BedrockEmbeddings(
        client=client, model_id=settings.embedding_model_id, dimensions=settings.embedding_dimensions
    )
