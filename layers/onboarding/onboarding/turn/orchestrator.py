"""Owns picking the user's current onboarding agent and giving it an immutable context.

`prepare` is pure: from what a turn loaded (state, profile, summary, newest messages) it cuts the
window candidates and builds the agent. The turn service loads and calls it;
`get_current_agent(user_id)` loads with the same reader, for callers outside a turn (the
orchestrator's tests, the inspect command).
"""

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from aws_lambda_powertools import Logger
from langchain_core.language_models import BaseChatModel

from onboarding.agents import AGENT_CLASSES, BaseOnboardingAgent
from onboarding.config import DEFAULT_LIMITS, Limits
from onboarding.context import OnboardingAgentContext
from onboarding.flags import DEFAULT_FLAGS, MemoryFlags
from onboarding.llm.sections import not_in_prompt
from onboarding.memory.transcript import transcript_lines
from onboarding.memory.window import carried_over, conversation_start, window_candidates
from onboarding.metrics import count_metric
from onboarding.model.answers import AnswerSource
from onboarding.model.errors import StoreError
from onboarding.model.history import TurnContext
from onboarding.model.messages import Message
from onboarding.model.state import OnboardingAgentType

logger = Logger(child=True)


class TurnContextReader(Protocol):
    """What loads a turn's context: the conversation repository (one Query)."""

    def load_turn(self, user_id: str, message_limit: int, exclude_message_id: str | None = None) -> TurnContext: ...


def degraded_context(error: StoreError) -> TurnContext:
    """The context of a turn whose read failed: no history, and marked degraded so that the turn
    neither overwrites the state and profile it could not read nor pretends to remember."""
    logger.warning(
        "Could not load conversation history; continuing with none",
        extra={"reason": type(error.__cause__ or error).__name__},
    )
    count_metric("HistoryLoadFailed")
    return TurnContext(degraded=True)


def single_prompt_context() -> TurnContext:
    """The context of a turn in single-prompt mode (the memory flag off): nothing read, and, as a
    degraded turn, no tools and nothing written but its two messages. Not a fault: no warning."""
    return TurnContext(degraded=True)


@dataclass(frozen=True)
class PreparedTurn:
    """The agent for a turn, and what was loaded for it (the turn folds the summary from it)."""

    agent: BaseOnboardingAgent
    loaded: TurnContext
    conversation_start: int  # index in loaded.messages of the current conversation's first message
    flags: MemoryFlags = DEFAULT_FLAGS

    @property
    def memory_unavailable(self) -> bool:
        """The memory could not be read (a fault the person is told about), not switched off."""
        return self.loaded.degraded and self.flags.memory


class OnboardingAgentOrchestrator:
    """Builds the agent for a user's turn from its state, profile, summary and history."""

    def __init__(
        self,
        reader: TurnContextReader,
        llm: BaseChatModel,
        limits: Limits = DEFAULT_LIMITS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._reader = reader
        self._llm = llm
        self._limits = limits
        self._clock = clock

    @property
    def limits(self) -> Limits:
        return self._limits

    async def get_current_agent(self, user_id: str) -> BaseOnboardingAgent:
        """The agent for the user's next turn, from the newest `history_load_limit` messages (one
        Query); on a read failure, a degraded context without history."""
        try:
            # The reader is synchronous (boto3); keep the event loop free while it waits.
            loaded = await asyncio.to_thread(self._reader.load_turn, user_id, self._limits.history_load_limit)
        except StoreError as error:
            loaded = degraded_context(error)
        return self.prepare(user_id, loaded).agent

    def prepare(
        self,
        user_id: str,
        loaded: TurnContext,
        message: Message | None = None,
        flags: MemoryFlags = DEFAULT_FLAGS,
        recalled: Sequence[Message] = (),
    ) -> PreparedTurn:
        """The agent for a turn over `loaded`: the window candidates are the current conversation's
        unsummarized messages; an earlier conversation's unsummarized tail rides with the summary.
        `message`: the stored client message the turn answers (its id and time mark what is saved).
        `flags`: without the summary the window is the newest messages and no summary is shown;
        without the profile it is not shown (what the tools save is still saved).
        `recalled`: older messages the index found for the message, most relevant first; those the
        prompt shows already (window, carried-over lines, the message itself) are left out."""
        messages = loaded.messages
        start = conversation_start(messages, self._clock(), flags.conversation_rules(self._limits.conversations))
        # A new conversation after earlier ones (a gap or a reset): the prompt opens with a recap.
        returning = messages[-1].created_at if messages and start == len(messages) else None
        source = AnswerSource(message.message_id or None, message.created_at) if message is not None else None
        summarized = loaded.summary if flags.summary else None
        through = summarized.through_message_id if summarized else None
        history = window_candidates(messages, start, through)
        carried_messages = carried_over(messages, start, through)
        carried = [f"- {line}" for line in transcript_lines(carried_messages)]
        shown = {m.message_id for m in (*history, *carried_messages)} | ({message.message_id} if message else set())
        summary = ("\n".join([*([summarized.text] if summarized else []), *carried]) or None) if flags.summary else None
        agent = self._create_agent(
            loaded.state.current_agent,
            loaded.state.agent_context,
            user_id,
            history,
            loaded,
            summary,
            {
                "message_source": source,
                "returning_since": returning,
                "single_prompt": not flags.memory,
                "show_profile": flags.profile,
                "recalled": not_in_prompt(recalled, shown),
            },
        )
        return PreparedTurn(agent, loaded, start, flags)

    @staticmethod
    def _format_history(messages: Sequence[Message]) -> list[Message]:
        """The loaded messages as the context's history entries: each reads as `{"role", "content"}`
        (plus `tool_calls` / `tool_call_id` where Converse needs them to pair calls and results)."""
        return list(messages)

    def _create_agent(
        self,
        agent_type: OnboardingAgentType,
        context_dict: Mapping[str, Any],
        user_id: str,
        conversation_history: Sequence[Message],
        loaded: TurnContext,
        summary: str | None,
        turn: Mapping[str, Any] | None = None,
    ) -> BaseOnboardingAgent:
        """The agent for `agent_type`; any failure becomes a ValueError with a clear message."""
        try:
            context = OnboardingAgentContext(
                user_id=user_id,
                conversation_history=self._format_history(conversation_history),
                agent_context=context_dict,
                profile=loaded.profile,
                summary=summary,
                waiting_for=loaded.state.waiting_for,
                skipped=loaded.state.skipped,
                completed_at=loaded.state.completed_at,
                memory_unavailable=loaded.degraded,
                **(turn or {}),
            )
            return AGENT_CLASSES[agent_type](context, self._llm, self._limits)
        except Exception as error:
            logger.error("Agent creation failed", extra={"agent_type": str(agent_type)}, exc_info=True)
            raise ValueError(f"Agent creation failed for {agent_type}: {error}") from error
