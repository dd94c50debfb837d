"""A deterministic scripted coach, so the local stack shows memory working (or failing) visibly.

It reads the same prompt a real model would: the `Collect` list of `- field: question` lines in
the system prompt and the conversation itself. A question counts as answered when the user replied
to the assistant message that asked it, or when the system prompt lists it under `Already known`.
The coach quotes what it was told and asks the first question that is still open, so a coach that
lost its history re-asks, and one that kept it moves on.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

_FIELD_LINE = re.compile(r"^- (?P<key>[a-z_]+): (?P<question>.+\?)\s*$")
_KNOWN_LINE = re.compile(r"^- (?:[a-z_]+\.)?(?P<key>[a-z_]+): (?P<value>.+)$")
_STEP_LINE = re.compile(r"^Current step: (?P<title>[^.]+)\.", re.MULTILINE)
_QUOTE_CHARS = 60


@dataclass(frozen=True)
class Turn:
    role: str
    text: str


def _section(system: str, header: str) -> list[str]:
    """Lines of the block that starts with `header` and ends at a blank line."""
    lines = system.splitlines()
    for start, line in enumerate(lines):
        if line.startswith(header):
            block: list[str] = []
            for following in lines[start + 1 :]:
                if not following.strip():
                    break
                block.append(following)
            return block
    return []


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _QUOTE_CHARS else flat[: _QUOTE_CHARS - 1] + "…"


def coach_reply(system: str, conversation: Sequence[Turn]) -> str:
    fields = [(m["key"], m["question"]) for line in _section(system, "Collect") if (m := _FIELD_LINE.match(line))]
    known = {m["key"] for line in _section(system, "Already known") if (m := _KNOWN_LINE.match(line))}
    step = m["title"] if (m := _STEP_LINE.search(system)) else "onboarding"
    answers: dict[str, str] = {}
    for index, turn in enumerate(conversation[:-1]):
        following = conversation[index + 1]
        if turn.role == "assistant" and following.role == "user":
            for key, question in fields:
                if question in turn.text:
                    answers[key] = following.text
    last = conversation[-1] if conversation else Turn("user", "")
    parts: list[str] = []
    if not any(turn.role == "assistant" for turn in conversation):
        parts.append(f"Hi, I'm your coach! Let's start with your {step.lower()}.")
    elif last.role == "user":
        parts.append(f"Thanks, noted: “{_quote(last.text)}”.")
    if len(answers) > 1:
        parts.append(
            "So far: "
            + "; ".join(f"{key.replace('_', ' ')}: “{_quote(value)}”" for key, value in answers.items())
            + "."
        )
    open_questions = [question for key, question in fields if key not in answers and key not in known]
    if open_questions:
        parts.append(open_questions[0])
    elif fields:
        parts.append(f"That's everything I need for the {step.lower()} step, thank you!")
    else:
        parts.append("How can I help you today?")
    return " ".join(parts)
