"""On the turn service with the local coach: answers keep where they came from and change
when the client corrects them (the prompt shows current values only, the history on request), a
name given applies in the same turn's reply, a returning client gets a recap, and "start over"
after onboarding starts it again. The real langchain-aws client talks to the Bedrock emulator."""

from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.config import Settings
from onboarding.llm.wording import SUMMARY_SYSTEM_PROMPT
from onboarding.model.answers import read_answer
from onboarding.model.state import ONBOARDING_ORDER
from onboarding.replies import RESTART_REPLY
from tests.support.clock import FakeClock
from tests.unit.test_memory_flow import Harness, _onboard, memory_settings

pytestmark = pytest.mark.unit

LEVEL = "fitness_assessment.fitness_level"


@pytest.fixture
def harness(dynamodb: Any, llm: BaseChatModel, settings: Settings) -> Harness:
    return Harness(dynamodb, llm, FakeClock(datetime.now(UTC).timestamp()), memory_settings(settings))


def _systems(emulator: BedrockEmulator, since: int) -> list[str]:
    """The coach's system prompts since request `since` (summaries left out)."""
    return [
        r.system_text for r in emulator.requests[since:] if not r.system_text.startswith(SUMMARY_SYSTEM_PROMPT[:20])
    ]


def _tools_called(emulator: BedrockEmulator, since: int) -> list[str]:
    """The tools the coach called since request `since`, as the next request sends them back."""
    return [
        str(block["toolUse"]["name"])
        for r in emulator.requests[since:]
        for message in r.body.get("messages", [])
        for block in message.get("content", [])
        if "toolUse" in block
    ]


def _level(harness: Harness) -> Any:
    state = harness.store.conversations.load_turn("u", 0).state
    return read_answer(state.agent_context["fitness_assessment"]["fitness_level"])


async def test_a_correction_replaces_the_value_keeps_the_old_one_with_its_source_and_the_prompt_shows_only_the_new(
    harness: Harness, emulator: BedrockEmulator
) -> None:
    await harness.say("hi")
    await harness.say("beginner")
    first = _level(harness)
    said_in = next(m for m in harness.store.conversations.load_turn("u", 10).messages if m.content == "beginner")
    assert (first.value, first.said_in) == ("beginner", said_in.message_id)
    assert first.said_at == said_in.created_at
    assert first.previous == ()

    since = len(emulator.requests)
    await harness.say("Actually my fitness level is intermediate these days")
    now = _level(harness)
    assert now.value == "intermediate"  # the part that changed, not the sentence around it
    assert [(p.value, p.said_in, p.said_at) for p in now.previous] == [("beginner", said_in.message_id, first.said_at)]
    assert now.previous[0].replaced_at == now.said_at
    assert "correct_answer" in _tools_called(emulator, since)

    since = len(emulator.requests)
    await harness.say("ok")
    system = _systems(emulator, since)[0]
    known, profile = (
        system.split(header, 1)[1].split("\n\n", 1)[0] for header in ("Already known", "About the client")
    )
    assert f"- {LEVEL}: intermediate (corrected" in known
    assert "intermediate" in profile
    # Never presented as current: not among the saved answers or the profile at all (what the
    # client said stays in the conversation's transcript, as said).
    assert "beginner" not in known + profile

    reply = await harness.say("What was my fitness level when I started?")
    assert "“beginner”" in reply
    assert "is now “intermediate”" in reply


async def test_a_name_given_applies_in_the_same_turns_reply(harness: Harness, emulator: BedrockEmulator) -> None:
    await harness.say("hi")
    since = len(emulator.requests)
    reply = await harness.say("Call me Tom")
    systems = _systems(emulator, since)
    assert len(systems) == 2  # the tool round, then the reply after the tool results
    assert "Address the client as Tom." not in systems[0]
    assert "Address the client as Tom." in systems[1]  # rebuilt between the tool rounds
    # After its tool calls the reply goes on from the rebuilt prompt, by name.
    assert reply.startswith("Nice to meet you, Tom!")  # one acknowledgement, the name once
    assert reply.count("Tom") == 1
    # "Call me Tom" was a profile fact, never the answer to the question asked.
    assert "fitness_assessment" not in harness.store.conversations.load_turn("u", 0).state.agent_context


async def test_a_returning_client_is_greeted_by_name_with_a_recap_and_the_next_question(
    harness: Harness, emulator: BedrockEmulator
) -> None:
    await harness.say("hi")
    await harness.say("Call me Tom")
    await harness.say("beginner")
    harness.clock.advance(2 * 3600)  # past the conversation gap
    since = len(emulator.requests)
    reply = await harness.say("hello again")
    system = _systems(emulator, since)[0]
    assert system.index("Returning client") < system.index("Already known")
    assert reply.startswith("Welcome back, Tom!")
    assert "fitness level: beginner" in reply
    assert "What exercise do you do in a typical week right now?" in reply
    since = len(emulator.requests)
    await harness.say("I walk daily")  # the same conversation: no recap again
    assert "Returning client" not in _systems(emulator, since)[0]


async def test_start_over_after_onboarding_starts_it_again_and_keeps_the_answers_as_history(
    harness: Harness, emulator: BedrockEmulator
) -> None:
    await _onboard(harness)
    done = harness.store.conversations.load_turn("u", 0).state
    assert done.onboarding_complete
    # After onboarding the coach keeps coaching from the saved plan, read from its prompt.
    days = read_answer(done.agent_context["scheduling"]["training_days"])
    assert days is not None
    reply = await harness.say("What does my plan say about my training days?")
    assert "rom your plan: " in reply, reply  # "Alexandra, from your plan: ..."
    assert f"training days: {days.value}" in reply.split("rom your plan: ", 1)[1]
    assert "How can I help you today?" not in reply
    recap = await harness.say("What do you know about me?")
    assert "Here's what I have: Name: Alexandra" in recap  # from the prompt's profile and answers
    assert f"training days: {days.value}" in recap
    assert await harness.say("start over") == RESTART_REPLY
    state = harness.store.conversations.load_turn("u", 0).state
    assert not state.onboarding_complete
    assert state.current_agent == ONBOARDING_ORDER[0]
    level = read_answer(state.agent_context["fitness_assessment"]["fitness_level"])
    assert level is not None
    assert level.value is None
    before = read_answer(done.agent_context["fitness_assessment"]["fitness_level"])
    assert before is not None
    assert [p.value for p in level.previous] == [before.value]
    since = len(emulator.requests)
    reply = await harness.say("hi")
    assert "Onboarding is complete" not in _systems(emulator, since)[0]
    assert "How would you describe your current fitness level" in reply
