"""Spec 000's correctness properties 1-7, and Property 8 (Bedrock-valid message lists)."""

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from infra.bedrock_emulator import BedrockEmulator
from onboarding.agents import AGENT_CLASSES, BaseOnboardingAgent
from onboarding.agents.base import PromptLimits
from onboarding.context import OnboardingAgentContext
from onboarding.conversation import message_texts
from onboarding.orchestrator import OnboardingAgentOrchestrator
from onboarding.store import ConversationStore, Role, StoredMessage

from .strategies import alternating_history, content, history, long_content, messy_history

agent_class = st.sampled_from(list(AGENT_CLASSES.values()))
WINDOW = BaseOnboardingAgent.HISTORY_WINDOW


def _agent(
    cls: type[BaseOnboardingAgent], llm: BaseChatModel, entries: Sequence[Mapping[str, Any]]
) -> BaseOnboardingAgent:
    return cls(OnboardingAgentContext(user_id="test-user", conversation_history=list(entries), agent_context={}), llm)


def _texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [text for message in messages for text in message_texts(message)]


def _expected_texts(entries: Sequence[Mapping[str, Any]], message: str) -> list[str]:
    """Reference model: valid non-blank entries, the last WINDOW of them, no leading assistant."""
    valid = [e for e in entries if e.get("role") in ("user", "assistant") and isinstance(e.get("content"), str)]
    window = [e for e in valid[-WINDOW:] if e["content"].strip()]
    while window and window[0]["role"] == "assistant":
        window = window[1:]
    return [e["content"] for e in window] + [message]


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, user_message=content, entries=history)
def test_property_1_message_structure_invariant(
    llm: BaseChatModel, cls: type[BaseOnboardingAgent], user_message: str, entries: list[dict[str, str]]
) -> None:
    # Feature: onboarding-conversation-memory, Property 1: Message Structure Invariant
    """For any user message and agent context, _build_messages() returns a SystemMessage first and a
    HumanMessage carrying the user's message last. (Validates R3.3, R3.6.)"""
    messages = _agent(cls, llm, entries)._build_messages(user_message)
    assert len(messages) >= 2
    assert isinstance(messages[0], SystemMessage)
    assert isinstance(messages[-1], HumanMessage)
    assert message_texts(messages[-1])[-1] == user_message


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, user_message=content, entries=history)
def test_property_2_history_inclusion_with_limiting(
    llm: BaseChatModel, cls: type[BaseOnboardingAgent], user_message: str, entries: list[dict[str, str]]
) -> None:
    # Feature: onboarding-conversation-memory, Property 2: Conversation History Inclusion with Limiting
    """For any context with history, _build_messages() includes the history (at most the last 15
    messages) between the system prompt and the current message. (Validates R3.4, R3.5.)"""
    messages = _agent(cls, llm, entries)._build_messages(user_message)
    texts = _texts(messages[1:])
    assert texts == _expected_texts(entries, user_message)
    assert len(texts) - 1 <= WINDOW


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, user_message=content, entries=alternating_history(max_pairs=7))
def test_property_3_history_format_conversion(
    llm: BaseChatModel, cls: type[BaseOnboardingAgent], user_message: str, entries: list[dict[str, str]]
) -> None:
    # Feature: onboarding-conversation-memory, Property 3: History Format Conversion
    """For any valid history, each dict becomes the matching LangChain type (HumanMessage for
    "user", AIMessage for "assistant") with the same content. (Validates R3.7.)"""
    messages = _agent(cls, llm, entries)._build_messages(user_message)
    converted = messages[1:-1]
    assert len(converted) == len(entries)
    for entry, message in zip(entries, converted, strict=True):
        assert isinstance(message, HumanMessage if entry["role"] == "user" else AIMessage)
        assert message.content == entry["content"]


@pytest.mark.property
@settings(max_examples=100)
@given(entries=history)
async def test_property_4_orchestrator_loading_ordering_and_limiting(
    store: ConversationStore, orchestrator: OnboardingAgentOrchestrator, entries: list[dict[str, str]]
) -> None:
    # Feature: onboarding-conversation-memory, Property 4: Orchestrator Message Loading with Ordering and Limiting
    """For any user's stored messages, the orchestrator loads at most the LAST 20, ordered by
    created_at ascending. (Validates R4.2, R4.3, R6.1.)"""
    user_id = str(uuid.uuid4())
    stored = [store.append_message(user_id, e["role"], e["content"]) for e in entries]  # type: ignore[arg-type]
    agent = await orchestrator.get_current_agent(user_id)
    loaded = list(agent.context.conversation_history)
    assert len(loaded) == min(len(entries), 20)
    assert [dict(e) for e in loaded] == entries[-20:]
    newest = stored[-20:]
    assert [m.created_at for m in newest] == sorted(m.created_at for m in newest)


@pytest.mark.property
@settings(max_examples=100)
@given(entries=history)
def test_property_5_orchestrator_format_transformation(entries: list[dict[str, str]]) -> None:
    # Feature: onboarding-conversation-memory, Property 5: Orchestrator Format Transformation
    """For any loaded messages, each becomes a dict with exactly "role" and "content", matching the
    stored message. (Validates R4.4.)"""
    from datetime import UTC, datetime

    roles: list[Role] = [cast(Role, e["role"]) for e in entries]
    messages = [
        StoredMessage(f"{i:013d}-abc", role, e["content"], datetime.now(UTC))
        for i, (role, e) in enumerate(zip(roles, entries, strict=True))
    ]
    formatted = OnboardingAgentOrchestrator._format_history(messages)
    assert formatted == [{"role": m.role, "content": m.content} for m in messages]
    assert all(set(entry) == {"role", "content"} for entry in formatted)


@pytest.mark.property
@settings(max_examples=100)
@given(
    cls=agent_class, user_message=content, entries=alternating_history(max_pairs=30).filter(lambda h: len(h) > WINDOW)
)
def test_property_6_limiting_preserves_recency(
    llm: BaseChatModel, cls: type[BaseOnboardingAgent], user_message: str, entries: list[dict[str, str]]
) -> None:
    # Feature: onboarding-conversation-memory, Property 6: History Limiting Preserves Recency
    """For any history over the limit, only the most recent messages are included, oldest to
    newest. (Validates R6.2, R6.3, R6.4; the orchestrator's 20 is covered by Property 4.)"""
    messages = _agent(cls, llm, entries)._build_messages(user_message)
    included = [(type(m), m.content) for m in messages[1:-1]]
    recent = [(HumanMessage if e["role"] == "user" else AIMessage, e["content"]) for e in entries[-WINDOW:]]
    # The window may start on an assistant turn, which is dropped so the list starts with a user.
    assert included in (recent, recent[1:])
    assert len(included) >= WINDOW - 1


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, texts=st.lists(long_content, min_size=1, max_size=6), user_message=long_content)
async def test_property_7_message_content_preservation(
    store: ConversationStore,
    orchestrator: OnboardingAgentOrchestrator,
    cls: type[BaseOnboardingAgent],
    texts: list[str],
    user_message: str,
) -> None:
    # Feature: onboarding-conversation-memory, Property 7: Message Content Preservation
    """For any message, storing, loading, formatting and message building never truncate or modify
    its content, whatever its length. (Validates R6.5.)"""
    user_id = str(uuid.uuid4())
    for index, text in enumerate(texts):
        store.append_message(user_id, "user" if index % 2 == 0 else "assistant", text)
    agent = await orchestrator.get_current_agent(user_id)
    # A budget far above the longest example: dropping whole messages to fit a budget is
    # test_memory_rules' subject; here nothing may be cut or changed on the way.
    roomy = PromptLimits(token_budget=10**7, system_allowance=5000)
    built = cls(
        OnboardingAgentContext(user_id="u", conversation_history=agent.context.conversation_history), agent.llm, roomy
    )._build_messages(user_message)
    assert [e["content"] for e in agent.context.conversation_history] == texts
    assert _texts(built[1:]) == [*texts, user_message]


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, user_message=content, entries=messy_history)
def test_property_8_bedrock_valid_message_lists(
    llm: BaseChatModel,
    emulator: BedrockEmulator,
    cls: type[BaseOnboardingAgent],
    user_message: str,
    entries: list[dict[str, Any]],
) -> None:
    # Feature: onboarding-conversation-memory, Property 8: Bedrock-valid message lists
    """For any history, malformed and blank entries included, the list sent to the model is the
    system message, then user/assistant turns that alternate starting with a user turn, ending with
    the current message, with no blank text; consecutive same-role turns are merged whole. The real
    langchain-aws client sends it to the emulator, which applies Bedrock's validation rules."""
    messages = _agent(cls, llm, entries)._build_messages(user_message)
    assert isinstance(messages[0], SystemMessage)
    turns = messages[1:]
    assert [type(m) for m in turns] == [HumanMessage if i % 2 == 0 else AIMessage for i in range(len(turns))]
    assert isinstance(turns[-1], HumanMessage)
    assert message_texts(turns[-1])[-1] == user_message
    assert all(text.strip() for text in _texts(turns))
    assert _texts(turns) == _expected_texts(entries, user_message)
    before = len(emulator.requests)
    llm.invoke(messages)  # raises ValidationException if Bedrock would reject the list
    assert len(emulator.requests) == before + 1
