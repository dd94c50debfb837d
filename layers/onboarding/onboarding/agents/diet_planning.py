"""Step 4: learns diet pattern, allergies, meals and cooking time."""

from onboarding.agents.base import BaseOnboardingAgent
from onboarding.model.state import OnboardingAgentType


class DietPlanningAgent(BaseOnboardingAgent):
    """Step 4: learns diet pattern, allergies, meals and cooking time."""

    agent_type = OnboardingAgentType.DIET_PLANNING
