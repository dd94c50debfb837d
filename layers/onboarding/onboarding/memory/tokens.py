"""Owns token counting for the prompt budget: an estimate that leans towards counting too many.

Claude's tokenizer is not published, so the count cannot be exact offline. English prose averages
3.5 to 4 characters a Claude token; counting 3 ASCII characters a token over-counts it by 15 to 35 %,
which makes the budget a safe upper bound. Characters outside ASCII (accents, CJK, emoji) are often
a whole token each or more, so each counts as one, and characters outside the Basic Multilingual
Plane (most emoji) as three. docs/decisions/0011-memory-beyond-the-window.md says how far off this
can be and how to calibrate it against Bedrock's CountTokens API.
"""

import json
import math
from collections.abc import Mapping
from typing import Any

from onboarding.model.immutable import thaw

ASCII_CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD_TOKENS = 4
"""Role marker and block framing Converse adds around every message."""
TOOL_CALL_OVERHEAD_TOKENS = 12


def count_tokens(text: str) -> int:
    """Estimated tokens in `text` (0 for an empty string).

    Counted with the codecs rather than a loop over characters: a turn counts every message of
    its window, and a Python loop was a large part of the turn's own CPU time.
    """
    if text.isascii():
        return math.ceil(len(text) / ASCII_CHARS_PER_TOKEN)
    ascii_chars = len(text.encode("ascii", "ignore"))
    # In UTF-16 an astral character takes two code units, every other character one.
    astral_chars = len(text.encode("utf-16-le", "surrogatepass")) // 2 - len(text)
    other_chars = len(text) - ascii_chars - astral_chars
    return math.ceil(ascii_chars / ASCII_CHARS_PER_TOKEN) + other_chars + 3 * astral_chars


def tool_call_tokens(name: str, args: Mapping[str, Any]) -> int:
    return TOOL_CALL_OVERHEAD_TOKENS + count_tokens(name) + count_tokens(json.dumps(thaw(args), ensure_ascii=False))
