"""Splitting replies into SMS bodies: for every text, no part over the limit and nothing lost or reordered."""

import re

from hypothesis import given
from hypothesis import strategies as st

from onboarding.sms.split import sms_length, split_message

sentences = st.lists(
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=400).map(lambda s: s.strip() + "."),
    max_size=30,
)


def _words(text: str) -> str:
    return "".join(re.split(r"\s+", text))


@given(st.text(max_size=8000), st.integers(min_value=2, max_value=1600))
def test_no_part_is_over_the_limit_and_no_character_is_lost(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert all(1 <= sms_length(part) <= limit for part in parts)
    # Only whitespace at the cuts is dropped: the rest is kept, in order.
    assert _words("".join(parts)) == _words(text)


@given(sentences)
def test_parts_end_at_sentence_ends_when_every_sentence_fits(parts_in: list[str]) -> None:
    text = " ".join(parts_in)
    parts = split_message(text, 1600)
    if all(sms_length(s) <= 1600 for s in parts_in):
        assert all(part.endswith((".", "!", "?", "…")) for part in parts)
