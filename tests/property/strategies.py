"""Hypothesis strategies for conversations."""

from typing import Any

from hypothesis import strategies as st

from onboarding.model.normalization import is_blank

# Any Unicode text with something visible in it (blank turns are never stored or sent).
content = st.text(min_size=1, max_size=300).filter(lambda text: not is_blank(text))
long_content = st.one_of(content, st.text(min_size=5_000, max_size=20_000).filter(lambda text: not is_blank(text)))
role = st.sampled_from(["user", "assistant"])
history_entry = st.fixed_dictionaries({"role": role, "content": content})
history = st.lists(history_entry, max_size=50)

malformed_entry: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.fixed_dictionaries({"role": role}),
    st.fixed_dictionaries({"content": content}),
    st.fixed_dictionaries({"role": st.sampled_from(["system", "tool", "", "USER"]), "content": content}),
    st.fixed_dictionaries({"role": role, "content": st.one_of(st.integers(), st.none(), st.lists(st.text()))}),
    st.fixed_dictionaries({"role": role, "content": st.sampled_from(["", " ", "\n\t", "\u3000", "\u200b", "\x00"])}),
)
messy_history = st.lists(st.one_of(history_entry, history_entry, malformed_entry), max_size=50)


@st.composite
def alternating_history(draw: st.DrawFn, max_pairs: int = 30, min_pairs: int = 0) -> list[dict[str, str]]:
    """user, assistant, user, assistant, ... (the shape a healthy conversation has)."""
    pairs = draw(st.integers(min_value=min_pairs, max_value=max_pairs))
    entries: list[dict[str, str]] = []
    for _ in range(pairs):
        entries.append({"role": "user", "content": draw(content)})
        entries.append({"role": "assistant", "content": draw(content)})
    return entries
