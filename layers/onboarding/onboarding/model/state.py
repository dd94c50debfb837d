"""Owns the onboarding steps and the per-user state that says which step the user is on."""

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from onboarding.model.immutable import FrozenMapping


class OnboardingAgentType(StrEnum):
    """The onboarding steps, in the order a user goes through them."""

    FITNESS_ASSESSMENT = "fitness_assessment"
    GOAL_SETTING = "goal_setting"
    WORKOUT_PLANNING = "workout_planning"
    DIET_PLANNING = "diet_planning"
    SCHEDULING = "scheduling"


ONBOARDING_ORDER: tuple[OnboardingAgentType, ...] = tuple(OnboardingAgentType)


def next_step(step: OnboardingAgentType) -> OnboardingAgentType | None:
    """The step after `step`, or None after the last one."""
    index = ONBOARDING_ORDER.index(step)
    return ONBOARDING_ORDER[index + 1] if index + 1 < len(ONBOARDING_ORDER) else None


class WaitingFor(BaseModel):
    """The one field the coach asked for and expects the next message to answer.

    `attempts` counts the turns that asked for it; the state survives between turns and channels
    because it is stored with the rest of the onboarding state.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: OnboardingAgentType
    field: str = Field(min_length=1, max_length=64)
    attempts: int = Field(default=1, ge=1)


class OnboardingState(BaseModel):
    """What the store keeps about a user's onboarding besides the messages."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    current_agent: OnboardingAgentType = OnboardingAgentType.FITNESS_ASSESSMENT
    agent_context: FrozenMapping = Field(default_factory=dict)
    waiting_for: WaitingFor | None = None
    # `step.field` names the client could not answer after the bounded re-asks: never asked again.
    skipped: tuple[str, ...] = ()
    completed_at: datetime | None = None

    @classmethod
    def initial(cls) -> "OnboardingState":
        """A user the store has never seen starts at the fitness assessment."""
        return cls()

    @property
    def onboarding_complete(self) -> bool:
        return self.completed_at is not None
