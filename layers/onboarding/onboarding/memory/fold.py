"""Owns what a fold takes into the summary after a turn: the messages the window will not hold.

Those before the conversation start, and the oldest once the unsummarized part grows past the
policy's limits, so the summary plus the window cover every message.
"""

from collections.abc import Sequence

from onboarding.config import FoldPolicy
from onboarding.memory.window import units_messages, units_of, units_tokens, unsummarized
from onboarding.model.messages import Message


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
