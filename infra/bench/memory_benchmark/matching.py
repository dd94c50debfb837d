"""Owns how the benchmark decides that something was said in what the model read.

Evidence: an evidence dialog is present when its whole text (spacing and case aside) is in the
text. Answers and traps match on whole words after LoCoMo's own normalisation (its
`normalize_answer`: lower case, no punctuation, no articles or "and", commas dropped), as a run of
words: the answer "2" no longer matches "2026", nor the trap "Yes" "yesterday".
"""

import re
import string
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d")


def normal(text: str) -> str:
    """Spacing and case aside: how a dialog's text is looked for."""
    return " ".join(text.split()).casefold()


def words(text: str) -> list[str]:
    """LoCoMo's answer normalisation, as words."""
    return _ARTICLES.sub(" ", text.replace(",", "").casefold().translate(_PUNCTUATION)).split()


def has_words(text: Sequence[str], phrase: str) -> bool:
    """Whether `phrase`'s words appear in `text` (already `words`) in a row; an empty phrase never does."""
    wanted = words(phrase)
    if not wanted:
        return False
    first, size = wanted[0], len(wanted)
    return any(text[i : i + size] == wanted for i, word in enumerate(text) if word == first)
