"""The memory benchmark's data and scoring (issue 18): the loader reads LoCoMo's own layout, the
synthetic conversations are what the issue asks for, and the scores fail when the memory does."""

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from infra.bedrock_emulator.server import RecordedRequest
from infra.memory_benchmark.dataset import DatasetError, load, to_locomo
from infra.memory_benchmark.replay import score_baselines, score_ours
from infra.memory_benchmark.synthetic import conversations

pytestmark = pytest.mark.unit

# Two samples cut from LoCoMo's locomo10.json layout (texts made up; keys and shapes as published).
LOCOMO_SAMPLE = [
    {
        "sample_id": "conv-26",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! I went to a support group yesterday."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "That's great, Caroline!"},
            ],
            "session_2_date_time": "1:14 pm on 25 May, 2023",
            "session_2": [{"speaker": "Caroline", "dia_id": "D2:1", "text": "I'm researching adoption agencies."}],
        },
        "qa": [
            {
                "question": "When did Caroline go to the support group?",
                "answer": "7 May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {"question": "What did Melanie adopt?", "adversarial_answer": "a dog", "evidence": [], "category": 5},
        ],
        "event_summary": {},
        "observation": {},
        "session_summary": {},
    }
]


def test_the_loader_reads_locomos_layout(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO_SAMPLE))
    [conversation] = load(path)
    assert conversation.client == "Caroline"
    assert [s.number for s in conversation.sessions] == [1, 2]
    assert conversation.sessions[0].date == "1:56 pm on 8 May, 2023"
    assert conversation.sessions[0].channel == "app"
    assert conversation.client_turns == 2
    temporal, adversarial = conversation.questions
    assert (temporal.category_name, temporal.answer, temporal.evidence) == ("temporal", "7 May 2023", ("D1:1",))
    assert (adversarial.category_name, adversarial.answer) == ("adversarial", None)
    assert (temporal.trap, adversarial.trap) == (None, "a dog")  # LoCoMo's adversarial_answer is the trap


def test_a_file_not_in_the_layout_is_refused_with_where(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"sample_id": "x", "conversation": {"speaker_b": "B"}}]))
    with pytest.raises(DatasetError, match="sample x: no 'conversation' with a 'speaker_a'"):
        load(path)


def test_the_synthetic_conversations_are_what_the_issue_asks_for(tmp_path: Path) -> None:
    written = conversations(10)
    path = tmp_path / "ours.json"
    path.write_text(json.dumps(to_locomo(written)))
    read = load(path)
    assert read == written  # our own data goes through the same loader
    for c in read:
        assert c.client_turns >= 300
        assert len(c.sessions) >= 10
        assert {s.channel for s in c.sessions} == {"app", "sms"}
        categories = {q.category_name for q in c.questions}
        assert {"single-hop", "multi-hop", "temporal", "open-domain", "adversarial", "knowledge-update"} <= categories
        assert all(q.evidence and all(c.dialog(e) for e in q.evidence) for q in c.questions if q.answer)
        assert any(d.text == "start over" for s in c.sessions for d in s.dialogs)
        # Each abstention question has a trap the client never says (so any trap found was not said).
        traps = [q.trap for q in c.questions if q.answer is None]
        said = " ".join(d.text for s in c.sessions for d in s.dialogs).casefold()
        assert len(traps) == 2
        assert all(t and t.casefold() not in said for t in traps)


def _request(system: str, *texts: str) -> RecordedRequest:
    messages = [{"role": "user", "content": [{"text": t}]} for t in texts]
    return RecordedRequest("m", "converse-stream", {"system": [{"text": system}], "messages": messages})


def test_scores_see_a_missing_fact_and_a_superseded_value_presented_as_current() -> None:
    [c] = conversations(1, 10, 0)
    weight_now = next(q for q in c.questions if q.question == "How much do I weigh now?")
    old = weight_now.superseded[0]
    good = _request(f"Already known:\n- fitness_assessment.age_and_body: my weight is {weight_now.answer}", "hi")
    stale = _request(f"Already known:\n- fitness_assessment.age_and_body: {old}\n\nAbout the client:\n- x", "hi")
    assert score_ours(weight_now, c, [good]).recalled
    assert score_ours(weight_now, c, [good]).carrier == "saved answers"
    assert not score_ours(weight_now, c, [good]).superseded_as_current
    assert not score_ours(weight_now, c, [stale]).recalled
    assert score_ours(weight_now, c, [stale]).superseded_as_current
    history = [HumanMessage(old), AIMessage("ok"), *[HumanMessage("filler")] * 30]
    scores, full = score_baselines(weight_now, c, history, 12_000)
    assert not scores["window-15"].recalled  # the old value was said 31 messages ago
    assert scores["full-cut"].holds_old_value
    assert full > scores["window-15"].tokens


def test_an_abstention_question_is_scored_for_false_evidence_in_ours_and_the_baselines() -> None:
    [c] = conversations(1, 10, 0)
    cat = next(q for q in c.questions if q.question == "What is the name of my cat?")
    assert cat.trap
    clean = _request("Already known:\n- fitness_assessment.fitness_level: beginner", "What is my cat's name?")
    trapped = _request(f"About the client:\n- cat: {cat.trap}", "What is my cat's name?")
    in_tool_result = [clean, _request("", f"answer_history: {cat.trap.upper()}")]
    assert not score_ours(cat, c, [clean]).false_evidence
    assert score_ours(cat, c, [trapped]).false_evidence
    assert score_ours(cat, c, in_tool_result).false_evidence  # any round the model reads counts
    quiet, _ = score_baselines(cat, c, [HumanMessage("hello"), AIMessage("hi")], 12_000)
    assert not any(s.false_evidence for s in quiet.values())
    told, _ = score_baselines(cat, c, [HumanMessage(f"my cat is {cat.trap}"), AIMessage("ok")], 12_000)
    assert all(s.false_evidence for s in told.values())
