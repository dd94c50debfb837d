"""The memory benchmark's data and scoring: the loader reads LoCoMo's layouts faithfully (both
speakers, captions, dates, evidence ids read tolerantly and the unreadable ones reported), evidence
is searched in what the model read but never in the question, answers match on whole words, the
baselines come from the original transcript within our budget, and the scores fail when the memory
does. The protocol's run on the local stack: the integration test."""

import argparse
import json
import math
import zipfile
from datetime import datetime
from pathlib import Path

import pytest

from infra.bench.memory_benchmark.__main__ import datasets
from infra.bench.memory_benchmark.dataset import CATEGORIES, MEM0_LABELS, DatasetError, load, parse_evidence
from infra.bench.memory_benchmark.replay import QuestionResult
from infra.bench.memory_benchmark.report import MEMORIES, figures, goal_rows, table
from infra.bench.memory_benchmark.scoring import (
    CEILING,
    Baselines,
    Score,
    evidence,
    has_words,
    message_cost,
    recorded_parts,
    score_ours,
    score_window,
    transcript,
    words,
)
from infra.bench.memory_benchmark.synthetic import conversations
from infra.local.bedrock_emulator.recorded import RecordedRequest
from infra.local.s3vectors import Bm25, IndexState
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS

pytestmark = pytest.mark.unit

# A small file of our own in LoCoMo's real layout (texts made up; keys and shapes as published).
TINY = Path(__file__).resolve().parents[1] / "support" / "data" / "locomo-tiny.json"


def _tiny() -> list[dict[str, object]]:
    return list(json.loads(TINY.read_text(encoding="utf-8")))


def test_both_speakers_are_read_and_the_caption_is_part_of_the_image_turn() -> None:
    [c] = load(TINY)
    assert (c.client, c.other, c.dialogs, c.client_turns) == ("Joanna", "Nate", 6, 3)
    assert c.has_other_party
    said = transcript(c)  # the conversation as said, both speakers, word for word
    assert len(said) == 6
    assert said[1] == "Nice one! I adopted a turtle named Shelly last week."
    image = c.dialog("D1:3")
    assert image is not None
    assert image.caption == "a photo of a red bicycle leaning on a brick wall"
    assert image.content == (
        "Look what I bought for the training rides! [shares a photo of a red bicycle leaning on a brick wall]"
    )


def test_each_session_has_its_own_date() -> None:
    [c] = load(TINY)
    assert [s.when for s in c.sessions] == [datetime(2022, 1, 21, 19, 31), datetime(2022, 3, 23, 14, 1)]


def test_evidence_ids_are_read_tolerantly_and_every_unreadable_one_is_reported() -> None:
    [c] = load(TINY)
    by_question = {q.question: q for q in c.questions}
    assert by_question["When did Joanna run the race?"].evidence == ("D2:1",)  # `D:2:1`
    before = by_question["What did Joanna do before the race?"]
    assert (before.evidence, before.unparsed) == (("D1:1", "D1:3"), ())  # `D1:1; D1:03`
    races = by_question["How many races has Joanna run?"]
    assert (races.evidence, races.unparsed) == ((), ("D9:9", "session one"))
    known = {"D8:6", "D9:17", "D11:26", "D30:5"}
    assert parse_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D8"], known) == (
        ("D8:6", "D9:17", "D11:26", "D30:5"),
        ("D8",),
    )


def test_the_zip_s_one_conversation_a_file_layout_and_a_folder_read_as_the_json_does(tmp_path: Path) -> None:
    [sample] = _tiny()
    body = dict(sample["conversation"])  # type: ignore[call-overload]
    archive = tmp_path / "locomo10.zip"
    with zipfile.ZipFile(archive, "w") as zipped:  # the repository's data/locomo10.zip: keys at the top level
        for number in (2, 1):
            zipped.writestr(f"locomo10/{number}.json", json.dumps(body | {"qa": sample["qa"]}))
    from_zip = load(archive)
    assert [c.sample_id for c in from_zip] == ["conv-1", "conv-2"]
    [from_json] = load(TINY)
    assert [c.sessions for c in from_zip] == [from_json.sessions] * 2
    assert from_zip[0].questions == from_json.questions
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(_tiny()))
    assert [c.sessions for c in load(folder)] == [from_json.sessions]


def test_conversations_is_honoured_with_data(tmp_path: Path) -> None:
    samples = _tiny() * 3
    path = tmp_path / "three.json"
    path.write_text(json.dumps(samples))
    chosen = datasets(argparse.Namespace(quick=False, conversations=2, data=path, synthetic=False))
    assert list(chosen) == ["LoCoMo"]
    assert len(chosen["LoCoMo"]) == 2
    both = datasets(argparse.Namespace(quick=False, conversations=1, data=path, synthetic=True))
    assert (len(both["LoCoMo"]), len(both["synthetic"])) == (1, 1)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([{"sample_id": "x", "conversation": {"speaker_b": "B"}}], "sample x: no conversation with a 'speaker_a'"),
        ([{"sample_id": "x", "conversation": {"speaker_a": "A", "session_1": {}}}], "session_1 is not a list"),
        ([{"sample_id": "x", "conversation": {"speaker_a": "A", "session_1": [{"text": "hi"}]}}], "a dialog needs"),
        ([{"sample_id": "x", "conversation": {"speaker_a": "A"}, "qa": [{"question": 1}]}], "question 1: a question"),
        ([7], "conversations as JSON objects"),
        ([], "no conversation in LoCoMo's layout"),
    ],
)
def test_a_file_not_in_the_layout_is_refused_with_where(tmp_path: Path, document: object, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(DatasetError, match=message):
        load(path)


def test_a_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(DatasetError, match="cannot read it as LoCoMo's JSON"):
        load(path)


def test_answers_and_traps_match_whole_words_after_locomo_s_normalisation() -> None:
    assert words("The Red, bicycle!") == ["red", "bicycle"]
    assert has_words(words("I ran 2 races"), "2")
    assert not has_words(words("How far will you ride in 2026?"), "2")
    assert not has_words(words("Yesterday I signed up"), "Yes")
    assert has_words(words("a RED bicycle"), "the red bicycle")
    assert not has_words(words("red shoes and a bicycle"), "red bicycle")  # a run of words, in order
    assert not has_words(words("anything"), "")


def test_the_ceiling_holds_everything_said_and_the_rules_show_in_its_scores() -> None:
    [c] = load(TINY)
    baselines = Baselines(transcript(c))
    by_question = {q.question: q for q in c.questions}
    scored = {
        q.question: score_window(q, c, baselines.windows(q.question, 12_000)[CEILING], q.question) for q in c.questions
    }
    assert scored["What is the name of Nate's turtle?"].strict  # speaker_b's line
    assert scored["What colour is the bicycle Joanna bought?"].strict  # the caption
    assert scored["What did Joanna do before the race?"].share == 1.0
    assert not scored["How many races has Joanna run?"].loose  # "2" is not in "2026"
    assert not scored["Did Nate run the race too?"].false_evidence  # "Yes" is not in "Yesterday"
    trap = by_question["Did Nate run the race too?"]
    assert score_window(trap, c, ["yes, he did"], trap.question).false_evidence


def test_an_answer_found_without_the_evidence_is_only_a_loose_recall() -> None:
    [c] = load(TINY)
    question = next(q for q in c.questions if q.answer == "Shelly")
    assert evidence(question, c, "Shelly says hi too.") == (False, False, 0.0, True)
    assert evidence(question, c, "nothing here") == (False, False, 0.0, False)
    before = next(q for q in c.questions if q.question == "What did Joanna do before the race?")  # two lines
    one_line = c.dialog(before.evidence[0])
    assert one_line is not None
    assert evidence(before, c, one_line.content)[:3] == (False, True, 0.5)  # some, not strict


def test_the_question_is_never_searched_for_the_evidence_or_the_answer() -> None:
    [c] = load(TINY)
    turtle = next(q for q in c.questions if q.answer == "Shelly")
    asked = "Nice one! I adopted a turtle named Shelly last week. Is the turtle Shelly?"  # quotes its evidence
    ours = score_ours(turtle, c, recorded_parts([_request("You are Coach.", asked)]), 100)
    assert (ours.strict, ours.some, ours.loose) == (False, False, False)
    assert not score_window(turtle, c, [], asked).loose


def test_the_bm25_baseline_keeps_the_best_ranked_lines_within_our_budget_in_the_order_said() -> None:
    history = ["My turtle is called Shelly.", *[f"We talked about the weather, day {n}." for n in range(40)]]
    history.append("Shelly the turtle loves lettuce.")
    kept = Baselines(history).windows("What does my turtle Shelly eat?", 60)
    assert kept["bm25"] == [history[0], history[-1]]
    assert kept["full-cut"][-1] == history[-1] and history[0] not in kept["full-cut"]  # noqa: PT018
    assert len(kept["window-15"]) < 15  # the window-only baseline, cut to the budget too
    assert kept[CEILING] == history


def test_the_bm25_baseline_ranks_as_the_index_s_full_text_search_does() -> None:
    """One BM25: the baseline keeps the lines the S3 Vectors stand-in's full-text search ranks first,
    so the baseline differs from our recall by what recall adds, not by another scorer."""
    history = [
        "I ride my bike to work.",
        "The bike has a flat tyre and the bike shop is closed.",
        "Lunch was a salad.",
        "I lent my old bike to Sam, who rides it to the lake.",
        "Sam's lakes trip: he rode there twice.",
    ]
    question = "Which lakes does Sam ride to?"  # "lakes" and "lake", "ride" and "rides", "to" a stop word
    index = IndexState(dimension=1, distance_metric="euclidean", text_keys={"said": "en"})
    index.put(
        [{"key": str(i), "data": {"float32": [1.0]}, "metadata": {"said": line}} for i, line in enumerate(history)]
    )
    searched = [key for key, _ in index.query(None, [{"metadataKey": "said", "text": question}], 10, None)]
    assert searched == ["3", "4", "0"]
    for best in range(1, len(searched) + 1):
        top = [history[int(key)] for key in sorted(searched[:best], key=int)]
        budget = sum(map(message_cost, top)) + message_cost(question) + MESSAGE_OVERHEAD_TOKENS
        assert Baselines(history).windows(question, budget)["bm25"] == top


def test_bm25_scores_as_lucene_does() -> None:
    """k1 1.2, b 0.75 and Lucene's IDF, log(1 + (N - n + 0.5) / (n + 0.5)), by hand for one line."""
    bm25 = Bm25("en")
    for key, line in {"a": "turtle turtle lettuce", "b": "weather", "c": "turtle"}.items():
        bm25.add(key, line)
    idf, length, average = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5)), 3, 5 / 3
    expected = idf * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * length / average))
    assert bm25.scores("turtles", ["a", "b"]) == {"a": pytest.approx(expected)}
    bm25.remove("c")  # a removed line leaves the statistics
    assert bm25.scores("turtle", ["c"]) == {}
    assert bm25.frequencies["turtl"] == 1


def test_categories_are_named_as_locomo_s_evaluation_code_and_mem0_s_labels_are_given() -> None:
    assert {n: CATEGORIES[n] for n in range(1, 6)} == {
        1: "multi-hop",
        2: "temporal",
        3: "open-domain",
        4: "single-hop",
        5: "adversarial",
    }
    assert MEM0_LABELS[1] == "single-hop"
    assert MEM0_LABELS[3] == "multi-hop"


def test_the_synthetic_conversations_are_what_the_benchmark_needs() -> None:
    for c in conversations(10):
        assert not c.has_other_party  # the coach's lines are the coach's to make
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
    said = c.dialog(weight_now.evidence[0])
    assert said is not None
    good = recorded_parts([_request(f"Already known:\n- fitness_assessment.age_and_body: {said.text}", "hi")])
    stale = recorded_parts(
        [_request(f"Already known:\n- fitness_assessment.age_and_body: {old}\n\nAbout the client:\n- x", "hi")]
    )
    assert score_ours(weight_now, c, good, 0).strict
    assert score_ours(weight_now, c, good, 0).carrier == "saved answers"
    assert not score_ours(weight_now, c, good, 0).superseded_as_current
    assert not score_ours(weight_now, c, stale, 0).strict
    assert score_ours(weight_now, c, stale, 0).superseded_as_current
    kept = Baselines([old, "ok", *["filler"] * 30]).windows(weight_now.question, 12_000)
    window, cut = (score_window(weight_now, c, kept[n], weight_now.question) for n in ("window-15", "full-cut"))
    assert not window.holds_old_value  # the old value was said 31 messages ago
    assert cut.holds_old_value
    assert score_window(weight_now, c, kept[CEILING], weight_now.question).tokens > window.tokens


def test_evidence_found_only_with_the_summary_s_help_is_not_claimed() -> None:
    [c] = load(TINY)
    turtle = next(q for q in c.questions if q.answer == "Shelly")
    line = "Nice one! I adopted a turtle named Shelly last week."
    in_summary = score_ours(
        turtle, c, recorded_parts([_request(f"Summary of the earlier conversation:\n{line}", "hi")]), 0
    )
    assert (in_summary.strict, in_summary.carrier) == (False, "summary")
    in_window = score_ours(
        turtle, c, recorded_parts([_request("You are Coach.", line, "What is the name of Nate's turtle?")]), 0
    )
    assert (in_window.strict, in_window.carrier) == (True, "window")


def test_an_abstention_question_is_scored_for_false_evidence_in_ours_and_the_baselines() -> None:
    [c] = conversations(1, 10, 0)
    cat = next(q for q in c.questions if q.question == "What is the name of my cat?")
    assert cat.trap
    system = "Already known:\n- fitness_assessment.fitness_level: beginner"
    clean = _request(system, "What is my cat's name?")
    trapped = _request(f"About the client:\n- cat: {cat.trap}", "What is my cat's name?")
    tool_round = _request(system, "What is my cat's name?", f"answer_history: {cat.trap.upper()}")
    assert not score_ours(cat, c, recorded_parts([clean]), 0).false_evidence
    assert score_ours(cat, c, recorded_parts([trapped]), 0).false_evidence
    assert score_ours(cat, c, recorded_parts([clean, tool_round]), 0).false_evidence  # a later round counts
    quiet = Baselines(["hello", "hi"]).windows(cat.question, 12_000)
    assert not any(score_window(cat, c, kept, cat.question).false_evidence for kept in quiet.values())
    told = Baselines([f"my cat is {cat.trap}", "ok"]).windows(cat.question, 12_000)
    assert all(score_window(cat, c, told[n], cat.question).false_evidence for n in ("full-cut", "window-15", CEILING))


def test_the_tables_lead_with_strict_recall_by_category_and_list_unparsed_ids() -> None:
    def result(category: str, strict: bool) -> QuestionResult:
        scores = {
            name: Score(strict=strict and name != "recall-off", tokens=100, some=True, share=0.5) for name in MEMORIES
        }
        return QuestionResult("LoCoMo", "tiny-1", "q", category, True, False, scores, 1000, 10.0,
                              {"ours": 5.0, "lexical": 1.0, "dense": 5.0}, ("D9:9",))  # fmt: skip

    f = figures([result("multi-hop", True), result("multi-hop", False)])
    lines = table(f)
    assert lines[0].startswith("| strict evidence recall: every evidence line in the prompt | questions | ours: hybrid")
    assert (
        "| multi-hop (1; Mem0: single-hop) | 2 | 50.0 % (1/2) | 50.0 % (1/2) | 50.0 % (1/2) | 0.0 % (0/2) |"
        in "\n".join(lines)
    )
    assert "| some evidence line in the prompt | 100.0 % (2/2) |" in "\n".join(lines)
    assert "`tiny-1: D9:9`" in "\n".join(lines)


def test_locomo_s_held_back_split_its_worst_conversation_and_the_tool_definitions_are_reported() -> None:
    def result(conversation: str, category: str, strict: bool) -> QuestionResult:
        scores = {name: Score(strict=strict, tokens=100) for name in MEMORIES}
        return QuestionResult("LoCoMo", conversation, "q", category, True, False, scores, 1000, 10.0,
                              {"ours": 5.0, "lexical": 1.0, "dense": 5.0}, tool_tokens=20)  # fmt: skip

    found = [result("conv-26", "multi-hop", True), result("conv-26", "temporal", True)]
    found += [result("conv-44", "multi-hop", True), result("conv-44", "temporal", False)]
    f = figures(found)
    assert f["by_conversation"] == {"conv-26": [2, 2], "conv-44": [1, 2]}
    assert f["splits"]["tuning"]["ours"] == 2
    assert f["splits"]["held-back"]["ours"] == 1
    assert f["ours"]["tokens_ratio"] == 0.1
    assert f["ours"]["tokens_ratio_with_tools"] == 0.12
    goals = "\n".join(goal_rows({"datasets": {"LoCoMo": f}}))
    assert "| LoCoMo: no conversation below 70 % | 50.0 % (conv-44) | **not met** |" in goals
    assert (
        "| LoCoMo: held-back split within 3 points of the tuning split | 50.0 % against 100.0 % | **not met** |"
        in goals
    )
    assert (
        "| LoCoMo: mean prompt ≤ 12 % of the conversation's tokens | 10.0 % (12.0 % with the tool definitions) | met |"
        in goals
    )
    lines = "\n".join(table(f))
    assert "| held-back (conv-44, conv-47, conv-48, conv-49, conv-50) | 50.0 % (1/2) |" in lines
