"""Owns who a user is: an app user is known by the verified id of their sign-in; a number that
texts before it is linked to an app account becomes an SMS-only user of its own. Also the records
of a user's phone (its owner item, a link code), of what erasing a user removed and left behind,
and the key that seals their queued texts."""

import re
import secrets
import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime

SMS_USER_PREFIX = "sms-"
LINK_CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: codes are typed on phones
LINK_CODE_LENGTH = 10  # 31**10 ≈ 8e14 codes: guessing one inside its lifetime is hopeless


def new_sms_user_id() -> str:
    return f"{SMS_USER_PREFIX}{uuid.uuid4()}"


def is_sms_only(user_id: str) -> bool:
    """True for a user created for a number that texted first (their memory joins the app user the
    number is later linked to)."""
    return user_id.startswith(SMS_USER_PREFIX)


def new_link_code() -> str:
    return "".join(secrets.choice(LINK_CODE_ALPHABET) for _ in range(LINK_CODE_LENGTH))


def normalize_link_code(text: str) -> str | None:
    """The code in `text` as stored (typed loosely: any case, spaces or dashes), or None if it is
    not shaped like one."""
    normalized = re.sub(r"[\s-]", "", text).upper()
    if len(normalized) != LINK_CODE_LENGTH or any(c not in LINK_CODE_ALPHABET for c in normalized):
        return None
    return normalized


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
    check_in_schedules: int = 0  # the user's check-in schedule (EventBridge Scheduler), deleted with them
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
            + self.check_in_schedules
        )


@dataclass(frozen=True)
class ErasedMark:
    """When a user was last erased (epoch ms), and into whom their memory was merged if a linked
    phone's merge was why (None: the person erased it)."""

    erased_at_ms: int
    merged_into: str | None = None


@dataclass(frozen=True)
class TextKey:
    """The key that seals `made_for`'s queued texts; `key_id` names it in each sealed text, so a
    text sealed with a key since erased is told from one sealed with the user's key now."""

    made_for: str
    key_id: str
    secret: bytes = field(repr=False)
