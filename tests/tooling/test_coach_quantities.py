"""The local coach reads a number by its unit: a weight, a height or an age, each filed where it
belongs and corrected on its own; a history of the body answer is told by the part asked about;
a name given again renames; a recap says each answer as a person writes it down
(docs/decisions/0024-local-coach.md)."""

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from infra.local.bedrock_emulator import BedrockEmulator, quantities
from infra.local.bedrock_emulator.coach import coach_respond
from infra.local.bedrock_emulator.memory_talk import gist, history_reply
from infra.local.bedrock_emulator.reading import corrected_value
from onboarding.config import Settings
from onboarding.llm.prompt import render_system_prompt
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.model.answers import answer_value, read_answer
from onboarding.model.state import OnboardingAgentType
from tests.support.clock import FakeClock
from tests.tooling.test_coach_phrases import product_tools
from tests.unit.test_memory_flow import Harness, memory_settings

pytestmark = pytest.mark.unit

ASSESSMENT, GOALS = OnboardingAgentType.FITNESS_ASSESSMENT, OnboardingAgentType.GOAL_SETTING
QUESTION = {f.key: f.question for step in (ASSESSMENT, GOALS) for f in STEP_PROMPTS[step].fields}


@pytest.mark.parametrize(
    ("said", "found"),
    [
        ("I'm 84 kg now", {"weight": "84 kg"}),
        ("I'm 84 kg now, would love to get to 75", {"weight": "84 kg"}),  # 75 is where they go, no age
        ("I'm 34 years old", {"age": "34 years old"}),
        ("32 y/o, 5'10\", 200 lbs", {"age": "32 y/o", "height": "5'10\"", "weight": "200 lbs"}),
        ("I'm 34", {"age": "34"}),
        ("age 60, 1.65 m, 14 stone", {"age": "60", "height": "1.65 m", "weight": "14 stone"}),
        ("6 ft and 90 kilos", {"height": "6 ft", "weight": "90 kilos"}),
        ("I want to get down to 70", {}),
        ("I'm 34 and want to get down to 75 kg", {"age": "34"}),  # a weight to reach is no weight now
        ("I'm 5 days a week", {}),
    ],
)
def test_a_number_is_what_its_unit_says(said: str, found: dict[str, str]) -> None:
    assert {kind: part.text for kind, part in quantities.parts(said).items()} == found


@pytest.mark.parametrize(
    ("old", "said", "new"),
    [
        ("I'm 34 years old, 84 kg", "actually I'm 80 kg now", "I'm 34 years old, 80 kg"),  # the weight only
        ("I'm 34 years old", "I'm 84 kg now", "I'm 34 years old, 84 kg"),  # a part it lacks is added
        ("I'm 34 years old", "I'm 84 kg now, would love to get to 75", "I'm 34 years old, 84 kg"),
        ("34, 180 cm, 85 kg", "I'm 35 now", "35, 180 cm, 85 kg"),
        ("34, 180 cm, 85 kg", "actually 6 ft", "34, 6 ft, 85 kg"),
        ("I'm 38 and weigh about 92kg", "I weigh 88 now", "I'm 38 and weigh about 88kg"),  # the unit kept
    ],
)
def test_a_correction_changes_the_part_it_names_and_keeps_the_others(old: str, said: str, new: str) -> None:
    assert corrected_value("age_and_body", old, said) == new


def _calls(reply: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(call.name, call.input) for call in reply.tool_calls]


def test_a_weight_and_a_number_to_reach_at_the_target_question() -> None:
    """Only the age known, the target asked: the weight now joins the age, and the number to
    reach is the target, in the unit the message gives."""
    known = {
        "fitness_assessment": {"age_and_body": "I'm 34 years old"},
        "goal_setting": {"primary_goal": "lose weight"},
    }
    messages = [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"text": QUESTION["target"]}]},
        {"role": "user", "content": [{"text": "I'm 84 kg now, would love to get to 75"}]},
    ]
    reply = coach_respond(render_system_prompt(GOALS, known), messages, product_tools(GOALS))
    assert _calls(reply) == [
        ("save_goal_setting", {"target": "75 kg", "step_complete": False}),
        ("correct_answer", {"item": "fitness_assessment.age_and_body", "value": "I'm 34 years old, 84 kg"}),
    ]


HISTORY = {
    "item": "fitness_assessment.age_and_body",
    "current": "I'm 34 years old, 80 kg",
    "current_since": "2026-11-29",
    "earlier": [
        {"value": "I'm 34 years old", "said": "2026-11-20", "replaced": "2026-11-21"},
        {"value": "I'm 34 years old, 84 kg", "said": "2026-11-21", "replaced": "2026-11-29"},
    ],
}


def test_a_question_about_one_part_of_the_body_answer_is_answered_with_that_part() -> None:
    assert history_reply(HISTORY, "what did I weigh when I started?") == (
        "Your weight is now “80 kg” (since 2026-11-29). Before that: “84 kg” (told 2026-11-21)."
    )
    assert history_reply(HISTORY, "how old was I when I started?") == (
        "Your age is now “34 years old” (since 2026-11-20); it hasn't changed."
    )
    assert history_reply(HISTORY, "how tall did I say I was?") == "You haven't told me your height yet."


def _result(kind: str) -> str:
    return json.dumps({"remembered": kind})


def _say(system: str, history: list[dict[str, Any]], said: str) -> str:
    """One turn as the product runs it: the coach's tool calls, their results, its reply."""
    history.append({"role": "user", "content": [{"text": said}]})
    tools = product_tools(ASSESSMENT)
    planned = coach_respond(system, history, tools)
    if planned.tool_calls:
        uses = [{"toolUse": {"toolUseId": c.tool_use_id, "name": c.name, "input": c.input}} for c in planned.tool_calls]
        results = [
            {"toolResult": {"toolUseId": c.tool_use_id, "content": [{"text": _result(str(c.input.get("kind")))}]}}
            for c in planned.tool_calls
        ]
        history += [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    text = coach_respond(system, history, tools).text
    history.append({"role": "assistant", "content": [{"text": text}]})
    return text


def test_a_name_given_when_one_is_known_is_a_rename() -> None:
    system = render_system_prompt(ASSESSMENT, {})
    history: list[dict[str, Any]] = []
    assert _say(system, history, "call me Sam").startswith("Nice to meet you, Sam!")
    assert _say(system, history, "call me Sammy").startswith("Sammy it is!")


KNOWN_FOR_RECAP: Mapping[str, Mapping[str, str]] = {
    "fitness_assessment": {
        "fitness_level": "beginner",
        "current_activity": "not much tbh, maybe a walk or two. oh",
        "limitations": "no injuries",
        "age_and_body": "I'm 34 years old, 84 kg",
    },
    "goal_setting": {
        "primary_goal": "lose weight",
        "target": "75 kg",
        "timeline": "by summer",
        "motivation": (
            "my doctor said my blood pressure is creeping up and I want to get it down before my next checkup"
        ),
    },
}


def test_a_recap_says_each_answer_as_a_person_writes_it_down() -> None:
    messages = [
        {"role": "user", "content": [{"text": "hi"}]},
        {
            "role": "assistant",
            "content": [{"text": STEP_PROMPTS[OnboardingAgentType.WORKOUT_PLANNING].fields[0].question}],
        },
        {"role": "user", "content": [{"text": "what do you know about me?"}]},
    ]
    step = OnboardingAgentType.WORKOUT_PLANNING
    recap = coach_respond(render_system_prompt(step, KNOWN_FOR_RECAP), messages, product_tools(step)).text
    lines = dict(line.split(": ", 1) for line in recap.removeprefix("Here's what I have: ").split(". ")[0].split("; "))
    assert lines["current activity"] == "not much, maybe a walk or two"
    assert lines["motivation"] == "my doctor said my blood pressure is creeping up"
    assert lines["age and body"] == "I'm 34 years old, 84 kg"  # a short answer whole
    assert "…" not in recap


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("um like 3 times a week, honestly", "3 times a week"),
        ("I like kettlebells", "I like kettlebells"),  # "like" the verb stays
        ("whatever you like", "whatever you like"),  # a whole answer keeps its last word
        ("I'm vegetarian, by the way", "I'm vegetarian"),
        (
            "I want to feel strong again and keep up with my kids. " * 3,
            "I want to feel strong again and keep up with my kids",
        ),
    ],
)
def test_a_recap_line_drops_filler_and_ends_where_a_clause_does(value: str, line: str) -> None:
    assert gist(value) == line


def test_a_long_first_clause_ends_between_words_never_on_one_that_leans_on_the_next() -> None:
    line = gist("I keep trying to find some sort of training routine that fits with the night shifts I work")
    assert line == "I keep trying to find some sort of training routine…"  # not "… routine that…"


async def test_the_reported_conversation_replayed_through_the_turn_service(
    dynamodb: Any, llm: BaseChatModel, settings: Settings, emulator: BedrockEmulator
) -> None:
    """The conversation a user reported, on the product's turn path (moto in process, the
    emulator's coach): the weight is filed with the age kept, the number to reach is the target,
    a correction changes the weight only, the weight question is answered with weights, and a new
    name is a rename."""
    harness = Harness(dynamodb, llm, FakeClock(datetime.now(UTC).timestamp()), memory_settings(settings))
    assert (
        await harness.say("Hi")
        == f"Hi, I'm your coach! Let's start with your fitness assessment. {QUESTION['fitness_level']}"
    )
    assert await harness.say("call me Sam") == f"Nice to meet you, Sam! {QUESTION['fitness_level']}"
    assert await harness.say("beginner, I walk a bit, no injuries, I'm 34 years old") == (
        "Sam, noted your fitness level: “beginner”; current activity: “I walk a bit”; limitations: “no injuries”; "
        f"age and body: “I'm 34 years old”. That step is done. {QUESTION['primary_goal']}"
    )
    assert await harness.say("lose weight") == f"Sam, noted your primary goal: “lose weight”. {QUESTION['target']}"
    assert await harness.say("I'm 84 kg now, would love to get to 75") == (
        "Sam, noted your target: “75 kg”. Updated your age and body: “I'm 34 years old, 84 kg” "
        f"(it was “I'm 34 years old”). {QUESTION['timeline']}"
    )
    assert await harness.say("actually I'm 80 kg now") == (
        "Sam, updated your age and body: “I'm 34 years old, 80 kg” (it was “I'm 34 years old, 84 kg”). "
        f"{QUESTION['timeline']}"
    )
    history = await harness.say("what did I weigh when I started?")
    assert re.fullmatch(
        r"Sam, your weight is now “80 kg” \(since [\d-]+\)\. Before that: “84 kg” \(told [\d-]+\)\. "
        + re.escape(QUESTION["timeline"]),
        history,
    ), history
    recap = await harness.say("what do you know about me?")
    assert "; age and body: I'm 34 years old, 80 kg; " in recap
    assert "; target: 75 kg" in recap
    assert await harness.say("call me Sammy actually") == f"Sammy it is! {QUESTION['timeline']}"
    assert await harness.say("what's my name?") == f"Your name is Sammy. {QUESTION['timeline']}"
    context = harness.store.conversations.load_turn("u", 0).state.agent_context
    body = read_answer(context["fitness_assessment"]["age_and_body"])
    assert body is not None
    assert body.value == "I'm 34 years old, 80 kg"
    assert [p.value for p in body.previous] == ["I'm 34 years old", "I'm 34 years old, 84 kg"]
    assert answer_value(context["goal_setting"]["target"]) == "75 kg"
