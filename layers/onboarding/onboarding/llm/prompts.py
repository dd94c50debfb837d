"""Owns every prompt the coach uses: the one place for model-facing text (the memory's sections of
the system prompt, and what gives way when they do not fit: llm/prompt_memory.py).

Each onboarding step says what it must collect as `field: question` lines. The question is what
the coach asks when the field is still unknown; the rules forbid asking again for anything that
the conversation or an earlier step already answered.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from onboarding.llm.prompt_fitting import FittedPrompt, PromptPart, PromptSection
from onboarding.llm.prompt_fitting import fit_system_prompt as fit_parts
from onboarding.llm.prompt_memory import answers_section, left_out_note, profile_section, summary_section
from onboarding.memory.recall import RECALL_HEADER
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


@dataclass(frozen=True)
class PromptFacts:
    """What the system prompt carries besides the step: the profile, the summary, the waiting field."""

    profile_lines: Sequence[str] = ()
    address_as: str | None = None
    summary: str | None = None
    waiting_for: str | None = None
    waiting_attempts: int = 0
    skipped: Sequence[str] = ()
    onboarding_complete: bool = False
    memory_unavailable: bool = False
    single_prompt: bool = False  # memory switched off for this user (a rollout arm), not a fault
    # Set when this message opens a new conversation after earlier ones: when they last talked.
    returning_since: datetime | None = None
    # Older messages recalled for this message (onboarding.memory.recall's lines, within their allowance).
    recalled: Sequence[str] = ()


MEMORY_UNAVAILABLE_RULE = (
    "Your notes about this client could not be loaded for this message (a temporary fault). Do not "
    "claim to remember anything about them and do not save answers; answer briefly and helpfully."
)
# Single-prompt mode (the memory flag off, docs/rollout.md): no notes by design, so nothing to apologise for.
SINGLE_PROMPT_RULE = (
    "You have no notes about this client: answer from their message alone. Do not claim to remember "
    "anything about them and do not save answers; answer briefly and helpfully."
)
# Said by us, first, in a turn whose memory could not be read: the person knows why the coach may
# ask something again. Their messages are still stored, so the next turn sees this one.
MEMORY_UNAVAILABLE_NOTICE = (
    "(I can't reach my notes about you right now, so I may ask something you've already told me. "
    "Your messages are saved.) "
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


def _returning(step: OnboardingAgentType, agent_context: Mapping[str, Any], memory: "PromptFacts") -> str:
    day = memory.returning_since.date().isoformat() if memory.returning_since else "an earlier day"
    by_name = f" as {memory.address_as}" if memory.address_as else ""
    question = None if memory.onboarding_complete else next_question(step, agent_context, memory.skipped)
    upcoming = f"ask “{question}”" if question else NEXT_WHEN_COMPLETE
    return RETURNING_CLIENT.format(day=day, by_name=by_name, next=upcoming)


def system_prompt_parts(
    step: OnboardingAgentType, agent_context: Mapping[str, Any], memory: PromptFacts | None = None
) -> tuple[PromptPart, ...]:
    """The system prompt for `step`, part by part, in the order shown: our instructions whole, the
    user's memory as sections whose items can give way (llm/prompt_memory.py)."""
    memory = memory or PromptFacts()
    prompt = STEP_PROMPTS[step]
    parts: list[PromptPart] = [PromptSection("instructions", "Persona", COACH_PERSONA)]
    if memory.returning_since is not None and not memory.memory_unavailable:
        parts.append(PromptSection("instructions", "Returning client", _returning(step, agent_context, memory)))
    if memory.address_as:
        parts.append(PromptSection("profile", "Address as", f"Address the client as {memory.address_as}."))
    if memory.onboarding_complete:
        parts.append(PromptSection("instructions", "Onboarding complete", ONBOARDING_COMPLETE_STEP))
        parts.append(PromptSection("instructions", "Tools", "Tools:\n" + REMEMBER_RULE + CORRECTION_RULES))
    else:
        collect = "\n".join(f"- {field.key}: {field.question}" for field in prompt.fields)
        parts.append(PromptSection("instructions", "Current step", f"Current step: {prompt.title}. {prompt.purpose}"))
        parts.append(PromptSection("instructions", "What to collect", f"Collect, one question at a time:\n{collect}"))
        parts.append(PromptSection("instructions", "Tools", TOOL_RULES.format(save_tool=save_tool_name(step))))
    parts.append(answers_section(step, agent_context, memory.skipped, memory.onboarding_complete))
    parts.append(profile_section(memory.profile_lines))
    parts.append(summary_section(memory.summary))
    if memory.recalled:  # whole: its lines were fitted to its own allowance (memory.recall)
        parts.append(
            PromptSection("recall", "From earlier conversations", "\n".join([RECALL_HEADER, *memory.recalled]))
        )
    if memory.waiting_for and not memory.onboarding_complete:
        waiting = (
            f"Waiting for: {memory.waiting_for}\n"
            f"You asked for {memory.waiting_for} (asked {memory.waiting_attempts} time(s)). Read the client's "
            "new message as the answer to it and save it; if it is not an answer, ask once more, differently."
        )
        parts.append(PromptSection("waiting_for", "Waiting for", waiting))
    parts.append(PromptSection("instructions", "Rules", NO_REASK_RULES))
    if memory.single_prompt:
        parts.append(PromptSection("instructions", "Single prompt", SINGLE_PROMPT_RULE))
    elif memory.memory_unavailable:
        parts.append(PromptSection("instructions", "Memory unavailable", MEMORY_UNAVAILABLE_RULE))
    return tuple(parts)


def fit_system_prompt(
    step: OnboardingAgentType,
    agent_context: Mapping[str, Any],
    memory: PromptFacts | None = None,
    allowance: int | None = None,
) -> FittedPrompt:
    """The system prompt for `step` within `allowance` tokens (None: all of the memory shown),
    rebuilt from stored data on every call (seed 003); what gave way is named by one line."""
    return fit_parts(system_prompt_parts(step, agent_context, memory), allowance, left_out_note)


def system_prompt_sections(
    step: OnboardingAgentType, agent_context: Mapping[str, Any], memory: PromptFacts | None = None
) -> tuple[PromptSection, ...]:
    """The whole system prompt for `step` (nothing left out), section by section: what each part
    is and costs (the memory console); `render_system_prompt` joins them with blank lines."""
    return fit_system_prompt(step, agent_context, memory).sections


def render_system_prompt(
    step: OnboardingAgentType, agent_context: Mapping[str, Any], memory: PromptFacts | None = None
) -> str:
    """The whole system prompt for `step`, rebuilt from stored data on every call (seed 003)."""
    return fit_system_prompt(step, agent_context, memory).text


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

SUMMARY_SYSTEM_PROMPT = (
    "You keep a running summary of a fitness coach's conversation with a client. Update the summary "
    "with the new messages. Keep every fact the client stated (names, numbers, dates, injuries, "
    "preferences, decisions) as short '- ' lines; drop greetings and small talk. Answer with the "
    "updated summary only."
)


def render_summary_request(current_summary: str | None, lines: Sequence[str]) -> str:
    """The user message of a summary request: the summary so far and the messages to fold in."""
    return f"Current summary:\n{current_summary or '(none)'}\n\nNew messages:\n" + "\n".join(lines)


RESET_REPLY = (
    "Okay, we're starting a fresh conversation. I still remember what you've told me about yourself "
    "and the onboarding steps we've finished."
)
RESET_REPLY_WITH_STEP = RESET_REPLY + " Let's pick up the {title} step."
RESTART_REPLY = (
    "Okay, let's go through your onboarding again from the start. I've kept your earlier answers "
    "on file, so you can tell me what has changed."
)


def reset_reply(step: OnboardingAgentType, onboarding_complete: bool) -> str:
    """What a reset command is answered with: after a completed onboarding it starts again."""
    return (
        RESTART_REPLY if onboarding_complete else RESET_REPLY_WITH_STEP.format(title=STEP_PROMPTS[step].title.lower())
    )


ONBOARDING_COMPLETE_NOTICE = "Onboarding is complete: tell the client so, and recap their plan in one sentence."
