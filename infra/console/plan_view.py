"""What the model saw for a turn, part by part, from what the library itself computed.

Everything here comes from the turn's own objects: the loaded `TurnContext`, the orchestrator's
`PreparedTurn` and the agent's `PromptPlan` (the same ones `infra.inspect_prompt` prints), split
with the library's own results (the plan's fitted sections, `memory.window`,
`llm.summarizer.transcript_lines`); nothing is counted a second way.
"""

import json
from collections.abc import Callable, Sequence

from infra.console.schemas import LeftOut, PlanView, SectionView, ToolCallView, WindowMessage
from infra.inspect_prompt import redact_system_prompt
from onboarding.agents.base import PromptPlan
from onboarding.llm.sections import PromptSection
from onboarding.memory.tokens import count_tokens
from onboarding.memory.transcript import transcript_lines
from onboarding.memory.window import carried_over, message_tokens, unsummarized, window_candidates
from onboarding.model.immutable import thaw
from onboarding.model.messages import Message
from onboarding.turn.orchestrator import PreparedTurn

Show = Callable[[str], str]


def redacted(text: str) -> str:
    return f"[redacted: {len(text)} characters]"


def shown(text: str) -> str:
    return text


class PromptSplitError(ValueError):
    """The system prompt is not the join of its sections: the library and the console disagree."""


def split_system_prompt(prepared: PreparedTurn, plan: PromptPlan) -> tuple[tuple[PromptSection, ...], int]:
    """The sections of `plan.system`, and how many of the summary's oldest lines the allowance cut.

    The agent fitted its prompt to the allowance (llm/prompt_fitting.py) and the plan keeps the
    sections it joined; they are checked to make the plan's prompt, byte for byte.
    """
    sections = plan.system_sections
    if "\n\n".join(section.text for section in sections) != plan.system:
        raise PromptSplitError("the system prompt is not the join of its sections")
    return sections, plan.system_left_out.get("summary", 0)


def _recap_count(prepared: PreparedTurn) -> int:
    """How many lines of the earlier conversation (not folded yet) the orchestrator put after the summary."""
    loaded = prepared.loaded
    through = loaded.summary.through_message_id if loaded.summary else None
    return len(transcript_lines(carried_over(loaded.messages, prepared.conversation_start, through)))


def _split_recap(section: PromptSection, recap: int) -> list[tuple[str, str, str]]:
    """The summary section as the stored summary's lines and the recap's (the allowance cuts the
    oldest lines first, so the recap, newest, is the last to go)."""
    header, _, body = section.text.partition("\n")
    lines = body.split("\n")
    in_recap = min(recap, len(lines))
    parts = []
    if len(lines) > in_recap:
        parts.append(("summary", "Summary", "\n".join([header, *lines[: len(lines) - in_recap]])))
    if in_recap:
        title = "Recap of the earlier conversation (not folded into the summary yet)"
        parts.append(("recap", title, "\n".join(lines[len(lines) - in_recap :])))
    return parts


def _section_views(sections: Sequence[PromptSection], recap: int, personal: bool) -> list[SectionView]:
    views: list[SectionView] = []
    for section in sections:
        parts = [(section.kind, section.title, section.text)]
        if section.kind == "summary":
            parts = _split_recap(section, recap)
        for kind, title, text in parts:
            if personal or kind in ("instructions", "left_out"):
                visible = text
            elif kind == "recap":
                visible = "\n".join(redacted(line) for line in text.split("\n"))
            else:
                visible = redact_system_prompt(text)
            views.append(SectionView(kind=kind, title=title, text=visible, tokens=count_tokens(text)))
    return views


def _message_view(message: Message, stored: Message, show: Show) -> WindowMessage:
    calls = [
        ToolCallView(name=call.name, args=show(json.dumps(thaw(call.args), ensure_ascii=False)))
        for call in message.tool_calls
    ]
    return WindowMessage(
        message_id=stored.message_id,
        role=message.role,
        text=show(message.content) if message.content else "",
        tool_calls=calls,
        tokens=message_tokens(message),
    )


def _window_of_loaded(prepared: PreparedTurn, plan: PromptPlan) -> list[Message]:
    """The loaded messages the window holds. The window is the newest candidates that fit, in order
    (`memory.window.fit_window`), so it is the candidates' tail; checked message by message."""
    loaded = prepared.loaded
    through = loaded.summary.through_message_id if loaded.summary else None
    candidates = window_candidates(loaded.messages, prepared.conversation_start, through)
    tail = candidates[len(candidates) - len(plan.window) :] if plan.window else []
    if [(m.role, m.content) for m in tail] != [(m.role, m.content) for m in plan.window]:
        raise PromptSplitError("the window is not the newest of the loaded messages")
    return tail


def _left_out(prepared: PreparedTurn, in_window: set[str], show: Show) -> list[LeftOut]:
    """Every loaded message not in the window, with the reason the library left it out."""
    loaded, start = prepared.loaded, prepared.conversation_start
    through = loaded.summary.through_message_id if loaded.summary else None
    first_unsummarized = unsummarized(loaded.messages, through)
    limits = prepared.agent.limits
    out: list[LeftOut] = []
    for index, message in enumerate(loaded.messages):
        if message.message_id in in_window:
            continue
        if index < first_unsummarized:
            reason, detail = "folded_into_summary", f"the summary covers it (through {through})"
        elif index < start:
            reason, detail = "before_conversation_start", "an earlier conversation; its lines ride in the recap"
        else:
            reason = "over_budget"
            detail = (
                f"the window holds the newest messages within {limits.window_messages} messages and the "
                "tokens the budget leaves, starting with a user message"
            )
        out.append(
            LeftOut(
                message_id=message.message_id,
                role=message.role,
                text=show(message.content) if message.content else "",
                reason=reason,
                detail=detail,
            )
        )
    return out


def plan_view(prepared: PreparedTurn, plan: PromptPlan, personal: bool) -> PlanView:
    show: Show = shown if personal else redacted
    sections, dropped = split_system_prompt(prepared, plan)
    stored = _window_of_loaded(prepared, plan)
    limits = prepared.agent.limits
    return PlanView(
        step=prepared.agent.agent_type.value,
        budget=plan.budget,
        total_tokens=plan.total_tokens,
        system_tokens=plan.system_tokens,
        window_tokens=plan.window_tokens,
        current_tokens=plan.current_tokens,
        system_allowance=limits.system_allowance,
        window_max_messages=limits.window_messages,
        window_available_tokens=plan.budget - plan.system_tokens - plan.current_tokens,
        system=plan.system if personal else redact_system_prompt(plan.system),
        sections=_section_views(sections, _recap_count(prepared), personal),
        summary_lines_dropped=dropped,
        window=[_message_view(message, kept, show) for message, kept in zip(plan.window, stored, strict=True)],
        current=show(plan.current),
        left_out=_left_out(prepared, {m.message_id for m in stored}, show),
        left_out_by_budget=plan.left_out,
        loaded_messages=len(prepared.loaded.messages),
        conversation_start=prepared.conversation_start,
    )
