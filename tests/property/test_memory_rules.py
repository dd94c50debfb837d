"""The memory's rules, for all inputs: the budget is never exceeded, no message is cut, order is kept,
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
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.agents import AGENT_CLASSES, BaseOnboardingAgent
from onboarding.config import Limits
from onboarding.config.settings import kept_prompt_tokens
from onboarding.context import OnboardingAgentContext
from onboarding.llm.tools import build_tools
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from onboarding.memory.transcript import transcript_lines
from onboarding.memory.window import (
    carried_over,
    conversation_start,
    fit_window,
    is_reset_command,
    message_tokens,
    units_of,
    window_candidates,
)
from onboarding.model.errors import MessageOverBudgetError
from onboarding.model.history import ConversationSummary, TurnContext
from onboarding.model.messages import Message, ToolCall
from onboarding.model.normalization import is_blank
from onboarding.summary import fold_batch, fold_candidates, fold_reach, read_reached_summary
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from tests.support.views import message_texts

from .strategies import content

pytestmark = pytest.mark.property

START = datetime(2026, 1, 1, tzinfo=UTC)
KEYWORDS = ("start over", "reset")
GAP_S = 1800


@st.composite
def conversations(draw: st.DrawFn, max_turns: int = 40) -> list[Message]:
    """Stored messages as turns produce them: a user message, then a reply that may call tools
    first; some turns follow an idle gap, some user messages are reset commands."""
    messages: list[Message] = []
    now = START
    for turn in range(draw(st.integers(min_value=0, max_value=max_turns))):
        now += timedelta(seconds=draw(st.sampled_from([5, 60, 600, 3600, 86_400])))
        text = draw(st.one_of(content, st.sampled_from(["Start over!", "reset"]), st.text(min_size=1, max_size=3000)))
        if is_blank(text):
            text = "x"

        def add(role: Any, body: str, **extra: Any) -> None:
            nonlocal now
            now += timedelta(milliseconds=1)
            message_id = f"{int(now.timestamp() * 1000):013d}-{len(messages):012x}"
            messages.append(Message(role, body, message_id, now, **extra))

        add("user", text)
        if draw(st.booleans()):
            call = ToolCall(f"call-{turn}", "save_fitness_assessment", {"fitness_level": draw(content)})
            add("assistant", draw(st.sampled_from(["", "Noted."])), tool_calls=(call,))
            add("tool", json.dumps({"saved": ["fitness_level"]}), tool_call_id=call.call_id)
        add("assistant", draw(content))
    return messages


def _limits(window: int, **overrides: Any) -> Limits:
    """The settings' limits with `window` as the window's (and so the fold's) message limit."""
    values: dict[str, Any] = {
        "window_max_messages": window,
        "history_load_limit": max(window, 20),
        "conversation_gap_s": GAP_S,
        "reset_keywords": KEYWORDS,
    }
    return Limits(**(values | overrides))


def _at(message: Message) -> datetime:
    assert message.created_at is not None  # every stored message has its time
    return message.created_at


def _is_reset(text: str) -> bool:
    return is_reset_command(text, KEYWORDS)


@settings(max_examples=200)
@given(messages=conversations(), available=st.integers(min_value=0, max_value=6000), cap=st.integers(1, 30))
def test_the_window_is_the_newest_whole_units_within_the_budget(
    messages: list[Message], available: int, cap: int
) -> None:
    window = fit_window(messages, available, cap)
    assert sum(message_tokens(m) for m in window) <= available  # budget never exceeded
    assert len(window) <= cap  # every message counts, tool results too
    assert list(window) == messages[len(messages) - len(window) :]  # newest, order kept, nothing cut
    assert not window or window[0].role == "user"  # Converse would drop a leading reply
    units = units_of(messages)
    assert any(window == tuple(m for unit in units[i:] for m in unit) for i in range(len(units) + 1))


@settings(max_examples=200)
@given(messages=conversations(), gap_s=st.sampled_from([300, 1800, 7200]))
def test_a_conversation_starts_after_the_last_gap_or_reset(messages: list[Message], gap_s: int) -> None:
    now = _at(messages[-1]) + timedelta(seconds=1) if messages else START
    start = conversation_start(messages, now, _limits(15, conversation_gap_s=gap_s).conversations)
    current = messages[start:]
    for before, after in pairwise(current):
        assert (_at(after) - _at(before)).total_seconds() <= gap_s
    assert not any(m.role == "user" and _is_reset(m.content) for m in current)
    if 0 < start < len(messages):
        earlier, first = messages[start - 1 : start + 1]
        gap = (_at(first) - _at(earlier)).total_seconds() > gap_s
        previous_user = max((i for i in range(start - 1) if messages[i].role == "user"), default=-1)
        reset = previous_user >= 0 and _is_reset(messages[previous_user].content)
        assert gap or reset


@settings(max_examples=150, deadline=None)
@given(messages=conversations(max_turns=60), policy_cap=st.integers(min_value=4, max_value=20))
def test_the_summary_and_the_window_never_drop_a_message(messages: list[Message], policy_cap: int) -> None:
    """Replay the conversation turn by turn with a fold after each turn: before every turn, each
    earlier message is either folded into the summary or in the prompt's window (or belongs to an
    earlier conversation and was folded), and the window fits the limits the fold keeps to."""
    limits = _limits(policy_cap, window_max_tokens=4000)
    policy = limits.fold
    assert (policy.max_messages, policy.keep_messages, policy.keep_tokens) == (policy_cap, policy_cap // 2, 2000)
    folded: set[str] = set()
    through: str | None = None
    turn_starts = [i for i, m in enumerate(messages) if m.role == "user"] + [len(messages)]
    for turn_start, next_start in pairwise(turn_starts):
        history, now = messages[:turn_start], _at(messages[turn_start])
        start = conversation_start(history, now, limits.conversations)
        candidates = window_candidates(history, start, through)
        # The window within exactly the fold's limits: what a fold leaves always fits them.
        window = fit_window(candidates, policy.max_tokens, limits.window_max_messages)
        in_prompt = {m.message_id for m in window}
        carried = set(_ids(carried_over(history, start, through)))  # the previous conversation's tail
        for message in history:
            assert message.message_id in folded | in_prompt | carried
        assert not (in_prompt & carried)
        # The turn is stored, then folded (the fold sees the turn's own messages).
        stored = messages[:next_start]
        due = fold_candidates(stored, conversation_start(stored, now, limits.conversations), through, policy)
        if due:
            folded.update(m.message_id for m in due)
            through = due[-1].message_id


class _NoReads:
    """The reader of an orchestrator whose `prepare` is under test: prepare does no I/O."""

    def load_turn(self, user_id: str, message_limit: int, exclude_message_id: str | None = None) -> TurnContext:
        raise AssertionError("prepare must not read the store")


@st.composite
def memory_limits(draw: st.DrawFn) -> Limits:
    """Any window setting, a history load at least as large, and a prompt budget roomy enough that
    only the message limit (and the fold's own token limit) shapes the window: the largest
    current message (3,000 astral characters, 9,004 tokens) and a full system allowance leave
    more than the fold's largest token limit for the window."""
    window = draw(st.integers(min_value=2, max_value=60))
    return _limits(
        window,
        history_load_limit=draw(st.integers(min_value=window, max_value=window + 40)),
        window_max_tokens=draw(st.sampled_from([500, 4_000, 150_000])),
        token_budget=200_000,
        system_prompt_allowance=20_000,
    )


def _view(message: Any) -> tuple[Any, ...]:
    """What of a message reaches the prompt (the agent's context keeps no ids or times)."""
    return (message["role"], message["content"], message.tool_calls, message.tool_call_id)


@settings(max_examples=150, deadline=None)
@given(messages=conversations(max_turns=60), limits=memory_limits())
def test_for_any_window_setting_the_window_and_the_summary_cover_every_message(
    messages: list[Message], limits: Limits
) -> None:
    """Regression (the window/fold drift): the product's turns replayed with a fold after each, as
    `onboarding.turn.fold` runs it (fold_reach over what the turn read plus what it stored, then
    fold_batch over the oldest unsummarized messages with `limits.fold`). Before every turn, every
    message since the conversation start that the summary does not cover (`through_message_id`) is
    in the window of the agent `OnboardingAgentOrchestrator.prepare` builds from the turn's read
    (the newest `history_load_limit` messages), whole and in order; an earlier conversation's
    uncovered messages ride next to the summary. So the agent's window cap and the fold's limits
    must agree, whatever the settings say."""
    policy, rules = limits.fold, limits.conversations
    assert policy.max_messages == limits.window_max_messages <= limits.history_load_limit
    now = START
    orchestrator = OnboardingAgentOrchestrator(_NoReads(), FakeListChatModel(responses=["ok"]), limits, lambda: now)
    through: str | None = None

    def covered(message: Message) -> bool:
        return through is not None and message.message_id <= through

    turn_starts = [i for i, m in enumerate(messages) if m.role == "user"] + [len(messages)]
    for turn_start, next_start in pairwise(turn_starts):
        stored, current = messages[:turn_start], messages[turn_start]
        now = _at(current)
        summary = ConversationSummary("(what was folded)", through) if through else None
        loaded = TurnContext(messages=tuple(stored[-limits.history_load_limit :]), summary=summary)
        agent = orchestrator.prepare("user", loaded).agent
        plan = agent.prompt_plan(current.content)
        start = conversation_start(stored, now, rules)
        assert [_view(m) for m in plan.window] == [_view(m) for m in stored[start:] if not covered(m)]
        assert plan.left_out == 0
        # ... and every one of them reaches the model: Converse normalisation drops none of them.
        sent = [text for message in agent._build_messages(current.content)[1:] for text in message_texts(message)]
        assert sent == [m.content for m in plan.window if not is_blank(m.content)] + [current.content]
        summary_lines = (agent.context.summary or "").split("\n")
        for line in transcript_lines([m for m in stored[:start] if not covered(m)]):
            assert f"- {line}" in summary_lines
        # The turn is stored, then folded as `onboarding.turn.fold.fold_after_turn` folds it.
        new = messages[turn_start:next_start]
        fold_now = _at(new[-1])
        seen = [*loaded.messages, *new]
        reached = read_reached_summary(loaded.messages, limits.history_load_limit, through)
        reach = fold_reach(seen, conversation_start(seen, fold_now, rules), through, policy, reached)
        if reach is not None:
            oldest = [m for m in messages[:next_start] if not covered(m)][: limits.fold_read_limit]
            due = fold_batch(oldest, reach, limits.fold_max_tokens, len(oldest) < limits.fold_read_limit)
            if due:
                through = due[-1].message_id


def test_after_a_fold_the_window_starts_with_the_client_and_every_reply_reaches_the_model() -> None:
    """With the default limits (window 15, the fold keeps 7), 8 exchanges are over the limit: the
    fold takes the oldest messages down to 7 and, since a window must start with the client's own
    words (Converse drops leading replies), the coach's answer m9 too. Every message the summary
    does not cover reaches the model."""
    limits = Limits()
    messages = [
        Message("user" if i % 2 == 0 else "assistant", f"m{i}", f"{i:013d}-000000000000", START + timedelta(seconds=i))
        for i in range(16)
    ]
    now = START + timedelta(seconds=20)
    due = fold_candidates(messages, conversation_start(messages, now, limits.conversations), None, limits.fold)
    assert [m.content for m in due] == [f"m{i}" for i in range(10)]
    loaded = TurnContext(messages=tuple(messages), summary=ConversationSummary("(m0-m9)", due[-1].message_id))
    orchestrator = OnboardingAgentOrchestrator(_NoReads(), FakeListChatModel(responses=["ok"]), limits, lambda: now)
    agent = orchestrator.prepare("user", loaded).agent
    assert [m["content"] for m in agent.prompt_plan("next").window] == [f"m{i}" for i in range(10, 16)]
    sent = [text for message in agent._build_messages("next")[1:] for text in message_texts(message)]
    assert sent == [f"m{i}" for i in range(10, 16)] + ["next"]


def test_a_reply_after_an_idle_gap_belongs_to_the_conversation_before() -> None:
    """A conversation starts with a user message: a reply stored after the gap (a slow turn) goes
    with the old conversation (and so to the summary), never first in a window that drops it."""
    limits = _limits(15)
    at = [
        START,
        START + timedelta(seconds=1),
        START + timedelta(seconds=GAP_S + 5),
        START + timedelta(seconds=GAP_S + 6),
    ]
    roles: list[Any] = ["user", "assistant", "assistant", "user"]
    messages = [
        Message(r, f"m{i}", f"{i:013d}-000000000000", t) for i, (r, t) in enumerate(zip(roles, at, strict=True))
    ]
    assert conversation_start(messages, at[-1] + timedelta(seconds=1), limits.conversations) == 3


@settings(max_examples=100, deadline=None)
@given(
    cls=st.sampled_from(list(AGENT_CLASSES.values())),
    messages=conversations(max_turns=25),
    current=st.one_of(content, st.text(min_size=1000, max_size=30_000).filter(str.strip)),
    budget=st.integers(min_value=2_000, max_value=12_000),
    summary=st.one_of(st.none(), st.text(min_size=1, max_size=8000)),
)
def test_the_prompt_never_exceeds_the_budget(
    llm: BaseChatModel,
    emulator: BedrockEmulator,
    cls: type[BaseOnboardingAgent],
    messages: list[Message],
    current: str,
    budget: int,
    summary: str | None,
) -> None:
    """For any history, summary and message: either the prompt fits the budget, whole messages
    only and in order, and Bedrock's rules accept it (tool calls included), or the message is
    refused with a clear error because the instructions and the message alone do not fit."""
    history = OnboardingAgentOrchestrator._format_history(messages)
    context = OnboardingAgentContext(user_id="u", conversation_history=history, summary=summary)
    # The smallest allowance the settings accept (values of 20 characters); the fold's token limit
    # (not the prompt's) must leave room next to it: the smallest.
    allowance = kept_prompt_tokens(20)
    limits = Limits(
        token_budget=budget,
        system_prompt_allowance=allowance,
        profile_value_chars=20,
        window_max_tokens=100,
        recall_max_tokens=0,
    )
    agent = cls(context, llm, limits)
    system_tokens = count_tokens(agent.get_system_prompt()) + MESSAGE_OVERHEAD_TOKENS
    if system_tokens + count_tokens(current) + MESSAGE_OVERHEAD_TOKENS > budget:
        with pytest.raises(MessageOverBudgetError, match="too long"):
            agent.prompt_plan(current)
        return
    plan = agent.prompt_plan(current)
    assert plan.total_tokens <= budget
    contents = [m["content"] for m in history]
    window = [turn.content for turn in plan.window]
    assert window == contents[len(contents) - len(window) :]  # whole, newest, in order
    before = len(emulator.requests)
    llm.bind_tools(build_tools(agent.working)).invoke(agent._build_messages(current))
    assert len(emulator.requests) == before + 1  # the emulator applies Bedrock's validation rules


def test_reset_commands_are_whole_messages_only() -> None:
    assert is_reset_command("Start over!", KEYWORDS)
    assert is_reset_command("  RESET ", KEYWORDS)
    assert not is_reset_command("I don't want to start over", KEYWORDS)
    assert not is_reset_command("!!!", KEYWORDS)


def _ids(messages: Sequence[Message]) -> list[str]:
    return [m.message_id for m in messages]
