"""Owns where a conversation starts: after an idle gap or a reset command (seed 002).

The window never reaches back across that start. The profile, agent_context and summary are not
part of the window, so they stay.
"""

import re
from collections.abc import Sequence
from datetime import datetime

from onboarding.config import ConversationRules
from onboarding.model.messages import Message

_PUNCTUATION = re.compile(r"[^\w\s]")


def normalize_command(text: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", text.lower()).split())


def is_reset_command(text: str, keywords: Sequence[str]) -> bool:
    """True when the whole message is one of `keywords` (any case, punctuation ignored): "Start
    over!" resets; "I don't want to start over" does not."""
    normalized = normalize_command(text)
    return bool(normalized) and normalized in {normalize_command(keyword) for keyword in keywords}


def _next_user(messages: Sequence[Message], index: int) -> int:
    while index < len(messages) and messages[index].role != "user":
        index += 1
    return index


def conversation_start(messages: Sequence[Message], now: datetime, rules: ConversationRules) -> int:
    """Index in `messages` (oldest first, stored) of the first message of the current conversation;
    `len(messages)` when the message arriving `now` starts a new one.

    A conversation ends at an idle gap longer than `rules.gap_s`, and at a reset command (the
    command and the coach's answer to it belong to the old conversation). A conversation always
    starts with a user message: a reply that arrives after a gap belongs to the one before.
    """
    start = 0
    for index, message in enumerate(messages):
        previous = messages[index - 1].created_at if index else None
        if previous and message.created_at and (message.created_at - previous).total_seconds() > rules.gap_s:
            start = _next_user(messages, index)
        if message.role == "user" and is_reset_command(message.content, rules.reset_keywords):
            start = _next_user(messages, index + 1)
    last = messages[-1].created_at if messages else None
    if last and (now - last).total_seconds() > rules.gap_s:
        start = len(messages)
    return start
