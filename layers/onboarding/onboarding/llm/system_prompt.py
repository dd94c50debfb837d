"""Owns the system prompt: put together, part by part, from the step's texts (llm/step_texts.py),
the tool rules (llm/tool_texts.py) and the user's memory as sections that can give way when they
do not fit (llm/prompt_memory.py; fitted by llm/prompt_fitting.py). Rebuilt from stored data on
every call (seed 003).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from onboarding.llm.prompt_fitting import FittedPrompt, PromptPart, PromptSection
from onboarding.llm.prompt_fitting import fit_system_prompt as fit_parts
from onboarding.llm.prompt_memory import answers_section, left_out_note, profile_section, summary_section
from onboarding.llm.step_texts import COACH_PERSONA, NO_REASK_RULES, STEP_PROMPTS, next_question
from onboarding.llm.tool_texts import CORRECTION_RULES, REMEMBER_RULE, TOOL_RULES, save_tool_name
from onboarding.memory.recall import RECALL_HEADER
from onboarding.model.state import OnboardingAgentType


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
