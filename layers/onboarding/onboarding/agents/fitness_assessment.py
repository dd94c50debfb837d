"""Step 1: learns the client's starting point (level, activity, limitations, body)."""

from onboarding.agents.base import BaseOnboardingAgent
from onboarding.model.state import OnboardingAgentType


class FitnessAssessmentAgent(BaseOnboardingAgent):
    """Step 1: learns the client's starting point (level, activity, limitations, body)."""

    agent_type = OnboardingAgentType.FITNESS_ASSESSMENT
