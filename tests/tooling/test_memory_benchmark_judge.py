"""The memory benchmark's LLM judge (--aws): verdicts parsed robustly (an unparseable
one counts as wrong and is reported), aggregated by category, asked with the question, the gold
answer and the coach's answer; and the emulator's judge, the test double the --aws test runs on."""

from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from infra.bench.memory_benchmark.dataset import Question
from infra.bench.memory_benchmark.judge import (
    CORRECT,
    FAILED,
    UNPARSEABLE,
    WRONG,
    LlmJudge,
    accuracy,
    accuracy_rows,
    judge_request,
    judge_settings,
    parse_verdict,
)
from infra.local.bedrock_emulator.judge import is_judge_request, judge_reply
from infra.local.bedrock_emulator.judge_prompt import JUDGE_SYSTEM_PROMPT, NO_ANSWER
from onboarding.config import Settings

pytestmark = pytest.mark.unit

WEIGHT = Question("How much do I weigh now?", "72 kg", ("D5:3",), 6, ("77 kg",))
CAT = Question("What is the name of my cat?", None, (), 5, trap="Whiskers")


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ('{"label": "CORRECT"}', CORRECT),
        ('```json\n{"label":"wrong"}\n```', WRONG),
        ('The coach recalls 72 kg.\n{"label": "CORRECT"}', CORRECT),
        ("CORRECT", CORRECT),
        ("Label: WRONG (the answer gives the old weight)", WRONG),
        ("INCORRECT: it gives 77 kg", WRONG),
        ('It is CORRECT in part, but {"label": "WRONG"}', WRONG),  # the JSON label wins
        ("CORRECT or WRONG? Hard to say.", UNPARSEABLE),
        ('{"label": "CORRECT"} {"label": "WRONG"}', UNPARSEABLE),
        ("I think the answer is correct.", UNPARSEABLE),  # prose, not a label
        ('{"label": "PARTIAL"}', UNPARSEABLE),
        ("", UNPARSEABLE),
    ],
)
def test_a_verdict_is_read_from_the_judges_reply_or_is_unparseable(reply: str, verdict: str) -> None:
    assert parse_verdict(reply) == verdict


def test_the_judge_is_asked_with_question_gold_and_answer_and_an_abstention_has_no_gold() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage('{"label": "WRONG"}'), AIMessage("no idea")]))
    judge = LlmJudge(model)
    assert judge(WEIGHT, "You weigh 77 kg.") == WRONG
    assert judge(CAT, "Your cat is Whiskers.") == UNPARSEABLE
    assert judge_request(WEIGHT, "x") == "Question: How much do I weigh now?\nGold answer: 72 kg\nCoach's answer: x"
    assert f"Gold answer: {NO_ANSWER}\n" in judge_request(CAT, "x")
    assert "CORRECT only if it says it does not know" in JUDGE_SYSTEM_PROMPT


def test_a_judge_call_that_fails_is_reported_as_failed_and_the_run_goes_on() -> None:
    class Throttled(GenericFakeChatModel):
        def invoke(self, *args: Any, **kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "Converse")

    assert LlmJudge(Throttled(messages=iter([])))(WEIGHT, "72 kg") == FAILED


def test_the_judge_model_is_the_coach_settings_with_its_own_id_and_no_sampling() -> None:
    coach = Settings(table_name="table", model_id="coach-model", model_temperature=0.7)
    judge = judge_settings(coach, "judge-model")
    assert (judge.model_id, judge.model_temperature, judge.table_name) == ("judge-model", 0.0, "table")
    assert coach.model_id == "coach-model"


def test_accuracy_is_aggregated_by_category_and_an_unparseable_verdict_counts_as_wrong() -> None:
    results = [
        SimpleNamespace(category="single-hop", verdict=CORRECT),
        SimpleNamespace(category="single-hop", verdict=WRONG),
        SimpleNamespace(category="adversarial", verdict=CORRECT),
        SimpleNamespace(category="adversarial", verdict=UNPARSEABLE),
        SimpleNamespace(category="adversarial", verdict=FAILED),
        SimpleNamespace(category="temporal", verdict=""),  # not judged (offline): left out
    ]
    found = accuracy(results)
    assert found == {
        "judged": 5,
        "correct": 2,
        "unparseable": 1,
        "failed": 1,
        "by_category": {
            "adversarial": {"questions": 3, "correct": 1, "unparseable": 1, "failed": 1},
            "single-hop": {"questions": 2, "correct": 1, "unparseable": 0, "failed": 0},
        },
    }
    rows = accuracy_rows({"answer_accuracy": found, "judge_model": "j"})
    assert "40.0 % (2/5), 1 unparseable, 1 failed" in rows[0]
    assert "| adversarial | 3 | 1 | 1 | 1 | 33.3 % |" in rows


def test_offline_the_report_claims_no_answer_accuracy() -> None:
    [row] = accuracy_rows({"answerable": 3})
    assert "not measured (offline, no answer accuracy is claimed" in row


def _judge_text(gold: str, answer: str) -> str:
    reply = judge_reply(
        [{"role": "user", "content": [{"text": f"Question: q?\nGold answer: {gold}\nCoach's answer: {answer}"}]}]
    )
    return reply.text


def test_the_emulators_judge_is_a_deterministic_double_that_can_also_say_nothing_parseable() -> None:
    assert is_judge_request(JUDGE_SYSTEM_PROMPT)
    assert not is_judge_request("You are Coach")
    assert parse_verdict(_judge_text("72 kg", "You weigh 72 kg now.")) == CORRECT
    assert parse_verdict(_judge_text("72 kg", "You weigh 77 kg.")) == WRONG
    assert parse_verdict(_judge_text(NO_ANSWER, "You never told me about a cat.")) == CORRECT
    assert parse_verdict(_judge_text(NO_ANSWER, "Your cat is Whiskers.")) == WRONG
    assert parse_verdict(_judge_text("-", "anything")) == UNPARSEABLE
