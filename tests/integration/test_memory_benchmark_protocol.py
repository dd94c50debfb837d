"""LoCoMo's protocol on the local stack, run on a small file of our own in LoCoMo's real
layout: both speakers stored as said, the caption with its image turn, each session at its own
date, the questions asked of the memory without being written into it, whole-word answers and
traps, the unreadable evidence id reported, the baselines and the ceiling from the transcript."""

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from infra.bench.memory_benchmark.__main__ import ENVIRONMENT, GAP_S
from infra.bench.memory_benchmark.dataset import load
from infra.bench.memory_benchmark.replay import QuestionResult, Replayer
from infra.local.stack import LocalStack, temporary_environment
from onboarding.config import Settings
from onboarding.model.messages import Message
from onboarding.persistence import Repositories
from tests.support.deployed_flows import operator_table, partition
from tests.tooling.test_memory_benchmark import TINY

pytestmark = pytest.mark.integration


def _memory(stack: LocalStack, user: str) -> dict[str, Any]:
    """Everything stored for the user: messages, summary, state, profile (the audit trail is apart)."""
    return partition(stack, user)


@pytest.fixture(scope="module")
def replayed() -> Iterator[tuple[Replayer, tuple[Message, ...], dict[str, QuestionResult]]]:
    [conversation] = load(TINY)
    # What is measured is what reaches the prompt, not how fast: on a busy test machine a recall
    # past its 1 s bound (RECALL_TIMEOUT_S) would count as forgotten, as in the slow tier's full run.
    with temporary_environment({**ENVIRONMENT, "RECALL_TIMEOUT_S": "10"}), LocalStack(api_port=0) as stack:
        replayer = Replayer(stack, conversation, "LoCoMo", GAP_S, 0)
        replayer.remember()
        before = _memory(stack, replayer.user)
        results = replayer.ask_all()
        assert _memory(stack, replayer.user) == before  # no question, answer, fold or saved answer was written
        store = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env())
        stored = tuple(reversed(store.conversations.history_page(replayer.user, 50).messages))
        assert stack.decisions().refusals == []
        yield replayer, stored, {r.question: r for r in results}


def test_both_speakers_are_stored_as_said_the_caption_with_its_image(replayed: Any) -> None:
    replayer, stored, _ = replayed
    dialogs = [d for s in replayer.conversation.sessions for d in s.dialogs]
    assert [(m.role, m.content) for m in stored] == [
        ("user" if d.speaker == "Joanna" else "assistant", d.content) for d in dialogs
    ]
    assert "[shares a photo of a red bicycle leaning on a brick wall]" in stored[2].content


def test_each_session_is_stored_at_its_own_date_and_the_prompt_shows_it(replayed: Any) -> None:
    replayer, stored, _ = replayed
    assert stored[0].created_at == datetime(2022, 1, 21, 19, 31, tzinfo=UTC)
    assert stored[4].created_at == datetime(2022, 3, 23, 14, 1, tzinfo=UTC)  # the second session's first turn
    assert stored[1].created_at is not None
    assert stored[1].created_at > stored[0].created_at
    prompts = "\n".join(r.system_text for r in replayer.model.requests)
    assert "2022-03-23:\n- Client: I ran the race this morning" in prompts  # a recalled line, under its day


def test_each_question_is_asked_in_every_mode_and_scored_beside_the_baselines(replayed: Any) -> None:
    _, _, results = replayed
    turtle = results["What is the name of Nate's turtle?"]  # speaker_b's line
    bicycle = results["What colour is the bicycle Joanna bought?"]  # the caption
    for found in (turtle, bicycle):
        assert found.scores["ours"].strict
        assert found.scores["ours"].carrier != "summary"
        assert found.scores["all-history"].strict
        assert found.scores["window-15"].strict  # the transcript's own lines
    assert set(turtle.scores) == {
        "ours",
        "lexical",
        "dense",
        "recall-off",
        "full-cut",
        "bm25",
        "window-15",
        "all-history",
    }
    assert turtle.full_tokens == turtle.scores["all-history"].tokens
    # The baselines get our prompt's budget for the question, no more.
    assert all(turtle.scores[name].tokens <= turtle.scores["ours"].tokens for name in ("full-cut", "bm25", "window-15"))
    assert set(turtle.added_ms) == {"ours", "lexical", "dense"}


def test_answers_and_traps_match_whole_words_and_unreadable_ids_are_reported(replayed: Any) -> None:
    _, _, results = replayed
    races = results["How many races has Joanna run?"]  # "2": said only inside "2026"
    assert races.unparsed_evidence == ("D9:9", "session one")
    assert not races.scores["all-history"].loose
    trap = results["Did Nate run the race too?"]  # "Yes": said only inside "Yesterday"
    assert not trap.answerable
    assert not trap.scores["all-history"].false_evidence
    assert not trap.scores["ours"].false_evidence


def test_the_other_party_s_line_reaches_the_model_through_recall_only(replayed: Any) -> None:
    _, _, results = replayed
    turtle = results["What is the name of Nate's turtle?"]  # said by speaker_b, a session ago
    assert turtle.scores["ours"].carrier == "recall"
    assert turtle.scores["lexical"].strict and turtle.scores["dense"].strict  # noqa: PT018 - one fact, both modes
    assert turtle.recall_ms is not None
    assert not turtle.scores["recall-off"].strict  # the window is empty and the summary keeps the client's lines
