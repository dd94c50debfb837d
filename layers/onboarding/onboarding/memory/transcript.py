"""Owns the transcript form of messages that leave the window: `Client:` / `Coach:` lines, and the
summary's cap in whole lines. Pure, so the summary's model call, the prompt's carried-over lines
and the merge of a linked phone's conversation all write the same lines."""

from collections.abc import Sequence

from onboarding.memory.tokens import count_tokens
from onboarding.model.messages import Message


def transcript_lines(messages: Sequence[Message]) -> list[str]:
    """The messages to fold as `Client:` / `Coach:` lines; tool calls and results are left out
    (what they saved is in agent_context and the profile already)."""
    lines: list[str] = []
    for message in messages:
        text = " ".join(message.content.split())
        if message.role == "user" and text:
            lines.append(f"Client: {text}")
        elif message.role == "assistant" and text:
            lines.append(f"Coach: {text}")
    return lines


def cap_summary(text: str, max_tokens: int) -> str:
    """The summary within `max_tokens`: whole lines, the oldest dropped first."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    while lines and count_tokens("\n".join(lines)) > max_tokens:
        lines.pop(0)
    return "\n".join(lines)
