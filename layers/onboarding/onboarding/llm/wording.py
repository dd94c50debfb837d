"""Owns every text of ours that the model reads: the coach's persona, the rules against asking
again, each step's `field: question` lines and what each item is called; the rules of when to call
each tool and the tools' own descriptions (the save tool's items are described by their
questions); the system prompt's fixed instructions and the memory sections' headers and notes;
the check-in's instructions and the summary's. What the person reads that we write without the
model (a reset's answer, the SMS channel's answers) is onboarding/replies.py's. A test holds every
sentence of ours to these two homes.

A question is what the coach asks when its field is still unknown; the rules forbid asking again
for anything the conversation or an earlier step already answered. The system prompt is put
together from these in llm/prompt.py.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onboarding.model.answers import step_answers
from onboarding.model.state import ONBOARDING_ORDER, OnboardingAgentType


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


NO_REASK_RULES = (
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


# What each item is, in a few words: how the correction tools list the items of every step.
ITEM_ABOUT: Mapping[str, str] = {
    "fitness_level": "fitness level",
    "current_activity": "current weekly exercise",
    "limitations": "injuries, pain, health conditions",
    "age_and_body": "age, height, weight",
    "primary_goal": "main goal",
    "target": "success in numbers",
    "timeline": "target date",
    "motivation": "why the goal matters",
    "days_per_week": "training days a week",
    "session_length": "session length",
    "equipment": "training place and equipment",
    "exercise_preferences": "exercises loved or avoided",
    "dietary_pattern": "diet",
    "allergies": "food allergies, intolerances",
    "meals_per_day": "meals a day",
    "cooking": "cooking time",
    "training_days": "which weekdays to train",
    "training_time": "time of day to train",
    "timezone": "time zone",
    "check_ins": "check-in frequency and channel",
}


def next_question(
    step: OnboardingAgentType, agent_context: Mapping[str, Any], skipped: Sequence[str] = ()
) -> str | None:
    """The first question of `step` (or a later step) that is still open; None when none is."""
    for later in ONBOARDING_ORDER[ONBOARDING_ORDER.index(step) :]:
        answers = step_answers(agent_context, later.value)
        for field in STEP_PROMPTS[later].fields:
            answered = field.key in answers and answers[field.key].answered
            if not answered and f"{later.value}.{field.key}" not in skipped:
                return field.question
    return None


def save_tool_name(step: OnboardingAgentType) -> str:
    return f"save_{step.value}"


CORRECTION_RULES = (
    "- Call correct_answer when the client changes an answer they gave before (any step); the old "
    "value is kept as history.\n"
    "- Call answer_history when the client asks what they said before or how an answer changed.\n"
    "- Call recall_facts when you need what is stored about the client and the prompt says more is stored."
)


REMEMBER_RULE = (
    "- Call remember_fact whenever the client tells you something about themself worth keeping "
    "(their name, what to call them, goals, level, injuries, preferences).\n"
)


TOOL_RULES = (
    "Tools:\n"
    "- Call {save_tool} as soon as the client answers any item above, with the items they answered; "
    "set step_complete to true once every item is known.\n"
    + REMEMBER_RULE
    + "- Call ask_for with an item's name when you ask for it and need that exact item next.\n"
    + CORRECTION_RULES
)


# What the model reads about its tools (the save tool's items are described by their questions).
TOOL_TEXTS: Mapping[str, str] = {
    "save": "Save the client's answers for the {title} step.",
    "step_complete": "true once every item of this step is known",
    "remember_fact": "Remember something the client said about themself, for every later conversation.",
    "fact_kind": "what the fact is about",
    "fact_value": "the fact, in a few words",
    "ask_for": "Say which single item you just asked the client for, so their next message answers it.",
    "ask_for_field": "the item you are asking for",
    "correct_answer": (
        "Replace an answer the client gave before (any step, also after onboarding) with what they say now."
    ),
    "answer_history": "The current and earlier values of one answer, each with the day the client said it.",
    "recall_facts": (
        "Every fact kept about the client (name, goals, level, limitations, preferences, other facts), "
        "or those mentioning `about`: also those the prompt had no room for."
    ),
    "recall_about": "a few words of what you want to know (leave out for every fact)",
    "item": "the answer, as step.field (as listed under 'Already known'): {items}",
    "history_item": "the answer, as step.field (the items correct_answer lists)",
    "new_value": "the new value, in the client's words",
}


# The check-in's agent (agents/check_in.py): the system prompt starts with CHECK_IN_OPENING (the
# local coach knows a check-in by it), then the memory's sections, each under its header.
CHECK_IN_OPENING = "You are checking in with a client, unprompted, as they asked"
CHECK_IN_PROMPT = (
    CHECK_IN_OPENING + ": {cadence}. It is {local_time} for them now.\n"
    "Write one short, warm message: at most two sentences and {max_chars} characters, no greeting line "
    "of its own. Use what the memory below holds: name one concrete thing from their plan or the last "
    "conversation, and keep a limitation in mind if there is one. Never invent anything the memory "
    "does not hold. End with one question they can answer in a few words."
)
CHECK_IN_HEADERS: Mapping[str, str] = {
    "address": "Address as:",
    "plan": "Their plan:",
    "limitation": "Limitation to mind:",
    "last": "Last conversation:",
}
# The user's side of the request (Converse starts with a user message): the cue to write it.
CHECK_IN_CUE = "(It is time for the scheduled check-in. Write it now.)"
# What the coach says when a check-ins answer cannot be read as a schedule (the tools' result).
CHECK_IN_ASK_AGAIN = (
    "The {item} answer could not be read as a check-in schedule ({why}); it was not saved. Ask the "
    "client again: how often, on which days, at what time, and by app or by SMS."
)

# The summary's model call (summary.py): one call without tools, to update the running summary.
SUMMARY_SYSTEM_PROMPT = (
    "You keep a running summary of a fitness coach's conversation with a client. Update the summary "
    "with the new messages. Keep every fact the client stated (names, numbers, dates, injuries, "
    "preferences, decisions) as short '- ' lines; drop greetings and small talk. Answer with the "
    "updated summary only."
)


# The system prompt's fixed instructions (llm/prompt.py puts them in).
MEMORY_UNAVAILABLE_RULE = (
    "Your notes about this client could not be loaded for this message (a temporary fault). Do not "
    "claim to remember anything about them and do not save answers; answer briefly and helpfully."
)

# Single-prompt mode (the memory flag off, docs/rollout.md): no notes by design, so nothing to apologise for.
SINGLE_PROMPT_RULE = (
    "You have no notes about this client: answer from their message alone. Do not claim to remember "
    "anything about them and do not save answers; answer briefly and helpfully."
)

ONBOARDING_COMPLETE_STEP = (
    "Onboarding is complete: every step is done. Answer the client's questions about their plan "
    "using what is known below, and never collect onboarding answers again."
)

RETURNING_CLIENT = (
    "Returning client: this message opens a new conversation (you last talked on {day}). Greet them"
    "{by_name}, recap in one sentence what you know about them (below), then say what comes next: {next}"
)

NEXT_WHEN_COMPLETE = "keep coaching them from their saved plan."


# The memory's sections' headers and notes (llm/sections.py renders them).
KNOWN_HEADER = "Already known:"

PROFILE_HEADER = "About the client (remembered across conversations):"

SUMMARY_HEADER = "Summary of the earlier conversation:"

NOTHING_YET = "- nothing yet"

NONE_SHOWN = "- (more than the prompt has room for: see 'More is stored' below)"

LEFT_OUT_TITLE = "More is stored"

LEFT_OUT_NOTE = "More is stored about the client than is shown here: {parts}."

LEFT_OUT_ANSWERS = "answers not shown: {n} (answer_history reads any answer, with its earlier values)"

LEFT_OUT_FACTS = "facts about the client not shown: {n} (recall_facts reads them all)"

LEFT_OUT_SUMMARY = "the summary's oldest lines not shown: {n}"

RECALL_HEADER = (
    "From earlier conversations (older messages that may bear on this one, under the day each was said; "
    "use them only if they do):"
)


# A linked phone's summary, where it joins the app account's (linking.py).
SMS_SUMMARY_HEADER = "Told by text before the phone was linked:"
