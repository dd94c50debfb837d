"""A deterministic scripted coach, so the local stack shows memory working (or failing) visibly.

It reads the same prompt a real model would: the `Collect` list of `- field: question` lines in
the system prompt and the conversation itself. A question counts as answered when the user replied
to the assistant message that asked it, or when the system prompt lists it under `Already known`.
The coach quotes what it was told and asks the first question that is still open, so a coach that
lost its history re-asks, and one that kept it moves on.

When the request offers tools (`toolConfig`, tool_turns.py), the coach uses them the way the app's prompt tells a
model to: it saves an answer with `save_<step>`, keeps facts with `remember_fact`, parks an
evasive answer with `ask_for`, changes an earlier answer with `correct_answer` and looks one up
with `answer_history`; after the tool results come back it answers in text. It calls the client
by the name the prompt gives, recaps what the prompt holds when asked (or when a returning client
opens a new conversation), and after onboarding answers from the saved plan (memory_talk.py). A request
whose system prompt starts with `You keep a running summary` is a summarization, answered with the
updated summary (server.py's `coach_respond` picks the summary, a tool turn or a text turn).
Everything is a pure function of the request, so tests can assert exact replies.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.local.bedrock_emulator import memory_talk as talk
from infra.local.bedrock_emulator import reading

_FIELD_LINE = re.compile(r"^- (?P<key>[a-z_]+): (?P<question>.+\?)\s*$")
_STEP_LINE = re.compile(r"^Current step: (?P<title>[^.]+)\.", re.MULTILINE)
_WAITING_LINE = re.compile(r"^Waiting for: (?P<key>[a-z_]+)\s*$", re.MULTILINE)
_QUOTE_CHARS = 60

# Answers that put a question off rather than answer it (the app then waits for the field).
_EVASIVE = re.compile(r"\b(?:not sure|don['’]?t know|let me check|later|no idea)\b", re.IGNORECASE)
# Facts worth keeping across conversations, as remember_fact {kind, value}.
_FACT_PATTERNS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    # (kind, pattern, whether the value is group 1 rather than the whole matched phrase)
    ("name", re.compile(r"\bmy name is ([A-Za-z][\w'’-]*)", re.IGNORECASE), True),
    ("preferred_name", re.compile(r"\bcall me ([A-Za-z][\w'’-]*)", re.IGNORECASE), True),
    ("limitations", re.compile(r"\bI have an? (?:[\w'’-]+\s+){1,4}?injury\b", re.IGNORECASE), False),
    ("limitations", re.compile(r"\bmy [\w'’-]+ is injured\b", re.IGNORECASE), False),
)

SUMMARY_PROMPT_PREFIX = "You keep a running summary"
_SUMMARY_NONE = "(none)"


@dataclass(frozen=True)
class Turn:
    role: str
    text: str


@dataclass(frozen=True)
class ToolCall:
    tool_use_id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class CoachReply:
    """One assistant message: optional text, then the tool calls (stop reason `tool_use` if any)."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


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


def _fields(system: str) -> list[tuple[str, str]]:
    return [(m["key"], m["question"]) for line in _section(system, "Collect") if (m := _FIELD_LINE.match(line))]


def _known_values(system: str) -> dict[str, str]:
    return {item.split(".", 1)[1]: value for item, value in talk.known_items(system, with_notes=True).items()}


def _step_title(system: str) -> str:
    return m["title"] if (m := _STEP_LINE.search(system)) else "onboarding"


def _open_question_or_done(system: str, known: set[str]) -> str:
    fields = _fields(system)
    open_questions = [question for key, question in fields if key not in known]
    if open_questions:
        return open_questions[0]
    if fields:
        return f"That's everything I need for the {_step_title(system).lower()} step, thank you!"
    return "What would you like to work on next?"


def coach_reply(
    system: str,
    conversation: Sequence[Turn],
    saved: frozenset[str] = frozenset(),
    descriptions: Mapping[str, str] | None = None,
) -> str:
    """The text-only coach; `saved` adds fields that tool calls in the conversation stored;
    `descriptions` are the items the correction tool lists (for answers from the saved plan)."""
    fields = _fields(system)
    known = set(_known_values(system)) | saved
    _step_title(system)
    answers: dict[str, str] = {}
    for index, turn in enumerate(conversation[:-1]):
        following = conversation[index + 1]
        # An empty user turn is a tool result, and a question back is small talk: neither answers.
        if (
            turn.role == "assistant"
            and following.role == "user"
            and following.text
            and not _is_question(following.text)
        ):
            for key, question in fields:
                if question in turn.text:
                    answers[key] = following.text
    last = conversation[-1] if conversation else Turn("user", "")
    said = last.text if last.role == "user" else ""
    parts: list[str] = []
    first = not any(turn.role == "assistant" for turn in conversation)
    returning = first and talk.is_returning(system)
    if first:  # the introduction, or a greeting by what is true
        done = talk.is_complete(system)
        return talk.with_name(system, talk.opening(system, _open_question_or_done(system, known), done))
    if last.role == "user":
        if talk.RECAP_REQUEST.search(said):
            parts.append(talk.recap(system))
        elif not (_is_question(said) or reading.is_request(said) or reading.is_greeting(said)):
            parts.append(f"Thanks, noted: “{_quote(last.text)}”.")
    if len(answers) > 1:
        parts.append(
            "So far: "
            + "; ".join(f"{key.replace('_', ' ')}: “{_quote(value)}”" for key, value in answers.items())
            + "."
        )
    if talk.is_complete(system) and not returning and said and not talk.RECAP_REQUEST.search(said):
        parts.append(talk.plan_reply(said, system, descriptions or {}, _is_question(said)))
    else:
        parts.append(_open_question_or_done(system, known | set(answers)))
    return talk.with_name(system, " ".join(parts))


def _is_question(text: str) -> bool:
    """A client message that asks something back ("Is coffee okay?") is not an answer."""
    return reading.is_question(text)


def _is_acknowledgement(text: str) -> bool:
    return reading.is_acknowledgement(text)


def summarize(request_text: str) -> str:
    """The updated running summary: the current summary's lines, then `- Client said: …` for every
    Client message that is more than an acknowledgement (Coach lines are dropped)."""
    lines = request_text.splitlines()
    summary: list[str] = []
    entries: list[tuple[str, list[str]]] = []
    section = "new" if not any(line.strip() == "Current summary:" for line in lines) else "before"
    for line in lines:
        stripped = line.strip()
        if stripped == "Current summary:":
            section = "summary"
        elif stripped == "New messages:":
            section = "new"
        elif section == "summary":
            if stripped and stripped != _SUMMARY_NONE:
                summary.append(stripped)
        elif section == "new":
            speaker, colon, said = stripped.partition(":")
            if speaker in ("Client", "Coach") and colon:
                entries.append((speaker, [said.strip()]))
            elif stripped and entries:
                # A message that spans several lines continues its speaker's entry.
                entries[-1][1].append(stripped)
    for speaker, parts in entries:
        said = " ".join(part for part in parts if part)
        if speaker == "Client" and said and not _is_acknowledgement(said):
            summary.append(f"- Client said: {said}")
    return "\n".join(summary) if summary else _SUMMARY_NONE
