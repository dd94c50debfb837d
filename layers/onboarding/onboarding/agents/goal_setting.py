"""Step 2: agrees one measurable primary goal with a time frame and a reason."""

from onboarding.agents.base import BaseOnboardingAgent
from onboarding.model.state import OnboardingAgentType


class GoalSettingAgent(BaseOnboardingAgent):
    """Step 2: agrees one measurable primary goal with a time frame and a reason."""

    agent_type = OnboardingAgentType.GOAL_SETTING
