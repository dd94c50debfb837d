"""A message that shows nothing is blank: whitespace, controls and format characters (zero-width
spaces and joiners, word joiners, the BOM) only. Anything a person can read is not."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onboarding.config import DEFAULT_LIMITS
from onboarding.llm.working_copy import WorkingCopy
from onboarding.model.normalization import is_blank
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingAgentType, OnboardingState

pytestmark = pytest.mark.property

invisible = st.text(st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"]))
readable = st.characters(categories=["L", "N", "P", "S", "Co"])


@given(text=invisible)
def test_invisible_characters_alone_are_blank(text: str) -> None:
    assert is_blank(text)


@given(before=invisible, char=readable, after=invisible)
def test_one_readable_character_is_enough(before: str, char: str, after: str) -> None:
    assert not is_blank(before + char + after)


@given(value=invisible)
def test_an_invisible_answer_is_never_saved(value: str) -> None:
    step = OnboardingAgentType.FITNESS_ASSESSMENT
    working = WorkingCopy(step, OnboardingState(), UserProfile(), DEFAULT_LIMITS)
    working.save_answers({"fitness_level": value}, step_complete=False)
    working.remember("name", value)
    assert "fitness_level" not in working.state.agent_context.get(step.value, {})
    assert working.profile == UserProfile()
