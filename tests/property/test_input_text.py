"""The input text rules (model/normalization.py `normalized_text`, docs/decisions/0032-input-text.md) over
drawn texts: normalising twice changes nothing; the result is in normal form C; no removed
character survives outside the contexts that need it (here checked from the rule as the decision
states it); emoji ZWJ sequences, Persian words with ZWNJ, Indic conjuncts and flag tag sequences
come through unchanged wherever they stand; a text typed composed or decomposed is one text."""

import re
import string
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onboarding.model.normalization import normalized_text

pytestmark = pytest.mark.property

ZWNJ, ZWJ, CANCEL_TAG = "\u200c", "\u200d", "\U000e007f"
ALWAYS_REMOVED = set("\u200b\u2060\ufeff\u00ad\u2061\u2062\u2063\u2064")
# The scripts the decision names (Arabic, Syriac, the Indic blocks), as a character class.
NEEDS_JOINERS = re.compile("[\u0600-\u077f\u0870-\u0dff\u1cd0-\u1cff\ua8e0-\ua8ff\ufb50-\ufdff\ufe70-\ufefe]")
TAG_SEQUENCE_TAGS = re.compile("^[\U000e0020-\U000e007e]+\U000e007f$")

KEPT_WHOLE = [
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",  # family
    "\U0001f469\u200d\u2695\ufe0f",  # woman health worker
    "\U0001f9d1\U0001f3fe\u200d\U0001f373",  # cook, medium-dark skin tone
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag
    "\u2764\ufe0f\u200d\U0001f525",  # heart on fire
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # flag of Scotland
    "\U0001f3f4\U000e0067\U000e0062\U000e0077\U000e006c\U000e0073\U000e007f",  # flag of Wales
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: I want
    "\u06a9\u062a\u0627\u0628\u200c\u0647\u0627",  # Persian: books
    "\u0915\u094d\u200d\u0937",  # Devanagari half form
    "\u0915\u094d\u200c\u0937",  # Devanagari explicit virama
    "\u0d28\u0d4d\u200d",  # Malayalam chillu (ZWJ at the end of the word: removed, see below)
]
KEPT_WHOLE_IN_A_WORD = KEPT_WHOLE[:-1]

PIECES = st.sampled_from(
    [
        ZWNJ, ZWJ, CANCEL_TAG, *ALWAYS_REMOVED, "\U000e0001", "\U000e0041", "\U000e0067", "\ufe0f", "\U0001f3fd",
        "\U0001f3f4", "\U0001f469", "\u2695", "e", "\u0301", "\u00e9", "\u0627", "\u0653", "\u0622", "\u06cc",
        "\u0915", "\u094d", "\u0937", "\u09c7", "\u09be", "\u0d28", " ", "\n", "\r", "\x00", "\u202e", "a",
        "e\u0301", "a\u0308", "\u0627\u0653", "\u09c7\u09be", "\u1100\u1161",  # each composes under NFC
        "\U000e0067\U000e0062\U000e007f",  # tags and their cancel: kept only after an emoji
    ]
)  # fmt: skip
# Texts made of the characters the rules are about, side by side in every order, and any text.
tricky = st.one_of(st.lists(st.one_of(PIECES, st.characters()), max_size=40).map("".join), st.text())
plain = st.text(string.ascii_letters + string.digits + " .,!?", max_size=20)


def _base_before(text: str, at: int) -> str:
    """The character before `text[at]`, past marks and skin tones ("" at the start)."""
    while at > 0 and (unicodedata.category(text[at - 1]).startswith("M") or 0x1F3FB <= ord(text[at - 1]) <= 0x1F3FF):
        at -= 1
    return text[at - 1] if at > 0 else ""


def _context_allows(text: str, at: int) -> bool:
    before, after = _base_before(text, at), text[at + 1 : at + 2]
    if NEEDS_JOINERS.fullmatch(before or "x") and NEEDS_JOINERS.fullmatch(after or "x"):
        return True
    emoji = [unicodedata.category(c) == "So" if c else False for c in (before, after)]
    return text[at] == ZWJ and all(emoji)


@given(text=tricky)
def test_normalising_twice_changes_nothing(text: str) -> None:
    once = normalized_text(text)
    assert normalized_text(once) == once


@given(text=tricky)
def test_the_result_is_in_normal_form_c(text: str) -> None:
    assert unicodedata.is_normalized("NFC", normalized_text(text))


@given(text=tricky)
def test_no_removed_character_survives_outside_the_contexts_that_need_it(text: str) -> None:
    result = normalized_text(text)
    assert not ALWAYS_REMOVED & set(result)
    for at, char in enumerate(result):
        if char in (ZWNJ, ZWJ):
            assert _context_allows(result, at), (result, at)
    for run in re.finditer("[\U000e0000-\U000e007f]+", result):
        assert TAG_SEQUENCE_TAGS.match(run.group()), result
        assert unicodedata.category(_base_before(result, run.start()) or "x") == "So", result


@given(before=plain, sequence=st.sampled_from(KEPT_WHOLE_IN_A_WORD), after=plain)
def test_emoji_sequences_persian_words_indic_conjuncts_and_flags_survive_unchanged(
    before: str, sequence: str, after: str
) -> None:
    assert normalized_text(before + sequence + after) == before + sequence + after


@given(text=tricky)
def test_a_text_typed_composed_or_decomposed_is_one_text(text: str) -> None:
    composed, decomposed = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    assert normalized_text(decomposed) == normalized_text(composed) == normalized_text(text)


def test_a_joiner_with_nothing_to_join_on_one_side_is_removed() -> None:
    """A ZWJ that ends a word joins nothing here (Malayalam writes chillu letters that way in old
    text; Unicode 5.1 gave them code points of their own, which stay)."""
    assert normalized_text(KEPT_WHOLE[-1]) == "\u0d28\u0d4d"
    assert normalized_text("\u0d7b") == "\u0d7b"
