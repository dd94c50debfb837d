"""Owns the shapes of the policies the settings derive (`Limits.prompt`, `.fold`, `.retry`, ...).

They have no defaults on purpose: every number comes from `onboarding.config.Limits`.
"""

from dataclasses import dataclass
from datetime import time, timedelta
from typing import Literal

from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS


@dataclass(frozen=True)
class PromptLimits:
    """The prompt's token budget (system + window + current message), the system prompt's share of
    it, the recalled messages' own share on top of that, the most history messages the window
    holds, and the tool rounds of one turn."""

    token_budget: int
    system_allowance: int
    window_messages: int
    max_tool_rounds: int
    recall_allowance: int = 0

    @property
    def max_message_tokens(self) -> int:
        """The largest current message that always fits, whatever the system prompt holds."""
        return self.token_budget - self.system_allowance - self.recall_allowance - MESSAGE_OVERHEAD_TOKENS


RecallMode = Literal["hybrid", "lexical", "dense"]


@dataclass(frozen=True)
class RecallPolicy:
    """Recall of older messages: the section's tokens at most, what the index ranks by, the matches
    asked of it, the wait for the embedding and the query together, the embedding's size and the
    text it takes, and how alike two hits' words are to count as near-duplicates, and as a repeat."""

    max_tokens: int
    mode: RecallMode
    top_k: int
    timeout_s: float
    dimensions: int
    max_chars: int
    near_duplicate_share: float = 1.0
    repeat_share: float = 1.0


@dataclass(frozen=True)
class FoldPolicy:
    """When the unsummarized part of a conversation is folded into the summary, and down to what.

    A fold starts once the unsummarized messages are more than `max_messages` or `max_tokens`, and
    leaves the newest `keep_messages` / `keep_tokens`. Every stored message counts (tool results
    too), so the turn's Query of `history_load_limit` messages always reaches the summary. A backlog
    (older messages the turn's read did not reach) is folded at most once every
    `backlog_interval_s`, counted from when the summary was last stored.
    """

    max_messages: int
    max_tokens: int
    keep_messages: int
    keep_tokens: int
    summary_max_tokens: int
    backlog_interval_s: float = 0.0


@dataclass(frozen=True)
class RetryPolicy:
    """Tries of a model stream that fails before its first token, within `budget_s` in all."""

    attempts: int
    budget_s: float
    first_backoff_s: float
    max_backoff_s: float


@dataclass(frozen=True)
class BreakerPolicy:
    """After `failure_threshold` failures in a row, no guarded calls (the model's, or the turn's
    read of the store) for `reset_s` seconds."""

    failure_threshold: int
    reset_s: float


@dataclass(frozen=True)
class RateLimit:
    """At most `messages` user messages per `window_s` seconds, counted in fixed windows."""

    messages: int
    window_s: int


@dataclass(frozen=True)
class ConversationRules:
    """Where a conversation ends: an idle gap longer than `gap_s`, or a message that is wholly one of
    `reset_keywords` (any case, punctuation ignored)."""

    gap_s: float
    reset_keywords: tuple[str, ...]


@dataclass(frozen=True)
class QuietHours:
    """The local hours no check-in is sent in, `start` to `end` (across midnight when `start` is
    later), and the minutes a scheduled check-in may come late (the schedule's flexible window)."""

    start: time
    end: time
    window_minutes: int

    def contains(self, at: time) -> bool:
        """Whether the local clock time `at` is inside the quiet hours (`end` itself is not)."""
        if self.start <= self.end:
            return self.start <= at < self.end
        return at >= self.start or at < self.end

    def allows(self, at: time) -> bool:
        """Whether a check-in scheduled at `at` arrives outside the quiet hours however late the
        window lets it come (every minute from `at` to `at` plus the window)."""
        start = timedelta(hours=at.hour, minutes=at.minute)
        for minute in range(self.window_minutes + 1):
            moment = start + timedelta(minutes=minute)
            clock = time((moment.seconds // 3600) % 24, (moment.seconds // 60) % 60)
            if self.contains(clock):
                return False
        return True
