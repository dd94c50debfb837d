"""The memory end to end on the turn service: tools and step advancement, the profile, gaps and
resets, the budget, the rolling summary, waiting for a field, and expiry. The real langchain-aws
client talks to the Bedrock emulator (which applies Converse's tool rules); DynamoDB is moto."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from infra.bench.fidelity_script import ANSWERS, QUESTIONS
from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.breaker import CircuitBreaker
from onboarding.config import Settings
from onboarding.config.settings import PROMPT_INSTRUCTIONS_TOKENS, PROMPT_KEPT_VALUES, kept_prompt_tokens
from onboarding.llm.bedrock import build_chat_model
from onboarding.llm.wording import STEP_PROMPTS, SUMMARY_SYSTEM_PROMPT
from onboarding.llm.working_copy import WorkingCopy
from onboarding.model.answers import answer_value
from onboarding.model.errors import MessageOverBudgetError
from onboarding.model.history import ConversationSummary
from onboarding.model.profile import UserProfile
from onboarding.model.state import ONBOARDING_ORDER, OnboardingAgentType, OnboardingState
from onboarding.persistence import Repositories
from onboarding.summary import Summarizer
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService
from tests.support.clock import FakeClock
from tests.unit.conftest import TABLE

pytestmark = pytest.mark.unit


def memory_settings(base: Settings, budget: int = 12_000) -> Settings:
    """`base` (the unit fixture's fast retries) with a small window, so folds happen soon: a fold
    starts past 8 messages or 2000 tokens and keeps 4 / 1000. A conversation ends after 30 minutes
    or at "start over" / "reset"; a turn reads up to 60 messages; no rate limit. Validated, so the
    limits must agree: below the default budget the window's tokens shrink to fit next to the
    system prompt's allowance (that only moves folds, which the budget tests do not look at), and
    a small allowance holds values as long as it can (`kept_prompt_tokens`)."""
    allowance = max(kept_prompt_tokens(20), min(5000, budget // 2))
    value_chars = max(20, min(200, ((allowance - PROMPT_INSTRUCTIONS_TOKENS) // PROMPT_KEPT_VALUES - 40) // 3))
    changes: dict[str, Any] = {
        "token_budget": budget,
        "system_prompt_allowance": allowance,
        "profile_value_chars": value_chars,
        "window_max_messages": 8,
        "window_max_tokens": min(2000, budget - allowance - 1),
        "summary_max_tokens": 800,
        "conversation_gap_s": 30 * 60,
        "reset_keywords": ("start over", "reset"),
        "history_load_limit": 60,
        "rate_limit_messages": 0,
        "recall_max_tokens": 0,  # no recall index here; its allowance would only crowd small budgets
    }
    assert changes.keys() <= Settings.model_fields.keys()  # no misspelt name silently ignored
    return Settings.model_validate(base.model_dump() | changes)


class Harness:
    """A turn service on a clock the test moves, with a small window so folds happen soon."""

    def __init__(
        self,
        dynamodb: Any,
        llm: BaseChatModel,
        clock: FakeClock,
        settings: Settings,
        summarizer_llm: BaseChatModel | None = None,
    ) -> None:
        self.clock = clock
        self.settings = settings
        self.store = Repositories.over(dynamodb, TABLE, settings, clock)

        def now() -> datetime:
            return datetime.fromtimestamp(clock.now, UTC)

        self.service = TurnService(
            OnboardingAgentOrchestrator(self.store.conversations, llm, settings, now),
            self.store,
            CircuitBreaker(settings.breaker),
            summarizer=Summarizer(summarizer_llm or llm, settings.summary_max_tokens),
            clock=now,
            store_breaker=CircuitBreaker(settings.store_breaker, name="store"),
        )

    async def say(self, text: str, user_id: str = "u", client_id: str | None = None) -> str:
        self.clock.now += 5
        turn = await self.service.start_turn(user_id, text, client_id)
        result = await turn.collect()
        await turn.fold_summary()
        return result.reply


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.now(UTC).timestamp())


@pytest.fixture
def harness(dynamodb: Any, llm: BaseChatModel, clock: FakeClock, settings: Settings) -> Harness:
    return Harness(dynamodb, llm, clock, memory_settings(settings))


def _answer(reply: str) -> str | None:
    """What the scripted client says to the coach's question in `reply`."""
    for question, key in QUESTIONS.items():
        if question in reply:
            return ANSWERS[key]
    return None


def _coach_requests(emulator: BedrockEmulator, since: int = 0) -> list[Any]:
    return [r for r in emulator.requests[since:] if not r.system_text.startswith(SUMMARY_SYSTEM_PROMPT[:20])]


async def _onboard(harness: Harness, until: OnboardingAgentType | None = None) -> list[str]:
    replies = [await harness.say("Hi! My name is Alexandra")]
    for _ in range(60):
        state = harness.store.conversations.load_turn("u", 0).state
        if state.onboarding_complete or state.current_agent == until:
            break
        answer = _answer(replies[-1])
        assert answer is not None, replies[-1]
        replies.append(await harness.say(answer))
    return replies


async def test_tools_save_each_step_and_the_orchestrator_advances_to_completion(
    harness: Harness, emulator: BedrockEmulator
) -> None:
    replies = await _onboard(harness)
    loaded = harness.store.conversations.load_turn("u", 60)
    state = loaded.state
    assert state.onboarding_complete
    for step in ONBOARDING_ORDER:
        saved = state.agent_context[step.value]
        assert "completed_at" in saved
        assert {f.key for f in STEP_PROMPTS[step].fields} <= set(saved)
    assert answer_value(state.agent_context["scheduling"]["timezone"]) == "Europe/Lisbon"
    assert "onboarding is complete" in replies[-1].lower()
    # Tool calls and results are stored and go back to the model in Converse's form.
    assert any(m.tool_calls for m in loaded.messages)
    assert any(m.role == "tool" for m in loaded.messages)
    await harness.say("What was my plan again?")
    last = _coach_requests(emulator)[-1].body
    blocks = [block for message in last["messages"] for block in message["content"]]
    assert any("toolUse" in block for block in blocks)
    assert any("toolResult" in block for block in blocks)
    assert "Onboarding is complete" in _coach_requests(emulator)[-1].system_text


async def test_the_profile_outlives_conversations_and_the_preferred_name_wins(
    harness: Harness, emulator: BedrockEmulator
) -> None:
    await harness.say("Hi! My name is Alexandra")
    await harness.say("Please call me Alex")
    profile = harness.store.conversations.load_turn("u", 0).profile
    assert (profile.name, profile.preferred_name) == ("Alexandra", "Alex")
    harness.clock.now += 31 * 60  # a new conversation: the window starts empty, the profile stays
    since = len(emulator.requests)
    await harness.say("Morning!")
    request = _coach_requests(emulator, since)[0]
    assert "Address the client as Alex." in request.system_text
    assert "- Name: Alexandra" in request.system_text
    assert [t.text for t in request.conversation] == ["Morning!"]


async def test_after_a_gap_the_window_starts_fresh_but_answers_stay_known(
    harness: Harness, emulator: BedrockEmulator
) -> None:
    replies = await _onboard(harness, until=OnboardingAgentType.GOAL_SETTING)
    harness.clock.now += 29 * 60  # within the gap: same conversation
    since = len(emulator.requests)
    await harness.say("still there?")
    assert len(_coach_requests(emulator, since)[0].conversation) > 1
    harness.clock.now += 31 * 60
    since = len(emulator.requests)
    reply = await harness.say("I'm back")
    request = _coach_requests(emulator, since)[0]
    assert [t.text for t in request.conversation] == ["I'm back"]
    assert "fitness_assessment.limitations: I have a left knee injury" in request.system_text
    assert "How would you describe your current fitness level" not in reply  # never re-asked
    assert replies


async def test_a_reset_keyword_starts_over_says_so_and_keeps_the_profile(
    harness: Harness, emulator: BedrockEmulator
) -> None:
    await harness.say("Hi! My name is Alexandra")
    await harness.say("beginner")
    since = len(emulator.requests)
    reply = await harness.say("Start over!")
    assert "fresh conversation" in reply
    assert _coach_requests(emulator, since) == []  # said by us; the model is not asked to coach
    # ... and the old conversation is folded into the summary right after.
    summary = harness.store.conversations.load_turn("u", 0).summary
    assert summary is not None
    assert "My name is Alexandra" in summary.text
    since = len(emulator.requests)
    await harness.say("ok, hello again")
    request = _coach_requests(emulator, since)[0]
    assert [t.text for t in request.conversation] == ["ok, hello again"]
    assert "- Name: Alexandra" in request.system_text
    assert "fitness_assessment.fitness_level: beginner" in request.system_text


async def test_a_reset_folds_the_conversation_it_ends_however_short(harness: Harness) -> None:
    # One exchange and the reset: far below the window's 8 messages, so only the reset makes the
    # fold due, right after the reset's own turn.
    await harness.say("Hi! My name is Alexandra")
    assert harness.store.conversations.load_turn("u", 0).summary is None
    await harness.say("reset")
    summary = harness.store.conversations.load_turn("u", 0).summary
    assert summary is not None
    assert "My name is Alexandra" in summary.text


async def test_a_message_over_the_budget_is_refused_and_nothing_is_stored(
    dynamodb: Any, llm: BaseChatModel, clock: FakeClock, settings: Settings
) -> None:
    harness = Harness(dynamodb, llm, clock, memory_settings(settings, budget=2000))
    with pytest.raises(MessageOverBudgetError, match="too long"):
        await harness.say("word " * 1500)
    assert harness.store.conversations.load_turn("u", 10).messages == ()


async def test_the_budget_drops_the_oldest_whole_messages_first(
    dynamodb: Any, llm: BaseChatModel, clock: FakeClock, settings: Settings, emulator: BedrockEmulator
) -> None:
    harness = Harness(dynamodb, llm, clock, memory_settings(settings, budget=2600))
    texts = [f"note {i}: " + "lorem ipsum " * 150 for i in range(6)]
    for text in texts:
        await harness.service.start_turn("u", text)  # stored, not answered: history grows
    since = len(emulator.requests)
    await harness.say("hello")
    request = _coach_requests(emulator, since)[0]
    sent = [t.text for t in request.conversation]
    user_blocks = [text for text in texts if text in sent[0]]
    assert user_blocks
    assert user_blocks[-1] == texts[-1]  # the newest kept, whole
    assert texts[0] not in sent[0]  # the oldest dropped


async def test_the_summary_is_folded_after_the_reply_and_carried_by_the_system_prompt(
    harness: Harness, emulator: BedrockEmulator
) -> None:
    await harness.say("Hi! My name is Alexandra and I love rowing")
    for index in range(8):
        harness.clock.now += 5
        turn = await harness.service.start_turn("u", f"small talk number {index}")
        summaries_before = len(emulator.requests) - len(_coach_requests(emulator))
        async for _ in turn:
            # The first token never waits for a fold: no summary request while the reply streams.
            assert len(emulator.requests) - len(_coach_requests(emulator)) == summaries_before
        await turn.fold_summary()
    summary = harness.store.conversations.load_turn("u", 0).summary
    assert summary is not None
    assert "I love rowing" in summary.text
    since = len(emulator.requests)
    await harness.say("what do you know about me?")
    request = _coach_requests(emulator, since)[0]
    assert "Summary of the earlier conversation:" in request.system_text
    assert "I love rowing" in request.system_text
    assert all("I love rowing" not in t.text for t in request.conversation)  # summarised, not repeated


async def test_a_failed_fold_loses_nothing_and_the_next_turn_folds_again(
    dynamodb: Any, llm: BaseChatModel, clock: FakeClock, settings: Settings
) -> None:
    limits = memory_settings(settings)
    # A summarizer whose every call is refused (Bedrock rejects a blank model id).
    failing = build_chat_model(settings.model_copy(update={"model_id": " "}))
    broken = Harness(dynamodb, llm, clock, limits, summarizer_llm=failing)
    await broken.say("Hi! I love rowing")
    for index in range(8):
        await broken.say(f"small talk number {index}")
    loaded = broken.store.conversations.load_turn("u", 60)
    assert loaded.summary is None
    assert "Hi! I love rowing" in [m.content for m in loaded.messages]  # nothing lost
    await Harness(dynamodb, llm, clock, limits).say("and now?")
    summary = broken.store.conversations.load_turn("u", 0).summary
    assert summary is not None
    assert "I love rowing" in summary.text


async def test_waiting_for_a_field_survives_channels_and_re_asks_are_bounded(harness: Harness) -> None:
    reply = await harness.say("Hi! My name is Alexandra")
    assert _answer(reply) == ANSWERS["fitness_level"]
    await harness.say(ANSWERS["fitness_level"])
    await harness.say("not sure, let me check")  # current_activity: the coach waits for it
    state = harness.store.conversations.load_turn("u", 0).state
    assert state.waiting_for is not None
    assert state.waiting_for.field == "current_activity"
    # The next message arrives by SMS (a MessageSid-keyed turn of the same user): it fills the field.
    await harness.say("I swim twice a week", client_id="SM" + "0" * 32)
    state = harness.store.conversations.load_turn("u", 0).state
    assert state.waiting_for is None
    assert answer_value(state.agent_context["fitness_assessment"]["current_activity"]) == "I swim twice a week"
    await harness.say("no idea")  # limitations: asked again once
    await harness.say("I don't know")  # twice: the bound (MAX_ASKS)
    assert harness.settings.max_asks == 2
    assert harness.store.conversations.load_turn("u", 0).state.waiting_for is not None
    await harness.say("still no idea, sorry")  # one more would be a third: the coach gives up on it
    state = harness.store.conversations.load_turn("u", 0).state
    assert state.waiting_for is None
    assert "fitness_assessment.limitations" in state.skipped


async def test_messages_expire_and_reads_ignore_them_before_dynamodb_does(
    dynamodb: Any, clock: FakeClock, settings: Settings
) -> None:
    day = 24 * 3600  # the setting is in days: MESSAGE_TTL_DAYS=1
    store = Repositories.over(dynamodb, TABLE, settings.model_copy(update={"message_ttl_days": 1}), clock)
    old = store.writes.append_message("u", "user", "old news")
    clock.now += day / 2
    store.writes.append_message("u", "user", "fresh")
    assert old.created_at is not None
    item = dynamodb.get_item(
        TableName=TABLE, Key={"pk": {"S": "USER#u"}, "sk": {"S": "MSG#" + old.message_id.replace("-", "#")}}
    )["Item"]
    assert int(item["expires_at"]["N"]) == int(old.created_at.timestamp()) + day
    clock.now += day / 2 + 100  # the first has expired; DynamoDB has not removed it yet
    assert [m.content for m in store.conversations.load_turn("u", 10).messages] == ["fresh"]
    assert [m.content for m in store.conversations.history_page("u", 20).messages] == ["fresh"]


async def test_the_summary_store_keeps_the_fold_that_covers_more(store: Repositories) -> None:
    assert store.writes.save_summary("u", ConversationSummary("newer", "0000000000002-aaaaaaaaaaaa"))
    assert not store.writes.save_summary("u", ConversationSummary("older", "0000000000001-aaaaaaaaaaaa"))
    summary = store.conversations.load_turn("u", 0).summary
    assert summary is not None
    assert summary.text == "newer"


def test_tool_results_are_json_the_model_can_read(settings: Settings) -> None:
    memory = WorkingCopy(
        OnboardingAgentType.SCHEDULING, OnboardingState(current_agent="scheduling"), UserProfile(), settings
    )
    assert json.loads(memory.save_answers({"timezone": "UTC"}, step_complete=True))["still_missing"]
    assert "error" in json.loads(memory.ask_for("no_such_field"))
