"""Owns the text rules shared by every channel (no LangChain here: the SMS webhook imports it)."""

import unicodedata

# Letters, marks on them, numbers, punctuation, symbols (emoji are symbols) and private-use
# characters are something a person wrote. Whitespace, controls (\u0000), format characters (zero
# width spaces and joiners, word joiners, the BOM) and unassigned code points are not.
_VISIBLE_CATEGORIES = frozenset({"L", "N", "P", "S"})

# What a message may not carry into the store or the prompt: the C0 controls other than tab and
# line feed (NUL, ESC of terminal colour codes, BEL...), DEL and the C1 controls, and the
# bidirectional overrides and isolates that make text display in another order than it is stored
# (the "Trojan Source" characters, CVE-2021-42574). Marks such as U+200E stay: they reorder nothing.
_BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_REMOVED: dict[int, None] = {
    **dict.fromkeys(code for code in range(0x20) if chr(code) not in "\t\n"),
    **dict.fromkeys([0x7F, *range(0x80, 0xA0)]),
    **dict.fromkeys(map(ord, _BIDI_CONTROLS)),
}


def normalized_text(text: str) -> str:
    """`text` as it is stored and sent to the model: line ends as `\\n` (a carriage return is a
    line end, not a character to drop: "a\\rb" keeps its two lines), and the controls above
    removed. Idempotent, so a text normalised at the webhook is unchanged by the turn."""
    return text.replace("\r\n", "\n").replace("\r", "\n").translate(_REMOVED)


def _visible(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] in _VISIBLE_CATEGORIES or category == "Co"


def is_blank(text: str) -> bool:
    """True when `text` shows nothing: only whitespace or invisible characters. Such a message
    says nothing to the coach, must not be saved as an answer, and Bedrock rejects blank text."""
    return not any(_visible(char) for char in text)
