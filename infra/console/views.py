"""What the console's page shows, from what the library itself computed.

- What the model saw for a turn, part by part: the turn's own objects (the loaded `TurnContext`,
  the orchestrator's `PreparedTurn` and the agent's `PromptPlan`, the same ones
  `infra.inspect_prompt` prints), split with the library's own results (the plan's fitted
  sections, `memory.window`, `memory.transcript`); nothing is counted a second way.
- The user's memory now: current step, answers with where each came from, profile, summary and
  phones, read with the library's repositories (one Query for the state, profile and summary, one
  for the phones, and the newest stored messages, page by page, to find the tool call behind each
  value); and what a turn changed in it.
"""

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from infra.console.schemas import (
    Answer,
    CheckInView,
    EarlierValue,
    LeftOut,
    MemoryView,
    PlanView,
    ProfileEntry,
    Provenance,
    SectionView,
    ToolCallView,
    WaitingFor,
    WindowMessage,
)
from infra.inspect_prompt import redact_system_prompt
from onboarding.agents.base import PromptPlan
from onboarding.llm.sections import PromptSection
from onboarding.llm.wording import STEP_PROMPTS, save_tool_name
from onboarding.llm.working_copy import PROFILE_MIRROR
from onboarding.memory.tokens import count_tokens
from onboarding.memory.transcript import transcript_lines
from onboarding.memory.window import carried_over, message_tokens, unsummarized, window_candidates
from onboarding.model.answers import read_answer
from onboarding.model.immutable import thaw
from onboarding.model.messages import Message
from onboarding.model.profile import PROFILE_FIELDS
from onboarding.model.state import ONBOARDING_ORDER
from onboarding.persistence import Repositories
from onboarding.turn.orchestrator import PreparedTurn

if TYPE_CHECKING:
    from onboarding.checkins.outreach import CheckInService

Show = Callable[[str], str]
PAGE_SIZE = 100


def redacted(text: str) -> str:
    return f"[redacted: {len(text)} characters]"


def shown(text: str) -> str:
    return text


class PromptSplitError(ValueError):
    """The system prompt is not the join of its sections: the library and the console disagree."""


def split_system_prompt(prepared: PreparedTurn, plan: PromptPlan) -> tuple[tuple[PromptSection, ...], int]:
    """The sections of `plan.system`, and how many of the summary's oldest lines the allowance cut.

    The agent fitted its prompt to the allowance (llm/prompt.py) and the plan keeps the
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


def read_messages(store: Repositories, user_id: str, most: int) -> list[Message]:
    """Up to `most` of the user's stored messages, oldest first (tool calls and results included)."""
    newest_first: list[Message] = []
    cursor: str | None = None
    while len(newest_first) < most:
        page = store.conversations.history_page(user_id, min(PAGE_SIZE, most - len(newest_first)), cursor)
        newest_first.extend(page.messages)
        cursor = page.next_cursor
        if cursor is None:
            break
    return list(reversed(newest_first))


def _succeeded(result: Message | None) -> bool:
    try:
        return result is not None and "error" not in json.loads(result.content)
    except (ValueError, TypeError):
        return False


def provenances(messages: list[Message], show: Show) -> dict[tuple[str, str], Provenance]:
    """For each remembered value, the latest successful tool call that saved it: keyed
    (step, field) for answers, ("profile", field) for profile fields, ("other", fact) for facts."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    last_user: Message | None = None
    found: dict[tuple[str, str], Provenance] = {}
    saves = {save_tool_name(step): step for step in ONBOARDING_ORDER}
    for message in messages:
        if message.role == "user":
            last_user = message
        for call in message.tool_calls:
            if not _succeeded(results.get(call.call_id)):
                continue
            origin = Provenance(
                tool=call.name,
                tool_message_id=message.message_id,
                saved_at=message.created_at,
                user_message_id=last_user.message_id if last_user else None,
                user_said=show(last_user.content) if last_user else None,
            )
            args: dict[str, Any] = thaw(call.args)
            if (step := saves.get(call.name)) is not None:
                for key, value in args.items():
                    if key == "step_complete" or not isinstance(value, str) or not value.strip():
                        continue
                    found[(step.value, key)] = origin
                    if (mirrored := PROFILE_MIRROR.get((step, key))) is not None:
                        found[("profile", mirrored)] = origin
            elif call.name == "correct_answer":
                step_name, _, key = str(args.get("item", "")).partition(".")
                found[(step_name, key)] = origin
                corrected = next((s for s in ONBOARDING_ORDER if s.value == step_name), None)
                if corrected is not None and (mirrored := PROFILE_MIRROR.get((corrected, key))) is not None:
                    found[("profile", mirrored)] = origin  # the profile's copy changed with it
            elif call.name == "remember_fact":
                kind, value = str(args.get("kind", "")), str(args.get("value", ""))
                found[("other", " ".join(value.split())) if kind == "other" else ("profile", kind)] = origin
    return found


def memory_view(
    store: Repositories,
    user_id: str,
    personal: bool,
    most_messages: int = 500,
    check_ins: "CheckInService | None" = None,
) -> MemoryView:
    """What is remembered about `user_id` now (texts redacted unless `personal`), with the user's
    check-in schedule when `check_ins` reads the schedules."""
    show: Show = shown if personal else redacted
    loaded = store.conversations.load_turn(user_id, 0)
    state, profile = loaded.state, loaded.profile
    messages = read_messages(store, user_id, most_messages)
    origins = provenances(messages, show)
    answers = []
    for step in ONBOARDING_ORDER:
        saved = state.agent_context.get(step.value, {})
        for collected in STEP_PROMPTS[step].fields:
            # The stored record (value, when and where it was said, earlier values), read as the
            # library reads it: the page shows its parts, never the record's Python text.
            stored = read_answer(saved.get(collected.key))
            value = stored.value if stored is not None else None
            answers.append(
                Answer(
                    step=step.value,
                    field=collected.key,
                    question=collected.question,
                    value=None if value is None else show(value),
                    said_at=stored.said_at if stored is not None else None,
                    said_in=stored.said_in if stored is not None else None,
                    earlier=[
                        EarlierValue(value=show(p.value), said_at=p.said_at, replaced_at=p.replaced_at)
                        for p in (stored.previous if stored is not None else ())
                    ],
                    skipped=f"{step.value}.{collected.key}" in state.skipped,
                    provenance=origins.get((step.value, collected.key)) if value is not None else None,
                )
            )
    entries = [
        ProfileEntry(field=name, value=show(value), provenance=origins.get(("profile", name)))
        for name in PROFILE_FIELDS
        if (value := getattr(profile, name))
    ]
    entries += [
        ProfileEntry(field="other", value=show(f), provenance=origins.get(("other", f))) for f in profile.other_facts
    ]
    waiting = state.waiting_for
    return MemoryView(
        user_id=user_id,
        step=state.current_agent.value,
        step_title=STEP_PROMPTS[state.current_agent].title,
        completed_at=state.completed_at,
        waiting_for=WaitingFor(step=waiting.step.value, field=waiting.field, attempts=waiting.attempts)
        if waiting
        else None,
        answers=answers,
        profile=entries,
        summary=show(loaded.summary.text) if loaded.summary else None,
        summary_through=loaded.summary.through_message_id if loaded.summary else None,
        phones=[show(phone) for phone in store.phones.phones_of(user_id)],
        check_in=_check_in(check_ins, user_id),
        state_version=loaded.state_version,
        profile_version=loaded.profile_version,
        messages_read=len(messages),
    )


def _check_in(check_ins: "CheckInService | None", user_id: str) -> CheckInView | None:
    scheduled = None if check_ins is None else check_ins.scheduled(user_id)
    if check_ins is None or scheduled is None:
        return None
    return CheckInView(
        schedule=scheduled.cadence.describe(), paused=scheduled.paused, next_at=check_ins.next_time(scheduled)
    )


def _paths(view: MemoryView | None) -> dict[str, Any]:
    """The view flattened to `path: value`, the paths the page marks when they change."""
    if view is None:
        return {}
    paths: dict[str, Any] = {
        "step": view.step,
        "completedAt": view.completed_at,
        "waitingFor": view.waiting_for.model_dump() if view.waiting_for else None,
        "summary": view.summary,
        "phones": sorted(view.phones),
        "checkIn": view.check_in.model_dump() if view.check_in else None,
    }
    for answer in view.answers:
        paths[f"answers.{answer.step}.{answer.field}"] = (answer.value, answer.skipped)
    for entry in view.profile:
        key = f"profile.{entry.field}" if entry.field != "other" else f"profile.other.{entry.value}"
        paths[key] = entry.value
    return paths


def changed_paths(before: MemoryView | None, after: MemoryView | None) -> list[str]:
    old, new = _paths(before), _paths(after)
    keys: Iterable[str] = sorted(set(old) | set(new))
    return [key for key in keys if old.get(key) != new.get(key)]
