"""Owns the records that cross the persistence boundary: what a turn loads, what a claim finds,
history pages, phone owners, link codes and the erasure receipt."""

from dataclasses import dataclass, field, fields
from datetime import datetime

from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingState


@dataclass(frozen=True)
class ConversationSummary:
    """The rolling summary; it covers every message up to and including `through_message_id`."""

    text: str
    through_message_id: str


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
    lease: str | None = None  # ... if this turn still holds the id (another may have taken it over)
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
class ClaimedTurn:
    """The user's message for a client message id; `first` is False when an earlier delivery of the
    same id already stored it, and `reply` is the coach's stored reply to it, if there is one."""

    user_message: Message
    reply: Message | None
    first: bool
    delivered: bool = False  # the reply reached the person (recorded by `mark_delivered`)
    reply_text: str | None = None  # the whole text the person was sent (None: not recorded)
    # The token of this delivery's hold on the id while it answers (None: it holds none, a replay).
    lease: str | None = None
    # Until when (epoch ms) the delivery answering the id holds it (0: nobody answers it now).
    lease_until_ms: int = 0


@dataclass(frozen=True)
class PhoneOwner:
    """The user a phone number belongs to, and whether the number opted out of SMS.
    `merge_from`: the SMS-only user whose memory joins this user since the phone was linked (set
    until the merge is done). `erase_requested_until`: the person texted DELETE MY DATA and may
    confirm until then (epoch seconds)."""

    phone: str
    user_id: str
    opted_out: bool
    merge_from: str | None = None
    erase_requested_until: int | None = None
    # When the link that left `merge_from` was made (epoch ms): an erase of the owner after it
    # refuses the merge's writes (0: not recorded, so any erase still marked refuses them).
    merge_since_ms: int = 0
    # The link code this phone texted (LINK <code>), waiting for its YES until `link_confirm_until`
    # (epoch seconds).
    link_code: str | None = None
    link_confirm_until: int | None = None


@dataclass(frozen=True)
class LinkCode:
    code: str
    expires_at: datetime


@dataclass(frozen=True)
class ErasureReport:
    """What an erase deleted, counted by kind (and the rate counters it kept). A phone's CONTACT#
    item and a link code's pointer are halves of the phone and the code, not counted on their own."""

    messages: int = 0
    state_items: int = 0  # onboarding state, profile and summary
    phone_numbers: int = 0  # PHONE# owner items that still named this user
    dedupe_records: int = 0  # CLIENT# items: which message a client or Twilio message id produced
    link_codes: int = 0  # LINK# codes this user created that were still stored
    other_items: int = 0  # partition items of a kind this version does not know (deleted all the same)
    # Kept, not deleted: LIMIT# counters hold only how many messages were sent in a window and
    # expire within the hour; erasing them would let an erase reset the rate limit.
    kept_rate_counters: int = 0
    # The ids of the messages erased, so that what was made of them elsewhere (their vectors in the
    # recall index) goes too. Not a count: not in `total`, nor in comparing two reports.
    message_ids: tuple[str, ...] = field(default=(), compare=False)

    def plus(self, other: "ErasureReport") -> "ErasureReport":
        """Both erases counted together (an erase that took a pending merge's SMS-only user along)."""
        return ErasureReport(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def total(self) -> int:
        return (
            self.messages
            + self.state_items
            + self.phone_numbers
            + self.dedupe_records
            + self.link_codes
            + self.other_items
        )


@dataclass(frozen=True)
class ErasedMark:
    """When a user was last erased (epoch ms), and into whom their memory was merged if a linked
    phone's merge was why (None: the person erased it)."""

    erased_at_ms: int
    merged_into: str | None = None
