"""The memory's feature flags on a turn. Single-prompt mode (memory off) reads nothing,
sends the model only the system prompt and the message, stores the two messages and does not tell
the person their memory is unavailable; summary, profile and gap off each leave their part out;
flags that cannot be evaluated never fail a turn; the arm is in the turn's telemetry."""

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.breaker import CircuitBreaker
from onboarding.config import Settings
from onboarding.flags import DEFAULT_FLAGS, MemoryFlags
from onboarding.flags.rollout import Rollout
from onboarding.llm.wording import MEMORY_UNAVAILABLE_RULE, SINGLE_PROMPT_RULE
from onboarding.model.profile import UserProfile
from onboarding.persistence import Repositories
from onboarding.replies import MEMORY_UNAVAILABLE_NOTICE
from onboarding.summary import Summarizer
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService
from tests.support.clock import FakeClock
from tests.support.seed import save_profile
from tests.unit.test_changing_answers import _systems
from tests.unit.test_memory_flow import memory_settings

from .conftest import TABLE

SINGLE_PROMPT = MemoryFlags(memory=False)


class Flagged:
    """A turn service whose flags the test sets (`flags`), on a clock the test moves, counting
    every Query the table receives."""

    def __init__(self, dynamodb: Any, llm: BaseChatModel, settings: Settings) -> None:
        self.clock = FakeClock(datetime.now(UTC).timestamp())
        self.store = Repositories.over(dynamodb, TABLE, settings, self.clock)
        self.flags = DEFAULT_FLAGS
        self.queries = 0

        def count(**_: Any) -> None:
            self.queries += 1

        dynamodb.meta.events.register("before-call.dynamodb.Query", count)

        def now() -> datetime:
            return datetime.fromtimestamp(self.clock.now, UTC)

        self.service = TurnService(
            OnboardingAgentOrchestrator(self.store.conversations, llm, settings, now),
            self.store,
            CircuitBreaker(settings.breaker),
            summarizer=Summarizer(llm, settings.summary_max_tokens),
            clock=now,
            flags=lambda user_id: self.flags,
            store_breaker=CircuitBreaker(settings.store_breaker, name="store"),
        )

    async def say(self, text: str, user_id: str = "u") -> str:
        self.clock.now += 5
        turn = await self.service.start_turn(user_id, text)
        result = await turn.collect()
        await turn.fold_summary()
        return result.reply


@pytest.fixture
def flagged(dynamodb: Any, llm: BaseChatModel, settings: Settings) -> Flagged:
    return Flagged(dynamodb, llm, memory_settings(settings))


async def test_single_prompt_mode_reads_nothing_and_sends_only_the_system_prompt_and_the_message(
    flagged: Flagged, emulator: BedrockEmulator
) -> None:
    await flagged.say("Hi, I'm a beginner")
    await flagged.say("I run twice a week")
    flagged.flags, flagged.queries = SINGLE_PROMPT, 0
    since = len(emulator.requests)
    reply = await flagged.say("What should I do today?")
    assert flagged.queries == 0  # not one Query: nothing of the memory is loaded
    [request] = emulator.requests[since:]  # one model call: no tools, so no tool round
    assert [(t.role, t.text) for t in request.conversation] == [("user", "What should I do today?")]
    assert "toolConfig" not in request.body
    assert SINGLE_PROMPT_RULE in request.system_text
    assert MEMORY_UNAVAILABLE_RULE not in request.system_text
    assert not reply.startswith(MEMORY_UNAVAILABLE_NOTICE)  # an arm, not a fault: nothing to apologise for
    stored = flagged.store.conversations.load_turn("u", 20).messages
    assert [(m.role, m.content) for m in stored[-2:]] == [("user", "What should I do today?"), ("assistant", reply)]


async def test_single_prompt_mode_writes_no_state_and_memory_comes_back_when_switched_on(
    flagged: Flagged, emulator: BedrockEmulator
) -> None:
    await flagged.say("hi")
    await flagged.say("beginner")
    before = flagged.store.conversations.load_turn("u", 0)
    flagged.flags = SINGLE_PROMPT
    await flagged.say("Call me Tom")
    after = flagged.store.conversations.load_turn("u", 0)
    assert (after.state, after.profile) == (before.state, before.profile)
    flagged.flags = DEFAULT_FLAGS
    since = len(emulator.requests)
    await flagged.say("and now?")
    texts = [t.text for t in emulator.requests[since].conversation if t.role == "user"]
    assert texts[:2] == ["hi", "beginner"]  # the memory is whole again, the off turn's messages in it
    assert "Call me Tom" in texts


async def test_a_failed_read_still_tells_the_person_unlike_the_off_arm(
    flagged: Flagged, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onboarding.model.errors import StoreError

    def fail(*_: Any, **__: Any) -> Any:
        raise StoreError("down")

    monkeypatch.setattr(flagged.store.conversations, "load_turn", fail)
    assert (await flagged.say("hello")).startswith(MEMORY_UNAVAILABLE_NOTICE)


async def test_profile_off_leaves_the_profile_out_of_the_prompt(
    flagged: Flagged, dynamodb: Any, emulator: BedrockEmulator
) -> None:
    save_profile(dynamodb, TABLE, "u", UserProfile(name="Alexandra", goals="run a 5k"))
    await flagged.say("hi")
    assert "run a 5k" in emulator.requests[-1].system_text
    flagged.flags = MemoryFlags(profile=False)
    since = len(emulator.requests)
    await flagged.say("hello")
    assert all("run a 5k" not in s and "Alexandra" not in s for s in _systems(emulator, since))
    assert flagged.store.conversations.load_turn("u", 0).profile.goals == "run a 5k"  # kept, only not shown


async def test_summary_off_shows_no_summary_and_folds_nothing(flagged: Flagged, emulator: BedrockEmulator) -> None:
    flagged.flags = MemoryFlags(summary=False)
    for i in range(10):  # past the window of 8 messages: a fold would be due
        await flagged.say(f"message number {i}")
    assert flagged.store.conversations.load_turn("u", 0).summary is None
    assert all("Summary of the earlier conversation" not in s for s in _systems(emulator, 0))
    assert len(_systems(emulator, 0)) == len(emulator.requests)  # no summarization call at all


async def test_a_stored_summary_is_left_out_once_the_summary_is_switched_off(
    flagged: Flagged, emulator: BedrockEmulator
) -> None:
    for i in range(10):  # the same turns with the summary on do fold (the control for the test above)
        await flagged.say(f"message number {i}")
    summary = flagged.store.conversations.load_turn("u", 0).summary
    assert summary is not None
    assert "Summary of the earlier conversation" in _systems(emulator, 0)[-1]
    flagged.flags = MemoryFlags(summary=False)
    since = len(emulator.requests)
    await flagged.say("and now?")
    assert all("Summary of the earlier conversation" not in s for s in _systems(emulator, since))
    assert flagged.store.conversations.load_turn("u", 0).summary == summary  # kept for when it is on again


@pytest.mark.parametrize(("gap", "recap"), [(True, True), (False, False)])
async def test_gap_off_opens_no_new_conversation_after_an_idle_gap(
    flagged: Flagged, emulator: BedrockEmulator, gap: bool, recap: bool
) -> None:
    flagged.flags = replace(DEFAULT_FLAGS, gap=gap)
    await flagged.say("hi")
    await flagged.say("beginner")
    flagged.clock.advance(2 * 3600)  # past the conversation gap
    since = len(emulator.requests)
    await flagged.say("hello again")
    assert ("Returning client" in _systems(emulator, since)[0]) is recap
    assert (len(emulator.requests[since].conversation) > 1) is not recap  # without the gap, the history stays


class Broken:
    """Flags whose every evaluation fails with something unexpected."""

    @property
    def get_raw_configuration(self) -> dict[str, Any]:
        raise RuntimeError("boom")

    def get_configuration(self) -> dict[str, Any]:
        raise RuntimeError("boom")


async def test_flags_that_fail_to_evaluate_never_fail_a_turn(
    dynamodb: Any, llm: BaseChatModel, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    flagged = Flagged(dynamodb, llm, memory_settings(settings))
    rollout = Rollout(Broken(), retry_after_s=60)  # type: ignore[arg-type]
    flagged.service = TurnService(
        OnboardingAgentOrchestrator(flagged.store.conversations, llm, settings),
        flagged.store,
        CircuitBreaker(settings.breaker),
        flags=rollout.for_user,
        store_breaker=CircuitBreaker(settings.store_breaker, name="store"),
    )
    assert await flagged.say("hello")
    assert rollout.for_user("u") == DEFAULT_FLAGS
    assert '"FeatureFlagsUnavailable"' in capsys.readouterr().out


async def test_the_arm_is_in_the_turns_log_lines_and_its_metrics(
    flagged: Flagged, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    flagged.flags = SINGLE_PROMPT
    await flagged.say("hello")
    flagged.flags = MemoryFlags(summary=False, gap=False)
    await flagged.say("hello")
    arms = [(r.getMessage(), getattr(r, "arm", None)) for r in caplog.records if r.getMessage().startswith("turn_")]
    assert arms == [
        ("turn_received", "single_prompt"),
        ("turn_responded", "single_prompt"),
        ("turn_received", "no_summary/no_gap"),
        ("turn_responded", "no_summary/no_gap"),
    ]
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"TurnCompleted"' in line]
    assert [blob["arm"] for blob in emf] == ["single_prompt", "no_summary/no_gap"]
    assert all("arm" not in blob["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0] for blob in emf)
