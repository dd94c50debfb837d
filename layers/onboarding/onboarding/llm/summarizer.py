"""Owns the rolling summary's model call (seed 002): folding what left the window into the summary.

A fold runs after the turn's reply is stored, inside the same invocation, as one model call
without tools. If it fails, nothing is lost: the messages stay unsummarized, and the next turn's
fold takes them (folds are computed from what is stored, not remembered). Storing the new summary
is the turn's job (`onboarding.turn.service`), like every other write of a turn.
"""

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from onboarding.llm.summary_prompt import SUMMARY_SYSTEM_PROMPT, render_summary_request
from onboarding.memory.transcript import cap_summary, transcript_lines
from onboarding.model.history import ConversationSummary
from onboarding.model.messages import Message
from onboarding.telemetry import record_usage


class Summarizer:
    def __init__(self, llm: BaseChatModel, max_tokens: int) -> None:
        self._llm = llm
        self._max_tokens = max_tokens

    async def summarize(self, due: Sequence[Message], summary: ConversationSummary | None) -> ConversationSummary:
        """The summary that also covers `due` (oldest first, not empty). Raises what the model raises."""
        lines = transcript_lines(due)
        text = summary.text if summary else None
        if lines:
            reply = await self._llm.ainvoke(
                [
                    SystemMessage(content=SUMMARY_SYSTEM_PROMPT),
                    HumanMessage(content=render_summary_request(text, lines)),
                ]
            )
            text = str(reply.text)
            record_usage(getattr(reply, "usage_metadata", None))
        return ConversationSummary(cap_summary(text or "", self._max_tokens), due[-1].message_id)
