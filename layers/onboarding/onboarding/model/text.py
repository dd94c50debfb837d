"""Owns the text rules shared by every channel (no LangChain here: the SMS webhook imports it)."""

import unicodedata

# Letters, marks on them, numbers, punctuation, symbols (emoji are symbols) and private-use
# characters are something a person wrote. Whitespace, controls (\u0000), format characters (zero
# width spaces and joiners, word joiners, the BOM) and unassigned code points are not.
_VISIBLE_CATEGORIES = frozenset({"L", "N", "P", "S"})


def _visible(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] in _VISIBLE_CATEGORIES or category == "Co"


def is_blank(text: str) -> bool:
    """True when `text` shows nothing: only whitespace or invisible characters. Such a message
    says nothing to the coach, must not be saved as an answer, and Bedrock rejects blank text."""
    return not any(_visible(char) for char in text)
