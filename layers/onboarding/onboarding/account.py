"""Owns what a user does with their account outside a turn: read the conversation page by page,
list and link phones, and erase everything.

Handlers call this, never the repositories: the rules (what a history page shows, the page
limits) live here, and so does the audit line of each read or erase of a user's memory.
"""

import asyncio
from dataclasses import dataclass

from onboarding.audit import Caller, record_access
from onboarding.config import Limits
from onboarding.erasing import erase_memory
from onboarding.model.errors import InvalidPageSizeError
from onboarding.model.history import HistoryPage
from onboarding.model.text import is_blank
from onboarding.model.users import ErasureReport, LinkCode
from onboarding.persistence import Repositories
from onboarding.recall.vectors import VectorIndex


@dataclass(frozen=True)
class AccountService:
    store: Repositories
    limits: Limits
    index: VectorIndex | None = None  # the recall index: an erase deletes the user's vectors too

    async def history(
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
        page = await asyncio.to_thread(self.store.conversations.history_page, user_id, limit, cursor)
        said = tuple(m for m in page.messages if m.role != "tool" and not is_blank(m.content))
        record_access(caller or Caller.function("history"), user_id, {"messages": len(said)})
        return HistoryPage(messages=said, next_cursor=page.next_cursor)

    async def phones(self, user_id: str) -> tuple[str, ...]:
        return tuple(sorted(await asyncio.to_thread(self.store.phones.phones_of, user_id)))

    async def create_link_code(self, user_id: str) -> LinkCode:
        """A one-time code to text from the phone to link; RateLimitedError past the link-code limit."""
        return await asyncio.to_thread(self.store.phones.create_link_code, user_id, self.limits.link_code_rate_limit)

    async def erase(self, user_id: str, caller: Caller | None = None) -> ErasureReport:
        """Everything stored for the user, and their vectors in the recall index (onboarding.erasing)."""
        return await asyncio.to_thread(
            erase_memory, self.store, self.index, user_id, caller or Caller.function("erase")
        )
