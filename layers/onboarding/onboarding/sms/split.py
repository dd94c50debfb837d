"""Owns splitting a reply into SMS bodies: at sentence ends, never over Twilio's 1,600-character limit."""

import re

SMS_BODY_LIMIT = 1600  # Twilio rejects longer bodies (error 21617)

_SENTENCE_END = re.compile(r"[.!?…](?=\s)")


def sms_length(text: str) -> int:
    """Length as SMS counts it: UTF-16 code units, so an emoji counts 2."""
    return len(text.encode("utf-16-le")) // 2


def split_message(text: str, limit: int = SMS_BODY_LIMIT) -> list[str]:
    """Parts of `text`, each at most `limit` long, cut after a sentence where one fits.

    Failing that a part is cut at the last whitespace, and a word longer than `limit` between
    characters. Parts are slices of the text: only the whitespace at a cut is dropped, so line
    breaks and paragraphs inside a part are kept.
    """
    parts: list[str] = []
    start, end_of_text = 0, len(text.rstrip())
    while True:
        while start < end_of_text and text[start].isspace():
            start += 1
        if start >= end_of_text:
            return parts
        end = _cut(text, start, min(_fit(text, start, limit), end_of_text))
        parts.append(text[start:end].rstrip())
        start = end


def _fit(text: str, start: int, limit: int) -> int:
    """The largest end such that text[start:end] is at most `limit` long (at least one character)."""
    used, end = 0, start
    while end < len(text):
        used += 2 if ord(text[end]) > 0xFFFF else 1
        if used > limit:
            break
        end += 1
    return max(end, start + 1)


def _cut(text: str, start: int, fit_end: int) -> int:
    if fit_end >= len(text.rstrip()):
        return fit_end
    window = text[start : fit_end + 1]  # a sentence may end exactly at the limit, before a space
    sentence_ends = [start + match.end() for match in _SENTENCE_END.finditer(window) if start + match.end() <= fit_end]
    if sentence_ends:
        return sentence_ends[-1]
    spaces = [start + index for index, char in enumerate(window) if char.isspace() and 0 < index <= fit_end - start]
    return spaces[-1] if spaces else fit_end
