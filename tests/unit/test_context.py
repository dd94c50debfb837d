"""OnboardingAgentContext: creation, defaults, and immutability all the way down."""

from datetime import datetime

import pytest
from pydantic import BaseModel, ValidationError

from onboarding.context import OnboardingAgentContext


def test_onboarding_agent_context_creation() -> None:
    """A pydantic model with the user id, the history, the agents' context and an aware `loaded_at`."""
    assert issubclass(OnboardingAgentContext, BaseModel)
    context = OnboardingAgentContext(
        user_id="test-user-123",
        conversation_history=[{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there"}],
        agent_context={"fitness_assessment": {"fitness_level": "beginner"}},
    )
    assert context.user_id == "test-user-123"
    assert len(context.conversation_history) == 2
    assert context.agent_context["fitness_assessment"]["fitness_level"] == "beginner"
    assert isinstance(context.loaded_at, datetime)
    assert context.loaded_at.tzinfo is not None


def test_defaults_are_empty() -> None:
    context = OnboardingAgentContext(user_id="u")
    assert list(context.conversation_history) == []
    assert dict(context.agent_context) == {}


def test_onboarding_agent_context_immutable() -> None:
    """Immutable: an attribute cannot be assigned."""
    context = OnboardingAgentContext(user_id="test-user", conversation_history=[], agent_context={})
    with pytest.raises(ValidationError):
        context.user_id = "new-user"  # type: ignore[misc]


def test_history_cannot_be_appended_or_edited() -> None:
    """Immutable all the way down: neither the list nor its entries nor the caller's originals can change it."""
    original = [{"role": "user", "content": "Hello"}]
    context = OnboardingAgentContext(user_id="u", conversation_history=original)
    with pytest.raises(AttributeError):
        context.conversation_history.append({"role": "user", "content": "x"})  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        context.conversation_history[0]["content"] = "changed"  # type: ignore[index]
    original.append({"role": "assistant", "content": "late"})
    original[0]["content"] = "changed behind its back"
    assert [dict(entry) for entry in context.conversation_history] == [{"role": "user", "content": "Hello"}]


def test_agent_context_is_deeply_frozen() -> None:
    context = OnboardingAgentContext(user_id="u", agent_context={"goal_setting": {"targets": [1, 2]}})
    with pytest.raises(TypeError):
        context.agent_context["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        context.agent_context["goal_setting"]["targets"] = []
    assert context.agent_context["goal_setting"]["targets"] == (1, 2)


@pytest.mark.parametrize(
    "arguments",
    [
        {"user_id": 123},
        {"user_id": "u", "conversation_history": "not a list"},
        {"user_id": "u", "conversation_history": ["not a dict"]},
        {"user_id": "u", "agent_context": ["not", "a", "dict"]},
        {"user_id": ""},
        {},
        {"user_id": "u", "unknown_field": 1},
    ],
)
def test_invalid_context_is_rejected(arguments: dict[str, object]) -> None:
    """Spec error handling: invalid types and missing fields raise ValidationError."""
    with pytest.raises(ValidationError):
        OnboardingAgentContext(**arguments)


def test_serialises_back_to_plain_lists_and_dicts() -> None:
    context = OnboardingAgentContext(
        user_id="u", conversation_history=[{"role": "user", "content": "😀"}], agent_context={"a": {"b": [1]}}
    )
    dumped = context.model_dump(mode="json")
    assert dumped["conversation_history"] == [{"role": "user", "content": "😀"}]
    assert dumped["agent_context"] == {"a": {"b": [1]}}
    assert OnboardingAgentContext.model_validate_json(context.model_dump_json()) == context
