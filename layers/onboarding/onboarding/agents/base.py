"""The base every onboarding agent shares: system prompt, message building, streaming."""

from abc import ABC
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

from aws_lambda_powertools import Logger
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage

from onboarding.context import OnboardingAgentContext
from onboarding.conversation import HistoryTurn, alternating_messages
from onboarding.prompts import render_system_prompt
from onboarding.state import OnboardingAgentType

logger = Logger(child=True)


def _history_turn(entry: Mapping[str, Any]) -> HistoryTurn | None:
    """One history entry as a turn, or None (with a warning) when it is malformed."""
    role, content = entry.get("role"), entry.get("content")
    if role not in ("user", "assistant") or not isinstance(content, str):
        # Log the shape only: the content is personal data.
        logger.warning(
            "Skipping malformed history entry",
            extra={"entry_keys": sorted(str(key) for key in entry), "role": str(role)[:20]},
        )
        return None
    return HistoryTurn(role=role, content=content)


class BaseOnboardingAgent(ABC):
    """An onboarding step's agent: one instance per turn, built on an immutable context."""

    agent_type: ClassVar[OnboardingAgentType]
    HISTORY_WINDOW: ClassVar[int] = 15
    """At most this many of the latest history messages go to the model (Requirement 3.5)."""

    def __init__(self, context: OnboardingAgentContext, llm: BaseChatModel) -> None:
        self.context = context
        self.llm = llm

    def get_system_prompt(self) -> str:
        """This step's instructions, plus what earlier steps already collected."""
        return render_system_prompt(self.agent_type, self.context.agent_context)

    def _build_messages(self, message: str) -> list[BaseMessage]:
        """System prompt, the latest history (at most HISTORY_WINDOW messages), then `message`.

        The result is always valid for Bedrock's Converse API: see `alternating_messages`.
        """
        turns = [turn for entry in self.context.conversation_history if (turn := _history_turn(entry))]
        window = turns[-self.HISTORY_WINDOW :] if self.HISTORY_WINDOW else []
        return [SystemMessage(content=self.get_system_prompt()), *alternating_messages(window, message)]

    async def stream_response(self, message: str) -> AsyncIterator[str]:
        """The coach's reply to `message`, as text chunks in the order the model streams them."""
        async for chunk in self.llm.astream(self._build_messages(message)):
            text = str(chunk.text)
            if text:
                yield text
