"""What a message becomes in the recall index stays within what S3 Vectors and Titan take, in any
script: metadata within 40 KB counted in bytes (documented in the S3 User Guide, "Limitations and
restrictions" of S3 Vectors), embedding input within Titan Text Embeddings V2's 8,192 tokens (the
Bedrock User Guide's Titan Embeddings page), cut on character boundaries, in the order decision
0033 gives."""

from datetime import UTC, datetime

import pytest

from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.config import Settings
from onboarding.model.messages import Message
from onboarding.recall.embeddings import TITAN_MAX_TOKENS, build_embeddings, estimated_tokens, within_tokens
from onboarding.recall.vectors import (
    METADATA_MARGIN_BYTES,
    METADATA_MAX_BYTES,
    head_bytes,
    metadata,
    metadata_bytes,
    tail_bytes,
)

AT = datetime(2026, 5, 1, tzinfo=UTC)
SCRIPTS = {"ascii": "run", "cyrillic": "бег", "cjk": "跑步", "emoji": "🏃", "mixed": "é🏃ж跑"}


def _long(word: str, chars: int = 8_000) -> str:
    return " ".join([word] * chars)[:chars]


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_long_message_answering_a_long_one_has_metadata_within_40_kb(script: str) -> None:
    asked = Message("assistant", "Q " + _long(SCRIPTS[script]), "0001794999999000-0a1b2c3d4e5f", AT)
    said = Message("user", _long(SCRIPTS[script]), "0001795000000000-0a1b2c3d4e5f", AT)
    found = metadata("u", said, asked, 8_000)
    assert metadata_bytes(found) <= METADATA_MAX_BYTES - METADATA_MARGIN_BYTES
    for value in (found["text"], found["said"], found["before"][3]):
        assert "\ufffd" not in value  # cut on a character boundary, never mid-character
    # The prompt's words of the message give way last: kept whole while they fit alone.
    assert found["text"] == said.content[:8_000]


def test_what_gives_way_first_is_the_answered_messages_searched_words_then_its_shown_ones() -> None:
    asked = Message("assistant", "asked " * 2_000, "0001794999999000-0a1b2c3d4e5f", AT)
    said = Message("user", "ж" * 8_000, "0001795000000000-0a1b2c3d4e5f", AT)  # 16,000 bytes
    found = metadata("u", said, asked, 24_000)
    assert found["text"] == said.content  # whole
    assert found["said"] == said.content  # its own words whole: the context gave way first
    assert found["before"][3].endswith("asked ")  # the neighbour's end kept, its start cut
    assert len(found["before"][3]) < len(asked.content)


@pytest.mark.parametrize("word", SCRIPTS.values())
def test_a_cut_in_bytes_keeps_whole_characters(word: str) -> None:
    text = _long(word, 100)
    for limit in range(0, len(text.encode()), 7):
        assert len(head_bytes(text, limit).encode()) <= limit
        assert text.startswith(head_bytes(text, limit))
        assert len(tail_bytes(text, limit).encode()) <= limit
        assert text.endswith(tail_bytes(text, limit))


@pytest.mark.parametrize("script", SCRIPTS)
def test_what_is_embedded_fits_titans_tokens_keeping_the_messages_own_end(script: str) -> None:
    text = "first " + _long(SCRIPTS[script], 24_000) + " last"
    fitted = within_tokens(text, TITAN_MAX_TOKENS)
    assert estimated_tokens(fitted) <= TITAN_MAX_TOKENS
    assert fitted.endswith(" last")


def test_the_estimate_counts_dense_scripts_by_their_bytes() -> None:
    assert estimated_tokens("abc" * 100) == 100
    assert estimated_tokens("🏃" * 100) == 200  # 4 bytes each
    assert estimated_tokens("跑" * 100) == 150  # 3 bytes each


def test_8000_emoji_are_embedded_and_a_titan_stricter_than_estimated_gets_half(
    settings: Settings, emulator: BedrockEmulator
) -> None:
    """Titan refuses past 8,192 tokens ("Too many input tokens"), as the emulator does by its own
    count: the product is never refused for a length, and tries once more, shorter, when Titan
    counts a text longer than the product estimated."""
    embeddings = build_embeddings(settings)
    assert embeddings.embed_query("🏃" * 8_000)  # 16,000 tokens by the estimate: cut, not refused
    first = emulator.embedded_chars[-1]
    assert estimated_tokens("🏃" * first) <= TITAN_MAX_TOKENS
    emulator.embedding_max_tokens = 5_000  # a Titan that counts more than the product's estimate
    assert embeddings.embed_query("🏃" * 8_000)  # refused once, then sent with half
    assert emulator.embedded_chars[-1] == first // 2
