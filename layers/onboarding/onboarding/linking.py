"""Owns linking a phone to an app user, and the memory the phone brings with it.

A number that texted before it was linked is an SMS-only user with a memory of its own. Linking
keeps that memory (decision 0015): its messages join the app user's timeline, its answers and
profile are merged into the app user's (`memory.merge_rules`), and then its own partition is erased.
The merge runs right after the link; if it fails, the owner item keeps `merge_from` and the
merge is finished before the number's next text is answered, so nothing is lost or left behind.
If the app user is erased meanwhile, the merge writes nothing into their partition (each write
is guarded by the erase mark) and the SMS-only user is erased too: the texts go with the erase.
"""

from dataclasses import dataclass

from aws_lambda_powertools import Logger

from onboarding.audit import Caller, record_access
from onboarding.config import Limits
from onboarding.erasing import erase_memory
from onboarding.memory.merge_rules import merge_profile, merge_state, merge_summaries
from onboarding.metrics import count_metric
from onboarding.model.errors import MemoryChangedError, StoreError, UserErasedError
from onboarding.model.users import PhoneOwner
from onboarding.persistence import Repositories
from onboarding.recall.vectors import VectorIndex

logger = Logger(child=True)


@dataclass(frozen=True)
class PhoneLinking:
    store: Repositories
    limits: Limits
    index: VectorIndex | None = None  # the recall index (the merged messages are indexed again by the stream)

    def link(self, phone: str, code: str) -> PhoneOwner | None:
        """Link `phone` with a one-time code (None: unknown, expired or used) and bring its memory."""
        owner = self.store.phones.link_by_code(phone, code)
        if owner is not None:
            self.finish_merge(owner)
        return owner

    def finish_merge(self, owner: PhoneOwner) -> None:
        """Join the memory the phone brought to its owner, if a link left one to join. A failure
        is logged and leaves the merge to the next try (never raised: the link itself stands)."""
        joining = owner.merge_from
        if joining is None:
            return
        try:
            try:
                self._merge(joining, owner.user_id, owner.merge_since_ms)
            except UserErasedError:
                # The app user was erased after the link: the texts go with them, not into them.
                logger.info("The app user was erased while a linked phone's texts joined it; they are erased too")
                erase_memory(self.store, self.index, joining, Caller.function("phone-link"))
            else:
                erase_memory(self.store, self.index, joining, Caller.function("phone-link"), owner.user_id)
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
