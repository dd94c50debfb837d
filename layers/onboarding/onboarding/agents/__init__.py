"""The five onboarding agents, one module each, and the map from step to agent class."""

from collections.abc import Mapping

from onboarding.agents.base import BaseOnboardingAgent
from onboarding.agents.diet_planning import DietPlanningAgent
from onboarding.agents.fitness_assessment import FitnessAssessmentAgent
from onboarding.agents.goal_setting import GoalSettingAgent
from onboarding.agents.scheduling import SchedulingAgent
from onboarding.agents.workout_planning import WorkoutPlanningAgent
from onboarding.model.state import OnboardingAgentType

AGENT_CLASSES: Mapping[OnboardingAgentType, type[BaseOnboardingAgent]] = {
    agent.agent_type: agent
    for agent in (
        FitnessAssessmentAgent,
        GoalSettingAgent,
        WorkoutPlanningAgent,
        DietPlanningAgent,
        SchedulingAgent,
    )
}

__all__ = [
    "AGENT_CLASSES",
    "BaseOnboardingAgent",
    "DietPlanningAgent",
    "FitnessAssessmentAgent",
    "GoalSettingAgent",
    "SchedulingAgent",
    "WorkoutPlanningAgent",
]
