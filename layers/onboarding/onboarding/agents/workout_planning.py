"""Step 3: shapes the weekly training (days, session length, equipment, preferences)."""

from onboarding.agents.base import BaseOnboardingAgent
from onboarding.model.state import OnboardingAgentType


class WorkoutPlanningAgent(BaseOnboardingAgent):
    """Step 3: shapes the weekly training (days, session length, equipment, preferences)."""

    agent_type = OnboardingAgentType.WORKOUT_PLANNING
