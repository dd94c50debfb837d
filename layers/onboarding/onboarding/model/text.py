"""Owns the text rules shared by every channel (no LangChain here: the SMS webhook imports it)."""


def is_blank(text: str) -> bool:
    """Bedrock rejects text blocks that are empty or only whitespace."""
    return not text.strip()
