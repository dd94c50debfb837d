"""Linking a phone never loses an answer: the merge rules, for all inputs (decision 0015)."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onboarding.linking import merge_profile, merge_state, merge_summaries
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.memory.transcript import transcript_lines
from onboarding.model.answers import Answer, PreviousValue, read_answer, same_value
from onboarding.model.history import ConversationSummary
from onboarding.model.messages import Message
from onboarding.model.profile import PROFILE_FIELDS, UserProfile
from onboarding.model.state import ONBOARDING_ORDER, OnboardingState

pytestmark = pytest.mark.property

words = st.text(alphabet="abcdefghij ", min_size=1, max_size=12).filter(str.strip)
times = st.integers(0, 10_000).map(lambda minutes: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes))
message_ids = st.text(alphabet="0123456789", min_size=4, max_size=4)


@st.composite
def answers(draw: st.DrawFn) -> Any:
    """An answer in either stored shape: a plain string (written before provenance), or a record
    with where it was said and earlier values (decision 0020)."""
    if draw(st.booleans()):
        return draw(words)
    earlier = draw(st.lists(st.tuples(words, message_ids, times), max_size=2))
    previous = tuple(PreviousValue(v, i, t, t) for v, i, t in earlier)
    return Answer(draw(words), draw(message_ids), draw(times), previous).stored()


def said(raw: Any) -> set[tuple[str, str | None]]:
    """Every value an answer holds, current and earlier, with the message it came from."""
    answer = read_answer(raw)
    assert answer is not None
    values = {(p.value, p.said_in) for p in answer.previous}
    return values | ({(answer.value, answer.said_in)} if answer.value is not None else set())


@st.composite
def states(draw: st.DrawFn) -> OnboardingState:
    context: dict[str, Any] = {}
    for step in ONBOARDING_ORDER:
        keys = [f.key for f in STEP_PROMPTS[step].fields]
        answers_ = {key: draw(answers()) for key in draw(st.lists(st.sampled_from(keys), unique=True))}
        if draw(st.booleans()):
            answers_["completed_at"] = "2026-01-01T00:00:00+00:00"
        if answers_:
            context[step.value] = answers_
    skipped = draw(
        st.lists(
            st.sampled_from([f"{s.value}.{f.key}" for s in ONBOARDING_ORDER for f in STEP_PROMPTS[s].fields]),
            unique=True,
            max_size=3,
        )
    )
    return OnboardingState(agent_context=context, skipped=tuple(skipped))


@given(kept=states(), joining=states())
def test_no_answer_is_lost_and_the_app_users_answers_win(kept: OnboardingState, joining: OnboardingState) -> None:
    merged = merge_state(kept, joining)
    for source in (kept, joining):
        for step, saved in source.agent_context.items():
            for key, raw in saved.items():
                assert key in merged.agent_context[step]
                if key != "completed_at":  # every value said, current or earlier, is still there,
                    kept_values = said(merged.agent_context[step][key])  # with where it was said
                    for value, said_in in said(raw):
                        assert (value, said_in) in kept_values or any(same_value(value, v) for v, _ in kept_values)
    for step, saved in kept.agent_context.items():
        for key, raw in saved.items():
            if key == "completed_at":
                assert merged.agent_context[step][key] == raw
                continue
            # The app user's current value wins, with where it was said.
            mine, ours = read_answer(raw), read_answer(merged.agent_context[step][key])
            assert mine is not None
            assert ours is not None
            assert (ours.value, ours.said_in, ours.said_at) == (mine.value, mine.said_in, mine.said_at)
    open_steps = [s for s in ONBOARDING_ORDER if "completed_at" not in merged.agent_context.get(s.value, {})]
    assert merged.current_agent == (open_steps[0] if open_steps else ONBOARDING_ORDER[-1])
    assert merged.completed_at == (None if open_steps else kept.completed_at or joining.completed_at)
    for name in merged.skipped:
        step, _, key = name.partition(".")
        assert key not in merged.agent_context.get(step, {})


profiles = st.builds(
    UserProfile,
    **{name: st.one_of(st.none(), words) for name in PROFILE_FIELDS},
    other_facts=st.lists(words, max_size=5, unique=True).map(tuple),
)


@given(kept=profiles, joining=profiles)
def test_the_profile_keeps_every_field_the_app_user_first(kept: UserProfile, joining: UserProfile) -> None:
    merged = merge_profile(kept, joining, max_facts=20)
    for name in PROFILE_FIELDS:
        assert getattr(merged, name) == (getattr(kept, name) or getattr(joining, name))
    assert set(merged.other_facts) == set(kept.other_facts) | set(joining.other_facts)


START = datetime(2026, 1, 1, tzinfo=UTC)


@given(
    count=st.integers(min_value=0, max_value=12),
    covered=st.tuples(st.integers(-1, 11), st.integers(-1, 11)),
    owners=st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_every_message_up_to_the_summarys_end_is_in_its_text(
    count: int, covered: tuple[int, int], owners: list[bool]
) -> None:
    """Two timelines interleaved by time; each user's summary covers its messages up to an index."""
    messages = [
        Message("user", f"said {i}", f"{i:013d}-000000000000", START + timedelta(seconds=i)) for i in range(count)
    ]
    mine = [m for m, kept in zip(messages, owners, strict=False) if kept]
    theirs = [m for m, kept in zip(messages, owners, strict=False) if not kept]

    def summary(of: list[Message], upto: int) -> ConversationSummary | None:
        inside = [m for m in of if int(m.message_id[:13]) <= upto]
        return ConversationSummary("- (folded)", inside[-1].message_id) if inside else None

    kept_summary, joining_summary = summary(mine, covered[0]), summary(theirs, covered[1])
    uncovered = [
        m
        for of, s in ((mine, kept_summary), (theirs, joining_summary))
        for m in of
        if s is None or m.message_id > s.through_message_id
    ]
    merged = merge_summaries(kept_summary, joining_summary, uncovered, max_tokens=100_000)
    if kept_summary is None and joining_summary is None:
        assert merged is None
        return
    assert merged is not None
    for message in uncovered:
        if message.message_id <= merged.through_message_id:
            assert f"- {transcript_lines([message])[0]}" in merged.text.splitlines()
