"""OnboardingAgentOrchestrator: agent choice, history loading, and what a failed read or a failed agent does."""

import json
import logging
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from onboarding.agents import DietPlanningAgent, FitnessAssessmentAgent
from onboarding.config import DEFAULT_LIMITS, Limits, Settings
from onboarding.model.history import TurnContext
from onboarding.model.state import OnboardingAgentType, OnboardingState
from onboarding.persistence import Repositories
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from tests.support.seed import save_state

from .conftest import TABLE


async def test_orchestrator_loads_conversation_history(
    store: Repositories, orchestrator: OnboardingAgentOrchestrator
) -> None:
    """The user's messages load into the agent's context, oldest first, each a `{"role", "content"}` entry."""
    for i in range(5):
        store.writes.append_message("test-user", "user" if i % 2 == 0 else "assistant", f"Message {i}")
    agent = await orchestrator.get_current_agent("test-user")
    assert len(agent.context.conversation_history) == 5
    assert agent.context.conversation_history[0]["content"] == "Message 0"
    assert dict(agent.context.conversation_history[1]) == {"role": "assistant", "content": "Message 1"}
    assert agent.context.user_id == "test-user"


async def test_a_new_user_starts_with_the_fitness_assessment(orchestrator: OnboardingAgentOrchestrator) -> None:
    agent = await orchestrator.get_current_agent("new-user")
    assert isinstance(agent, FitnessAssessmentAgent)
    assert list(agent.context.conversation_history) == []


async def test_the_saved_state_picks_the_agent_and_its_context(
    dynamodb: Any, orchestrator: OnboardingAgentOrchestrator
) -> None:
    save_state(
        dynamodb,
        TABLE,
        "u",
        OnboardingState(
            current_agent=OnboardingAgentType.DIET_PLANNING,
            agent_context={"goal_setting": {"primary_goal": "fat loss"}},
        ),
    )
    agent = await orchestrator.get_current_agent("u")
    assert isinstance(agent, DietPlanningAgent)
    assert agent.context.agent_context["goal_setting"]["primary_goal"] == "fat loss"
    assert "goal_setting.primary_goal: fat loss" in agent.get_system_prompt()


async def test_only_the_newest_20_are_loaded(store: Repositories, orchestrator: OnboardingAgentOrchestrator) -> None:
    """Only the newest `history_load_limit` (20) messages are loaded, oldest first."""
    for i in range(45):
        store.writes.append_message("u", "user" if i % 2 == 0 else "assistant", f"m{i}")
    agent = await orchestrator.get_current_agent("u")
    assert [entry["content"] for entry in agent.context.conversation_history] == [f"m{i}" for i in range(25, 45)]


async def test_read_failure_gives_empty_history_and_a_warning(
    dynamodb: Any, llm: BaseChatModel, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed history read: empty history, the agent still works."""
    missing = Repositories.over(dynamodb, "missing-table", settings)
    orchestrator = OnboardingAgentOrchestrator(missing.conversations, llm, settings)
    with caplog.at_level(logging.WARNING):
        agent = await orchestrator.get_current_agent("u")
    assert isinstance(agent, FitnessAssessmentAgent)
    assert list(agent.context.conversation_history) == []
    assert any("Could not load conversation history" in r.getMessage() for r in caplog.records)


async def test_agent_creation_failure_raises_value_error(orchestrator: OnboardingAgentOrchestrator) -> None:
    """An agent that cannot be made: a clear ValueError."""
    with pytest.raises(ValueError, match="Agent creation failed"):
        orchestrator._create_agent(OnboardingAgentType.GOAL_SETTING, {}, "", [], TurnContext(), None)
    with pytest.raises(ValueError, match="Agent creation failed"):
        orchestrator._create_agent("no_such_step", {}, "u", [], TurnContext(), None)  # type: ignore[arg-type]


def _query_limits(dynamodb: Any) -> list[int]:
    """The `Limit` of every Query the client sends from now on, as sent (a botocore before-call hook)."""
    seen: list[int] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        seen.append(json.loads(params["body"])["Limit"])

    dynamodb.meta.events.register("before-call.dynamodb.Query", hook)
    return seen


async def test_history_load_limit_default_is_20(
    dynamodb: Any, store: Repositories, llm: BaseChatModel, settings: Settings
) -> None:
    """The latest 20 messages by default: the default limit, and the one Query a turn's load sends
    (the 20 newest messages plus the state, profile and summary items)."""
    assert Limits.model_fields["history_load_limit"].default == 20
    assert DEFAULT_LIMITS.history_load_limit == 20
    assert Settings.from_env({"TABLE_NAME": TABLE}).history_load_limit == 20
    for i in range(45):
        store.writes.append_message("u", "user" if i % 2 == 0 else "assistant", f"m{i}")
    seen = _query_limits(dynamodb)
    # Built without limits (the orchestrator's own default), and from the default settings.
    for orchestrator in (
        OnboardingAgentOrchestrator(store.conversations, llm),
        OnboardingAgentOrchestrator(store.conversations, llm, Settings(table_name=TABLE)),
        OnboardingAgentOrchestrator(store.conversations, llm, settings),
    ):
        assert orchestrator.limits.history_load_limit == 20
        agent = await orchestrator.get_current_agent("u")
        assert len(agent.context.conversation_history) == 20
    assert seen == [20 + 3] * 3
