"""Owns what the model reads about its tools: the rules of when to call each, and the tools' own
descriptions (the save tool's items are described by their questions, llm/step_texts.py)."""

from collections.abc import Mapping

from onboarding.model.state import OnboardingAgentType


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
