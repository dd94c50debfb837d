"""Owns the rolling summary: when a fold is due and what it takes, and its model call (its
instructions are llm/wording.py's, with every other text the model reads).

What a fold takes: the messages the window will not hold. Those before the conversation start,
and the oldest once the unsummarized part grows past the policy's limits, so the summary plus the
window cover every message. A fold takes the oldest unsummarized messages first, in order, a
bounded amount at a time (`fold_batch`): a backlog (folds that failed, or the memory or summary
switched off for a while) is caught up over as many turns as it needs, and nothing older than what
a fold takes is ever passed over.

The model call (`Summarizer`) is one call without tools. If it fails, nothing is lost: the
messages stay unsummarized, and the next fold takes them (folds are computed from what is stored,
not remembered). Reading what to fold and storing the new summary are the turn's
(`turn.fold.fold_if_due`, through the turn's `TurnStore`), like every other read and write of a
turn. LangChain is imported by the call itself, so what needs only the rules does not load it.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from onboarding.config import FoldPolicy
from onboarding.llm.wording import SUMMARY_SYSTEM_PROMPT
from onboarding.memory.transcript import cap_summary, transcript_lines
from onboarding.memory.window import units_messages, units_of, units_tokens, unsummarized
from onboarding.model.history import ConversationSummary
from onboarding.model.messages import Message
from onboarding.telemetry import record_usage

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


@dataclass(frozen=True)
class FoldReach:
    """How far the fold after a turn may reach: every unsummarized message up to and including
    `upto` (what the fold policy takes from what the turn saw), and, when the turn's read did not
    reach back to the summary, every one before `before` (the oldest message the turn read)."""

    upto: str | None
    before: str | None

    def takes(self, message: Message) -> bool:
        return (self.upto is not None and message.message_id <= self.upto) or (
            self.before is not None and message.message_id < self.before
        )


def fold_due(messages: Sequence[Message], start: int, through_message_id: str | None, policy: FoldPolicy) -> bool:
    """True when a fold after this turn has something to take."""
    first = unsummarized(messages, through_message_id)
    units = units_of(messages[max(first, start) :])
    return first < start or units_messages(units) > policy.max_messages or units_tokens(units) > policy.max_tokens


def fold_candidates(
    messages: Sequence[Message], start: int, through_message_id: str | None, policy: FoldPolicy
) -> tuple[Message, ...]:
    """The messages (oldest first) to fold into the summary after a turn: every unsummarized one
    before the conversation start, and, when the unsummarized part of the current conversation is
    over the policy's limits, its oldest units until what is left is within the keep limits and
    starts with a user message."""
    first = unsummarized(messages, through_message_id)
    folded = list(messages[first:start])
    units = units_of(messages[max(first, start) :])
    if units_messages(units) > policy.max_messages or units_tokens(units) > policy.max_tokens:
        while units and (units_messages(units) > policy.keep_messages or units_tokens(units) > policy.keep_tokens):
            folded.extend(units.pop(0))
        # What stays must start with the client's own words: Converse drops a conversation's
        # leading replies, so a reply left first would be in neither the summary nor the prompt.
        while units and units[0][0].role != "user":
            folded.extend(units.pop(0))
    return tuple(folded)


def read_reached_summary(read: Sequence[Message], read_limit: int, through_message_id: str | None) -> bool:
    """Whether a turn's read of the newest `read_limit` messages reached back to the summary: it did
    unless it was full and every message in it is newer than what the summary covers (then older
    ones wait unsummarized: a backlog)."""
    full = len(read) >= read_limit
    return not full or (through_message_id is not None and through_message_id >= read[0].message_id)


def fold_reach(
    seen: Sequence[Message], start: int, through_message_id: str | None, policy: FoldPolicy, reached_summary: bool
) -> FoldReach | None:
    """What the fold after a turn may take, from what the turn saw (`seen`: what it read, oldest
    first, and what it stored) and whether that read reached back to the summary (it did unless it
    was full and all of it is newer than the summary); None when nothing is due."""
    before = None if reached_summary or not seen else seen[0].message_id
    if before is None and not fold_due(seen, start, through_message_id, policy):
        return None
    candidates = fold_candidates(seen, start, through_message_id, policy)
    upto = candidates[-1].message_id if candidates else None
    return FoldReach(upto, before) if upto is not None or before is not None else None


def backlog_fold_due(
    summary: ConversationSummary | None, read: Sequence[Message], now: datetime, policy: FoldPolicy
) -> bool:
    """Whether a backlog may be folded after this turn (its `read`, oldest first, did not reach back
    to the summary): at most once every `backlog_interval_s` since the summary was last stored, so
    a backlog costs a model call an interval, not one a turn, however fast the person writes. But at
    once when a whole read's worth arrived since (every message read is newer than the summary):
    then the backlog never grows faster than the folds take it. A summary never stored, or stored
    before its time was kept, lets the fold run."""
    if summary is None or summary.saved_at is None:
        return True
    if (now - summary.saved_at).total_seconds() >= policy.backlog_interval_s:
        return True
    oldest = read[0].created_at if read else None
    return oldest is None or oldest > summary.saved_at


def arrived_since(seen: Sequence[Message], summary: ConversationSummary | None, new: Sequence[Message]) -> int:
    """Units of `seen` stored since the summary was (the turn's `new` ones when it has no time):
    what a fold must take more of, for a backlog to shrink from one fold to the next."""
    saved = summary.saved_at if summary else None
    if saved is None:
        return len(units_of(new))
    return len(units_of([m for m in seen if m.created_at is None or m.created_at > saved]))


def fold_batch(
    oldest: Sequence[Message], reach: FoldReach, max_tokens: int, read_all: bool, min_units: int = 1
) -> tuple[Message, ...]:
    """The messages one fold takes: from `oldest` (the oldest unsummarized messages, in order; all
    of them when `read_all`), those `reach` allows, whole units. Of a backlog (before
    `reach.before`) at most `max_tokens`, but at least `min_units` units (more than the turn added:
    so a backlog of large messages still shrinks every turn); past the backlog, the policy's own
    candidates whole, as every fold did (the window is sized for what they leave).

    What stays unsummarized must start with the client's own words: Converse drops a conversation's
    leading replies, so a reply left first would be in neither the summary nor the window. So the
    batch takes the replies that follow it, and where the read stopped (more unread after it) it
    ends before its last client's message instead."""
    units = units_of(oldest)
    taken = tokens = 0
    for unit in units:
        cost = units_tokens([unit])
        in_backlog = reach.before is not None and unit[0].message_id < reach.before
        over = taken >= min_units and tokens + cost > max_tokens
        if not reach.takes(unit[0]) or (in_backlog and over and unit[0].role == "user"):
            break
        taken += 1
        tokens += cost
    if not taken:
        return ()
    while taken < len(units) and units[taken][0].role != "user":
        taken += 1
    if taken == len(units) and not read_all:
        taken = max((i for i in range(1, taken) if units[i][0].role == "user"), default=taken)
    return tuple(message for unit in units[:taken] for message in unit)


def render_summary_request(current_summary: str | None, lines: Sequence[str]) -> str:
    """The user message of a summary request: the summary so far and the messages to fold in."""
    return f"Current summary:\n{current_summary or '(none)'}\n\nNew messages:\n" + "\n".join(lines)


class Summarizer:
    def __init__(self, llm: "BaseChatModel", max_tokens: int) -> None:
        self._llm = llm
        self._max_tokens = max_tokens

    async def summarize(self, due: Sequence[Message], summary: ConversationSummary | None) -> ConversationSummary:
        """The summary that also covers `due` (oldest first, not empty). Raises what the model raises."""
        from langchain_core.messages import HumanMessage, SystemMessage

        lines = transcript_lines(due)
        text = summary.text if summary else None
        if lines:
            reply = await self._llm.ainvoke(
                [
                    SystemMessage(content=SUMMARY_SYSTEM_PROMPT),
                    HumanMessage(content=render_summary_request(text, lines)),
                ]
            )
            text = str(reply.text)
            record_usage(getattr(reply, "usage_metadata", None))
        return ConversationSummary(cap_summary(text or "", self._max_tokens), due[-1].message_id)
