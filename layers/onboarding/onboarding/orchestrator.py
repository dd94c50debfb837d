"""Picks the user's current onboarding agent and gives it an immutable context (spec 000, §3)."""

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger
from langchain_core.language_models import BaseChatModel

from onboarding.agents import AGENT_CLASSES, BaseOnboardingAgent
from onboarding.agents.base import PromptLimits
from onboarding.context import OnboardingAgentContext
from onboarding.memory import carried_over, conversation_start, window_candidates
from onboarding.metrics import count_metric
from onboarding.state import OnboardingAgentType, OnboardingState
from onboarding.store import ConversationStore, LoadedTurnContext, StoredMessage, StoreError
from onboarding.summary import transcript_lines

logger = Logger(child=True)


@dataclass(frozen=True)
class MemoryRules:
    """How the orchestrator cuts the stored conversation into the agent's window."""

    conversation_gap_s: float = 30 * 60
    is_reset: Callable[[str], bool] = lambda _text: False
    now: Callable[[], datetime] = lambda: datetime.now(UTC)


@dataclass(frozen=True)
class PreparedTurn:
    """The agent for a turn, and what was loaded for it (the turn folds the summary from it)."""

    agent: BaseOnboardingAgent
    loaded: LoadedTurnContext
    conversation_start: int  # index in loaded.messages of the current conversation's first message


class OnboardingAgentOrchestrator:
    """Builds the agent for a user's turn: state, profile, summary and history in one read, then the agent."""

    HISTORY_LIMIT = 20
    """Newest messages loaded per turn by default (Requirement 4.3 / 6.1); settings raise it."""

    def __init__(
        self,
        store: ConversationStore,
        llm: BaseChatModel,
        history_limit: int = HISTORY_LIMIT,
        limits: PromptLimits | None = None,
        rules: MemoryRules | None = None,
    ) -> None:
        self._store = store
        self._llm = llm
        self._history_limit = history_limit
        self._limits = limits or PromptLimits()
        self._rules = rules or MemoryRules()

    async def get_current_agent(self, user_id: str, exclude_message_id: str | None = None) -> BaseOnboardingAgent:
        """The agent for the user's turn. `exclude_message_id` is the turn's own message when it was
        stored before the agent is built (a turn with a client message id), so it is not history."""
        return (await self.prepare_turn(user_id, exclude_message_id)).agent

    async def prepare_turn(self, user_id: str, exclude_message_id: str | None = None) -> PreparedTurn:
        loaded = await self._load_turn_context(user_id, extra=1 if exclude_message_id else 0)
        messages = tuple(m for m in loaded.messages if m.message_id != exclude_message_id)[-self._history_limit :]
        loaded = LoadedTurnContext(loaded.state, messages, loaded.profile, loaded.summary)
        start = conversation_start(messages, self._rules.now(), self._rules.conversation_gap_s, self._rules.is_reset)
        through = loaded.summary.through_message_id if loaded.summary else None
        history = window_candidates(messages, start, through) if self._history_limit else []
        # What an earlier conversation said that the summary has not taken yet rides with the summary.
        carried = [f"- {line}" for line in transcript_lines(carried_over(messages, start, through))]
        summary = "\n".join([*([loaded.summary.text] if loaded.summary else []), *carried]) or None
        agent = await self._create_agent(
            loaded.state.current_agent,
            loaded.state.agent_context,
            user_id,
            self._format_history(history),
            loaded=loaded,
            summary=summary,
        )
        return PreparedTurn(agent, loaded, start)

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
    def _format_history(messages: Sequence[StoredMessage]) -> list[dict[str, Any]]:
        """Stored messages as the spec's `{"role": ..., "content": ...}` dicts, order kept; tool
        calls and results keep what Converse needs to pair them."""
        history: list[dict[str, Any]] = []
        for message in messages:
            entry: dict[str, Any] = {"role": message.role, "content": message.content}
            if message.tool_calls:
                entry["tool_calls"] = [{"id": c.call_id, "name": c.name, "args": c.args} for c in message.tool_calls]
            if message.tool_call_id is not None:
                entry["tool_call_id"] = message.tool_call_id
            history.append(entry)
        return history

    async def _create_agent(
        self,
        agent_type: OnboardingAgentType,
        context_dict: Mapping[str, Any],
        user_id: str,
        conversation_history: list[dict[str, Any]],
        loaded: LoadedTurnContext | None = None,
        summary: str | None = None,
    ) -> BaseOnboardingAgent:
        """The agent for `agent_type`; any failure becomes a ValueError with a clear message."""
        try:
            extra: dict[str, Any] = {}
            if loaded is not None:
                extra = {
                    "profile": loaded.profile,
                    "summary": summary,
                    "waiting_for": loaded.state.waiting_for,
                    "skipped": loaded.state.skipped,
                    "completed_at": loaded.state.completed_at,
                }
            context = OnboardingAgentContext(
                user_id=user_id,
                conversation_history=conversation_history,
                agent_context=context_dict,
                **extra,
            )
            return AGENT_CLASSES[agent_type](context, self._llm, self._limits)
        except Exception as error:
            logger.error("Agent creation failed", extra={"agent_type": str(agent_type)}, exc_info=True)
            raise ValueError(f"Agent creation failed for {agent_type}: {error}") from error
