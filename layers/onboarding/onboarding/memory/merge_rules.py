"""Owns how the memory of an SMS-only user joins the app user their phone is linked to.

Linking a phone keeps what the person told by text (decision 0015): the answers and profile
are merged, and the SMS conversation joins the app user's timeline. Pure rules, so they hold
for every input (tests/property):

- answers: the app user's value wins where both answered an item, the SMS value then kept as an
  earlier value of it (with where it was said: decision 0020); the SMS answers fill the gaps;
- the step: the first one not completed by the merged answers; onboarding is complete only when
  every step is;
- profile: the app user's fields win; the SMS fields fill the gaps; free-form facts are joined;
- summary: every message up to the merged summary's `through` is in its text (the two texts,
  then transcript lines of the messages neither text covered), every later one is in the
  timeline: the invariant the fold keeps.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from onboarding.memory.transcript import cap_summary, transcript_lines
from onboarding.model.answers import is_answered, read_answer
from onboarding.model.history import ConversationSummary
from onboarding.model.immutable import thaw
from onboarding.model.messages import Message
from onboarding.model.profile import PROFILE_FIELDS, UserProfile
from onboarding.model.state import ONBOARDING_ORDER, OnboardingState

SMS_SUMMARY_HEADER = "Told by text before the phone was linked:"


def _completed(context: Mapping[str, Any], step: str) -> bool:
    answers = context.get(step)
    return isinstance(answers, Mapping) and "completed_at" in answers


def _answered(context: Mapping[str, Any], name: str) -> bool:
    step, _, field = name.partition(".")
    return is_answered(context.get(step), field)


def _merge_answers(mine: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """One step's answers: ours win; theirs fill the gaps, or join ours as earlier values."""
    merged = {**other, **mine}
    for key in (mine.keys() & other.keys()) - {"completed_at"}:
        ours, theirs = read_answer(mine[key]), read_answer(other[key])
        if ours is not None and theirs is not None:
            joined = ours.joined_with(theirs)
            if joined != ours:
                merged[key] = joined.stored()
    return merged


def merge_state(kept: OnboardingState, joining: OnboardingState) -> OnboardingState:
    """`kept` (the app user's state) with what `joining` (the SMS user's) adds."""
    ours, theirs = thaw(kept.agent_context), thaw(joining.agent_context)
    context: dict[str, Any] = {}
    for step in dict.fromkeys([*theirs, *ours]):
        mine, other = ours.get(step), theirs.get(step)
        if isinstance(mine, dict) and isinstance(other, dict):
            context[step] = _merge_answers(mine, other)
        else:
            context[step] = mine if step in ours else other
    skipped = tuple(n for n in dict.fromkeys([*kept.skipped, *joining.skipped]) if not _answered(context, n))
    open_steps = [step for step in ONBOARDING_ORDER if not _completed(context, step.value)]
    current = open_steps[0] if open_steps else ONBOARDING_ORDER[-1]
    waiting = next((w for w in (kept.waiting_for, joining.waiting_for) if w is not None and w.step == current), None)
    completed_at = None if open_steps else (kept.completed_at or joining.completed_at)
    return OnboardingState(
        current_agent=current, agent_context=context, waiting_for=waiting, skipped=skipped, completed_at=completed_at
    )


def merge_profile(kept: UserProfile, joining: UserProfile, max_facts: int) -> UserProfile:
    fields = {name: getattr(kept, name) or getattr(joining, name) for name in PROFILE_FIELDS}
    facts = tuple(dict.fromkeys([*joining.other_facts, *kept.other_facts]))
    return UserProfile(**fields, other_facts=facts[-max_facts:] if max_facts else ())


def merge_summaries(
    kept: ConversationSummary | None,
    joining: ConversationSummary | None,
    uncovered: Sequence[Message],
    max_tokens: int,
) -> ConversationSummary | None:
    """One summary for the joined timeline. `uncovered` are the messages of both users that their
    own summary does not cover (oldest first is not required); those up to the merged `through`
    are written into the text, the rest stay in the timeline."""
    if kept is None and joining is None:
        return None
    through = max(s.through_message_id for s in (kept, joining) if s is not None)
    lines: list[str] = kept.text.splitlines() if kept else []
    if joining is not None:
        lines += [SMS_SUMMARY_HEADER, *joining.text.splitlines()]
    below = sorted((m for m in uncovered if m.message_id <= through), key=lambda m: m.message_id)
    lines += [f"- {line}" for line in transcript_lines(below)]
    return ConversationSummary(cap_summary("\n".join(lines), max_tokens), through)
