"""Owns what a user does with their account outside a turn: read the conversation page by page,
list their phones, make a link code, and erase everything.

The services' callers (the API's routes, the SMS intake, a link's merge) come here, never to the
repositories: the rules (what a history page shows, the page limits) live here, and so does the
audit line of each read or erase of a user's memory. The methods block on the table: async callers
run them in a thread.

Every erase goes through `erase` (DELETE /me, YES DELETE by text, a linked phone's merge): the
table's partition, then the vectors the recall index made of the user's messages, then the audit
trail's erase line. The vectors go right after the partition, so a recall by the same user id (an
app user who erased and goes on chatting) finds nothing of before. If that delete fails, the erase
still stands: it is logged and counted (`RecallForgetFailed`), and the table's stream deletes each
vector again as its message's removal reaches the indexer.
"""

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from onboarding.audit import Caller, erasure_counts, record_access
from onboarding.config import Limits
from onboarding.metrics import count_metric
from onboarding.model.errors import InvalidPageSizeError, RecallUnavailableError
from onboarding.model.history import HistoryPage
from onboarding.model.normalization import is_blank
from onboarding.model.users import ErasedMark, ErasureReport, LinkCode
from onboarding.persistence import Repositories
from onboarding.recall.vectors import VectorIndex

if TYPE_CHECKING:
    from datetime import datetime

    from onboarding.checkins.outreach import CheckInService
    from onboarding.checkins.timetable import Scheduled

logger = Logger(child=True)


@dataclass(frozen=True)
class AccountService:
    store: Repositories
    limits: Limits
    index: VectorIndex | None = None  # the recall index: an erase deletes the user's vectors too
    # The check-in schedules: an erase deletes the user's; a link's merge moves it to the kept user.
    check_ins: "CheckInService | None" = None

    def history(
        self, user_id: str, limit: int | None = None, cursor: str | None = None, caller: Caller | None = None
    ) -> HistoryPage:
        """One page of what was said, newest first. Tool calls and results are the coach's
        bookkeeping, not part of what was said, so they are left out (the cursor still moves past
        them). Without a `limit`, the configured page size. InvalidCursorError for a cursor this
        service did not hand out, InvalidPageSizeError for a limit over the configured maximum.
        `caller` is who reads, for the audit trail (by default this function)."""
        limit = self.limits.history_page_size if limit is None else limit
        if not 1 <= limit <= self.limits.history_page_max:
            raise InvalidPageSizeError(f"limit must be between 1 and {self.limits.history_page_max}")
        page = self.store.conversations.history_page(user_id, limit, cursor)
        said = tuple(m for m in page.messages if m.role != "tool" and not is_blank(m.content))
        record_access(caller or Caller.function("history"), user_id, {"messages": len(said)})
        return HistoryPage(messages=said, next_cursor=page.next_cursor)

    def phones(self, user_id: str) -> tuple[str, ...]:
        return tuple(sorted(self.store.phones.phones_of(user_id)))

    def create_link_code(self, user_id: str) -> LinkCode:
        """A one-time code to text from the phone to link; RateLimitedError past the link-code limit."""
        return self.store.phones.create_link_code(user_id, self.limits.link_code_rate_limit)

    def erase(self, user_id: str, caller: Caller | None = None, merged_into: str | None = None) -> ErasureReport:
        """Erase everything stored for `user_id`, and its vectors; the audit line names `caller` (by
        default this function), and the erase mark `merged_into` when the memory was erased because
        it joined that user (a link's merge)."""
        report = self.store.erasure.erase(user_id, merged_into=merged_into)
        vectors = self._forget(user_id, report.message_ids)
        if self.check_ins is not None:
            if merged_into is not None:
                # A link: the phone user's schedule becomes the app user's (paused if it was),
                # then follows the merged answers.
                self.check_ins.move(user_id, merged_into)
                self.check_ins.replan_stored(merged_into)
            else:
                report = replace(report, check_in_schedules=self.check_ins.erase(user_id))
        counts = {**erasure_counts(report), "vectors": vectors}
        record_access(caller or Caller.function("erase"), user_id, counts, access="erase")
        return report

    def check_in_schedule(self, user_id: str) -> "tuple[Scheduled, datetime | None] | None":
        """The user's check-in schedule and its next time (None when paused), or None without one."""
        if self.check_ins is None or (scheduled := self.check_ins.scheduled(user_id)) is None:
            return None
        return scheduled, self.check_ins.next_time(scheduled)

    def erased_mark(self, user_id: str) -> ErasedMark | None:
        """When `user_id` was last erased, and whom their memory joined if a link's merge was why."""
        return self.store.erasure.erased_mark(user_id)

    def _forget(self, user_id: str, message_ids: tuple[str, ...]) -> int:
        """Delete the vectors of the user's erased messages; how many were deleted (0 on a failure)."""
        if self.index is None or not message_ids:
            return 0
        try:
            return self.index.delete(user_id, message_ids)
        except RecallUnavailableError as error:
            logger.warning(
                "Could not delete the erased messages' vectors; the stream will", extra={"reason": error.reason}
            )
            count_metric("RecallForgetFailed")
            return 0
