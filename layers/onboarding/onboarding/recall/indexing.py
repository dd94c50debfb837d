"""Owns what a message becomes in the recall index: its key, its metadata and the text embedded.

A message is embedded with the message it answers ("what does my plan say?" with the coach's
answer), so that a reply is found by the question it answers and a short answer ("yes, twice a
week") by what was asked. What is shown when it is recalled is the message alone, with its day.
Pure: the indexer and the tests share it.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from onboarding.model.messages import Message

KEY_SEPARATOR = "#"
USER_KEY = "user"  # the one filterable key: every query is filtered to one user
TEXT_KEY, ROLE_KEY, AT_KEY = "text", "role", "at"  # non-filterable (template.yaml's index says so)
NON_FILTERABLE_KEYS = (TEXT_KEY, ROLE_KEY, AT_KEY)
INDEXED_ROLES = ("user", "assistant")


def vector_key(user_id: str, message_id: str) -> str:
    """The vector's key: the user and the message (unique across users, as message ids are not)."""
    return f"{user_id}{KEY_SEPARATOR}{message_id}"


def is_indexed(message: Message) -> bool:
    """Only what the client and the coach said: tool calls and results are the coach's bookkeeping."""
    return message.role in INDEXED_ROLES and bool(message.content.strip())


def embedded_text(message: Message, answers: Message | None, max_chars: int) -> str:
    """The text embedded for `message`: what it answers, then itself, within `max_chars` (its own
    text kept first, the context cut first)."""
    own = " ".join(message.content.split())[:max_chars]
    context = " ".join(answers.content.split()) if answers is not None else ""
    room = max_chars - len(own) - 1
    return f"{context[-room:]} {own}" if context and room > 0 else own


def metadata(user_id: str, message: Message, max_chars: int) -> dict[str, str]:
    at = message.created_at.isoformat() if message.created_at else ""
    return {USER_KEY: user_id, TEXT_KEY: message.content[:max_chars], ROLE_KEY: message.role, AT_KEY: at}


def recalled_message(key: str, found: Mapping[str, Any]) -> Message | None:
    """The message a query found, from its key and metadata; None when either is not ours."""
    message_id = key.rpartition(KEY_SEPARATOR)[2]
    text, role, at = found.get(TEXT_KEY), found.get(ROLE_KEY), found.get(AT_KEY)
    if not message_id or not isinstance(text, str) or role not in INDEXED_ROLES or not isinstance(at, str):
        return None
    try:
        created_at = datetime.fromisoformat(at) if at else None
    except ValueError:
        return None
    return Message("user" if role == "user" else "assistant", text, message_id, created_at)
