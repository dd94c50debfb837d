"""Owns fitting the system prompt to its allowance: deterministically, whatever the memory holds
(docs/decisions/0011-memory-beyond-the-window.md, "A prompt that always fits").

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
3. What did not fit is named by one line (the `note` the caller gives: llm/prompt_memory.py's
   says which tool reads what gave way), placed right after the memory it speaks of.

Tokens are counted per line and summed: the estimate of a joined text is at most the sum of its
parts' (`memory.tokens.count_tokens` rounds each part up), so the sum is an upper bound and the
prompt the parts make never exceeds the allowance. A new kind of memory (a section of its own, with
its own allowance) is one more `MemorySection` among the parts: the fitter needs no change.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from onboarding.memory.tokens import count_tokens

SECTION_SEPARATOR = "\n\n"


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


def fit_system_prompt(parts: Sequence[PromptPart], allowance: int | None, note: Note) -> FittedPrompt:
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
