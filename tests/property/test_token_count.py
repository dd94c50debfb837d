"""The token estimate counts by the codecs for speed; it must equal its definition, character by
character: ⌈ASCII / 3⌉, plus one per other character of the Basic Multilingual Plane (lone
surrogates included), plus three per astral character."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onboarding.memory.tokens import count_tokens

pytestmark = pytest.mark.property


def by_definition(text: str) -> int:
    ascii_chars = sum(1 for char in text if ord(char) < 128)
    astral_chars = sum(1 for char in text if ord(char) > 0xFFFF)
    return math.ceil(ascii_chars / 3) + (len(text) - ascii_chars - astral_chars) + 3 * astral_chars


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_the_estimate_equals_its_definition_for_any_text(text: str) -> None:
    assert count_tokens(text) == by_definition(text)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("abc", 1), ("abcd", 2), ("é", 1), ("日本", 2), ("💪", 3), ("go 💪!", 2 + 3), ("\ud800", 1)],
)
def test_examples(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens
