"""For all inputs: a backlog of unsummarized messages (folds that failed, or the
memory or the summary switched off for a while) is folded oldest first, a bounded amount a turn,
over as many turns as it needs. Each fold takes a prefix of the oldest unsummarized messages (none
is ever passed over), reads at most FOLD_READ_LIMIT of them, and after enough turns every message
since the conversation start is in the summary or in the window, and every earlier one is in the
summary or rides with it."""

from collections.abc import Callable
from datetime import timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from onboarding.config import Limits
from onboarding.memory.transcript import transcript_lines
from onboarding.memory.window import conversation_start
from onboarding.model.history import ConversationSummary, TurnContext
from onboarding.model.messages import Message
from onboarding.summary import fold_batch, fold_reach, read_reached_summary
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator

from .test_memory_rules import START, _at, _limits, _NoReads, _view, conversations

pytestmark = pytest.mark.property


def _idle_turn(after: Message, index: int) -> list[Message]:
    """One short exchange a minute after `after`: the turns that go on while the backlog is folded."""
    at = _at(after) + timedelta(minutes=1)
    ms = int(at.timestamp() * 1000)
    return [
        Message("user", f"ok {index}", f"{ms:013d}-{index:012x}", at),
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
    return _limits(
        window,
        history_load_limit=load,
        fold_read_limit=draw(st.integers(min_value=max(load, 8), max_value=load + 30)),
        fold_max_tokens=draw(st.sampled_from([100, 1_000, 8_000])),
        window_max_tokens=4_000,
        token_budget=200_000,
        system_prompt_allowance=20_000,
    )


@settings(max_examples=120, deadline=None)
@given(backlog=conversations(max_turns=80), limits=catch_up_limits())
def test_a_backlog_is_folded_in_order_and_caught_up(backlog: list[Message], limits: Limits) -> None:
    messages = list(backlog) or [Message("user", "hi", f"{0:013d}-{0:012x}", START)]  # stored, never folded
    through: str | None = None
    folded: list[str] = []
    now = START
    orchestrator = OnboardingAgentOrchestrator(_NoReads(), FakeListChatModel(responses=["ok"]), limits, lambda: now)
    caught_up = False  # the turn before read back to the summary and folded as every turn does
    most_turns = len(messages) + 10  # every fold of a backlog takes at least one unit: enough turns
    for turn in range(most_turns):
        messages += _idle_turn(messages[-1], turn)
        stored, now = messages[:-2], _at(messages[-2])

        covered = _covered_by(through)
        loaded = TurnContext(
            messages=tuple(stored[-limits.history_load_limit :]),
            summary=ConversationSummary("(folded)", through) if through else None,
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
        # The fold after this turn, as onboarding.turn.run runs it.
        reached = read_reached_summary(loaded.messages, limits.history_load_limit, through)
        seen = [*loaded.messages, *messages[-2:]]
        reach = fold_reach(seen, conversation_start(seen, now, limits.conversations), through, limits.fold, reached)
        assert reach is not None or reached  # a backlog is always due
        caught_up = reached
        if reach is None:
            continue
        oldest = [m for m in messages if not covered(m)][: limits.fold_read_limit]  # the fold's one read
        due = fold_batch(oldest, reach, limits.fold_max_tokens, len(oldest) < limits.fold_read_limit)
        assert due or reached, "every fold of a backlog makes progress"
        assert list(due) == oldest[: len(due)], "a fold takes the oldest unsummarized messages, in order"
        folded += [m.message_id for m in due]
        through = due[-1].message_id if due else through
    else:
        raise AssertionError(f"the backlog was not caught up in {most_turns} turns")
    # Nothing was ever passed over: every message the summary covers went through a fold.
    assert folded == [m.message_id for m in messages if through is not None and m.message_id <= through]
    assert all(a < b for a, b in pairwise(folded))
