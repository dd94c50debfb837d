"""Owns the stored conversation as the services see it: what a turn loads (`TurnContext`: the
newest messages, state, profile and summary), the state and profile with the versions they were read
at (`Memory`), what a turn commits and what a client message id's lease finds, and history pages."""

from dataclasses import dataclass, field
from datetime import datetime

from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingState


@dataclass(frozen=True)
class ConversationSummary:
    """The rolling summary; it covers every message up to and including `through_message_id`.
    `saved_at`: when the stored one was written (None for one not read from the table)."""

    text: str
    through_message_id: str
    saved_at: datetime | None = None


@dataclass(frozen=True)
class Memory:
    """The user's onboarding state and profile, each with the version it was read at (0: never
    stored). A write of either is conditional on its version being unchanged since the read, so a
    turn never overwrites what another turn saved in between."""

    state: OnboardingState = field(default_factory=OnboardingState)
    profile: UserProfile = field(default_factory=UserProfile)
    state_version: int = 0
    profile_version: int = 0


@dataclass(frozen=True)
class TurnContext:
    """What a turn needs from the table: state, profile, summary and the newest messages, oldest first.
    `degraded` is set when the table could not be read and the turn goes on without its memory."""

    state: OnboardingState = field(default_factory=OnboardingState)
    messages: tuple[Message, ...] = ()
    profile: UserProfile = field(default_factory=UserProfile)
    summary: ConversationSummary | None = None
    degraded: bool = False
    state_version: int = 0
    profile_version: int = 0

    @property
    def memory(self) -> Memory:
        return Memory(self.state, self.profile, self.state_version, self.profile_version)


@dataclass(frozen=True)
class TurnCommit:
    """What a turn stores when it ends, in one transaction: the messages it produced (tool calls,
    results, the reply), and the state and profile its tools changed (None: unchanged), each
    written only if still at the version `memory` was read at."""

    user_id: str
    drafts: tuple[Message, ...]
    memory: Memory
    state: OnboardingState | None = None
    profile: UserProfile | None = None
    client_id: str | None = None  # with one, the reply is recorded as that message id's answer...
    reply_text: str = ""  # ... with the whole text the person was sent, for a resend to repeat
    lease: str | None = None  # ... if this turn still has the id's lease (another may have taken it over)
    since_ms: int = 0  # when the turn began: refused if the user was erased after that


@dataclass(frozen=True)
class CommittedTurn:
    """What a commit stored: the turn's messages with ids and times, and the reply text the person
    was sent. `earlier` when another delivery of the same client message id had stored its reply
    first: then `messages` is that reply alone and nothing of this turn was stored."""

    messages: tuple[Message, ...]
    reply_text: str
    earlier: bool = False


@dataclass(frozen=True)
class HistoryPage:
    """Messages newest first; `next_cursor` continues after the last one (None at the end)."""

    messages: tuple[Message, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class LeasedTurn:
    """The user's message for a client message id; `first` is False when an earlier delivery of the
    same id already stored it, and `reply` is the coach's stored reply to it, if there is one."""

    user_message: Message
    reply: Message | None
    first: bool
    delivered: bool = False  # the reply reached the person (recorded by `mark_delivered`)
    reply_text: str | None = None  # the whole text the person was sent (None: not recorded)
    # The token of this delivery's lease on the id while it answers (None: it has none, a replay).
    lease: str | None = None
    # Until when (epoch ms) the lease of the delivery answering the id runs (0: nobody answers it now).
    lease_until_ms: int = 0
