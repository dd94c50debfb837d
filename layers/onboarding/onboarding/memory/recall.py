"""Owns the "From earlier conversations" section's lines: the recalled messages that fit its own
token allowance, most relevant first, then shown in the order they were said. Pure."""

from collections.abc import Sequence

from onboarding.memory.tokens import count_tokens
from onboarding.model.messages import Message

RECALL_HEADER = (
    "From earlier conversations (older messages that may bear on this one, with the day each was said; "
    "use them only if they do):"
)
_WHO = {"user": "Client", "assistant": "Coach"}


def recall_line(message: Message) -> str:
    day = message.created_at.date().isoformat() if message.created_at else "an earlier day"
    return f"- {day} {_WHO.get(message.role, 'Coach')}: {' '.join(message.content.split())}"


def recall_lines(recalled: Sequence[Message], max_tokens: int) -> list[str]:
    """The lines of `recalled` (most relevant first) that fit `max_tokens` with the section's
    header, oldest first. A message too long for what is left is passed over, not cut. A message
    that repeats one already chosen (the same speaker and words: "sorry, the dog needed me" said on
    eight days) is shown once, at its most relevant day: its copies would fill the section with one
    line and push out what was said only once."""
    left = max_tokens - count_tokens(RECALL_HEADER) - 1
    chosen: list[Message] = []
    seen: set[tuple[str, str]] = set()
    for message in recalled:
        said = (message.role, " ".join(message.content.lower().split()))
        cost = count_tokens(recall_line(message)) + 1
        if said not in seen and cost <= left:
            chosen.append(message)
            seen.add(said)
            left -= cost
    chosen.sort(key=lambda m: m.message_id)
    return [recall_line(message) for message in chosen]


def recall_section_tokens(lines: Sequence[str]) -> int:
    """What the section costs in the system prompt (its header, lines and the blank line before it)."""
    return count_tokens("\n".join([RECALL_HEADER, *lines])) + 1 if lines else 0


def not_in_prompt(recalled: Sequence[Message], shown_ids: set[str]) -> tuple[Message, ...]:
    """What was recalled minus what the prompt shows already (the window, the carried-over lines)."""
    return tuple(message for message in recalled if message.message_id not in shown_ids)
