"""Owns the text rules shared by every channel (no LangChain here: the SMS webhook imports it)."""

import re
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
# And the invisible characters that carry nothing a person meant (docs/decisions/0032-input-text.md):
# zero width space, word joiner, the BOM, the soft hyphen (a hyphenation hint) and the invisible
# math operators, wherever they are: "fit\u00adness" and "fitness" are one answer.
_INVISIBLE = "\u200b\u2060\ufeff\u00ad\u2061\u2062\u2063\u2064"
_REMOVED: dict[int, None] = {
    **dict.fromkeys(code for code in range(0x20) if chr(code) not in "\t\n"),
    **dict.fromkeys([0x7F, *range(0x80, 0xA0)]),
    **dict.fromkeys(map(ord, _BIDI_CONTROLS + _INVISIBLE)),
}
# The zero-width joiners are removed too, but where a script or an emoji needs them (below).
ZWNJ, ZWJ = "\u200c", "\u200d"
# The tag block. Its characters are kept only as an emoji tag sequence (UTS #51: an emoji, tags
# U+E0020 to U+E007E, then CANCEL TAG U+E007F), which is how the flags of England, Scotland and
# Wales are written; anywhere else they hide text no one sees.
_TAG_SEQUENCE = re.compile("[\U000e0020-\U000e007e]+\U000e007f")
_JOINERS_AND_TAGS = re.compile("[\u200c\u200d]|[\U000e0000-\U000e007f]+")
# Scripts whose words need ZWNJ and ZWJ between their letters (Persian "می‌خواهم", the half forms
# of Indic conjuncts): Arabic (with its supplements and presentation forms), Syriac, and the Indic
# blocks from Devanagari to Sinhala with the Vedic and Devanagari extensions.
_JOINING_SCRIPTS = (
    range(0x0600, 0x0780),  # Arabic, Syriac, Arabic Supplement
    range(0x0870, 0x0E00),  # Arabic Extended-B and -A; Devanagari ... Sinhala
    range(0x1CD0, 0x1D00),  # Vedic Extensions
    range(0xA8E0, 0xA900),  # Devanagari Extended
    range(0xFB50, 0xFE00),  # Arabic Presentation Forms-A
    range(0xFE70, 0xFEFF),  # Arabic Presentation Forms-B (not U+FEFF, the BOM)
)
_SKIN_TONES = range(0x1F3FB, 0x1F400)


def _in_joining_script(char: str) -> bool:
    return any(ord(char) in block for block in _JOINING_SCRIPTS)


def _is_emoji(char: str) -> bool:
    """An emoji, as far as the standard library can tell: emoji are symbols (So)."""
    return unicodedata.category(char) == "So"


def _base_before(text: str, at: int) -> str | None:
    """The character before `text[at]`, past the marks on it (virama, harakat, the emoji
    presentation selector U+FE0F) and skin tones: what a joiner at `at` joins from."""
    at -= 1
    while at >= 0 and (unicodedata.category(text[at])[0] == "M" or ord(text[at]) in _SKIN_TONES):
        at -= 1
    return text[at] if at >= 0 else None


def _joiner_kept(text: str, at: int) -> bool:
    """ZWNJ and ZWJ stay between two letters of a script that needs them; ZWJ also between two
    emoji (the family, profession and flag sequences)."""
    before, after = _base_before(text, at), text[at + 1] if at + 1 < len(text) else None
    if before is None or after is None:
        return False
    if _in_joining_script(before) and _in_joining_script(after):
        return True
    return text[at] == ZWJ and _is_emoji(before) and _is_emoji(after)


def _tag_sequence_kept(text: str, at: int, tags: str) -> str:
    """Of the run of tag characters `tags` at `at`, the emoji tag sequence it starts with, if an
    emoji stands before it; nothing otherwise."""
    sequence = _TAG_SEQUENCE.match(tags)
    base = _base_before(text, at)
    return sequence.group() if sequence and base is not None and _is_emoji(base) else ""


def _joiners_and_tags_in_place(text: str) -> str:
    """`text` without the joiners and tag characters that neither a script nor an emoji needs."""

    def kept(found: re.Match[str]) -> str:
        if found.group() in (ZWNJ, ZWJ):
            return found.group() if _joiner_kept(text, found.start()) else ""
        return _tag_sequence_kept(text, found.start(), found.group())

    return _JOINERS_AND_TAGS.sub(kept, text)


def normalized_text(text: str) -> str:
    """`text` as it is stored and sent to the model: line ends as `\\n` (a carriage return is a
    line end, not a character to drop: "a\\rb" keeps its two lines), the controls above removed,
    the invisible characters removed but where a script or an emoji needs them, and then in Unicode
    normal form C ("é" typed as one character or as "e" and an accent is one text). Idempotent, so
    a text normalised at the webhook is unchanged by the turn."""
    controlled = text.replace("\r\n", "\n").replace("\r", "\n").translate(_REMOVED)
    return unicodedata.normalize("NFC", _joiners_and_tags_in_place(controlled))


def _visible(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] in _VISIBLE_CATEGORIES or category == "Co"


def is_blank(text: str) -> bool:
    """True when `text` shows nothing: only whitespace or invisible characters. Such a message
    says nothing to the coach, must not be saved as an answer, and Bedrock rejects blank text."""
    return not any(_visible(char) for char in text)
