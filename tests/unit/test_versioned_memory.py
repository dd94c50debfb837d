"""Versioned state, in process: a turn whose commit meets a state another turn
saved after its read re-reads and applies its own changes again, so both answers are kept; saving
an answer that is already stored leaves one answer. The two-process race over HTTP is in
integration/test_concurrent_memory.py."""

import json
import time
from typing import Any

import pytest

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.coach import CoachReply, ToolCall
from onboarding.composition import build_turn_service
from onboarding.model.answers import answer_value
from onboarding.model.state import OnboardingState
from onboarding.persistence.codec import state_item
from tests.support.setting_runs import repositories, run_turn, settings_with

from .conftest import TABLE

pytestmark = pytest.mark.unit


def _save_level(emulator: BedrockEmulator, level: str) -> None:
    call = ToolCall(f"save-{time.monotonic_ns()}", "save_fitness_assessment", {"fitness_level": level})
    emulator.script(CoachReply("", (call,)))
    emulator.script(CoachReply("Noted."))


async def test_a_commit_that_meets_another_turns_state_keeps_both_answers(
    dynamodb: Any, emulator: BedrockEmulator
) -> None:
    settings = settings_with(rate_limit_messages=0)
    store = repositories(dynamodb, settings)
    service = build_turn_service(settings, store)
    await run_turn(service, "u", "Hi")
    commits: list[int] = []

    def another_turn_saves_first(params: dict[str, Any], **_: Any) -> None:
        """Once, between our read and our commit: the other turn stores its answer (version 1)."""
        if not commits and any("~STATE" in json.dumps(item) for item in params["TransactItems"]):
            commits.append(1)
            theirs = OnboardingState(agent_context={"fitness_assessment": {"current_activity": "swims"}})
            dynamodb.put_item(TableName=TABLE, Item=state_item("u", theirs, time.time(), 1))

    dynamodb.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", another_turn_saves_first)
    _save_level(emulator, "beginner")
    await run_turn(service, "u", "I'm a beginner")
    answers = store.conversations.load_turn("u", 20).state.agent_context["fitness_assessment"]
    assert commits == [1]
    # (answers are records with their provenance; their values are what counts here)
    assert (answer_value(answers.get("fitness_level")), answer_value(answers.get("current_activity"))) == (
        "beginner",
        "swims",
    )


async def test_saving_an_answer_already_stored_leaves_one_answer(dynamodb: Any, emulator: BedrockEmulator) -> None:
    settings = settings_with(rate_limit_messages=0)
    store = repositories(dynamodb, settings)
    service = build_turn_service(settings, store)
    _save_level(emulator, "beginner")
    await run_turn(service, "u", "I'm a beginner")
    first = store.conversations.load_turn("u", 20)
    _save_level(emulator, "beginner")
    await run_turn(service, "u", "As I said, a beginner")
    again = store.conversations.load_turn("u", 20)
    assert again.state == first.state  # one answer, not a list of two
