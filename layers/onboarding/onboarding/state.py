"""Onboarding steps and the per-user state that says which step the user is on."""

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from onboarding.context import FrozenMapping


class OnboardingAgentType(StrEnum):
    """The onboarding steps, in the order a user goes through them."""

    FITNESS_ASSESSMENT = "fitness_assessment"
    GOAL_SETTING = "goal_setting"
    WORKOUT_PLANNING = "workout_planning"
    DIET_PLANNING = "diet_planning"
    SCHEDULING = "scheduling"


ONBOARDING_ORDER: tuple[OnboardingAgentType, ...] = tuple(OnboardingAgentType)


class OnboardingState(BaseModel):
    """What the store keeps about a user's onboarding besides the messages."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    current_agent: OnboardingAgentType = OnboardingAgentType.FITNESS_ASSESSMENT
    agent_context: FrozenMapping = Field(default_factory=dict)

    @classmethod
    def initial(cls) -> "OnboardingState":
        """A user the store has never seen starts at the fitness assessment."""
        return cls()
