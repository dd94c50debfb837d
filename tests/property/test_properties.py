"""The onboarding memory's correctness properties 1-7, and Property 8 (Bedrock-valid message lists)."""

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, cast

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.agents import AGENT_CLASSES, BaseOnboardingAgent
from onboarding.config import DEFAULT_LIMITS, Limits, Settings
from onboarding.context import OnboardingAgentContext
from onboarding.memory.window import is_reset_command
from onboarding.model.messages import Message, Role
from onboarding.model.normalization import is_blank
from onboarding.persistence import Repositories
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from tests.support.views import message_texts

from .strategies import alternating_history, content, history, history_entry, long_content, messy_history

agent_class = st.sampled_from(list(AGENT_CLASSES.values()))

# The window under test: the default one, or any other, so that a test follows a changed limit
# instead of a number of its own (the default of 15 is checked on its own below).
windows = st.one_of(st.just(Limits().window_max_messages), st.integers(min_value=2, max_value=40))


def _window_limits(window: int) -> Limits:
    """Limits whose window holds `window` messages, with a token budget roomy enough for any window
    of `history` (its 300-character texts are at most 904 tokens each) that only the message
    limit cuts it."""
    return Limits(window_max_messages=window, history_load_limit=max(window, 20), token_budget=200_000)


def _agent(
    cls: type[BaseOnboardingAgent],
    llm: BaseChatModel,
    entries: Sequence[Mapping[str, Any]],
    limits: Limits = DEFAULT_LIMITS,
) -> BaseOnboardingAgent:
    context = OnboardingAgentContext(user_id="test-user", conversation_history=list(entries), agent_context={})
    return cls(context, llm, limits)


def _texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [text for message in messages for text in message_texts(message)]


def _expected_texts(entries: Sequence[Mapping[str, Any]], message: str, window: int) -> list[str]:
    """Reference model: valid entries, the last `window` of them, blank ones dropped, no leading assistant."""
    valid = [e for e in entries if e.get("role") in ("user", "assistant") and isinstance(e.get("content"), str)]
    kept = [e for e in valid[-window:] if not is_blank(e["content"])]
    while kept and kept[0]["role"] == "assistant":
        kept = kept[1:]
    return [e["content"] for e in kept] + [message]


def _no_reset(entries: Sequence[Mapping[str, Any]], limits: Limits) -> bool:
    """True when no entry is a reset command (one would start a new conversation, and the window
    with it: test_memory_rules' subject, not these properties')."""
    return not any(is_reset_command(str(e["content"]), limits.reset_keywords) for e in entries)


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, user_message=content, entries=history)
def test_property_1_message_structure_invariant(
    llm: BaseChatModel, cls: type[BaseOnboardingAgent], user_message: str, entries: list[dict[str, str]]
) -> None:
    # Feature: onboarding-conversation-memory, Property 1: Message Structure Invariant
    """For any user message and agent context, _build_messages() returns a SystemMessage first and a
    HumanMessage carrying the user's message last."""
    messages = _agent(cls, llm, entries)._build_messages(user_message)
    assert len(messages) >= 2
    assert isinstance(messages[0], SystemMessage)
    assert isinstance(messages[-1], HumanMessage)
    assert message_texts(messages[-1])[-1] == user_message


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, user_message=content, entries=history, window=windows)
def test_property_2_history_inclusion_with_limiting(
    llm: BaseChatModel, cls: type[BaseOnboardingAgent], user_message: str, entries: list[dict[str, str]], window: int
) -> None:
    # Feature: onboarding-conversation-memory, Property 2: Conversation History Inclusion with Limiting
    """For any context with history, _build_messages() includes the history (at most the last
    `window_max_messages`, 15 by default) between the system prompt and the current message."""
    limits = _window_limits(window)
    messages = _agent(cls, llm, entries, limits)._build_messages(user_message)
    texts = _texts(messages[1:])
    assert texts == _expected_texts(entries, user_message, limits.window_max_messages)
    assert len(texts) - 1 <= limits.window_max_messages


@pytest.mark.property
def test_property_2_the_default_window_is_15_messages(llm: BaseChatModel) -> None:
    # Feature: onboarding-conversation-memory, Property 2: the default limit is 15 messages.
    """Unless the settings say otherwise, the window holds the last 15 history messages."""
    assert Limits().window_max_messages == 15
    assert Settings(table_name="table").window_max_messages == 15
    entries = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(20)]
    for cls in AGENT_CLASSES.values():
        agent = _agent(cls, llm, entries)  # the agent's own default limits
        assert agent.limits.window_messages == 15
        # The last 15 are m5..m19; m5 is a reply, left out so that the list starts with a user message.
        assert _texts(agent._build_messages("now")[1:]) == [f"m{i}" for i in range(6, 20)] + ["now"]


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, user_message=content, entries=alternating_history(max_pairs=7))
def test_property_3_history_format_conversion(
    llm: BaseChatModel, cls: type[BaseOnboardingAgent], user_message: str, entries: list[dict[str, str]]
) -> None:
    # Feature: onboarding-conversation-memory, Property 3: History Format Conversion
    """For any valid history, each dict becomes the matching LangChain type (HumanMessage for
    "user", AIMessage for "assistant") with the same content."""
    messages = _agent(cls, llm, entries)._build_messages(user_message)
    converted = messages[1:-1]
    assert len(converted) == len(entries)
    for entry, message in zip(entries, converted, strict=True):
        assert isinstance(message, HumanMessage if entry["role"] == "user" else AIMessage)
        assert message.content == entry["content"]


@pytest.mark.property
def test_property_4_the_default_load_is_the_latest_20_messages() -> None:
    # Feature: onboarding-conversation-memory, Property 4: the latest 20 messages by default.
    assert Limits().history_load_limit == 20


@pytest.mark.property
@settings(max_examples=100)
@given(data=st.data())
async def test_property_4_orchestrator_loading_ordering_and_limiting(
    store: Repositories,
    orchestrator: OnboardingAgentOrchestrator,
    settings: Settings,
    data: st.DataObject,
) -> None:
    # Feature: onboarding-conversation-memory, Property 4: Orchestrator Message Loading with Ordering and Limiting
    """For any user's stored messages, the orchestrator loads the NEWEST `history_load_limit` (20
    by default) of them, ordered by created_at ascending."""
    limit = settings.history_load_limit
    # Unique contents, so that each loaded entry names one stored message; and histories longer
    # than the limit every time, so that loading the oldest ones instead would be seen.
    entries = data.draw(
        st.one_of(
            st.lists(history_entry, max_size=limit + 30, unique_by=lambda e: e["content"]),
            st.lists(history_entry, min_size=limit + 1, max_size=limit + 30, unique_by=lambda e: e["content"]),
        )
    )
    assume(_no_reset(entries, settings))
    user_id = str(uuid.uuid4())
    stored = [store.writes.append_message(user_id, cast(Role, e["role"]), e["content"]) for e in entries]
    agent = await orchestrator.get_current_agent(user_id)
    loaded = list(agent.context.conversation_history)
    newest = stored[len(stored) - min(len(stored), limit) :]
    # What the orchestrator loaded is exactly the newest `limit` stored, oldest first: not the
    # oldest ones, not newest first.
    assert [(e["role"], e["content"]) for e in loaded] == [(m.role, m.content) for m in newest]
    by_content = {m.content: m for m in stored}
    created = [cast(datetime, by_content[e["content"]].created_at) for e in loaded]
    assert all(a < b for a, b in pairwise(created))
    assert [dict(e) for e in loaded] == entries[len(entries) - len(newest) :]


@pytest.mark.property
@settings(max_examples=100)
@given(entries=history)
def test_property_5_orchestrator_format_transformation(entries: list[dict[str, str]]) -> None:
    # Feature: onboarding-conversation-memory, Property 5: Orchestrator Format Transformation
    """For any loaded messages, each becomes a dict with exactly "role" and "content", matching the
    stored message."""
    messages = [
        Message(cast(Role, e["role"]), e["content"], f"{i:013d}-abc", datetime.now(UTC)) for i, e in enumerate(entries)
    ]
    formatted = OnboardingAgentOrchestrator._format_history(messages)
    assert formatted == [{"role": m.role, "content": m.content} for m in messages]
    assert all(set(entry) == {"role", "content"} for entry in formatted)
    assert [dict(entry) for entry in formatted] == entries


@st.composite
def over_the_window(draw: st.DrawFn) -> tuple[int, list[dict[str, str]]]:
    """A window size, and an alternating history (from a user message) longer than it."""
    window = draw(windows)
    return window, draw(alternating_history(max_pairs=30, min_pairs=window // 2 + 1))


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, user_message=content, case=over_the_window())
def test_property_6_limiting_preserves_recency(
    llm: BaseChatModel, cls: type[BaseOnboardingAgent], user_message: str, case: tuple[int, list[dict[str, str]]]
) -> None:
    # Feature: onboarding-conversation-memory, Property 6: History Limiting Preserves Recency
    """For any history over the limit, only the most recent messages are included, oldest to
    newest. (The orchestrator's 20 is covered by Property 4.)"""
    window, entries = case
    limits = _window_limits(window)
    assert len(entries) > limits.window_max_messages
    messages = _agent(cls, llm, entries, limits)._build_messages(user_message)
    included = [(type(m), m.content) for m in messages[1:-1]]
    recent = entries[-limits.window_max_messages :]
    # The history alternates from a user message, so the window starts on a reply exactly when it
    # holds an odd number of messages. That reply, and nothing else, is left out (Converse wants the
    # user's words first); otherwise the whole window is included.
    starts_on_reply = recent[0]["role"] == "assistant"
    assert starts_on_reply == (limits.window_max_messages % 2 == 1)
    expected = recent[1:] if starts_on_reply else recent
    assert included == [(HumanMessage if e["role"] == "user" else AIMessage, e["content"]) for e in expected]


@pytest.mark.property
@settings(max_examples=100)
@given(cls=agent_class, texts=st.lists(long_content, min_size=1, max_size=6), user_message=long_content)
async def test_property_7_message_content_preservation(
    store: Repositories,
    orchestrator: OnboardingAgentOrchestrator,
    settings: Settings,
    cls: type[BaseOnboardingAgent],
    texts: list[str],
    user_message: str,
) -> None:
    # Feature: onboarding-conversation-memory, Property 7: Message Content Preservation
    """For any message, storing, loading, formatting and message building never truncate or modify
    its content, whatever its length."""
    assume(_no_reset([{"content": text} for text in texts], settings))
    user_id = str(uuid.uuid4())
    for index, text in enumerate(texts):
        store.writes.append_message(user_id, "user" if index % 2 == 0 else "assistant", text)
    agent = await orchestrator.get_current_agent(user_id)
    # A budget far above the longest example: dropping whole messages to fit a budget is
    # test_memory_rules' subject; here nothing may be cut or changed on the way. Seven texts of up
    # to 20,000 characters (3 tokens each when astral) can be over the most `Limits` validates
    # (200,000), so the defaults are copied with a larger budget.
    roomy = Limits().model_copy(update={"token_budget": 10**7})
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
    assert all(not is_blank(text) for text in _texts(turns))
    assert _texts(turns) == _expected_texts(entries, user_message, Limits().window_max_messages)
    before = len(emulator.requests)
    llm.invoke(messages)  # raises ValidationException if Bedrock would reject the list
    assert len(emulator.requests) == before + 1
