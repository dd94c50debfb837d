"""BaseOnboardingAgent._build_messages: examples, and malformed history entries skipped with a warning."""

import logging

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from onboarding.agents import AGENT_CLASSES, FitnessAssessmentAgent
from onboarding.context import OnboardingAgentContext
from onboarding.model.state import OnboardingAgentType
from tests.support.views import message_texts


def _agent(
    llm: BaseChatModel, history: list[dict[str, object]], agent_context: dict[str, object] | None = None
) -> FitnessAssessmentAgent:
    return FitnessAssessmentAgent(
        OnboardingAgentContext(user_id="u", conversation_history=history, agent_context=agent_context or {}), llm
    )


def test_constructor_keeps_the_context(llm: BaseChatModel) -> None:
    """The agent takes the context and exposes history and agent_context through it."""
    context = OnboardingAgentContext(
        user_id="u", conversation_history=[{"role": "user", "content": "hi"}], agent_context={"k": {"v": 1}}
    )
    agent = FitnessAssessmentAgent(context, llm)
    assert agent.context is context
    assert agent.context.conversation_history[0]["content"] == "hi"
    assert agent.context.agent_context["k"]["v"] == 1


def test_empty_history_gives_system_then_message(llm: BaseChatModel) -> None:
    messages = _agent(llm, [])._build_messages("Hello")
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage]
    assert messages[1].content == "Hello"


def test_history_is_converted_in_order(llm: BaseChatModel) -> None:
    """History entries become HumanMessage / AIMessage in their order, between the system prompt and the message."""
    history: list[dict[str, object]] = [
        {"role": "user", "content": "I'm a beginner"},
        {"role": "assistant", "content": "Great! How often do you train?"},
    ]
    messages = _agent(llm, history)._build_messages("Twice a week")
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert [m.content for m in messages[1:]] == ["I'm a beginner", "Great! How often do you train?", "Twice a week"]


def test_malformed_entries_are_skipped_with_a_warning(llm: BaseChatModel, caplog: pytest.LogCaptureFixture) -> None:
    """Malformed history entries are skipped, valid ones kept, both ends present."""
    history: list[dict[str, object]] = [
        {"role": "user"},
        {"content": "no role"},
        {"role": "system", "content": "not a chat role"},
        {"role": "user", "content": 42},
        {"role": "user", "content": "valid"},
        {"role": "assistant", "content": "also valid"},
    ]
    with caplog.at_level(logging.WARNING):
        messages = _agent(llm, history)._build_messages("now")
    assert [m.content for m in messages[1:]] == ["valid", "also valid", "now"]
    assert isinstance(messages[0], SystemMessage)
    assert sum("Skipping malformed history entry" in r.getMessage() for r in caplog.records) == 4


def test_only_the_last_15_history_messages_are_used(llm: BaseChatModel) -> None:
    """The window: at most the last 15 history messages, by default."""
    history: list[dict[str, object]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(40)
    ]
    messages = _agent(llm, history)._build_messages("now")
    texts = [t for m in messages[1:] for t in message_texts(m)]
    # The window is m25..m39; m25 is an assistant turn and is dropped so the list starts with a user.
    assert texts == [f"m{i}" for i in range(26, 40)] + ["now"]


def test_history_ending_with_a_user_turn_is_merged_not_doubled(llm: BaseChatModel) -> None:
    """Property 8 example: an unanswered user turn (a failed reply) and the new message."""
    history: list[dict[str, object]] = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "lost reply"},
    ]
    messages = _agent(llm, history)._build_messages("again")
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert message_texts(messages[-1]) == ["lost reply", "again"]


def test_blank_current_message_is_rejected(llm: BaseChatModel) -> None:
    with pytest.raises(ValueError, match="must contain some text"):
        _agent(llm, [])._build_messages("   ")


def test_system_prompt_names_the_fields_and_what_is_known(llm: BaseChatModel) -> None:
    agent = _agent(llm, [], {"goal_setting": {"primary_goal": "fat loss", "completed_at": "2026-02-04T12:00:00Z"}})
    prompt = agent.get_system_prompt()
    assert "Current step: Fitness assessment" in prompt
    assert "- limitations: Do you have any injuries" in prompt
    assert "- goal_setting.primary_goal: fat loss" in prompt
    assert "completed_at" not in prompt


def test_system_prompt_ignores_agent_context_entries_that_are_not_mappings(llm: BaseChatModel) -> None:
    agent = _agent(llm, [], {"notes": "a plain string", "goal_setting": {"timeline": "12 weeks"}})
    prompt = agent.get_system_prompt()
    assert "- goal_setting.timeline: 12 weeks" in prompt
    assert "a plain string" not in prompt


def test_system_prompt_says_when_nothing_is_known_yet(llm: BaseChatModel) -> None:
    assert "Already known:\n- nothing yet" in _agent(llm, []).get_system_prompt()


def test_five_agents_one_per_step() -> None:
    """Every step has its agent, and none overrides stream_response or _build_messages."""
    assert set(AGENT_CLASSES) == set(OnboardingAgentType)
    for agent_class in AGENT_CLASSES.values():
        assert "stream_response" not in vars(agent_class)
        assert "_build_messages" not in vars(agent_class)
