"""Owns what a system prompt is made of, and how the user's memory is shown in it: the parts (a
`PromptSection` of ours, always whole; a `MemorySection` of the user's memory, one `MemoryItem` a
line, whose items can give way), the memory's sections (what is known, about the client, the
summary, and "From earlier conversations": the recalled messages that fit its own allowance),
their texts, which items are kept first, which give way first, and the one line that says what
gave way. llm/prompt.py puts the parts together and fits them.

What is kept first: the current step's answers (and what it could not answer). Then, in turns:
the other answers (the most recently told first), the summary (its newest lines first, never with
a gap), the profile (its named fields, then its free-form facts, newest first). What gave way is
still stored: the note names `answer_history` (any answer, with its earlier values) and
`recall_facts` (every fact), which read it. Recalled messages are chosen most relevant first, then
shown in the order they were said.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from onboarding.llm.wording import (
    KNOWN_HEADER,
    LEFT_OUT_ANSWERS,
    LEFT_OUT_FACTS,
    LEFT_OUT_NOTE,
    LEFT_OUT_SUMMARY,
    LEFT_OUT_TITLE,
    NONE_SHOWN,
    NOTHING_YET,
    PROFILE_HEADER,
    RECALL_HEADER,
    SUMMARY_HEADER,
)
from onboarding.memory.tokens import count_tokens
from onboarding.model.answers import Answer, step_answers
from onboarding.model.messages import Message
from onboarding.model.profile import FACT_LINE_PREFIX
from onboarding.model.state import OnboardingAgentType


@dataclass(frozen=True)
class PromptSection:
    """One part of the system prompt. `kind` says what it is made of: `instructions` (ours),
    `profile`, `collected_answers`, `summary`, `waiting_for` (the user's memory), or `left_out`
    (the line that names what did not fit)."""

    kind: str
    title: str
    text: str


@dataclass(frozen=True)
class MemoryItem:
    """One line of a memory section; `position` is where it is shown within the section."""

    text: str
    position: int


@dataclass(frozen=True)
class MemorySection:
    """A section of the user's memory whose items (in the order they are kept: the first is kept
    first) can give way. `empty` is shown when it has no items at all (None: the section is left
    out then), `none_shown` when all of them gave way (so the model does not read the section as
    "nothing is known"); `left_out_as` names what gave way in the note (`{n}`: how many)."""

    kind: str
    title: str
    header: str
    items: tuple[MemoryItem, ...]
    left_out_as: str
    none_shown: str
    kept_first: int = 0
    contiguous: bool = False
    allowance: int | None = None
    empty: str | None = None


PromptPart = PromptSection | MemorySection


def known_line(step: str, key: str, answer: Answer) -> str:
    """`- step.field: value`, with the day the client said it; a corrected value says so (its
    earlier values are not shown: the answer_history tool gives them when asked)."""
    line = f"- {step}.{key}: {answer.value}"
    if answer.said_at is None:
        return line
    day = answer.said_at.date().isoformat()
    return f"{line} (corrected {day}; earlier values: answer_history)" if answer.previous else f"{line} (told {day})"


def skipped_line(name: str) -> str:
    return f"- {name}: (the client could not say; do not ask again)"


def _newest_first(said_at: datetime | None, position: int) -> tuple[int, float, int]:
    # Answers told most recently first; answers without a time (saved before provenance) last.
    return (said_at is None, -(said_at.timestamp() if said_at else 0.0), position)


def answers_section(
    step: OnboardingAgentType, agent_context: Mapping[str, Any], skipped: Sequence[str], onboarding_complete: bool
) -> MemorySection:
    """What every step stored (current values only), so nothing is asked again. Shown in step order;
    the current step's lines are kept first (none after onboarding: no step is collecting)."""
    current: list[MemoryItem] = []
    others: list[tuple[tuple[int, float, int], MemoryItem]] = []
    position = 0
    for name in agent_context:
        for key, answer in step_answers(agent_context, name).items():
            if answer.answered:
                item = MemoryItem(known_line(name, key, answer), position)
                if name == step.value and not onboarding_complete:
                    current.append(item)
                else:
                    others.append((_newest_first(answer.said_at, position), item))
                position += 1
    for name in skipped:
        item = MemoryItem(skipped_line(name), position)
        if name.startswith(f"{step.value}.") and not onboarding_complete:
            current.append(item)
        else:
            others.append(((0, 0.0, position), item))  # short, and they stop a re-ask: before answers
        position += 1
    items = (*current, *(item for _, item in sorted(others, key=lambda pair: pair[0])))
    return MemorySection(
        "collected_answers",
        "Already known",
        KNOWN_HEADER,
        items,
        LEFT_OUT_ANSWERS,
        NONE_SHOWN,
        kept_first=len(current),
        empty=NOTHING_YET,
    )


def profile_section(lines: Sequence[str]) -> MemorySection:
    """The profile's lines: its named fields are kept before its free-form facts, newest fact first."""
    named = [MemoryItem(line, i) for i, line in enumerate(lines) if not line.startswith(FACT_LINE_PREFIX)]
    facts = [MemoryItem(line, i) for i, line in enumerate(lines) if line.startswith(FACT_LINE_PREFIX)]
    return MemorySection(
        "profile",
        "About the client",
        PROFILE_HEADER,
        (*named, *reversed(facts)),
        LEFT_OUT_FACTS,
        NONE_SHOWN,
        empty=NOTHING_YET,
    )


def summary_section(summary: str | None) -> MemorySection:
    """The summary (and the earlier conversation's lines not folded yet): newest lines kept first,
    the oldest give way, never one from the middle."""
    lines = (summary or "").splitlines()
    items = tuple(MemoryItem(line, i) for i, line in reversed(list(enumerate(lines))))
    return MemorySection("summary", "Summary", SUMMARY_HEADER, items, LEFT_OUT_SUMMARY, NONE_SHOWN, contiguous=True)


def left_out_note(parts: Sequence[PromptPart], left_out: Mapping[str, int]) -> PromptSection:
    """The one line that says what is stored but not shown, and which tool reads it."""
    named = [
        part.left_out_as.format(n=left_out[part.kind])
        for part in parts
        if isinstance(part, MemorySection) and left_out.get(part.kind)
    ]
    return PromptSection("left_out", LEFT_OUT_TITLE, LEFT_OUT_NOTE.format(parts="; ".join(named)))


_WHO = {"user": "Client", "assistant": "Coach"}


def recall_day(message: Message) -> str:
    """The line that opens a day's recalled messages."""
    return f"{message.created_at.date().isoformat() if message.created_at else 'An earlier day'}:"


def recall_line(message: Message) -> str:
    return f"- {_WHO.get(message.role, 'Coach')}: {' '.join(message.content.split())}"


def recall_lines(recalled: Sequence[Message], max_tokens: int) -> list[str]:
    """The lines of `recalled` (most relevant first) that fit `max_tokens` with the section's
    header, oldest first, each day's under a line that names it once (a date on every line would
    cost the room of a few more messages). A message too long for what is left is passed over, not
    cut. A message that repeats one already chosen (the same speaker and words: a hit that is also
    another's neighbour, or "sorry, the dog needed me" said on eight days) is shown once, at its
    most relevant day: its copies would fill the section with one line and push out what was said
    only once."""
    left = max_tokens - count_tokens(RECALL_HEADER) - 1
    chosen: list[Message] = []
    seen: set[tuple[str, str]] = set()
    days: set[str] = set()
    for message in recalled:
        said = (message.role, " ".join(message.content.lower().split()))
        day = recall_day(message)
        cost = count_tokens(recall_line(message)) + 1 + (0 if day in days else count_tokens(day) + 1)
        if said not in seen and cost <= left:
            chosen.append(message)
            seen.add(said)
            days.add(day)
            left -= cost
    lines: list[str] = []
    for message in sorted(chosen, key=lambda m: m.message_id):
        if (day := recall_day(message)) not in lines:
            lines.append(day)
        lines.append(recall_line(message))
    return lines


def recall_section_tokens(lines: Sequence[str]) -> int:
    """What the section costs in the system prompt (its header, lines and the blank line before it)."""
    return count_tokens("\n".join([RECALL_HEADER, *lines])) + 1 if lines else 0


def not_in_prompt(recalled: Sequence[Message], shown_ids: set[str]) -> tuple[Message, ...]:
    """What was recalled minus what the prompt shows already (the window, the carried-over lines)."""
    return tuple(message for message in recalled if message.message_id not in shown_ids)
