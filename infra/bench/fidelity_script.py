"""The fidelity run's script: the facts a scripted client states, which steps need each, its answers
and small talk, and what is recorded of each turn (infra/bench/fidelity.py runs it)."""

import re
from dataclasses import dataclass, field

from onboarding.llm.wording import STEP_PROMPTS
from onboarding.model.state import OnboardingAgentType

USER = "fidelity-user"
PHONE = "+15551239876"
TOKEN_BUDGET = 12_000
GAP_S = 20
SEED_WINDOW = 15
COMPLETE = "complete"
STEP_BY_TITLE = {prompt.title: step for step, prompt in STEP_PROMPTS.items()}


@dataclass(frozen=True)
class Fact:
    name: str
    value: str  # what must appear in the prompt
    needed_by: frozenset[str]  # step values (and "complete") whose prompts need it

    def found_in(self, text: str) -> bool:
        """Whole words only: "Alex" is not found in "Alexandra"."""
        return re.search(rf"\b{re.escape(self.value)}\b", text, flags=re.IGNORECASE) is not None


ALL_STEPS = frozenset([*(step.value for step in OnboardingAgentType), COMPLETE])
FACTS = (
    Fact("preferred name", "Alex", ALL_STEPS),
    Fact("fitness level", "beginner", frozenset({"goal_setting", "workout_planning", COMPLETE})),
    Fact("injury", "left knee injury", frozenset({"workout_planning", "diet_planning", "scheduling", COMPLETE})),
    Fact("goal", "run a 10k", frozenset({"workout_planning", "diet_planning", "scheduling", COMPLETE})),
    Fact("training days a week (by SMS)", "3 days", frozenset({"scheduling", COMPLETE})),
    Fact("equipment (by SMS)", "resistance bands", frozenset({"scheduling", COMPLETE})),
    Fact("diet", "vegetarian", frozenset({"scheduling", COMPLETE})),
    Fact("time zone", "Europe/Lisbon", frozenset({COMPLETE})),
)
ANSWERS: dict[str, str] = {
    "fitness_level": "I'm a beginner",
    "current_activity": "I walk my dog every day",
    "limitations": "I have a left knee injury",
    "age_and_body": "34, 170 cm, 72 kg",
    "primary_goal": "I want to run a 10k",
    "target": "10k in under an hour",
    "timeline": "by June",
    "motivation": "my sister's wedding",
    "days_per_week": "3 days",
    "session_length": "45 minutes",
    "equipment": "resistance bands at home",
    "exercise_preferences": "no burpees please",
    "dietary_pattern": "vegetarian",
    "allergies": "peanuts",
    "meals_per_day": "three meals",
    "cooking": "20 minutes on weekdays",
    "training_days": "Monday, Wednesday, Friday",
    "training_time": "early morning",
    "timezone": "Europe/Lisbon",
    "check_ins": "weekly by SMS",
}
FACT_OF_ANSWER = {"limitations": "injury", "primary_goal": "goal", "days_per_week": "training days a week (by SMS)"}
QUESTIONS = {f.question: f.key for prompt in STEP_PROMPTS.values() for f in prompt.fields}
SMALL_TALK = (
    "Quick question: should I stretch before a run?",
    "Is coffee okay before training?",
    "How much water should I drink a day?",
    "What do you think about rest days?",
    "Sorry, the dog needed me. Where were we?",
    "Is walking enough cardio for now?",
    "What's a good warm-up?",
    "Do I need special shoes?",
    "How important is sleep for this?",
)
SMS_FIELDS = {"days_per_week", "session_length", "equipment", "exercise_preferences"}


@dataclass
class TurnRecord:
    number: int
    channel: str
    step: str
    text: str
    needed: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    baseline_present: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    baseline_tokens: int = 0
    model_called: bool = True
