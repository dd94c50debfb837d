"""A user with a rich memory is never locked out. The system prompt is fitted to its
allowance deterministically: our instructions and the current step's answers first, then the other
answers, the summary and the profile in turns; what gave way (the oldest facts and answers, the
summary's oldest lines) is named in one line with the tools that read it.

The repro of the issue: nine turns in Russian at the old caps (300 characters an answer or fact, 20
facts, 10 earlier values an answer) made a system prompt of about 13,000 tokens, and from then on
every message, "Привет" too, was stored and refused with 413."""

from datetime import UTC, datetime, timedelta
from itertools import product
from typing import Any

import httpx
import pytest

from functions.api.mobile_api.routes import create_app
from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.account import AccountService
from onboarding.agents import AGENT_CLASSES
from onboarding.config import Limits, Settings
from onboarding.config.settings import PROMPT_INSTRUCTIONS_TOKENS, kept_prompt_tokens
from onboarding.context import OnboardingAgentContext
from onboarding.llm.prompt import PromptFacts, fit_system_prompt
from onboarding.llm.tools import build_tools
from onboarding.llm.wording import LEFT_OUT_TITLE, STEP_PROMPTS
from onboarding.llm.working_copy import WorkingCopy
from onboarding.memory.tokens import count_tokens
from onboarding.model.answers import Answer, PreviousValue
from onboarding.model.history import ConversationSummary
from onboarding.model.profile import PROFILE_FIELDS, UserProfile
from onboarding.model.state import ONBOARDING_ORDER, OnboardingAgentType, OnboardingState
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService
from tests.support.seed import save_profile, save_state
from tests.unit.conftest import TABLE
from tests.unit.test_api import identity

pytestmark = pytest.mark.unit

START = datetime(2026, 3, 1, tzinfo=UTC)
RUSSIAN = "Я тренируюсь три раза в неделю, бегаю по утрам и хожу в бассейн по выходным. "
CURRENT = OnboardingAgentType.DIET_PLANNING  # three steps done, the fourth half answered


def russian(chars: int, tag: str) -> str:
    return (f"{tag}: " + RUSSIAN * (chars // len(RUSSIAN) + 1))[:chars]


def rich_memory(chars: int = 300, facts: int = 20, earlier: int = 10) -> tuple[OnboardingState, UserProfile]:
    """Every answer of the first four steps at `chars` characters, each corrected `earlier` times,
    told a day apart (the oldest first); a profile with every field and `facts` facts at `chars`."""
    context: dict[str, Any] = {}
    day = 0
    for step in ONBOARDING_ORDER[:4]:
        answers: dict[str, Any] = {}
        for field in STEP_PROMPTS[step].fields:
            day += 1
            previous = tuple(
                PreviousValue(russian(chars, f"{field.key} {n}"), f"m{day}-{n}", START + timedelta(days=day))
                for n in range(earlier)
            )
            answers[field.key] = Answer(
                russian(chars, field.key), f"m{day}", START + timedelta(days=day, hours=1), previous
            ).stored()
        if step != CURRENT:
            answers["completed_at"] = (START + timedelta(days=day)).isoformat()
        context[step.value] = answers
    state = OnboardingState(current_agent=CURRENT, agent_context=context)
    profile = UserProfile(
        **{name: russian(chars, name) for name in PROFILE_FIELDS},
        other_facts=tuple(russian(chars, f"факт {n}") for n in range(facts)),
    )
    return state, profile


def long_summary(tokens: int = 800) -> str:
    lines: list[str] = []
    n = 0
    while count_tokens("\n".join(lines)) < tokens:
        lines.append(f"- строка {n}: клиент рассказал о своих тренировках и питании")
        n += 1
    return "\n".join(lines[:-1])


@pytest.fixture
async def api(service: TurnService, account: AccountService) -> Any:
    transport = httpx.ASGITransport(app=create_app(service, account))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        yield http


async def test_a_user_with_a_rich_russian_memory_is_answered_not_refused(
    api: httpx.AsyncClient, store: Repositories, dynamodb: Any, emulator: BedrockEmulator, settings: Settings
) -> None:
    """The issue's repro: a memory saved at the old caps (what the table holds today). "Привет" is
    answered, and the system prompt sent is within its allowance."""
    state, profile = rich_memory()
    save_state(dynamodb, TABLE, "ru", state)
    save_profile(dynamodb, TABLE, "ru", profile)
    store.writes.save_summary("ru", ConversationSummary(long_summary(), "0000000000001-000000000000"))
    response = await api.post("/chat", json={"message": "Привет"}, headers=identity("ru"))
    assert response.status_code == 200, response.text
    system = emulator.requests[-1].system_text
    assert count_tokens(system) <= settings.system_prompt_allowance
    for field in STEP_PROMPTS[CURRENT].fields:  # the current step's answers are all shown
        assert f"- {CURRENT.value}.{field.key}: {russian(300, field.key)}" in system
    note = next(line for line in system.splitlines() if line.startswith(LEFT_OUT_TITLE))
    assert "answer_history" in note
    assert "recall_facts" in note


def test_what_gives_way_first_is_the_oldest() -> None:
    """The newest facts and the most recently told answers stay; the oldest go; the summary keeps
    its newest lines, without a gap; each kind gets a share; the same memory gives the same prompt."""
    state, profile = rich_memory(chars=200)
    facts = PromptFacts(profile_lines=profile.render_lines(), summary=long_summary(2_000))
    fitted = fit_system_prompt(CURRENT, state.agent_context, facts, 5_000)
    assert fitted == fit_system_prompt(CURRENT, state.agent_context, facts, 5_000)
    assert count_tokens(fitted.text) <= 5_000
    assert set(fitted.left_out) == {"collected_answers", "profile", "summary"}
    shown_facts = [n for n in range(20) if russian(200, f"факт {n}") in fitted.text]
    assert shown_facts == list(range(20 - len(shown_facts), 20))  # the newest, as a block
    told = [
        (step.value, field.key) for step in ONBOARDING_ORDER[:3] for field in STEP_PROMPTS[step].fields
    ]  # oldest told first
    shown = [f"- {step}.{key}: " in fitted.text for step, key in told]
    assert shown == sorted(shown)  # a run of left-out ones, then the newest shown
    summary = long_summary(2_000).splitlines()
    kept = [line for line in summary if line in fitted.text.splitlines()]
    assert kept == summary[len(summary) - len(kept) :]
    assert kept  # no kind crowded out
    assert any(shown)
    assert russian(200, "goals") in fitted.text


def test_everything_shows_when_it_fits() -> None:
    state, profile = rich_memory(chars=20, facts=2, earlier=1)
    facts = PromptFacts(profile_lines=profile.render_lines(), summary="- a line")
    fitted = fit_system_prompt(CURRENT, state.agent_context, facts, 5_000)
    assert fitted.left_out == {}
    assert fitted == fit_system_prompt(CURRENT, state.agent_context, facts, None)
    assert LEFT_OUT_TITLE not in fitted.text


@pytest.mark.parametrize("step", list(OnboardingAgentType))
def test_our_own_text_stays_within_its_reserve_in_every_mode(step: OnboardingAgentType) -> None:
    """PROMPT_INSTRUCTIONS_TOKENS holds what the prompt shows besides the user's values, in every
    step and mode: the instructions, the memory sections' headers (each left empty by the fitting)
    and the line that names what gave way."""
    most = 0
    for complete, waiting, returning, unavailable, single in product([False, True], repeat=5):
        facts = PromptFacts(
            profile_lines=["- Also: " + "x" * 4_000],
            summary="- " + "y" * 4_000,
            waiting_for=STEP_PROMPTS[step].fields[-1].key if waiting else None,
            waiting_attempts=9,
            skipped=(),
            onboarding_complete=complete,
            memory_unavailable=unavailable,
            single_prompt=single,
            returning_since=START if returning else None,
        )
        context = {"goal_setting": {"motivation": "z" * 4_000}}  # another step's: it gives way
        fitted = fit_system_prompt(step, context, facts, PROMPT_INSTRUCTIONS_TOKENS)
        assert set(fitted.left_out) == {"collected_answers", "profile", "summary"}
        most = max(most, count_tokens(fitted.text))
    assert most <= PROMPT_INSTRUCTIONS_TOKENS
    print(f"{step.value}: our own text at most {most} of {PROMPT_INSTRUCTIONS_TOKENS} tokens")


def test_the_settings_refuse_an_allowance_that_cannot_hold_the_current_step() -> None:
    assert kept_prompt_tokens(200) <= Limits().system_prompt_allowance
    Limits(system_prompt_allowance=kept_prompt_tokens(100), profile_value_chars=100)
    with pytest.raises(ValueError, match="SYSTEM_PROMPT_ALLOWANCE must hold"):
        Limits(system_prompt_allowance=kept_prompt_tokens(100) - 1, profile_value_chars=100)


def test_the_current_step_at_its_caps_fits_the_smallest_allowance_with_the_name() -> None:
    """The worst the caps allow: every value of the current step and the name at PROFILE_VALUE_CHARS
    characters outside the BMP (3 estimated tokens each), on an allowance exactly as large as the
    settings require; a returning client with a field waited for."""
    chars = 50
    limits = Limits(system_prompt_allowance=kept_prompt_tokens(chars), profile_value_chars=chars)
    emoji = "🏋" * chars
    step = OnboardingAgentType.WORKOUT_PLANNING
    context = {
        step.value: {
            f.key: Answer(emoji, "m", START, (PreviousValue("x"),)).stored() for f in STEP_PROMPTS[step].fields
        }
    }
    profile = UserProfile(name=emoji, preferred_name=emoji, other_facts=(emoji,) * 20)
    agent_context = OnboardingAgentContext(
        user_id="u", agent_context=context, profile=profile, summary="- s" * 500, returning_since=START
    )
    agent = AGENT_CLASSES[step](agent_context, llm=None, limits=limits)  # type: ignore[arg-type]
    fitted = agent.fitted_system_prompt()
    assert count_tokens(fitted.text) <= limits.system_prompt_allowance
    # The answers, the name in "Address as" and in the greeting (and in the profile, if it fitted).
    assert fitted.text.count(emoji) >= len(STEP_PROMPTS[step].fields) + 2


def test_recall_facts_reads_the_facts_the_prompt_had_no_room_for() -> None:
    state, profile = rich_memory(chars=200)
    working = WorkingCopy(CURRENT, state, profile, Limits())
    assert "recall_facts" in {tool.name for tool in build_tools(working)}
    fitted = fit_system_prompt(CURRENT, state.agent_context, PromptFacts(profile_lines=profile.render_lines()), 5_000)
    oldest = russian(200, "факт 0")
    assert oldest not in fitted.text
    assert oldest in working.recall()
    assert oldest in working.recall("факт 0")
    assert '"facts": []' in working.recall("nothing matches this")
