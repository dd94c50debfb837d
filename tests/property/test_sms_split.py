"""Splitting replies into SMS bodies: for every text, no part over the limit and nothing lost or reordered."""

from hypothesis import given
from hypothesis import strategies as st

from onboarding.sms.split import sms_length, split_message

any_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=6000)
sentences = st.lists(
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=400).map(lambda s: s.strip() + "."),
    max_size=30,
)


def _gaps(text: str, parts: list[str]) -> list[str]:
    """What lies between the parts in `text`; fails if a part is not the next slice of it."""
    gaps, cursor = [], 0
    for part in parts:
        index = text.index(part, cursor)
        gaps.append(text[cursor:index])
        cursor = index + len(part)
    gaps.append(text[cursor:])
    return gaps


@given(any_text, st.integers(min_value=2, max_value=1600))
def test_no_part_is_over_the_limit_and_only_whitespace_at_cuts_is_dropped(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert all(1 <= sms_length(part) <= limit for part in parts)
    assert all(part == part.strip() for part in parts)
    gaps = _gaps(text, parts)
    assert all(not gap.strip() for gap in gaps)
    # Parts and whitespace gaps tile the text exactly: nothing else is dropped, nothing reordered.
    assert sum(map(len, parts)) + sum(map(len, gaps)) == len(text)


@given(sentences, st.sampled_from([" ", "\n", "\n\n"]))
def test_parts_end_at_sentence_ends_and_keep_their_line_breaks(parts_in: list[str], separator: str) -> None:
    text = separator.join(parts_in)
    parts = split_message(text, 1600)
    if all(sms_length(s) <= 1600 for s in parts_in):
        assert all(part.endswith((".", "!", "?", "…")) for part in parts)
    if len(parts) == 1:
        assert parts[0] == text.strip()


def test_line_breaks_inside_a_long_reply_survive() -> None:
    paragraph = "Week one: walk 20 minutes a day.\nWeek two: add two short runs.\n\n"
    parts = split_message(paragraph * 60, 1600)
    assert len(parts) > 1
    assert all("\n\n" in part for part in parts)
