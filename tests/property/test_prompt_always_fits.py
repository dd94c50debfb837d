"""For all inputs: for any memory within the caps (answers of any steps at up to
PROFILE_VALUE_CHARS characters with their earlier values, skipped items, a full profile, a summary
at its cap and an earlier conversation's lines riding with it) and any message the up-front check
accepts, on any settings the validation accepts: the system prompt is within its allowance, the
whole prompt within the budget, the current step's answers are all shown, and the message is
answered (Bedrock's rules, applied by the emulator, accept the request)."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models import BaseChatModel

from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.agents import AGENT_CLASSES
from onboarding.config import Limits
from onboarding.config.settings import kept_prompt_tokens
from onboarding.context import OnboardingAgentContext
from onboarding.llm.tools import build_tools
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from onboarding.memory.transcript import cap_summary
from onboarding.model.answers import Answer, PreviousValue
from onboarding.model.normalization import is_blank
from onboarding.model.profile import PROFILE_FIELDS, UserProfile
from onboarding.model.state import ONBOARDING_ORDER, OnboardingAgentType

pytestmark = pytest.mark.property

START = datetime(2026, 1, 1, tzinfo=UTC)
# Any text, Cyrillic, and characters outside the BMP (the estimator's worst: 3 tokens each).
ANY_TEXT = st.one_of(
    st.text(min_size=1),
    st.text(st.characters(min_codepoint=0x400, max_codepoint=0x4FF), min_size=1),
    st.text(st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF), min_size=1),
)


@st.composite
def valid_limits(draw: st.DrawFn) -> Limits:
    """Any settings the validation accepts around the prompt: an allowance from the least that holds
    the current step at the drawn value cap, a window, and a budget above both."""
    chars = draw(st.integers(min_value=20, max_value=300))
    allowance = kept_prompt_tokens(chars) + draw(st.integers(min_value=0, max_value=3_000))
    window = draw(st.sampled_from([100, 1_000, 4_000]))
    recall = draw(st.sampled_from([0, 500, 2_000]))  # the recalled messages' own allowance
    return Limits(
        profile_value_chars=chars,
        system_prompt_allowance=allowance,
        window_max_tokens=window,
        recall_max_tokens=recall,
        token_budget=allowance + recall + window + draw(st.integers(min_value=1, max_value=8_000)),
        profile_other_facts=draw(st.integers(min_value=0, max_value=20)),
        answer_history_values=draw(st.integers(min_value=1, max_value=10)),
        summary_max_tokens=draw(st.sampled_from([50, 800, 3_000])),
    )


def _kept(draw: st.DrawFn, limits: Limits) -> str:
    """A value as the store keeps it (WorkingCopy: spaces collapsed, cut to the cap), never blank;
    often as long as the cap allows (a drawn text repeated), where the prompt is under pressure."""
    text = draw(ANY_TEXT)
    if draw(st.booleans()):
        text = text * (limits.profile_value_chars // len(text) + 1)
    value = " ".join(text.split())[: limits.profile_value_chars]
    return value if not is_blank(value) else "x"


@st.composite
def memories(draw: st.DrawFn, limits: Limits) -> tuple[OnboardingAgentType, dict[str, Any]]:
    """A step and the context an agent gets for it, with everything within `limits`' caps."""
    step = draw(st.sampled_from(ONBOARDING_ORDER))
    agent_context: dict[str, Any] = {}
    for answered in [*draw(st.lists(st.sampled_from(ONBOARDING_ORDER), unique=True)), step]:
        fields = STEP_PROMPTS[answered].fields
        agent_context[answered.value] = {
            field.key: Answer(
                _kept(draw, limits),
                "m",
                START + timedelta(hours=draw(st.integers(0, 10_000))),
                tuple(
                    PreviousValue(_kept(draw, limits), "p", START)
                    for _ in range(draw(st.integers(0, limits.answer_history_values)))
                ),
            ).stored()
            for field in fields
            if draw(st.booleans()) or answered == step
        }
    names = [f"{s.value}.{f.key}" for s in ONBOARDING_ORDER for f in STEP_PROMPTS[s].fields]
    profile = UserProfile(
        **{name: _kept(draw, limits) for name in PROFILE_FIELDS if draw(st.booleans())},
        other_facts=tuple(_kept(draw, limits) for _ in range(draw(st.integers(0, limits.profile_other_facts)))),
    )
    summary = cap_summary("\n".join(draw(st.lists(ANY_TEXT, max_size=60))), limits.summary_max_tokens)
    carried = [f"- Client: {draw(ANY_TEXT)}" for _ in range(draw(st.integers(0, 20)))]  # an earlier conversation
    complete = draw(st.booleans()) and draw(st.booleans())
    return step, {
        "agent_context": agent_context,
        "skipped": tuple(draw(st.lists(st.sampled_from(names), unique=True, max_size=20))),
        "profile": profile,
        "summary": "\n".join([summary, *carried]) or None,
        "completed_at": START if complete else None,
        "returning_since": START if draw(st.booleans()) else None,
    }


def _within(text: str, limits: Limits) -> str:
    """`text` cut to the largest message the up-front check accepts (tokens and bytes)."""
    most = limits.prompt.max_message_tokens - MESSAGE_OVERHEAD_TOKENS
    while count_tokens(text) > most or len(text.encode("utf-8", "surrogatepass")) > limits.max_message_bytes:
        text = text[: len(text) * 3 // 4]
    return text if not is_blank(text) else "Привет"


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_for_any_memory_within_the_caps_the_prompt_fits_and_the_message_is_answered(
    data: st.DataObject, llm: BaseChatModel, emulator: BedrockEmulator
) -> None:
    limits = data.draw(valid_limits())
    step, fields = data.draw(memories(limits))
    message = _within(data.draw(st.one_of(ANY_TEXT, st.text(min_size=10_000, max_size=40_000))), limits)
    context = OnboardingAgentContext(user_id="u", **fields)
    agent = AGENT_CLASSES[step](context, llm, limits)
    plan = agent.prompt_plan(message)  # never MessageOverBudgetError: the user is never locked out
    assert count_tokens(plan.system) <= limits.system_prompt_allowance
    assert plan.total_tokens <= limits.token_budget
    if fields["completed_at"] is None:
        for key, stored in fields["agent_context"][step.value].items():
            assert f"- {step.value}.{key}: {stored['value']}" in plan.system  # kept first, always shown
    before = len(emulator.requests)
    llm.bind_tools(build_tools(agent.working)).invoke(agent._build_messages(message))
    assert len(emulator.requests) == before + 1  # accepted: the emulator applies Bedrock's rules
