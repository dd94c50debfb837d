"""Step 5: places training in the week and agrees check-ins."""

from onboarding.agents.base import BaseOnboardingAgent
from onboarding.model.state import OnboardingAgentType


class SchedulingAgent(BaseOnboardingAgent):
    """Step 5: places training in the week and agrees check-ins."""

    agent_type = OnboardingAgentType.SCHEDULING
