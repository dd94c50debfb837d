"""Owns the tools an onboarding agent calls inside a turn: their schemas, bound to the turn's
`WorkingCopy` (llm/working_copy.py), which is all they change."""

from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field, create_model

from onboarding.config import DEFAULT_LIMITS
from onboarding.llm.wording import ITEM_ABOUT, STEP_PROMPTS, TOOL_TEXTS, save_tool_name
from onboarding.llm.working_copy import WorkingCopy
from onboarding.model.profile import UserProfile
from onboarding.model.state import ONBOARDING_ORDER, OnboardingAgentType, OnboardingState

# Every answer of every step, as `step.field`: what correct_answer and answer_history name.
ITEMS: tuple[str, ...] = tuple(f"{step.value}.{f.key}" for step in ONBOARDING_ORDER for f in STEP_PROMPTS[step].fields)
_ITEM_TEXT = TOOL_TEXTS["item"].format(
    items="; ".join(
        f"{step.value}.{f.key} ({ITEM_ABOUT[f.key]})" for step in ONBOARDING_ORDER for f in STEP_PROMPTS[step].fields
    )
)


@cache  # a step's schemas never change; building pydantic models each turn cost milliseconds
def _save_schema(step: OnboardingAgentType) -> type[BaseModel]:
    fields: dict[str, Any] = {
        f.key: (str | None, Field(default=None, description=f.question)) for f in STEP_PROMPTS[step].fields
    }
    fields["step_complete"] = (
        bool,
        Field(default=False, description=TOOL_TEXTS["step_complete"]),
    )
    return create_model(f"Save{step.value.title().replace('_', '')}", **fields)


class _RememberFact(BaseModel):
    kind: Literal["name", "preferred_name", "goals", "level", "limitations", "preferences", "other"] = Field(
        description=TOOL_TEXTS["fact_kind"]
    )
    # Longer values are cut to the profile's limit when kept, not refused.
    value: str = Field(description=TOOL_TEXTS["fact_value"])


class _CorrectAnswer(BaseModel):
    item: Literal[ITEMS] = Field(description=_ITEM_TEXT)  # type: ignore[valid-type]
    value: str = Field(description=TOOL_TEXTS["new_value"])


class _AnswerHistory(BaseModel):
    item: Literal[ITEMS] = Field(description=TOOL_TEXTS["history_item"])  # type: ignore[valid-type]


class _RecallFacts(BaseModel):
    about: str | None = Field(default=None, description=TOOL_TEXTS["recall_about"])


def build_tools(working: WorkingCopy) -> list[BaseTool]:
    """The tools of `working.step`'s agent, bound to `working`. After onboarding: remember_fact,
    correct_answer, answer_history and recall_facts (answers still change; nothing new is collected).
    answer_history and recall_facts read what the system prompt may have had no room for."""
    step = working.step
    remember = StructuredTool.from_function(
        func=lambda kind, value: working.remember(kind, value),
        name="remember_fact",
        description=TOOL_TEXTS["remember_fact"],
        args_schema=_RememberFact,
    )
    answers = [
        StructuredTool.from_function(
            func=lambda item, value: working.correct(item, value),
            name="correct_answer",
            description=TOOL_TEXTS["correct_answer"],
            args_schema=_CorrectAnswer,
        ),
        StructuredTool.from_function(
            func=lambda item: working.history(item),
            name="answer_history",
            description=TOOL_TEXTS["answer_history"],
            args_schema=_AnswerHistory,
        ),
        StructuredTool.from_function(
            func=lambda about=None: working.recall(about),
            name="recall_facts",
            description=TOOL_TEXTS["recall_facts"],
            args_schema=_RecallFacts,
        ),
    ]
    if working.state.onboarding_complete:
        return [remember, *answers]
    return [
        StructuredTool.from_function(
            func=lambda step_complete=False, **answers: working.save_answers(answers, step_complete),
            name=save_tool_name(step),
            description=TOOL_TEXTS["save"].format(title=STEP_PROMPTS[step].title.lower()),
            args_schema=_save_schema(step),
        ),
        remember,
        StructuredTool.from_function(
            func=lambda field: working.ask_for(field),
            name="ask_for",
            description=TOOL_TEXTS["ask_for"],
            args_schema=_ask_schema(step),
        ),
        *answers,
    ]


@cache
def _ask_schema(step: OnboardingAgentType) -> type[BaseModel]:
    keys = tuple(f.key for f in STEP_PROMPTS[step].fields)
    return create_model("AskFor", field=(Literal[keys], Field(description=TOOL_TEXTS["ask_for_field"])))  # type: ignore[arg-type]


@cache
def tool_definitions(step: OnboardingAgentType, onboarding_complete: bool) -> tuple[dict[str, Any], ...]:
    """What the model is told about a step's tools, converted once per step (LangChain's conversion
    of a tool to its JSON schema was the largest CPU cost of a turn). `build_tools` gives the
    callables that run them for one turn."""
    state = OnboardingState(current_agent=step, completed_at=datetime.now(UTC) if onboarding_complete else None)
    return tuple(
        convert_to_openai_tool(tool) for tool in build_tools(WorkingCopy(step, state, UserProfile(), DEFAULT_LIMITS))
    )
