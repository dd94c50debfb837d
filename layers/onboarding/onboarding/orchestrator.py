"""Picks the user's current onboarding agent and gives it an immutable context (spec 000, §3)."""

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from aws_lambda_powertools import Logger
from langchain_core.language_models import BaseChatModel

from onboarding.agents import AGENT_CLASSES, BaseOnboardingAgent
from onboarding.context import OnboardingAgentContext
from onboarding.metrics import count_metric
from onboarding.state import OnboardingAgentType, OnboardingState
from onboarding.store import ConversationStore, LoadedTurnContext, StoredMessage, StoreError

logger = Logger(child=True)


class OnboardingAgentOrchestrator:
    """Builds the agent for a user's turn: state and history in one read, then the agent."""

    HISTORY_LIMIT = 20
    """Newest messages loaded per turn (Requirement 4.3 / 6.1)."""

    def __init__(self, store: ConversationStore, llm: BaseChatModel, history_limit: int = HISTORY_LIMIT) -> None:
        self._store = store
        self._llm = llm
        self._history_limit = history_limit

    async def get_current_agent(self, user_id: str, exclude_message_id: str | None = None) -> BaseOnboardingAgent:
        """The agent for the user's turn. `exclude_message_id` is the turn's own message when it was
        stored before the agent is built (a turn with a client message id), so it is not history."""
        loaded = await self._load_turn_context(user_id, extra=1 if exclude_message_id else 0)
        messages = [m for m in loaded.messages if m.message_id != exclude_message_id][-self._history_limit :]
        return await self._create_agent(
            loaded.state.current_agent,
            loaded.state.agent_context,
            user_id,
            self._format_history(messages) if self._history_limit else [],
        )

    async def _load_turn_context(self, user_id: str, extra: int = 0) -> LoadedTurnContext:
        """State and newest messages; on a read failure, a fresh state and empty history.

        The coach can still answer without history (a degraded turn), which beats failing it.
        """
        try:
            # The store is synchronous (boto3); keep the event loop free while it waits.
            return await asyncio.to_thread(self._store.load_turn_context, user_id, self._history_limit + extra)
        except StoreError as error:
            logger.warning(
                "Could not load conversation history; continuing with none",
                extra={"reason": type(error.__cause__ or error).__name__},
            )
            count_metric("HistoryLoadFailed")
            return LoadedTurnContext(state=OnboardingState.initial(), messages=())

    @staticmethod
    def _format_history(messages: Sequence[StoredMessage]) -> list[dict[str, str]]:
        """Stored messages as the spec's `{"role": ..., "content": ...}` dicts, order kept."""
        return [{"role": message.role, "content": message.content} for message in messages]

    async def _create_agent(
        self,
        agent_type: OnboardingAgentType,
        context_dict: Mapping[str, Any],
        user_id: str,
        conversation_history: list[dict[str, str]],
    ) -> BaseOnboardingAgent:
        """The agent for `agent_type`; any failure becomes a ValueError with a clear message."""
        try:
            context = OnboardingAgentContext(
                user_id=user_id,
                conversation_history=conversation_history,
                agent_context=context_dict,
            )
            return AGENT_CLASSES[agent_type](context, self._llm)
        except Exception as error:
            logger.error("Agent creation failed", extra={"agent_type": str(agent_type)}, exc_info=True)
            raise ValueError(f"Agent creation failed for {agent_type}: {error}") from error
