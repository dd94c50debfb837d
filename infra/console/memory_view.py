"""The user's memory now: current step, answers with where each came from, profile, summary and
phones; and what a turn changed in it.

Read with the library's repositories (one Query for the state, profile and summary, one for the
phones, and the newest stored messages, page by page, to find the tool call behind each value).
"""

import json
from collections.abc import Iterable
from typing import Any

from infra.console.plan_view import Show, redacted, shown
from infra.console.schemas import Answer, EarlierValue, MemoryView, ProfileEntry, Provenance, WaitingFor
from onboarding.llm.wording import STEP_PROMPTS, save_tool_name
from onboarding.llm.working_copy import PROFILE_MIRROR
from onboarding.model.answers import read_answer
from onboarding.model.immutable import thaw
from onboarding.model.messages import Message
from onboarding.model.profile import PROFILE_FIELDS
from onboarding.model.state import ONBOARDING_ORDER
from onboarding.persistence import Repositories

PAGE_SIZE = 100


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


def memory_view(store: Repositories, user_id: str, personal: bool, most_messages: int = 500) -> MemoryView:
    """What is remembered about `user_id` now (texts redacted unless `personal`)."""
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
        state_version=loaded.state_version,
        profile_version=loaded.profile_version,
        messages_read=len(messages),
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
