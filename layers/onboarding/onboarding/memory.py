"""What of the stored conversation goes into a prompt, and what is folded into the summary.

Pure functions over stored messages, so the rules can be checked for all inputs (tests/property):

- A conversation starts after an idle gap or after a reset command (seed 002); the window never
  reaches back across that start. The profile, agent_context and summary are not part of the
  window, so they stay.
- The window is the newest WHOLE messages of the current conversation that the summary does not
  cover yet, as many as fit the token budget; the oldest go first, a message is never cut, and a
  tool call travels with its results (Bedrock rejects a result without its call).
- After a turn, messages the window will not hold (those before the conversation start, and the
  oldest once the unsummarized part grows past its limits) are folded into the summary, so the
  summary plus the window cover every message.
"""

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from onboarding.store import StoredMessage
from onboarding.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens, tool_call_tokens


class _Call(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> Mapping[str, Any]: ...


class _Message(Protocol):
    """A stored message, or a history entry an agent was given: what the window rules read."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def tool_calls(self) -> Sequence[_Call]: ...


M = TypeVar("M", bound=_Message)


class OverBudgetError(ValueError):
    """The prompt cannot fit the token budget even without any history."""

    def __init__(self, needed: int, budget: int) -> None:
        super().__init__(
            f"the message is too long for the coach: about {needed} tokens with the instructions, "
            f"and the limit is {budget}; please send it in shorter parts"
        )
        self.needed = needed
        self.budget = budget


@dataclass(frozen=True)
class WindowPolicy:
    """When the unsummarized part of a conversation is folded, and down to what.

    A fold starts once the unsummarized messages are more than `max_messages` (tool results not
    counted: they travel with their call) or `max_tokens`, and leaves the newest `keep_messages` /
    `keep_tokens` of them. The prompt budget must leave room for `max_tokens` of history, so
    that between folds the whole unsummarized part fits.
    """

    max_messages: int = 15
    max_tokens: int = 4000
    keep_messages: int = 8
    keep_tokens: int = 2000


def message_tokens(message: _Message) -> int:
    return (
        MESSAGE_OVERHEAD_TOKENS
        + count_tokens(message.content)
        + sum(tool_call_tokens(call.name, call.args) for call in message.tool_calls)
    )


def units_of(messages: Sequence[M]) -> list[tuple[M, ...]]:
    """Messages grouped so that an assistant message with tool calls and the tool results that
    follow it form one unit; every other message is a unit of its own."""
    units: list[list[M]] = []
    for message in messages:
        if message.role == "tool" and units and units[-1][0].tool_calls:
            units[-1].append(message)
        else:
            units.append([message])
    return [tuple(unit) for unit in units]


def _counted(unit: Sequence[_Message]) -> int:
    return sum(1 for message in unit if message.role != "tool")


def _tokens(units: Sequence[Sequence[_Message]]) -> int:
    return sum(message_tokens(message) for unit in units for message in unit)


_PUNCTUATION = re.compile(r"[^\w\s]")


def normalize_command(text: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", text.lower()).split())


def is_reset_command(text: str, keywords: Sequence[str]) -> bool:
    """True when the whole message is one of `keywords` (any case, punctuation ignored): "Start
    over!" resets; "I don't want to start over" does not."""
    normalized = normalize_command(text)
    return bool(normalized) and normalized in {normalize_command(keyword) for keyword in keywords}


def conversation_start(
    messages: Sequence[StoredMessage], now: datetime, gap_s: float, is_reset: Callable[[str], bool]
) -> int:
    """Index in `messages` (oldest first) of the first message of the current conversation;
    `len(messages)` when the message arriving `now` starts a new one.

    A conversation ends at an idle gap longer than `gap_s`, and at a reset command (the command
    and the coach's answer to it belong to the old conversation).
    """
    start = 0
    for index, message in enumerate(messages):
        if index and (message.created_at - messages[index - 1].created_at).total_seconds() > gap_s:
            start = index
        if message.role == "user" and is_reset(message.content):
            start = index + 1
            while start < len(messages) and messages[start].role != "user":
                start += 1
    if messages and (now - messages[-1].created_at).total_seconds() > gap_s:
        start = len(messages)
    return start


def unsummarized(messages: Sequence[StoredMessage], through_message_id: str | None) -> int:
    """Index of the first message the summary does not cover."""
    if through_message_id is None:
        return 0
    return next((i for i, m in enumerate(messages) if m.message_id > through_message_id), len(messages))


def window_candidates(
    messages: Sequence[StoredMessage], start: int, through_message_id: str | None
) -> list[StoredMessage]:
    """The current conversation's messages the summary does not cover, oldest first."""
    return list(messages[max(start, unsummarized(messages, through_message_id)) :])


def carried_over(messages: Sequence[StoredMessage], start: int, through_message_id: str | None) -> list[StoredMessage]:
    """The previous conversations' messages the summary does not cover yet (the fold after this turn
    takes them). They are not in the window, which starts fresh, so the system prompt carries them
    next to the summary: between a gap and the next fold, nothing said is out of the prompt."""
    return list(messages[unsummarized(messages, through_message_id) : start])


def fit_window(candidates: Sequence[M], available_tokens: int, max_messages: int) -> tuple[M, ...]:
    """The newest whole units of `candidates` within `available_tokens` and `max_messages`, in order."""
    chosen: list[tuple[M, ...]] = []
    used_tokens = used_messages = 0
    for unit in reversed(units_of(candidates)):
        tokens, count = _tokens([unit]), _counted(unit)
        if used_tokens + tokens > available_tokens or used_messages + count > max_messages:
            break
        chosen.append(unit)
        used_tokens += tokens
        used_messages += count
    return tuple(message for unit in reversed(chosen) for message in unit)


def fold_candidates(
    messages: Sequence[StoredMessage], start: int, through_message_id: str | None, policy: WindowPolicy
) -> tuple[StoredMessage, ...]:
    """The messages (oldest first) to fold into the summary after a turn: every unsummarized one
    before the conversation start, and, when the unsummarized part of the current conversation is
    over the policy's limits, its oldest units until what is left is within the keep limits."""
    first = unsummarized(messages, through_message_id)
    folded = list(messages[first:start])
    units = units_of(messages[max(first, start) :])
    if sum(map(_counted, units)) > policy.max_messages or _tokens(units) > policy.max_tokens:
        while units and (sum(map(_counted, units)) > policy.keep_messages or _tokens(units) > policy.keep_tokens):
            folded.extend(units.pop(0))
    return tuple(folded)
