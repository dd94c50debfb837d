"""The local coach, the README's first command, reads correctly from a new user's first
message to the end of onboarding and after it. Scripted conversations on the turn service (the real
langchain-aws client, the Bedrock emulator, moto), every reply asserted as the person reads it.
Each turn is there for one way a scripted coach can misread a person: plain answers with two
items, answers given out of turn, a self-correction, a question about what it remembers, "what
now?" after onboarding (docs/decisions/0024-local-coach.md).
"""

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.recorded import Fault
from onboarding.config import Settings
from onboarding.model.answers import answer_value, read_answer
from onboarding.model.errors import ModelUnavailableError
from tests.support.clock import FakeClock
from tests.unit.test_memory_flow import Harness, memory_settings

pytestmark = pytest.mark.unit

LEVEL_Q = "How would you describe your current fitness level: beginner, intermediate or advanced?"
ACTIVITY_Q = "What exercise do you do in a typical week right now?"
INJURY_Q = "Do you have any injuries, pain or health conditions I should plan around?"
GOAL_Q = "What is the main thing you want to achieve: lose fat, build muscle, get fitter, or something else?"
TARGET_Q = "What would success look like in numbers, for example a weight, a distance or a lift?"
MOTIVATION_Q = "Why does this goal matter to you right now?"
EQUIPMENT_Q = "Where will you train, and what equipment do you have?"
PREFERENCES_Q = "Are there exercises you love or want to avoid?"
ALLERGY_Q = "Do you have any food allergies or intolerances?"
MEALS_Q = "How many meals a day do you usually eat?"
COOKING_Q = "How much time do you have for cooking on a normal day?"
TRAINING_DAYS_Q = "Which days of the week will you train?"
TIME_Q = "What time of day suits you best for training?"
ZONE_Q = "Which time zone are you in?"
CHECK_IN_Q = "How often would you like me to check in with you, and by app or SMS?"
PASTED = "I want to feel strong again and keep up with my kids. " * 110  # about 6,000 characters
EVERY_ITEM = (
    "fitness level: intermediate",
    "current activity: I run twice a week",
    "limitations: no injuries",
    "age and body: I'm 34, 180 cm, 80 kg",
    "primary goal: lose about 5 kg",
    "target: 5 kg",
    "timeline: before summer",
    "motivation: I want to feel strong",
    "days per week: 3 days a week",
    "session length: about 45 minutes",
    "equipment: dumbbells at home",
    "exercise preferences: I love kettlebells",
    "dietary pattern: I'm vegetarian",
    "allergies: peanuts",
    "meals per day: three meals",
    "cooking: 20 minutes on weekdays",
    "training days: Monday, Wednesday, Friday",
    "training time: I'd rather train in the mornings",
    "timezone: Europe/Lisbon",
    "check ins: weekly by SMS",
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.now(UTC).timestamp())


@pytest.fixture
def harness(dynamodb: Any, llm: BaseChatModel, clock: FakeClock, settings: Settings) -> Harness:
    return Harness(dynamodb, llm, clock, memory_settings(settings))


def _answers(harness: Harness) -> dict[str, str | None]:
    context = harness.store.conversations.load_turn("u", 0).state.agent_context
    return {
        field: answer_value(raw)
        for step in context.values()
        if isinstance(step, dict) or hasattr(step, "items")
        for field, raw in step.items()
        if field != "completed_at"
    }


def _reads_well(reply: str) -> None:
    """What no reply may do, whatever the turn."""
    assert len(re.findall(r"\b(?:noted|got it|thanks)\b", reply, re.IGNORECASE)) <= 1, reply  # one acknowledgement
    assert reply.count("Sam") <= 1, reply  # the name once
    assert not re.search(r"”[;,.]\S", reply), reply  # a space after each quoted item
    assert len(reply) < 1600, reply[:300]  # a pasted page is never said back whole


def _recaps_everything(reply: str) -> None:
    for item in EVERY_ITEM:
        assert reply.count(item) == 1, (item, reply)


async def test_a_new_users_conversation_reads_correctly(harness: Harness, emulator: BedrockEmulator) -> None:
    async def say(text: str) -> str:
        reply = await harness.say(text)
        _reads_well(reply)
        return reply

    # An introduction for someone the coach knows nothing about; a name is a fact, never an
    # answer, and the coach answers what it is from memory; a greeting answers nothing.
    assert await say("Hi") == f"Hi, I'm your coach! Let's start with your fitness assessment. {LEVEL_Q}"
    assert await say("call me Sam") == f"Nice to meet you, Sam! {LEVEL_Q}"
    assert await say("what's my name?") == f"Your name is Sam. {LEVEL_Q}"
    assert await say("Hi coach") == f"Hi again, Sam! {LEVEL_Q}"
    # Two items in one answer, each filed under its own; the second is not asked again.
    assert await say("intermediate I guess, I run twice a week") == (
        f"Sam, noted your fitness level: “intermediate”; current activity: “I run twice a week”. {INJURY_Q}"
    )
    assert await say("what do you know about me?") == (
        f"Here's what I have: Preferred name: Sam; fitness level: intermediate; current activity: I run "
        f"twice a week. {INJURY_Q}"
    )
    # A goal given at the injuries question is the goal (with its target and timeline), never a
    # limitation; the question asked stays open.
    assert await say("My goal is to lose about 5 kg before summer") == (
        f"Sam, noted your primary goal: “lose about 5 kg”; target: “5 kg”; timeline: “before summer”. {INJURY_Q}"
    )
    assert await say("I'm 34, 180 cm, 85 kg") == f"Sam, noted your age and body: “I'm 34, 180 cm, 85 kg”. {INJURY_Q}"
    assert await say("no injuries") == f"Sam, noted your limitations: “no injuries”. That step is done. {MOTIVATION_Q}"
    # A correction changes only the part that changed, in the right item.
    assert await say("actually I'm 80 kg now") == (
        f"Sam, updated your age and body: “I'm 34, 180 cm, 80 kg” (it was “I'm 34, 180 cm, 85 kg”). {MOTIVATION_Q}"
    )
    assert _answers(harness)["limitations"] == "no injuries"
    # A request and a bare "yes" are not answers; days and minutes given at the motivation
    # question are the workout's, and the motivation is still asked.
    assert await say("can you tell me my plan?") == (
        f"Sam, good question — here I can only help with your onboarding, so let's keep going. {MOTIVATION_Q}"
    )
    assert await say("yes") == f"Sam, I need a little more than “yes” for your motivation. {MOTIVATION_Q}"
    assert await say("3 days a week, about 45 minutes") == (
        f"Sam, noted your days per week: “3 days a week”; session length: “about 45 minutes”. {MOTIVATION_Q}"
    )
    assert await say("what's my goal?") == f"Sam, you told me your primary goal: “lose about 5 kg”. {MOTIVATION_Q}"
    # A pasted page is saved, quoted short, and recapped once, short.
    motivation = await say(PASTED)
    assert motivation == f"Sam, noted your motivation: “{PASTED[:59]}…”. That step is done. {EQUIPMENT_Q}"
    recap = await say("what do you know about me?")
    assert recap.count("I want to feel strong") == 1
    for item in ("fitness level", "current activity", "limitations", "age and body", "primary goal", "motivation"):
        assert recap.count(f"{item}:") == 1, (item, recap)
    assert recap.endswith(EQUIPMENT_Q)
    # "start over" then "Hi" seconds later is no "welcome back"; a greeting in another language
    # does not restart the introduction.
    assert "starting a fresh conversation" in await say("start over")
    assert await say("Hi") == f"Hi again, Sam! Let's pick up your workout planning. {EQUIPMENT_Q}"
    assert await say("你好 💪") == f"Hi again, Sam! {EQUIPMENT_Q}"
    assert await say("dumbbells at home") == f"Sam, noted your equipment: “dumbbells at home”. {PREFERENCES_Q}"
    # A diet given at the exercise question is the diet; the exercise question stays open.
    assert await say("I'm vegetarian, by the way") == (
        f"Sam, noted your dietary pattern: “I'm vegetarian, by the way”. {PREFERENCES_Q}"
    )
    assert await say("I love kettlebells") == (
        f"Sam, noted your exercise preferences: “I love kettlebells”. That step is done. {ALLERGY_Q}"
    )
    # A reply cut short (the model failed after the message was stored); the next message is not
    # glued to it: "peanuts" is the allergy, "Hi" a greeting.
    emulator.queue_fault(Fault("unavailable"))
    with pytest.raises(ModelUnavailableError):
        await harness.say("peanuts")
    assert await say("Hi") == f"Sam, noted your allergies: “peanuts”. {MEALS_Q}"
    assert await say("three meals") == f"Sam, noted your meals per day: “three meals”. {COOKING_Q}"
    # "weekdays" here is when the client cooks, not their training days.
    assert await say("20 minutes on weekdays") == (
        f"Sam, noted your cooking: “20 minutes on weekdays”. That step is done. {TRAINING_DAYS_Q}"
    )
    # After a real gap, "welcome back" with a recap and the open question.
    harness.clock.advance(2 * 3600)
    back = await say("hello")
    assert back.startswith("Welcome back, Sam! Here's what I have: ")
    assert back.endswith(TRAINING_DAYS_Q)
    assert await say("Monday, Wednesday, Friday") == (
        f"Sam, noted your training days: “Monday, Wednesday, Friday”. {TIME_Q}"
    )
    assert await say("I'd rather train in the mornings") == (
        f"Sam, noted your training time: “I'd rather train in the mornings”. {ZONE_Q}"
    )
    assert await say("yes") == f"Sam, I need a little more than “yes” for your timezone. {ZONE_Q}"
    assert await say("Europe/Lisbon") == f"Sam, noted your timezone: “Europe/Lisbon”. {CHECK_IN_Q}"
    done = await say("weekly by SMS")
    assert done.startswith("Noted your check ins: “weekly by SMS”. That's everything — your onboarding is complete!")
    _recaps_everything(done)
    assert not any(question in done for question in (CHECK_IN_Q, ZONE_Q))  # nothing asked again after "everything"
    # After onboarding, "what now?" and a greeting give the next step and every saved item.
    for said in ("what now?", "hello"):
        plan = await say(said)
        assert plan.startswith(
            "Sam, your onboarding is complete. Next step: start your first week of training on your training days "
            "(Monday, Wednesday, Friday); I'll check in as you asked (weekly by SMS). Here's what I have: "
        ), plan
        _recaps_everything(plan)
        assert "haven't told me" not in plan
    state = harness.store.conversations.load_turn("u", 0).state
    assert state.onboarding_complete
    body = read_answer(state.agent_context["fitness_assessment"]["age_and_body"])
    assert body is not None
    assert body.value == "I'm 34, 180 cm, 80 kg"
    assert [p.value for p in body.previous] == ["I'm 34, 180 cm, 85 kg"]
    answers = _answers(harness)
    assert (answers["fitness_level"], answers["current_activity"]) == ("intermediate", "I run twice a week")
    assert (answers["primary_goal"], answers["target"], answers["timeline"]) == (
        "lose about 5 kg",
        "5 kg",
        "before summer",
    )
    assert answers["limitations"] == "no injuries"  # the goal never was
    assert (answers["days_per_week"], answers["session_length"]) == ("3 days a week", "about 45 minutes")
    assert answers["dietary_pattern"] == "I'm vegetarian, by the way"
    assert answers["exercise_preferences"] == "I love kettlebells"
    assert answers["training_days"] == "Monday, Wednesday, Friday"  # "weekdays" of the cooking never was
    assert answers["timezone"] == "Europe/Lisbon"  # "yes" never was


async def _through_the_first_step(harness: Harness) -> None:
    assert await harness.say("Hi") == f"Hi, I'm your coach! Let's start with your fitness assessment. {LEVEL_Q}"
    assert await harness.say("beginner, I walk a bit, no injuries, 34, 170 cm, 70 kg") == (
        "Noted your fitness level: “beginner”; current activity: “I walk a bit”; limitations: “no injuries”; "
        f"age and body: “34, 170 cm, 70 kg”. That step is done. {GOAL_Q}"
    )


async def test_an_injury_at_the_goal_question_and_its_correction(harness: Harness) -> None:
    await _through_the_first_step(harness)
    assert await harness.say("I have a bad left knee") == (
        f"Updated your limitations: “I have a bad left knee” (it was “no injuries”). {GOAL_Q}"
    )
    # The self-correction names both items: the goal is saved; the injury is already what it says.
    assert await harness.say("sorry, my goal is to lose fat, and the knee is my injury") == (
        f"Noted your primary goal: “lose fat”. {TARGET_Q}"
    )
    answers = _answers(harness)
    assert (answers["primary_goal"], answers["limitations"]) == ("lose fat", "I have a bad left knee")
    assert "target" not in answers


@pytest.mark.parametrize("said", ["I'd rather train in the mornings", "in the mornings", "mornings", "early morning"])
async def test_every_way_of_saying_mornings_is_the_training_time(harness: Harness, said: str) -> None:
    """Several items in each message take a new user to the training-time question."""
    await _through_the_first_step(harness)
    for message, next_up in (
        ("I want to lose 5 kg by June for my wedding", "How many days a week can you train?"),
        ("3 days a week, 45 minutes, dumbbells at home, and I love kettlebells", "Do you follow a particular diet"),
        ("vegetarian, no allergies, three meals a day, and about 20 minutes to cook", TRAINING_DAYS_Q),
        ("Monday, Wednesday, Friday", TIME_Q),
    ):
        reply = await harness.say(message)
        assert next_up in reply, (message, reply)
        assert "Sorry" not in reply
    assert await harness.say(said) == f"Noted your training time: “{said}”. {ZONE_Q}"
    assert _answers(harness)["training_time"] == said
    assert "check_ins" not in _answers(harness)
