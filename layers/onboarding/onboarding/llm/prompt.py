"""Owns the system prompt: put together, part by part, from the step's texts and the tool rules
(llm/wording.py) and the user's memory as sections that can give way (llm/sections.py), rebuilt
from stored data on every call, and fitted to its allowance: deterministically, whatever the
memory holds (docs/decisions/0011-memory-beyond-the-window.md, "A prompt that always fits").

A prompt is a sequence of parts, in the order they are shown. A `PromptSection` is ours (the
persona, the step, the rules) and is always shown whole. A `MemorySection` is made of the user's
memory, one `MemoryItem` a line, and its items can give way:

1. Every section's first `kept_first` items are taken before anything else (the current step's
   answers, what to call the client, the field waited for).
2. Then the sections take turns: the one that has taken the fewest tokens so far takes its next
   item (ties: the earlier part), while items fit what is left of the allowance (and of the
   section's own allowance, if it has one). So no kind of memory crowds out the others, and one
   that needs less leaves its share to the rest. A `contiguous` section (the summary) stops at its
   first item that does not fit; the others skip it and go on with their next.
3. What did not fit is named by one line (the `note` the caller gives: llm/sections.py's
   says which tool reads what gave way), placed right after the memory it speaks of.

Tokens are counted per line and summed: the estimate of a joined text is at most the sum of its
parts' (`memory.tokens.count_tokens` rounds each part up), so the sum is an upper bound and the
prompt the parts make never exceeds the allowance. A new kind of memory (a section of its own, with
its own allowance) is one more `MemorySection` among the parts: the fitter needs no change.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from onboarding.llm.sections import (
    MemoryItem,
    MemorySection,
    PromptPart,
    PromptSection,
    answers_section,
    left_out_note,
    profile_section,
    summary_section,
)
from onboarding.llm.wording import (
    COACH_PERSONA,
    CORRECTION_RULES,
    MEMORY_UNAVAILABLE_RULE,
    NEXT_WHEN_COMPLETE,
    NO_REASK_RULES,
    ONBOARDING_COMPLETE_STEP,
    RECALL_HEADER,
    REMEMBER_RULE,
    RETURNING_CLIENT,
    SINGLE_PROMPT_RULE,
    STEP_PROMPTS,
    TOOL_RULES,
    next_question,
    save_tool_name,
)
from onboarding.memory.tokens import count_tokens
from onboarding.model.state import OnboardingAgentType

SECTION_SEPARATOR = "\n\n"


Note = Callable[[Sequence[PromptPart], Mapping[str, int]], PromptSection]


@dataclass(frozen=True)
class FittedPrompt:
    """The system prompt as fitted: its sections, its text, and how many items of each kind of
    memory gave way (empty when everything fitted)."""

    sections: tuple[PromptSection, ...]
    left_out: dict[str, int]

    @property
    def text(self) -> str:
        return SECTION_SEPARATOR.join(section.text for section in self.sections)


def _line_tokens(line: str) -> int:
    return count_tokens(line) + 1  # and the line break (or section separator) before it


def _render(section: MemorySection, kept: Sequence[MemoryItem]) -> PromptSection | None:
    if not section.items:
        if section.empty is None:
            return None
        return PromptSection(section.kind, section.title, f"{section.header}\n{section.empty}")
    lines = [item.text for item in sorted(kept, key=lambda item: item.position)] or [section.none_shown]
    return PromptSection(section.kind, section.title, "\n".join([section.header, *lines]))


def _fixed_tokens(part: PromptPart) -> int:
    """What a part costs with none of its items: its text, or its header (and its empty line)."""
    if isinstance(part, PromptSection):
        return _line_tokens(part.text)
    if not part.items:
        return 0 if part.empty is None else _line_tokens(part.header) + _line_tokens(part.empty)
    return _line_tokens(part.header) + _line_tokens(part.none_shown)  # room for a section left empty


class _Fitting:
    """The items taken so far, and the tokens left."""

    def __init__(self, parts: Sequence[PromptPart], allowance: int, note: Note) -> None:
        self.memory = [part for part in parts if isinstance(part, MemorySection)]
        # The note's room is kept from the start, at its longest (every item of every kind named).
        worst_note = note(parts, {s.kind: len(s.items) for s in self.memory if s.items})
        self.left = allowance - sum(_fixed_tokens(part) for part in parts) - _line_tokens(worst_note.text)
        self.kept: dict[str, list[MemoryItem]] = {s.kind: [] for s in self.memory}
        self.used: dict[str, int] = {s.kind: _fixed_tokens(s) for s in self.memory}
        self.shared: dict[str, int] = dict.fromkeys(self.kept, 0)  # tokens taken in turns (step 2)
        self.next: dict[str, int] = dict.fromkeys(self.kept, 0)
        self.closed: set[str] = set()

    def take(self, section: MemorySection, index: int) -> bool:
        """Take item `index` of `section` if it fits; False (and nothing taken) if it does not."""
        cost = _line_tokens(section.items[index].text)
        over_own = section.allowance is not None and self.used[section.kind] + cost > section.allowance
        if cost > self.left or over_own:
            return False
        self.left -= cost
        self.used[section.kind] += cost
        if index >= section.kept_first:
            self.shared[section.kind] += cost
        self.kept[section.kind].append(section.items[index])
        return True

    def take_next(self, section: MemorySection) -> None:
        """The section's turn: its next item that fits (a contiguous section: its next one, or none)."""
        while self.next[section.kind] < len(section.items):
            index = self.next[section.kind]
            self.next[section.kind] += 1
            if self.take(section, index):
                return
            if section.contiguous:
                break
        self.closed.add(section.kind)


def fit_parts(parts: Sequence[PromptPart], allowance: int | None, note: Note) -> FittedPrompt:
    """The parts as a prompt within `allowance` tokens (None: every item shown). Ours are shown
    whole; if they alone are over the allowance they are all that is shown."""
    everything = {s.kind: list(s.items) for s in parts if isinstance(s, MemorySection)}
    whole = _assemble(parts, everything, {}, note)
    if allowance is None or count_tokens(whole.text) <= allowance:
        return whole
    fitting = _Fitting(parts, allowance, note)
    for section in fitting.memory:
        for index in range(min(section.kept_first, len(section.items))):
            fitting.take(section, index)
        fitting.next[section.kind] = section.kept_first
    while open_sections := [s for s in fitting.memory if s.kind not in fitting.closed]:
        fitting.take_next(min(open_sections, key=lambda s: fitting.shared[s.kind]))  # min: the first of ties
    gone = {s.kind: len(s.items) - len(fitting.kept[s.kind]) for s in fitting.memory}
    left_out = {kind: count for kind, count in gone.items() if count}
    return _assemble(parts, fitting.kept, left_out, note)


def _assemble(
    parts: Sequence[PromptPart], kept: dict[str, list[MemoryItem]], left_out: dict[str, int], note: Note
) -> FittedPrompt:
    sections: list[PromptSection] = []
    for part in parts:
        rendered = part if isinstance(part, PromptSection) else _render(part, kept[part.kind])
        if rendered is not None:
            sections.append(rendered)
    if left_out:
        # Before the closing instructions (the rules), right after the memory it speaks of.
        last_memory = max(i for i, s in enumerate(sections) if s.kind not in ("instructions", "left_out"))
        sections.insert(last_memory + 1, note(parts, left_out))
    return FittedPrompt(tuple(sections), left_out)


@dataclass(frozen=True)
class PromptFacts:
    """What the system prompt carries besides the step: the profile, the summary, the waiting field."""

    profile_lines: Sequence[str] = ()
    address_as: str | None = None
    summary: str | None = None
    waiting_for: str | None = None
    waiting_attempts: int = 0
    skipped: Sequence[str] = ()
    onboarding_complete: bool = False
    memory_unavailable: bool = False
    single_prompt: bool = False  # memory switched off for this user (a rollout arm), not a fault
    # Set when this message opens a new conversation after earlier ones: when they last talked.
    returning_since: datetime | None = None
    # Older messages recalled for this message (onboarding.llm.sections's lines, within their allowance).
    recalled: Sequence[str] = ()


def _returning(step: OnboardingAgentType, agent_context: Mapping[str, Any], memory: "PromptFacts") -> str:
    day = memory.returning_since.date().isoformat() if memory.returning_since else "an earlier day"
    by_name = f" as {memory.address_as}" if memory.address_as else ""
    question = None if memory.onboarding_complete else next_question(step, agent_context, memory.skipped)
    upcoming = f"ask “{question}”" if question else NEXT_WHEN_COMPLETE
    return RETURNING_CLIENT.format(day=day, by_name=by_name, next=upcoming)


def system_prompt_parts(
    step: OnboardingAgentType, agent_context: Mapping[str, Any], memory: PromptFacts | None = None
) -> tuple[PromptPart, ...]:
    """The system prompt for `step`, part by part, in the order shown: our instructions whole, the
    user's memory as sections whose items can give way (llm/sections.py)."""
    memory = memory or PromptFacts()
    prompt = STEP_PROMPTS[step]
    parts: list[PromptPart] = [PromptSection("instructions", "Persona", COACH_PERSONA)]
    if memory.returning_since is not None and not memory.memory_unavailable:
        parts.append(PromptSection("instructions", "Returning client", _returning(step, agent_context, memory)))
    if memory.address_as:
        parts.append(PromptSection("profile", "Address as", f"Address the client as {memory.address_as}."))
    if memory.onboarding_complete:
        parts.append(PromptSection("instructions", "Onboarding complete", ONBOARDING_COMPLETE_STEP))
        parts.append(PromptSection("instructions", "Tools", "Tools:\n" + REMEMBER_RULE + CORRECTION_RULES))
    else:
        collect = "\n".join(f"- {field.key}: {field.question}" for field in prompt.fields)
        parts.append(PromptSection("instructions", "Current step", f"Current step: {prompt.title}. {prompt.purpose}"))
        parts.append(PromptSection("instructions", "What to collect", f"Collect, one question at a time:\n{collect}"))
        parts.append(PromptSection("instructions", "Tools", TOOL_RULES.format(save_tool=save_tool_name(step))))
    parts.append(answers_section(step, agent_context, memory.skipped, memory.onboarding_complete))
    parts.append(profile_section(memory.profile_lines))
    parts.append(summary_section(memory.summary))
    if memory.recalled:  # whole: its lines were fitted to its own allowance (llm/sections.py)
        parts.append(
            PromptSection("recall", "From earlier conversations", "\n".join([RECALL_HEADER, *memory.recalled]))
        )
    if memory.waiting_for and not memory.onboarding_complete:
        waiting = (
            f"Waiting for: {memory.waiting_for}\n"
            f"You asked for {memory.waiting_for} (asked {memory.waiting_attempts} time(s)). Read the client's "
            "new message as the answer to it and save it; if it is not an answer, ask once more, differently."
        )
        parts.append(PromptSection("waiting_for", "Waiting for", waiting))
    parts.append(PromptSection("instructions", "Rules", NO_REASK_RULES))
    if memory.single_prompt:
        parts.append(PromptSection("instructions", "Single prompt", SINGLE_PROMPT_RULE))
    elif memory.memory_unavailable:
        parts.append(PromptSection("instructions", "Memory unavailable", MEMORY_UNAVAILABLE_RULE))
    return tuple(parts)


def fit_system_prompt(
    step: OnboardingAgentType,
    agent_context: Mapping[str, Any],
    memory: PromptFacts | None = None,
    allowance: int | None = None,
) -> FittedPrompt:
    """The system prompt for `step` within `allowance` tokens (None: all of the memory shown),
    rebuilt from stored data on every call; what gave way is named by one line."""
    return fit_parts(system_prompt_parts(step, agent_context, memory), allowance, left_out_note)


def render_system_prompt(
    step: OnboardingAgentType, agent_context: Mapping[str, Any], memory: PromptFacts | None = None
) -> str:
    """The whole system prompt for `step`, rebuilt from stored data on every call."""
    return fit_system_prompt(step, agent_context, memory).text
