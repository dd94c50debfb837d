"""Splitting a reply into SMS bodies: at sentence ends, never over Twilio's 1,600-character limit."""

import re

SMS_BODY_LIMIT = 1600  # Twilio rejects longer bodies (error 21617)

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_WHITESPACE = re.compile(r"\s+")


def sms_length(text: str) -> int:
    """Length as SMS counts it: UTF-16 code units, so an emoji counts 2."""
    return len(text.encode("utf-16-le")) // 2


def split_message(text: str, limit: int = SMS_BODY_LIMIT) -> list[str]:
    """Parts of `text`, each at most `limit` long, cut between sentences where a sentence fits.

    A sentence longer than `limit` is cut between words, and a word longer than `limit` between
    characters. Only the whitespace at a cut is dropped; every other character is kept in order.
    """
    text = text.strip()
    if sms_length(text) <= limit:
        return [text] if text else []
    parts: list[str] = []
    current = ""
    for piece in _pieces(text, limit):
        candidate = f"{current} {piece}" if current else piece
        if sms_length(candidate) <= limit:
            current = candidate
        else:
            parts.append(current)
            current = piece
    if current:
        parts.append(current)
    return parts


def _pieces(text: str, limit: int) -> list[str]:
    """Sentences, and words or character runs where a sentence alone is too long."""
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        if sms_length(sentence) <= limit:
            pieces.append(sentence)
            continue
        for word in _WHITESPACE.split(sentence):
            pieces.extend(_hard_cut(word, limit) if sms_length(word) > limit else [word])
    return [piece for piece in pieces if piece]


def _hard_cut(word: str, limit: int) -> list[str]:
    cuts: list[str] = []
    current = ""
    for char in word:
        if sms_length(current + char) > limit:
            cuts.append(current)
            current = ""
        current += char
    return [*cuts, current]
