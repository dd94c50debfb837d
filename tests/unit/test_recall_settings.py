"""Every recall setting has an effect someone can see (test_every_setting.py holds the list; this
module registers its part of it). RECALL_MAX_TOKENS is observed there, in the largest message."""

import time
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.s3vectors import S3VectorsStandIn
from onboarding.composition import build_indexer, build_recaller, build_turn_service
from onboarding.config import Settings
from onboarding.persistence import Repositories
from onboarding.persistence.changes import MessageChange
from onboarding.recall.embeddings import build_embeddings
from onboarding.recall.vectors import vector_key
from tests.support.setting_effects import observes
from tests.unit.test_recall import index_stored, stored_earlier, turn

pytestmark = pytest.mark.unit


async def recall_of(settings: Settings, text: str = "What is my dog called?") -> Any:
    recaller = build_recaller(settings)
    assert recaller is not None
    return await recaller.recall("u", text, wait_s=10)


@observes("recall_top_k")
async def test_the_index_is_asked_for_recall_top_k_matches(
    dynamodb: Any, recall_settings: Settings, store: Repositories, vector_index: S3VectorsStandIn
) -> None:
    stored_earlier(dynamodb, recall_settings, "u")
    index_stored(recall_settings, store, "u")
    for top_k in (2, 40):
        found = await recall_of(recall_settings.model_copy(update={"recall_top_k": top_k}))
        assert vector_index.last_query["topK"] == top_k
        assert len(found.messages) == min(top_k, 4)


@observes("recall_timeout_s")
async def test_recall_waits_at_most_recall_timeout_s(recall_settings: Settings, vector_index: S3VectorsStandIn) -> None:
    vector_index.delay_s = 0.4
    assert not (await recall_of(recall_settings.model_copy(update={"recall_timeout_s": 2.0}))).failed
    started = time.monotonic()
    assert (await recall_of(recall_settings.model_copy(update={"recall_timeout_s": 0.1}))).failed
    assert time.monotonic() - started < 0.35


@observes("embedding_dimensions")
def test_embeddings_have_embedding_dimensions_values(recall_settings: Settings) -> None:
    for size in (256, 512):
        assert (
            len(
                build_embeddings(recall_settings.model_copy(update={"embedding_dimensions": size}), True).embed_query(
                    "hi"
                )
            )
            == size
        )


@observes("embedding_max_chars")
def test_what_is_embedded_and_kept_is_cut_at_embedding_max_chars(
    recall_settings: Settings, store: Repositories, vector_index: S3VectorsStandIn
) -> None:
    message = store.writes.append_message("u", "user", "word " * 100)
    for cap in (120, 8000):
        build_indexer(recall_settings.model_copy(update={"embedding_max_chars": cap})).apply(
            MessageChange("u", message.message_id, message)
        )
        kept = vector_index.buckets["recall-test"]["messages"].vectors[vector_key("u", message.message_id)][1]
        assert len(kept["text"]) == min(cap, 500)


@observes("recall_index_arn")
async def test_without_a_recall_index_a_turn_recalls_nothing(
    settings: Settings, recall_settings: Settings, store: Repositories, llm: BaseChatModel,
    vector_index: S3VectorsStandIn, emulator: BedrockEmulator,
) -> None:  # fmt: skip
    await turn(build_turn_service(settings, store, llm), "u", "Hi")
    assert vector_index.queries == 0
    await turn(build_turn_service(recall_settings, store, llm), "u", "Hi again")
    assert vector_index.queries == 1


@observes("embedding_model_id")
async def test_recall_embeds_with_embedding_model_id(recall_settings: Settings, emulator: BedrockEmulator) -> None:
    assert not (await recall_of(recall_settings)).failed
    # The emulator serves Titan Text Embeddings V2 only: another model id reaches it, and is refused.
    assert (
        await recall_of(recall_settings.model_copy(update={"embedding_model_id": "cohere.embed-english-v3"}))
    ).failed
