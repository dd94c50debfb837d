"""The local coach's reader (infra/local/bedrock_emulator/reading.py, reading.toml) reads answers by
their kind, each kind one rule: a hedged answer ("intermediate-ish?", "not sure, maybe 2?"), a
range ("5–6 days", "maybe 3 or 4"), a count without its noun ("like 5 little ones"), filler words
("tbh", "kinda", "like" where it is no verb), health words (conditions, symptoms, allergic
reactions), and a question the client asks before answering ("how do you want reminders? whatever,
text me"). Each test here fails when its rule is taken out.
"""

from collections.abc import Mapping
from typing import Any

import pytest

from infra.local.bedrock_emulator import reading
from infra.local.bedrock_emulator.coach import coach_respond
from onboarding.llm.prompt import render_system_prompt
from onboarding.llm.tools import tool_definitions
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.model.state import ONBOARDING_ORDER

pytestmark = pytest.mark.unit

STEP_OF = {field.key: step for step in ONBOARDING_ORDER for field in STEP_PROMPTS[step].fields}
ORDER = list(STEP_OF)
KNOWN = {
    "fitness_level": "beginner",
    "current_activity": "I walk a bit",
    "limitations": "none",
    "age_and_body": "34, 180 cm, 85 kg",
    "primary_goal": "lose fat",
    "target": "lose 5 kg",
    "timeline": "by June",
    "motivation": "feel better",
    "days_per_week": "3 days",
    "session_length": "45 minutes",
    "equipment": "dumbbells at home",
    "exercise_preferences": "I love kettlebells",
    "dietary_pattern": "no particular diet",
    "allergies": "none",
    "meals_per_day": "3",
    "cooking": "30 minutes",
    "training_days": "Monday, Wednesday, Friday",
    "training_time": "early morning",
    "timezone": "Europe/London",
    "check_ins": "weekly by app",
}


def _read(at: str, said: str) -> dict[str, str]:
    """What the reader files when `said` answers the question of `at`, every item before it known."""
    position = ORDER.index(at)
    if reading.is_question(said):
        return {}
    return reading.read(said, at, ORDER[position:], ORDER[:position])


def _coach_files(at: str, said: str, known: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """The coach's tool calls when `said` answers the question of `at` with the product's prompt and
    tools, every item before it known (`known` overriding the usual values)."""
    step = STEP_OF[at]
    values = {**KNOWN, **known}
    context: dict[str, dict[str, str]] = {}
    for key in ORDER[: ORDER.index(at)]:
        context.setdefault(STEP_OF[key].value, {})[key] = values[key]
    question = next(f.question for f in STEP_PROMPTS[step].fields if f.key == at)
    messages = [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"text": question}]},
        {"role": "user", "content": [{"text": said}]},
    ]
    functions = [tool["function"] for tool in tool_definitions(step, False)]
    tools = {
        "tools": [
            {"toolSpec": {"name": f["name"], "description": f["description"], "inputSchema": {"json": f["parameters"]}}}
            for f in functions
        ]
    }
    reply = coach_respond(render_system_prompt(step, context), messages, tools)
    return [(call.name, call.input) for call in reply.tool_calls]


# Hedges: a trailing "?" on an answer is a hedge, not a question (reading._asks).
@pytest.mark.parametrize(
    ("at", "said", "item"),
    [
        ("fitness_level", "beginner?", "fitness_level"),
        ("timezone", "Berlin?", "timezone"),
        ("days_per_week", "not sure, maybe 2?", "days_per_week"),
        ("equipment", "the gym at work?", "equipment"),
    ],
)
def test_a_hedged_answer_ending_in_a_question_mark_is_an_answer(at: str, said: str, item: str) -> None:
    assert not reading.is_question(said)
    assert item in _read(at, said)


@pytest.mark.parametrize(
    "said",
    ["is 2 months too fast?", "like what?", "you mean like asthma?", "as many as I need?", "what's the difference?"],
)
def test_a_real_question_stays_a_question(said: str) -> None:
    assert reading.is_question(said)


# Hedges: the marks of a hedge ("-ish", "I guess", "I think") carry no meaning ([kinds] hedge_mark).
@pytest.mark.parametrize(
    ("at", "said", "value"),
    [
        ("fitness_level", "intermediate-ish", "intermediate"),
        ("training_time", "evenings i guess", "evenings"),
        ("meals_per_day", "two-ish", "two"),
        ("allergies", "i think gluten", "gluten"),
    ],
)
def test_the_marks_of_a_hedge_are_left_out(at: str, said: str, value: str) -> None:
    assert _read(at, said) == {at: value}


# Ranges: any dash between two numbers makes one range ([kinds] range_dash).
def test_a_range_with_an_en_dash_is_one_range() -> None:
    assert _read("days_per_week", "5–6 days") == {"days_per_week": "5-6 days"}


# Ranges and counts without their unit, at a question about a count ([words] count).
@pytest.mark.parametrize(
    ("at", "said"),
    [("days_per_week", "maybe 3 or 4"), ("days_per_week", "2 to 3"), ("session_length", "40-50")],
)
def test_a_range_without_its_unit_answers_a_count_question(at: str, said: str) -> None:
    assert _read(at, said) == {at: said}


# Counts without their noun ("4 small ones") at the meals question (items.meals_per_day asked).
@pytest.mark.parametrize("said", ["4 small ones", "like 5 little ones", "2 big ones"])
def test_a_count_without_its_noun_answers_the_meals_question(said: str) -> None:
    assert set(_read("meals_per_day", said)) == {"meals_per_day"}


# Filler words carry no meaning ([kinds] filler_words).
@pytest.mark.parametrize(
    ("at", "said", "value"),
    [
        ("fitness_level", "kinda beginner tbh lol", "beginner"),
        ("dietary_pattern", "keto, erm, mostly", "keto, mostly"),
        ("primary_goal", "sort of want more energy", "want more energy"),
    ],
)
def test_filler_words_are_left_out(at: str, said: str, value: str) -> None:
    assert _read(at, said) == {at: value}


# "like" is a filler only where it is no verb (reading._filler_like).
@pytest.mark.parametrize(
    ("said", "plain"),
    [
        ("i jog like twice a wk", "i jog twice a wk"),
        ("like intermediate", "intermediate"),
        ("I'm, like, a beginner", "I'm a beginner"),
        ("I like running", "I like running"),
        ("like swimming, hate burpees", "like swimming, hate burpees"),
        ("I'd like to build muscle", "I'd like to build muscle"),
    ],
)
def test_like_is_a_filler_only_where_it_is_no_verb(said: str, plain: str) -> None:
    assert reading.plain(said) == plain


def test_a_liking_stays_a_preference() -> None:
    assert _read("exercise_preferences", "I like running") == {"exercise_preferences": "I like running"}


# Health words: conditions and symptoms of every category of the [health] table are limitations.
@pytest.mark.parametrize(
    "said",
    [
        "mild scoliosis",
        "plantar fasciitis",
        "migraines",
        "epilepsy",
        "COPD",
        "sleep apnea",
        "hypothyroidism",
        "PCOS",
        "anxiety",
        "depression",
        "IBS",
        "my knees are shot",
    ],
)
def test_a_health_word_is_a_limitation(said: str) -> None:
    assert _read("limitations", said) == {"limitations": said}


# Health words are news: filed even when the item is known and the message answers another one.
def test_a_condition_beside_another_answer_is_filed_though_the_injuries_were_none() -> None:
    assert _read("equipment", "gym, but i have a frozen shoulder") == {
        "limitations": "i have a frozen shoulder",
        "equipment": "gym",
    }


# Allergic reactions: an allergy wherever said, each item with its own part ([health] allergic_reaction).
@pytest.mark.parametrize(
    ("at", "said", "files"),
    [
        (
            "dietary_pattern",
            "I eat everything but shrimp makes my throat swell up",
            {"dietary_pattern": "I eat everything", "allergies": "shrimp makes my throat swell up"},
        ),
        ("limitations", "peanuts make my throat swell up", {"allergies": "peanuts make my throat swell up"}),
        ("exercise_preferences", "eggs make me break out in hives", {"allergies": "eggs make me break out in hives"}),
        ("allergies", "kiwi makes my mouth tingle", {"allergies": "kiwi makes my mouth tingle"}),
    ],
)
def test_an_allergic_reaction_is_an_allergy_wherever_it_is_said(at: str, said: str, files: dict[str, str]) -> None:
    assert _read(at, said) == files


@pytest.mark.parametrize("said", ["burpees make me sick", "cycling gives me a rash"])
def test_an_exercise_that_makes_you_sick_is_no_allergy(said: str) -> None:
    assert "allergies" not in _read("current_activity", said)


# A question asked before the answer: the last sentence decides, the question is set aside.
def test_an_answer_after_an_echoed_question_files_check_ins_only() -> None:
    calls = _coach_files(
        "check_ins", "how do you want reminders? whatever, text me i guess", {"fitness_level": "intermediate I guess"}
    )
    assert calls == [("save_scheduling", {"check_ins": "whatever, text me", "step_complete": True})]


def test_a_question_set_aside_files_nothing_of_its_own() -> None:
    assert _read("training_days", "do you need my time zone? mon wed fri") == {"training_days": "mon wed fri"}
