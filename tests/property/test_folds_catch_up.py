"""For all inputs: a backlog of unsummarized messages (folds that failed, or the
memory or the summary switched off for a while) is folded oldest first, a bounded amount a turn,
over as many turns as it needs. Each fold takes a prefix of the oldest unsummarized messages (none
is ever passed over), reads at most FOLD_READ_LIMIT of them, at most once every
FOLD_BACKLOG_INTERVAL_S, and after enough turns every message since the conversation start is in
the summary or in the window, and every earlier one is in the summary or rides with it."""

from collections.abc import Callable
from datetime import timedelta
from itertools import pairwise
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from onboarding.config import Limits
from onboarding.memory.transcript import transcript_lines
from onboarding.memory.window import conversation_start
from onboarding.model.history import ConversationSummary, TurnContext
from onboarding.model.messages import Message, Role
from onboarding.summary import arrived_since, backlog_fold_due, fold_batch, fold_reach, read_reached_summary
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator

from .test_memory_rules import START, _at, _limits, _NoReads, _view, conversations

pytestmark = pytest.mark.property


def _idle_turn(after: Message, index: int, gap_s: int, text: str) -> list[Message]:
    """One exchange `gap_s` after `after`: the turns that go on while the backlog is folded."""
    at = _at(after) + timedelta(seconds=gap_s)
    ms = int(at.timestamp() * 1000)
    return [
        Message("user", f"{text} {index}", f"{ms:013d}-{index:012x}", at),
        Message("assistant", "Noted.", f"{ms + 1:013d}-{index:012x}", at + timedelta(milliseconds=1)),
    ]


def _covered_by(through: str | None) -> Callable[[Message], bool]:
    return lambda message: through is not None and message.message_id <= through


@st.composite
def catch_up_limits(draw: st.DrawFn) -> Limits:
    """Small reads and folds, so a backlog takes many turns (a read holds more than a turn adds:
    otherwise no fold could ever catch up with a conversation)."""
    window = draw(st.integers(min_value=2, max_value=20))
    load = draw(st.integers(min_value=window, max_value=window + 10))
    interval = draw(st.sampled_from([0, 45, 90]))
    # Between two folds of a backlog less than a read's worth arrives (and this turn), or the next
    # fold comes at once; a fold's read holds more than that, as the settings' do (200 and 20).
    least = max(load, 8) if interval == 0 else 2 * load + 8
    return _limits(
        window,
        history_load_limit=load,
        fold_read_limit=draw(st.integers(min_value=least, max_value=least + 30)),
        fold_backlog_interval_s=interval,
        fold_max_tokens=draw(st.sampled_from([100, 1_000, 8_000])),
        window_max_tokens=4_000,
        token_budget=200_000,
        system_prompt_allowance=20_000,
    )


@settings(max_examples=120, deadline=None)
@given(
    backlog=conversations(max_turns=80),
    limits=catch_up_limits(),
    gap_s=st.sampled_from([5, 20, 60, 120]),
    text=st.sampled_from(["ok", "long " * 400]),  # short turns, or each over a small fold's tokens
)
def test_a_backlog_is_folded_in_order_and_caught_up(
    backlog: list[Message], limits: Limits, gap_s: int, text: str
) -> None:
    _catch_up(backlog, limits, gap_s, text)


def test_a_fast_writer_s_backlog_is_caught_up_too() -> None:
    """Turns every 5 s, each over a small fold's tokens, against a 90 s interval: the folds come
    as soon as a read's worth arrived, each taking more than arrived, so the backlog still shrinks."""
    start = START.timestamp() * 1000
    backlog = [
        Message(role, "long " * 400, f"{int(start) + i:013d}-{i:012x}", START + timedelta(milliseconds=i))
        for i, role in enumerate(cast(list[Role], ["user", "assistant"] * 30))
    ]
    limits = _limits(2, history_load_limit=3, fold_read_limit=14, fold_max_tokens=100, fold_backlog_interval_s=90,
                     window_max_tokens=4_000, token_budget=200_000, system_prompt_allowance=20_000)  # fmt: skip
    _catch_up(backlog, limits, 5, "long " * 400)


def _catch_up(backlog: list[Message], limits: Limits, gap_s: int, text: str) -> None:
    messages = list(backlog) or [Message("user", "hi", f"{0:013d}-{0:012x}", START)]  # stored, never folded
    through: str | None = None
    saved_at = None  # when the summary was last stored
    folded: list[str] = []
    backlog_folds = []  # when each fold of the backlog ran, and the oldest message its turn read
    now = START
    orchestrator = OnboardingAgentOrchestrator(_NoReads(), FakeListChatModel(responses=["ok"]), limits, lambda: now)
    caught_up = False  # the turn before read back to the summary and folded as every turn does
    # Every fold of a backlog takes a unit more than arrived since the one before, and one comes at
    # least every interval, or once a read's worth arrived: enough turns.
    turns_apart = min(-(-int(limits.fold_backlog_interval_s) // gap_s), limits.history_load_limit)
    most_turns = (len(messages) + 10) * (turns_apart + 1)
    for turn in range(most_turns):
        messages += _idle_turn(messages[-1], turn, gap_s, text)
        stored, now = messages[:-2], _at(messages[-2])

        covered = _covered_by(through)
        loaded = TurnContext(
            messages=tuple(stored[-limits.history_load_limit :]),
            summary=ConversationSummary("(folded)", through, saved_at) if through else None,
        )
        if caught_up:  # the window and the summary cover everything, as they always did
            start = conversation_start(stored, now, limits.conversations)
            agent = orchestrator.prepare("u", loaded).agent
            plan = agent.prompt_plan("ok")
            assert [_view(m) for m in plan.window] == [_view(m) for m in stored[start:] if not covered(m)]
            summary_lines = (agent.context.summary or "").split("\n")
            for line in transcript_lines([m for m in stored[:start] if not covered(m)]):
                assert f"- {line}" in summary_lines
            break
        # The fold after this turn, as onboarding.turn.fold runs it.
        reached = read_reached_summary(loaded.messages, limits.history_load_limit, through)
        seen = [*loaded.messages, *messages[-2:]]
        reach = fold_reach(seen, conversation_start(seen, now, limits.conversations), through, limits.fold, reached)
        assert reach is not None or reached  # a backlog is always due
        caught_up = reached
        if reach is None or not (reached or backlog_fold_due(loaded.summary, loaded.messages, now, limits.fold)):
            continue
        if not reached:
            backlog_folds.append((now, _at(loaded.messages[0])))
        oldest = [m for m in messages if not covered(m)][: limits.fold_read_limit]  # the fold's one read
        more = arrived_since(seen, loaded.summary, messages[-2:]) + 1
        due = fold_batch(oldest, reach, limits.fold_max_tokens, len(oldest) < limits.fold_read_limit, more)
        assert due or reached, "every fold of a backlog makes progress"
        assert list(due) == oldest[: len(due)], "a fold takes the oldest unsummarized messages, in order"
        folded += [m.message_id for m in due]
        through, saved_at = (due[-1].message_id, now) if due else (through, saved_at)
    else:
        raise AssertionError(f"the backlog was not caught up in {most_turns} turns")
    # A backlog's folds (each a model call) came at most once an interval, however often turns came,
    # unless a whole read's worth had arrived since the one before.
    for (before, _), (after, oldest_read) in pairwise(backlog_folds):
        assert (after - before).total_seconds() >= limits.fold_backlog_interval_s or oldest_read > before
    # Nothing was ever passed over: every message the summary covers went through a fold.
    assert folded == [m.message_id for m in messages if through is not None and m.message_id <= through]
    assert all(a < b for a, b in pairwise(folded))
