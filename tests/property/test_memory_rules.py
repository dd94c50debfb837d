"""Issue 4's rules, for all inputs: the budget is never exceeded, no message is cut, order is kept,
tool calls stay with their results, and the summary plus the window never drop a message."""

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models import BaseChatModel

from infra.bedrock_emulator import BedrockEmulator
from onboarding.agents import AGENT_CLASSES, BaseOnboardingAgent
from onboarding.agents.base import PromptLimits
from onboarding.context import OnboardingAgentContext
from onboarding.memory import (
    OverBudgetError,
    WindowPolicy,
    carried_over,
    conversation_start,
    fit_window,
    fold_candidates,
    is_reset_command,
    message_tokens,
    units_of,
    window_candidates,
)
from onboarding.orchestrator import OnboardingAgentOrchestrator
from onboarding.store import StoredMessage, ToolCall
from onboarding.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from onboarding.tools import build_tools

from .strategies import content

pytestmark = pytest.mark.property

START = datetime(2026, 1, 1, tzinfo=UTC)
KEYWORDS = ("start over", "reset")


@st.composite
def conversations(draw: st.DrawFn, max_turns: int = 40) -> list[StoredMessage]:
    """Stored messages as turns produce them: a user message, then a reply that may call tools
    first; some turns follow an idle gap, some user messages are reset commands."""
    messages: list[StoredMessage] = []
    now = START
    for turn in range(draw(st.integers(min_value=0, max_value=max_turns))):
        now += timedelta(seconds=draw(st.sampled_from([5, 60, 600, 3600, 86_400])))
        text = draw(st.one_of(content, st.sampled_from(["Start over!", "reset"]), st.text(min_size=1, max_size=3000)))
        if not text.strip():
            text = "x"

        def add(role: str, body: str, **extra: Any) -> None:
            nonlocal now
            now += timedelta(milliseconds=1)
            messages.append(
                StoredMessage(f"{int(now.timestamp() * 1000):013d}-{len(messages):012x}", role, body, now, **extra)  # type: ignore[arg-type]
            )

        add("user", text)
        if draw(st.booleans()):
            call = ToolCall(f"call-{turn}", "save_fitness_assessment", {"fitness_level": draw(content)})
            add("assistant", draw(st.sampled_from(["", "Noted."])), tool_calls=(call,))
            add("tool", json.dumps({"saved": ["fitness_level"]}), tool_call_id=call.call_id)
        add("assistant", draw(content))
    return messages


def _is_reset(text: str) -> bool:
    return is_reset_command(text, KEYWORDS)


@settings(max_examples=200)
@given(messages=conversations(), available=st.integers(min_value=0, max_value=6000), cap=st.integers(1, 30))
def test_the_window_is_the_newest_whole_units_within_the_budget(
    messages: list[StoredMessage], available: int, cap: int
) -> None:
    window = fit_window(messages, available, cap)
    assert sum(message_tokens(m) for m in window) <= available  # budget never exceeded
    assert len([m for m in window if m.role != "tool"]) <= cap
    assert list(window) == messages[len(messages) - len(window) :]  # newest, order kept, nothing cut
    units = units_of(messages)
    assert any(window == tuple(m for unit in units[i:] for m in unit) for i in range(len(units) + 1))


@settings(max_examples=200)
@given(messages=conversations(), gap_s=st.sampled_from([300, 1800, 7200]))
def test_a_conversation_starts_after_the_last_gap_or_reset(messages: list[StoredMessage], gap_s: int) -> None:
    now = messages[-1].created_at + timedelta(seconds=1) if messages else START
    start = conversation_start(messages, now, gap_s, _is_reset)
    current = messages[start:]
    for before, after in pairwise(current):
        assert (after.created_at - before.created_at).total_seconds() <= gap_s
    assert not any(m.role == "user" and _is_reset(m.content) for m in current)
    if 0 < start < len(messages):
        boundary = messages[start - 1 : start + 1]
        gap = (boundary[1].created_at - boundary[0].created_at).total_seconds() > gap_s
        previous_user = max((i for i in range(start - 1) if messages[i].role == "user"), default=-1)
        reset = previous_user >= 0 and _is_reset(messages[previous_user].content)
        assert gap or reset


@settings(max_examples=150, deadline=None)
@given(messages=conversations(max_turns=60), policy_cap=st.integers(min_value=4, max_value=20))
def test_the_summary_and_the_window_never_drop_a_message(messages: list[StoredMessage], policy_cap: int) -> None:
    """Replay the conversation turn by turn with a fold after each turn: before every turn, each
    earlier message is either folded into the summary or in the prompt's window (or belongs to an
    earlier conversation and was folded), and the window fits the budget the settings leave it."""
    policy = WindowPolicy(max_messages=policy_cap, max_tokens=4000, keep_messages=policy_cap // 2, keep_tokens=2000)
    folded: set[str] = set()
    through: str | None = None
    turn_starts = [i for i, m in enumerate(messages) if m.role == "user"] + [len(messages)]
    for turn_start, next_start in pairwise(turn_starts):
        history, now = messages[:turn_start], messages[turn_start].created_at
        start = conversation_start(history, now, 1800, _is_reset)
        candidates = window_candidates(history, start, through)
        window = fit_window(candidates, policy.max_tokens + 4000, policy.max_messages + 4)
        in_prompt = {m.message_id for m in window}
        carried = set(_ids(carried_over(history, start, through)))  # the previous conversation's tail
        for message in history:
            assert message.message_id in folded | in_prompt | carried or message.role == "tool"
        assert not (in_prompt & carried)
        # The turn is stored, then folded (the fold sees the turn's own messages).
        stored = messages[:next_start]
        due = fold_candidates(stored, conversation_start(stored, now, 1800, _is_reset), through, policy)
        if due:
            folded.update(m.message_id for m in due)
            through = due[-1].message_id


@settings(max_examples=100, deadline=None)
@given(
    cls=st.sampled_from(list(AGENT_CLASSES.values())),
    messages=conversations(max_turns=25),
    current=st.one_of(content, st.text(min_size=1000, max_size=30_000).filter(str.strip)),
    budget=st.integers(min_value=1500, max_value=12_000),
    summary=st.one_of(st.none(), st.text(min_size=1, max_size=8000)),
)
def test_the_prompt_never_exceeds_the_budget(
    llm: BaseChatModel,
    emulator: BedrockEmulator,
    cls: type[BaseOnboardingAgent],
    messages: list[StoredMessage],
    current: str,
    budget: int,
    summary: str | None,
) -> None:
    """For any history, summary and message: either the prompt fits the budget, whole messages
    only and in order, and Bedrock's rules accept it (tool calls included), or the message is
    refused with a clear error because the instructions and the message alone do not fit."""
    history = OnboardingAgentOrchestrator._format_history(messages)
    context = OnboardingAgentContext(user_id="u", conversation_history=history, summary=summary)
    agent = cls(context, llm, PromptLimits(token_budget=budget, system_allowance=min(1000, budget // 2)))
    system_tokens = count_tokens(agent.get_system_prompt()) + MESSAGE_OVERHEAD_TOKENS
    if system_tokens + count_tokens(current) + MESSAGE_OVERHEAD_TOKENS > budget:
        with pytest.raises(OverBudgetError, match="too long"):
            agent.prompt_plan(current)
        return
    plan = agent.prompt_plan(current)
    assert plan.total_tokens <= budget
    contents = [m["content"] for m in history]
    window = [turn.content for turn in plan.window]
    assert window == contents[len(contents) - len(window) :]  # whole, newest, in order
    before = len(emulator.requests)
    llm.bind_tools(build_tools(agent.memory)).invoke(agent._build_messages(current))
    assert len(emulator.requests) == before + 1  # the emulator applies Bedrock's validation rules


def test_reset_commands_are_whole_messages_only() -> None:
    assert is_reset_command("Start over!", KEYWORDS)
    assert is_reset_command("  RESET ", KEYWORDS)
    assert not is_reset_command("I don't want to start over", KEYWORDS)
    assert not is_reset_command("!!!", KEYWORDS)


def _ids(messages: Sequence[StoredMessage]) -> list[str]:
    return [m.message_id for m in messages]
