"""Owns the prompt's window and where it starts: the newest WHOLE messages of the current
conversation that the summary does not cover yet, as many as fit the token budget and the
window's message limit; and where a conversation starts (after an idle gap or a reset command).

The oldest go first, a message is never cut, and a tool call travels with its results (Bedrock
rejects a result without its call). Every message counts towards the limit, tool results too, as
in the fold's policy (onboarding/summary.py): the two agree, so what the fold leaves always fits
the window. The window never reaches back across the conversation's start; the profile, the
answers and the summary are not part of the window, so they stay.
"""

import re
from collections.abc import Sequence
from datetime import datetime

from onboarding.config import ConversationRules
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens, tool_call_tokens
from onboarding.model.messages import Message


def message_tokens(message: Message) -> int:
    return (
        MESSAGE_OVERHEAD_TOKENS
        + count_tokens(message.content)
        + sum(tool_call_tokens(call.name, call.args) for call in message.tool_calls)
    )


def units_of(messages: Sequence[Message]) -> list[tuple[Message, ...]]:
    """Messages grouped so that an assistant message with tool calls and the tool results that
    follow it form one unit; every other message is a unit of its own."""
    units: list[list[Message]] = []
    for message in messages:
        if message.role == "tool" and units and units[-1][0].tool_calls:
            units[-1].append(message)
        else:
            units.append([message])
    return [tuple(unit) for unit in units]


def units_tokens(units: Sequence[Sequence[Message]]) -> int:
    return sum(message_tokens(message) for unit in units for message in unit)


def units_messages(units: Sequence[Sequence[Message]]) -> int:
    return sum(len(unit) for unit in units)


def unsummarized(messages: Sequence[Message], through_message_id: str | None) -> int:
    """Index of the first message the summary does not cover."""
    if through_message_id is None:
        return 0
    return next((i for i, m in enumerate(messages) if m.message_id > through_message_id), len(messages))


def window_candidates(messages: Sequence[Message], start: int, through_message_id: str | None) -> list[Message]:
    """The current conversation's messages the summary does not cover, oldest first."""
    return list(messages[max(start, unsummarized(messages, through_message_id)) :])


def carried_over(messages: Sequence[Message], start: int, through_message_id: str | None) -> list[Message]:
    """The previous conversations' messages the summary does not cover yet (the fold after this turn
    takes them). They are not in the window, which starts fresh, so the system prompt carries them
    next to the summary: between a gap and the next fold, nothing said is out of the prompt."""
    return list(messages[unsummarized(messages, through_message_id) : start])


def fit_window(candidates: Sequence[Message], available_tokens: int, max_messages: int) -> tuple[Message, ...]:
    """The newest whole units of `candidates` within `available_tokens` and `max_messages`, in
    order, starting with a user message."""
    chosen: list[tuple[Message, ...]] = []
    used_tokens = used_messages = 0
    for unit in reversed(units_of(candidates)):
        tokens, count = units_tokens([unit]), len(unit)
        if used_tokens + tokens > available_tokens or used_messages + count > max_messages:
            break
        chosen.append(unit)
        used_tokens += tokens
        used_messages += count
    # Converse drops replies before the first user message, so the window does not hold them.
    while chosen and chosen[-1][0].role != "user":
        chosen.pop()
    return tuple(message for unit in reversed(chosen) for message in unit)


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
