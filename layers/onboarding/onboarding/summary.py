"""The rolling summary (seed 002): what leaves the window is folded into a stored summary.

A fold runs after the turn's reply is stored and sent, so it never delays the first token; it
is one model call without tools. If it fails, nothing is lost: the messages stay unsummarized,
and the next turn's fold takes them (folds are computed from what is stored, not remembered).
"""

import asyncio
from collections.abc import Sequence

from aws_lambda_powertools import Logger
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from onboarding.memory import WindowPolicy, fold_candidates
from onboarding.metrics import count_metric
from onboarding.prompts import SUMMARY_SYSTEM_PROMPT, render_summary_request
from onboarding.store import ConversationStore, ConversationSummary, StoredMessage
from onboarding.tokens import count_tokens

logger = Logger(child=True)


def transcript_lines(messages: Sequence[StoredMessage]) -> list[str]:
    """The messages to fold as `Client:` / `Coach:` lines; tool calls and results are left out
    (what they saved is in agent_context and the profile already)."""
    lines: list[str] = []
    for message in messages:
        text = " ".join(message.content.split())
        if message.role == "user" and text:
            lines.append(f"Client: {text}")
        elif message.role == "assistant" and text:
            lines.append(f"Coach: {text}")
    return lines


def cap_summary(text: str, max_tokens: int) -> str:
    """The summary within `max_tokens`: whole lines, the oldest dropped first."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    while lines and count_tokens("\n".join(lines)) > max_tokens:
        lines.pop(0)
    return "\n".join(lines)


class Summarizer:
    def __init__(
        self, llm: BaseChatModel, store: ConversationStore, policy: WindowPolicy, max_tokens: int = 800
    ) -> None:
        self._llm = llm
        self._store = store
        self._policy = policy
        self._max_tokens = max_tokens

    def pending(
        self, messages: Sequence[StoredMessage], start: int, summary: ConversationSummary | None
    ) -> tuple[StoredMessage, ...]:
        """What a fold after this turn would take (empty when nothing is due)."""
        return fold_candidates(messages, start, summary.through_message_id if summary else None, self._policy)

    async def fold(
        self, user_id: str, messages: Sequence[StoredMessage], start: int, summary: ConversationSummary | None
    ) -> ConversationSummary | None:
        """Fold what is due into the summary and store it; the new summary, or None if nothing was due
        or the fold failed (logged and counted; a later turn folds the same messages again)."""
        due = self.pending(messages, start, summary)
        if not due:
            return None
        lines = transcript_lines(due)
        try:
            text = summary.text if summary else None
            if lines:
                reply = await self._llm.ainvoke(
                    [
                        SystemMessage(content=SUMMARY_SYSTEM_PROMPT),
                        HumanMessage(content=render_summary_request(text, lines)),
                    ]
                )
                text = str(reply.text)
            folded = ConversationSummary(cap_summary(text or "", self._max_tokens), due[-1].message_id)
            await asyncio.to_thread(self._store.save_summary, user_id, folded)
        except Exception as error:  # best effort: the next turn folds the same messages
            logger.warning("Summary fold failed", extra={"reason": type(error).__name__})
            count_metric("SummaryFoldFailed")
            return None
        logger.info("Folded messages into the summary", extra={"folded": len(due)})
        return folded
