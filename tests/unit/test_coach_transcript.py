"""The local coach, the README's first command, reads correctly from a new user's first
message to the end of onboarding. One scripted conversation of 30 turns on the turn service (the
real langchain-aws client, the Bedrock emulator, moto), every reply asserted as the person reads
it. Each turn is there for one of the oddities the issue listed (docs/decisions/0024-local-coach.md).
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
TIMELINE_Q = "By when would you like to reach that?"
MOTIVATION_Q = "Why does this goal matter to you right now?"
DAYS_Q = "How many days a week can you train?"
LENGTH_Q = "How long can each session be?"
EQUIPMENT_Q = "Where will you train, and what equipment do you have?"
PREFERENCES_Q = "Are there exercises you love or want to avoid?"
DIET_Q = "Do you follow a particular diet, such as vegetarian, vegan or halal?"
ALLERGY_Q = "Do you have any food allergies or intolerances?"
MEALS_Q = "How many meals a day do you usually eat?"
COOKING_Q = "How much time do you have for cooking on a normal day?"
TRAINING_DAYS_Q = "Which days of the week will you train?"
TIME_Q = "What time of day suits you best for training?"
ZONE_Q = "Which time zone are you in?"
CHECK_IN_Q = "How often would you like me to check in with you, and by app or SMS?"
PASTED = "I want to feel strong again and keep up with my kids. " * 110  # about 6,000 characters


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
    assert len(reply) < 1200, reply[:300]  # a pasted page is never said back whole


async def test_a_new_users_thirty_turns_read_correctly(harness: Harness, emulator: BedrockEmulator) -> None:
    turns: list[tuple[str, str]] = []

    async def say(text: str) -> str:
        reply = await harness.say(text)
        _reads_well(reply)
        turns.append((text, reply))
        return reply

    # 1-3: an introduction for someone the coach knows nothing about; a name is a fact, never an
    # answer; a greeting answers nothing.
    assert await say("Hi") == f"Hi, I'm your coach! Let's start with your fitness assessment. {LEVEL_Q}"
    assert await say("call me Sam") == f"Nice to meet you, Sam! {LEVEL_Q}"
    assert await say("Hi coach") == f"Hi again, Sam! {LEVEL_Q}"
    # 4-5: one acknowledgement, the name once; a question is answered, not "noted".
    assert await say("beginner") == f"Sam, noted your fitness level: “beginner”. {ACTIVITY_Q}"
    assert await say("what do you know about me?") == (
        f"Here's what I have: Preferred name: Sam; fitness level: beginner. {ACTIVITY_Q}"
    )
    assert await say("I run twice a week") == f"Sam, noted your current activity: “I run twice a week”. {INJURY_Q}"
    # 7-9: an answer given out of order is filed under the item it answers; a later correction
    # changes only the part that changed, in the right item.
    assert await say("I'm 34, 180 cm, 85 kg") == f"Sam, noted your age and body: “I'm 34, 180 cm, 85 kg”. {INJURY_Q}"
    assert await say("no injuries") == f"Sam, noted your limitations: “no injuries”. That step is done. {GOAL_Q}"
    assert await say("actually I'm 80 kg now") == (
        f"Sam, updated your age and body: “I'm 34, 180 cm, 80 kg” (it was “I'm 34, 180 cm, 85 kg”). {GOAL_Q}"
    )
    assert _answers(harness)["limitations"] == "no injuries"
    # 10-11: a request and a bare "yes" are not answers.
    assert await say("can you tell me my plan?") == (
        f"Sam, good question — here I can only help with your onboarding, so let's keep going. {GOAL_Q}"
    )
    assert await say("yes") == f"Sam, I need a little more than “yes” for your primary goal. {GOAL_Q}"
    assert await say("lose 5 kg") == f"Sam, noted your primary goal: “lose 5 kg”. {TARGET_Q}"
    assert await say("80 kg") == f"Sam, noted your target: “80 kg”. {TIMELINE_Q}"
    assert await say("by June") == f"Sam, noted your timeline: “by June”. {MOTIVATION_Q}"
    # 15-16: a pasted page is saved, quoted short, and recapped once, short.
    motivation = await say(PASTED)
    assert motivation == f"Sam, noted your motivation: “{PASTED[:59]}…”. That step is done. {DAYS_Q}"
    recap = await say("what do you know about me?")
    assert recap.count("I want to feel strong") == 1
    for item in ("fitness level", "current activity", "limitations", "age and body", "primary goal", "motivation"):
        assert recap.count(f"{item}:") == 1, (item, recap)
    assert recap.endswith(DAYS_Q)
    assert await say("3 days") == f"Sam, noted your days per week: “3 days”. {LENGTH_Q}"
    assert await say("45 minutes") == f"Sam, noted your session length: “45 minutes”. {EQUIPMENT_Q}"
    # 19-21: "start over" then "Hi" seconds later is no "welcome back"; a greeting in another
    # language does not restart the introduction.
    assert "starting a fresh conversation" in await say("start over")
    assert await say("Hi") == f"Hi again, Sam! Let's pick up your workout planning. {EQUIPMENT_Q}"
    assert await say("你好 💪") == f"Hi again, Sam! {EQUIPMENT_Q}"
    assert await say("dumbbells at home") == f"Sam, noted your equipment: “dumbbells at home”. {PREFERENCES_Q}"
    assert await say("I love kettlebells") == (
        f"Sam, noted your exercise preferences: “I love kettlebells”. That step is done. {DIET_Q}"
    )
    # 24-25: a reply cut short (the model failed after the message was stored); the next message
    # is not glued to it: "vegetarian" is the diet, "Hi" a greeting.
    emulator.queue_fault(Fault("unavailable"))
    with pytest.raises(ModelUnavailableError):
        await harness.say("vegetarian")
    assert await say("Hi") == f"Sam, noted your dietary pattern: “vegetarian”. {ALLERGY_Q}"
    assert _answers(harness)["dietary_pattern"] == "vegetarian"
    assert await say("peanuts") == f"Sam, noted your allergies: “peanuts”. {MEALS_Q}"
    assert await say("three meals") == f"Sam, noted your meals per day: “three meals”. {COOKING_Q}"
    assert await say("20 minutes on weekdays") == (
        f"Sam, noted your cooking: “20 minutes on weekdays”. That step is done. {TRAINING_DAYS_Q}"
    )
    # 28: after a real gap, "welcome back" with a recap and the open question.
    harness.clock.advance(2 * 3600)
    back = await say("hello")
    assert back.startswith("Welcome back, Sam! Here's what I have: ")
    assert back.endswith(TRAINING_DAYS_Q)
    assert await say("Monday, Wednesday, Friday") == (
        f"Sam, noted your training days: “Monday, Wednesday, Friday”. {TIME_Q}"
    )
    assert await say("early morning") == f"Sam, noted your training time: “early morning”. {ZONE_Q}"
    # 31: a time zone is not "yes".
    assert await say("yes") == f"Sam, I need a little more than “yes” for your timezone. {ZONE_Q}"
    assert await say("Europe/Lisbon") == f"Sam, noted your timezone: “Europe/Lisbon”. {CHECK_IN_Q}"
    done = await say("weekly by SMS")
    # The recap that follows says the name, so the reply does not open with it.
    assert done.startswith("Noted your check ins: “weekly by SMS”. That's everything — your onboarding is complete!")
    assert not any(question in done for question in (CHECK_IN_Q, ZONE_Q))  # nothing asked again after "everything"
    assert len(turns) >= 30
    state = harness.store.conversations.load_turn("u", 0).state
    assert state.onboarding_complete
    body = read_answer(state.agent_context["fitness_assessment"]["age_and_body"])
    assert body is not None
    assert body.value == "I'm 34, 180 cm, 80 kg"
    assert [p.value for p in body.previous] == ["I'm 34, 180 cm, 85 kg"]
    assert _answers(harness)["fitness_level"] == "beginner"  # "Hi coach" never was
    assert _answers(harness)["timezone"] == "Europe/Lisbon"  # "yes" never was
