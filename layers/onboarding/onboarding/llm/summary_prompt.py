"""Owns the rolling summary's prompt: the summarizer's instructions and the request it sends
(the call itself is llm/summarizer.py)."""

from collections.abc import Sequence

SUMMARY_SYSTEM_PROMPT = (
    "You keep a running summary of a fitness coach's conversation with a client. Update the summary "
    "with the new messages. Keep every fact the client stated (names, numbers, dates, injuries, "
    "preferences, decisions) as short '- ' lines; drop greetings and small talk. Answer with the "
    "updated summary only."
)


def render_summary_request(current_summary: str | None, lines: Sequence[str]) -> str:
    """The user message of a summary request: the summary so far and the messages to fold in."""
    return f"Current summary:\n{current_summary or '(none)'}\n\nNew messages:\n" + "\n".join(lines)
