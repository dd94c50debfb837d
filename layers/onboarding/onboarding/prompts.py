"""Every prompt the coach uses, in one place.

Each onboarding step says what it must collect as `field: question` lines. The question is what
the coach asks when the field is still unknown; the rules forbid asking again for anything that
the conversation or an earlier step already answered.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onboarding.state import OnboardingAgentType


@dataclass(frozen=True)
class CollectedField:
    key: str
    question: str


@dataclass(frozen=True)
class StepPrompt:
    title: str
    purpose: str
    fields: tuple[CollectedField, ...]


COACH_PERSONA = (
    "You are Coach, a warm, concise personal fitness coach onboarding a new client by chat or SMS. "
    "Keep replies short (at most three sentences), ask one question at a time, and never give "
    "medical advice."
)

MEMORY_RULES = (
    "Rules:\n"
    "- Read the whole conversation before you answer. Never ask again for anything the client "
    "already told you, in this conversation or in an earlier step (see 'Already known').\n"
    "- Acknowledge what the client just said, then ask the next missing item.\n"
    "- When every item of this step is known, summarise it in one sentence and say what comes next."
)

STEP_PROMPTS: Mapping[OnboardingAgentType, StepPrompt] = {
    OnboardingAgentType.FITNESS_ASSESSMENT: StepPrompt(
        title="Fitness assessment",
        purpose="Find out where the client is starting from, so every later plan is safe and realistic.",
        fields=(
            CollectedField(
                "fitness_level",
                "How would you describe your current fitness level: beginner, intermediate or advanced?",
            ),
            CollectedField("current_activity", "What exercise do you do in a typical week right now?"),
            CollectedField("limitations", "Do you have any injuries, pain or health conditions I should plan around?"),
            CollectedField("age_and_body", "How old are you, and roughly what are your height and weight?"),
        ),
    ),
    OnboardingAgentType.GOAL_SETTING: StepPrompt(
        title="Goal setting",
        purpose="Agree on one primary goal that is specific, measurable and has a time frame.",
        fields=(
            CollectedField(
                "primary_goal",
                "What is the main thing you want to achieve: lose fat, build muscle, get fitter, or something else?",
            ),
            CollectedField(
                "target", "What would success look like in numbers, for example a weight, a distance or a lift?"
            ),
            CollectedField("timeline", "By when would you like to reach that?"),
            CollectedField("motivation", "Why does this goal matter to you right now?"),
        ),
    ),
    OnboardingAgentType.WORKOUT_PLANNING: StepPrompt(
        title="Workout planning",
        purpose="Shape a weekly training plan that fits the client's level, goal, equipment and time.",
        fields=(
            CollectedField("days_per_week", "How many days a week can you train?"),
            CollectedField("session_length", "How long can each session be?"),
            CollectedField("equipment", "Where will you train, and what equipment do you have?"),
            CollectedField("exercise_preferences", "Are there exercises you love or want to avoid?"),
        ),
    ),
    OnboardingAgentType.DIET_PLANNING: StepPrompt(
        title="Diet planning",
        purpose="Set up eating habits that support the goal and respect the client's diet and allergies.",
        fields=(
            CollectedField("dietary_pattern", "Do you follow a particular diet, such as vegetarian, vegan or halal?"),
            CollectedField("allergies", "Do you have any food allergies or intolerances?"),
            CollectedField("meals_per_day", "How many meals a day do you usually eat?"),
            CollectedField("cooking", "How much time do you have for cooking on a normal day?"),
        ),
    ),
    OnboardingAgentType.SCHEDULING: StepPrompt(
        title="Scheduling",
        purpose="Put the plan into the client's week and agree how and when the coach checks in.",
        fields=(
            CollectedField("training_days", "Which days of the week will you train?"),
            CollectedField("training_time", "What time of day suits you best for training?"),
            CollectedField("timezone", "Which time zone are you in?"),
            CollectedField("check_ins", "How often would you like me to check in with you, and by app or SMS?"),
        ),
    ),
}


def _render_known(agent_context: Mapping[str, Any]) -> str:
    """What earlier steps stored, as `step.field: value` lines, so it is never asked again."""
    lines: list[str] = []
    for step, collected in agent_context.items():
        if not isinstance(collected, Mapping):
            continue
        for key, value in collected.items():
            if key == "completed_at":
                continue
            lines.append(f"- {step}.{key}: {value}")
    return "\n".join(lines) if lines else "- nothing yet"


def render_system_prompt(step: OnboardingAgentType, agent_context: Mapping[str, Any]) -> str:
    """The system prompt for `step`, rebuilt from stored data on every call."""
    prompt = STEP_PROMPTS[step]
    collect = "\n".join(f"- {field.key}: {field.question}" for field in prompt.fields)
    return (
        f"{COACH_PERSONA}\n\n"
        f"Current step: {prompt.title}. {prompt.purpose}\n\n"
        f"Collect, one question at a time:\n{collect}\n\n"
        f"Already known:\n{_render_known(agent_context)}\n\n"
        f"{MEMORY_RULES}"
    )
