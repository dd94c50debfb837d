"""Owns a phone number's side of the product: who a number belongs to, its SMS opt-out, linking it
to an app user (the code it texts, the lockout of wrong codes, the YES, and the memory the phone
brings with it), who answers a text queued for a user since linked or erased, and the key that
opens such a text. The SMS path calls this, never the repositories.

A number that texted before it was linked is an SMS-only user with a memory of its own. Linking
keeps that memory (decision 0015): its messages join the app user's timeline, its answers and
profile are merged into the app user's (the pure rules at the end of this module), and then its
own partition is erased through the account service. The merge runs right after the link; if it
fails, the owner item keeps `merge_from` and the merge is finished before the number's next text
is answered, so nothing is lost or left behind. If the app user is erased meanwhile, the merge
writes nothing into their partition (each write is guarded by the erase mark) and the SMS-only
user is erased too: the texts go with the erase.

The merge rules hold for every input (tests/property):

- answers: the app user's value wins where both answered an item, the SMS value then kept as an
  earlier value of it (with where it was said: decision 0020); the SMS answers fill the gaps;
- the step: the first one not completed by the merged answers; onboarding is complete only when
  every step is;
- profile: the app user's fields win; the SMS fields fill the gaps; free-form facts are joined;
- summary: every message up to the merged summary's `through` is in its text (the two texts,
  then transcript lines of the messages neither text covered), every later one is in the
  timeline: the invariant the fold keeps.

Every method blocks on the table: async callers run them in a thread.
"""

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from aws_lambda_powertools import Logger

from onboarding.account import AccountService
from onboarding.audit import Caller, record_access
from onboarding.config import Limits
from onboarding.llm.wording import SMS_SUMMARY_HEADER
from onboarding.memory.transcript import cap_summary, transcript_lines
from onboarding.metrics import count_metric
from onboarding.model.answers import is_answered, read_answer
from onboarding.model.errors import MemoryChangedError, StoreError, UserErasedError
from onboarding.model.history import ConversationSummary
from onboarding.model.immutable import thaw
from onboarding.model.messages import Message
from onboarding.model.profile import PROFILE_FIELDS, UserProfile
from onboarding.model.state import ONBOARDING_ORDER, OnboardingState
from onboarding.model.users import PhoneOwner, TextKey, new_sms_user_id
from onboarding.persistence import Repositories
from onboarding.persistence.link_requests import LinkLockout

logger = Logger(child=True)

# How many times a text's user is followed through erase marks (a link's merge moves it once) or a
# text is queued again for its number's new owner, before giving up.
OWNER_CHANGES = 3


@dataclass(frozen=True)
class LinkAnswer:
    """What a `LINK <code>` text gets: asked for its YES (`ask_yes`, within `minutes`), `refused`
    (unknown, expired or used code), `locked` out (too many wrong codes; try again in `minutes`),
    or `busy` (other codes from the phone are still being checked: send it again in a minute)."""

    outcome: Literal["ask_yes", "refused", "locked", "busy"]
    minutes: int = 0


@dataclass(frozen=True)
class PhoneLinking:
    store: Repositories
    limits: Limits
    account: AccountService  # a merged or refused SMS-only user is erased through it
    new_user_id: Callable[[], str] = new_sms_user_id
    clock: Callable[[], float] = field(default=time.time)

    def owner_of(self, phone: str) -> PhoneOwner:
        """Who `phone` belongs to; a number never seen becomes an SMS-only user of its own."""
        return self.store.phones.find_or_create_owner(phone, self.new_user_id)

    def find_owner(self, phone: str) -> PhoneOwner | None:
        return self.store.phones.find_owner(phone)

    def set_opted_out(self, phone: str, opted_out: bool) -> None:
        """STOP (or a send refused as opted out) pauses the owner's check-in schedule; START resumes it."""
        self.store.phones.set_opted_out(phone, opted_out)
        check_ins = self.account.check_ins
        if check_ins is not None and (owner := self.store.phones.find_owner(phone)) is not None:
            check_ins.pause(owner.user_id, opted_out)

    def request_erase(self, phone: str, until_s: int) -> None:
        """DELETE MY DATA: the number's user may confirm with YES DELETE until `until_s`."""
        self.store.phones.request_erase(phone, until_s)

    def request_link(self, owner: PhoneOwner, code: str) -> LinkAnswer:
        """LINK <code>: nothing is linked yet. A valid code is kept on the phone, which is asked to
        reply YES (so a code alone cannot pull a phone's texts into an account: decision 0015).
        Every code is counted before it is checked, and a right one given back: past a few wrong
        ones in a window the phone is locked out until the window ends, even texts sent at once,
        and even after an erase (the count is not the phone's owner item)."""
        requests = self.store.link_requests
        attempt = requests.take_link_attempt(owner.phone, self.limits.link_failure_limit)
        if isinstance(attempt, LinkLockout):
            if attempt.busy:
                logger.info("Link code refused unread: other codes from this phone are still being checked")
                return LinkAnswer("busy")
            logger.info("Link code refused unread: too many wrong codes from this phone")
            return LinkAnswer("locked", max(1, -(-attempt.retry_after_s // 60)))
        window = self.limits.link_confirmation_window_s
        right = requests.request_link(owner.phone, code, int(self.clock()) + window)
        requests.settle_link_attempt(attempt, right)
        if not right:
            logger.info("Phone link refused: unknown, expired or used code")
            return LinkAnswer("refused")
        logger.info("Link code accepted; waiting for the phone's YES")
        return LinkAnswer("ask_yes", max(1, window // 60))

    def link_pending(self, owner: PhoneOwner) -> bool:
        """Whether the phone texted a valid code whose YES is still awaited."""
        until = owner.link_confirm_until
        return owner.link_code is not None and until is not None and until >= int(self.clock())

    def confirm_link(self, owner: PhoneOwner) -> bool:
        """YES after LINK <code>: link the phone and bring its memory (the code is used up now).
        False when the code expired or was used before the YES."""
        if owner.link_code is None or self.link(owner.phone, owner.link_code) is None:
            logger.info("Phone link refused: the code expired or was used before the YES")
            return False
        logger.info("Phone linked to an app user")
        return True

    def link(self, phone: str, code: str) -> PhoneOwner | None:
        """Link `phone` with a one-time code (None: unknown, expired or used) and bring its memory."""
        owner = self.store.phones.link_by_code(phone, code)
        if owner is not None:
            self.finish_merge(owner)
        return owner

    def text_key_for(self, owner: PhoneOwner, received_ms: int) -> tuple[PhoneOwner, TextKey] | None:
        """The user a text that came in at `received_ms` from `owner.phone` is queued for, and the
        key it is sealed with (made with their first queued text). If the number was linked to
        another user meanwhile, that user; None if its user was erased meanwhile (the text is
        answered as nobody, as the worker would)."""
        for _ in range(OWNER_CHANGES):
            key = self.store.text_keys.for_queueing(owner.phone, owner.user_id, received_ms)
            if key is not None:
                return owner, key
            now_owner = self.store.phones.find_owner(owner.phone)
            if now_owner is None or now_owner.user_id == owner.user_id:
                logger.info("Text received as its user was erased; not answered")
                return None
            owner = now_owner
        logger.warning("A text's number kept changing owners while it was queued; not answered")
        return None

    def queued_text_key(self, user_id: str, key_id: str) -> TextKey | None:
        """The key that sealed a text queued for `user_id`: in their partition, or, when their memory
        joined another user's (a link's merge), in that user's; None once the user (or the one they
        joined) is erased: the text cannot be read."""
        holder = user_id
        for _ in range(OWNER_CHANGES):
            key = self.store.text_keys.stored(holder, user_id)
            if key is not None and key.key_id == key_id:
                return key
            mark = self.account.erased_mark(holder)
            if mark is None or mark.merged_into is None:
                return None
            holder = mark.merged_into
        return None

    def addressee(self, queued_for: str, received_ms: int, owner: PhoneOwner | None) -> str | None:
        """Who answers a text queued for `queued_for` that came in at `received_ms`: the number's
        owner now (`owner`), unless the user it was queued for was erased since it arrived (None:
        answered as nobody), following the erase marks of merged users to the user their memory
        joined."""
        if owner is not None and owner.user_id == queued_for:
            return owner.user_id  # the same user: the turn's own erasure guard covers an erase
        user_id = queued_for
        for _ in range(OWNER_CHANGES):
            mark = self.account.erased_mark(user_id)
            if mark is None or mark.erased_at_ms < received_ms:
                break
            if mark.merged_into is None:
                return None  # erased by the person after the text arrived
            user_id = mark.merged_into
        return owner.user_id if owner is not None else user_id

    def finish_merge(self, owner: PhoneOwner) -> None:
        """Join the memory the phone brought to its owner, if a link left one to join. A failure
        is logged and leaves the merge to the next try (never raised: the link itself stands)."""
        joining = owner.merge_from
        if joining is None:
            return
        caller = Caller.function("phone-link")
        try:
            try:
                self._merge(joining, owner.user_id, owner.merge_since_ms)
            except UserErasedError:
                # The app user was erased after the link: the texts go with them, not into them.
                logger.info("The app user was erased while a linked phone's texts joined it; they are erased too")
                self.account.erase(joining, caller)
            else:
                self.account.erase(joining, caller, merged_into=owner.user_id)
            self.store.phones.merge_done(owner.phone, joining)
        except StoreError as error:
            logger.warning(
                "Joining a linked phone's texts failed; retried later", extra={"reason": type(error).__name__}
            )
            count_metric("PhoneMergeDeferred")
            return
        logger.info("A linked phone's texts joined the app user's memory")

    def _merge(self, joining_user: str, kept_user: str, since_ms: int) -> None:
        """Join `joining_user`'s memory to `kept_user`'s; UserErasedError (nothing more written)
        if `kept_user` was erased at or after `since_ms` (the link)."""
        store, limits = self.store, self.limits
        joining = store.merger.read(joining_user)
        counts = {"messages": len(joining.messages), "summary": int(joining.summary is not None)}
        # The audit trail's caller: the function that took the link (the API or the SMS worker).
        record_access(Caller.function("phone-link"), joining_user, counts)
        joining_ids = {m.message_id for m in joining.messages}
        store.merger.copy(kept_user, joining.copies, since_ms)
        through = joining.summary.through_message_id if joining.summary else None
        joining_uncovered = [m for m in joining.messages if through is None or m.message_id > through]
        for _ in range(limits.memory_write_attempts):
            kept = store.conversations.load_memory(kept_user)
            kept_summary = store.conversations.load_summary(kept_user)
            after = store.conversations.oldest_unsummarized(kept_user, kept_summary, limits.fold_read_limit)
            uncovered = [m for m in after if m.message_id not in joining_ids] + joining_uncovered
            summary = merge_summaries(kept_summary, joining.summary, uncovered, limits.summary_max_tokens)
            try:
                store.merger.write_merged(
                    kept_user,
                    kept,
                    kept_summary,
                    merge_state(kept.state, joining.memory.state),
                    merge_profile(kept.profile, joining.memory.profile, limits.profile_other_facts),
                    summary,
                    since_ms,
                )
                return
            except MemoryChangedError:
                continue  # the app user's turn saved meanwhile: merge with what it saved
        raise StoreError("the app user's memory kept changing while the phone's texts joined it")


def _completed(context: Mapping[str, Any], step: str) -> bool:
    answers = context.get(step)
    return isinstance(answers, Mapping) and "completed_at" in answers


def _answered(context: Mapping[str, Any], name: str) -> bool:
    step, _, field = name.partition(".")
    return is_answered(context.get(step), field)


def _merge_answers(mine: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """One step's answers: ours win; theirs fill the gaps, or join ours as earlier values."""
    merged = {**other, **mine}
    for key in (mine.keys() & other.keys()) - {"completed_at"}:
        ours, theirs = read_answer(mine[key]), read_answer(other[key])
        if ours is not None and theirs is not None:
            joined = ours.joined_with(theirs)
            if joined != ours:
                merged[key] = joined.stored()
    return merged


def merge_state(kept: OnboardingState, joining: OnboardingState) -> OnboardingState:
    """`kept` (the app user's state) with what `joining` (the SMS user's) adds."""
    ours, theirs = thaw(kept.agent_context), thaw(joining.agent_context)
    context: dict[str, Any] = {}
    for step in dict.fromkeys([*theirs, *ours]):
        mine, other = ours.get(step), theirs.get(step)
        if isinstance(mine, dict) and isinstance(other, dict):
            context[step] = _merge_answers(mine, other)
        else:
            context[step] = mine if step in ours else other
    skipped = tuple(n for n in dict.fromkeys([*kept.skipped, *joining.skipped]) if not _answered(context, n))
    open_steps = [step for step in ONBOARDING_ORDER if not _completed(context, step.value)]
    current = open_steps[0] if open_steps else ONBOARDING_ORDER[-1]
    waiting = next((w for w in (kept.waiting_for, joining.waiting_for) if w is not None and w.step == current), None)
    completed_at = None if open_steps else (kept.completed_at or joining.completed_at)
    return OnboardingState(
        current_agent=current, agent_context=context, waiting_for=waiting, skipped=skipped, completed_at=completed_at
    )


def merge_profile(kept: UserProfile, joining: UserProfile, max_facts: int) -> UserProfile:
    fields = {name: getattr(kept, name) or getattr(joining, name) for name in PROFILE_FIELDS}
    facts = tuple(dict.fromkeys([*joining.other_facts, *kept.other_facts]))
    return UserProfile(**fields, other_facts=facts[-max_facts:] if max_facts else ())


def merge_summaries(
    kept: ConversationSummary | None,
    joining: ConversationSummary | None,
    uncovered: Sequence[Message],
    max_tokens: int,
) -> ConversationSummary | None:
    """One summary for the joined timeline. `uncovered` are the messages of both users that their
    own summary does not cover (oldest first is not required); those up to the merged `through`
    are written into the text, the rest stay in the timeline."""
    if kept is None and joining is None:
        return None
    through = max(s.through_message_id for s in (kept, joining) if s is not None)
    lines: list[str] = kept.text.splitlines() if kept else []
    if joining is not None:
        lines += [SMS_SUMMARY_HEADER, *joining.text.splitlines()]
    below = sorted((m for m in uncovered if m.message_id <= through), key=lambda m: m.message_id)
    lines += [f"- {line}" for line in transcript_lines(below)]
    return ConversationSummary(cap_summary("\n".join(lines), max_tokens), through)
