"""Model failures: retries before the first token, the circuit breaker, and the metrics operators alarm on.

The store's breaker: after reads of the memory that failed in a row, turns stop trying to read
for a while and go on degraded (no memory), then try again and recover by themselves. The user's
message is still stored while it is open (decision 0010).
"""

import json
import logging
from typing import Any

import httpx
import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    EventStreamError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from langchain_core.language_models import BaseChatModel

from functions.api.mobile_api.routes import create_app
from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.coach import CoachReply, ToolCall
from infra.local.bedrock_emulator.recorded import Fault
from onboarding.account import AccountService
from onboarding.breaker import CircuitBreaker
from onboarding.composition import build_turn_service
from onboarding.config import DEFAULT_LIMITS, BreakerPolicy, RetryPolicy, Settings
from onboarding.llm.bedrock import build_chat_model, is_transient_model_error
from onboarding.model.errors import CoachUnavailableError, ModelUnavailableError, StoreError
from onboarding.model.history import TurnContext
from onboarding.persistence import Conversations, Repositories
from onboarding.replies import MEMORY_UNAVAILABLE_NOTICE
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService
from tests.support.clock import FakeClock
from tests.unit.test_api import identity, parse_sse

pytestmark = pytest.mark.unit


def settings_with(settings: Settings, **changes: Any) -> Settings:
    """`settings` with `changes`, validated (and no misspelt name silently ignored)."""
    assert changes.keys() <= Settings.model_fields.keys()
    return Settings.model_validate(settings.model_dump() | changes)


def service_with(
    store: Repositories, llm: BaseChatModel, settings: Settings, breaker: CircuitBreaker | None = None
) -> TurnService:
    """A turn service whose limits (retries among them) are `settings`, as the composition root builds it."""
    orchestrator = OnboardingAgentOrchestrator(store.conversations, llm, settings)
    store_breaker = CircuitBreaker(settings.store_breaker, name="store")
    return TurnService(orchestrator, store, breaker or CircuitBreaker(settings.breaker), store_breaker=store_breaker)


def metrics_in(output: str) -> list[str]:
    """Names of the Embedded Metric Format metrics printed in `output`."""
    names = []
    for line in output.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            names += [m["Name"] for m in json.loads(line)["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    return names


@pytest.mark.parametrize(
    "fault", [Fault("stream_throttle"), Fault("stream_error", after_chunks=0)], ids=["throttling", "stream-error"]
)
async def test_a_stream_that_fails_before_its_first_token_is_retried(
    service: TurnService,
    store: Repositories,
    emulator: BedrockEmulator,
    fault: Fault,
    capsys: pytest.CaptureFixture[str],
) -> None:
    emulator.queue_fault(fault)
    before = len(emulator.requests)
    result = await (await service.start_turn("u", "Hello")).collect()
    assert result.reply.startswith("Hi, I'm your coach!")
    assert len(emulator.requests) - before == 2
    assert [m.role for m in store.conversations.load_turn("u", 20).messages] == ["user", "assistant"]
    assert "ModelRetry" in metrics_in(capsys.readouterr().out)


async def test_a_retry_after_a_tool_round_keeps_nothing_of_the_first_try(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    """The first try calls a tool (no text yet), then its next round fails before any text: the
    retried reply never saw that tool call, so neither the call, its result nor its effect on the
    state is stored; only the retry's own."""
    first_try = ToolCall("tooluse-first-try", "save_fitness_assessment", {"fitness_level": "advanced"})
    emulator.script(CoachReply("", (first_try,)))
    emulator.queue_fault(Fault("none"))  # the first round answers (the scripted tool call)...
    emulator.queue_fault(Fault("stream_error", after_chunks=0))  # ... the second fails at once
    result = await (await service.start_turn("u", "I'm a beginner")).collect()
    stored = store.conversations.load_turn("u", 20)
    calls = [call.call_id for m in stored.messages for call in m.tool_calls]
    results = [m.tool_call_id for m in stored.messages if m.role == "tool"]
    assert "tooluse-first-try" not in calls + results
    assert calls == results  # the retry's own calls, each with its result
    saved = stored.state.agent_context.get("fitness_assessment", {})
    assert saved.get("fitness_level") != "advanced"  # the first try's effect is gone too
    assert result.assistant_message is not None


@pytest.mark.parametrize("fault", [Fault("throttle"), Fault("unavailable")], ids=["429", "503"])
async def test_an_error_response_is_retried_by_botocore_with_backoff(
    store: Repositories, settings: Settings, emulator: BedrockEmulator, fault: Fault
) -> None:
    """botocore's standard mode retries what Bedrock refuses outright; our retries do not add to it."""
    botocore_retries = settings_with(settings, model_max_attempts=2)
    service = service_with(store, build_chat_model(botocore_retries), botocore_retries)
    emulator.queue_fault(fault)
    before = len(emulator.requests)
    result = await (await service.start_turn("u", "Hello")).collect()
    assert result.reply.startswith("Hi, I'm your coach!")
    assert len(emulator.requests) - before == 2


async def test_an_error_response_after_botocores_retries_is_not_retried_again(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    emulator.queue_fault(Fault("throttle"))  # the fixture's model makes one attempt
    before = len(emulator.requests)
    with pytest.raises(ModelUnavailableError):
        await (await service.start_turn("u", "Hello")).collect()
    assert len(emulator.requests) - before == 1
    assert [m.role for m in store.conversations.load_turn("u", 20).messages] == ["user"]


async def test_a_failure_after_the_first_token_is_not_retried(
    service: TurnService, store: Repositories, emulator: BedrockEmulator
) -> None:
    """A retry would send the user the start of the reply twice; they are told instead."""
    emulator.queue_fault(Fault("stream_throttle", after_chunks=2))
    before = len(emulator.requests)
    received: list[str] = []
    turn = await service.start_turn("u", "Hello")

    async def consume() -> None:
        async for chunk in turn:
            received.append(chunk)

    with pytest.raises(ModelUnavailableError):
        await consume()
    assert len(received) == 2
    assert len(emulator.requests) - before == 1
    assert [(m.role, m.content) for m in store.conversations.load_turn("u", 20).messages] == [("user", "Hello")]


async def test_retries_stop_within_the_time_budget(
    llm: BaseChatModel, store: Repositories, settings: Settings, emulator: BedrockEmulator
) -> None:
    """With backoffs longer than the budget, no retry is started: the Lambda's time is not spent waiting."""
    patient = settings_with(
        settings,
        model_stream_attempts=10,
        model_retry_budget_s=0.2,
        model_first_backoff_s=1.0,
        model_max_backoff_s=4.0,
    )
    assert patient.retry == RetryPolicy(attempts=10, budget_s=0.2, first_backoff_s=1.0, max_backoff_s=4.0)
    service = service_with(store, llm, patient)
    for _ in range(10):
        emulator.queue_fault(Fault("stream_throttle"))
    before = len(emulator.requests)
    with pytest.raises(ModelUnavailableError):
        await (await service.start_turn("u", "Hello")).collect()
    assert len(emulator.requests) - before == 1


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (EventStreamError({"Error": {"Code": "throttlingException"}}, "ConverseStream"), True),
        (EventStreamError({"Error": {"Code": "modelStreamErrorException"}}, "ConverseStream"), True),
        (EventStreamError({"Error": {"Code": "validationException"}}, "ConverseStream"), False),
        (ResponseStreamingError(error="connection reset"), True),
        (ReadTimeoutError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com"), True),
        (ClientError({"Error": {"Code": "ThrottlingException"}}, "ConverseStream"), False),
        (EndpointConnectionError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com"), False),
        (ClientError({"Error": {"Code": "ValidationException"}}, "ConverseStream"), False),
        (ClientError({"Error": {"Code": "AccessDeniedException"}}, "ConverseStream"), False),
        (ValueError("a bug of ours"), False),
    ],
)
def test_only_transient_errors_are_retried(error: BaseException, transient: bool) -> None:
    assert is_transient_model_error(error) is transient


def test_the_breaker_opens_after_failures_in_a_row_and_half_opens_after_its_reset_time(settings: Settings) -> None:
    clock = FakeClock()
    policy = settings_with(settings, circuit_failure_threshold=3, circuit_reset_s=30).breaker
    assert policy == BreakerPolicy(failure_threshold=3, reset_s=30)
    breaker = CircuitBreaker(policy, clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    breaker.record_success()  # a success resets the count
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_failure()
    assert (breaker.state, breaker.allows_call(), breaker.retry_after_s()) == ("open", False, 30)
    clock.now += 29.5
    assert (breaker.allows_call(), breaker.retry_after_s()) == (False, 1)
    clock.now += 0.5
    assert (breaker.state, breaker.allows_call()) == ("half-open", True)
    breaker.record_failure()  # the trial call failed: open again, for a full reset time
    assert (breaker.state, breaker.retry_after_s()) == ("open", 30)
    clock.now += 30
    breaker.record_success()
    assert (breaker.state, breaker.retry_after_s()) == ("closed", 0)


async def test_an_open_breaker_answers_at_once_without_the_model_and_keeps_the_message(
    llm: BaseChatModel,
    store: Repositories,
    settings: Settings,
    emulator: BedrockEmulator,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()
    limits = settings_with(settings, circuit_failure_threshold=2, circuit_reset_s=60, model_stream_attempts=1)
    service = service_with(store, llm, limits, CircuitBreaker(limits.breaker, clock=clock))
    for _ in range(2):
        emulator.queue_fault(Fault("stream_error"))
        with pytest.raises(ModelUnavailableError):
            await (await service.start_turn("u", "are you there?")).collect()
    before = len(emulator.requests)
    with pytest.raises(CoachUnavailableError, match="we'll get back to you") as raised:
        await (await service.start_turn("u", "hello?")).collect()
    assert raised.value.retry_after_s == 60
    assert len(emulator.requests) == before, "an open breaker must not call the model"
    assert [m.content for m in store.conversations.load_turn("u", 20).messages] == [
        "are you there?",
        "are you there?",
        "hello?",
    ]
    assert {"ModelFailed", "ModelCircuitOpened", "ModelCallSkipped"} <= set(metrics_in(capsys.readouterr().out))
    clock.now += 60  # the outage is over: the next turn tries the model and answers all three messages
    result = await (await service.start_turn("u", "still there?")).collect()
    assert result.assistant_message is not None
    assert emulator.requests[-1].conversation[-1].text == "are you there?\nare you there?\nhello?\nstill there?"


async def test_the_api_answers_503_with_retry_after_when_the_breaker_is_open(
    llm: BaseChatModel, store: Repositories, account: AccountService, settings: Settings, emulator: BedrockEmulator
) -> None:
    limits = settings_with(settings, circuit_failure_threshold=1, circuit_reset_s=45, model_stream_attempts=1)
    service = service_with(store, llm, limits, CircuitBreaker(limits.breaker, clock=FakeClock()))
    transport = httpx.ASGITransport(app=create_app(service, account))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as client:
        emulator.queue_fault(Fault("throttle"))
        failed = await client.post("/chat", json={"message": "one"}, headers=identity("u"))
        assert (failed.status_code, failed.json()["error"]) == (502, "model_unavailable")
        paused = await client.post("/chat", json={"message": "two"}, headers=identity("u"))
        streamed = await client.post(
            "/chat", json={"message": "three"}, headers=identity("u") | {"accept": "text/event-stream"}
        )
    assert (paused.status_code, paused.headers["retry-after"]) == (503, "45")
    body: dict[str, Any] = paused.json()
    assert body["error"] == "coach_unavailable"
    assert "Your message is saved" in body["message"]
    [(name, data)] = parse_sse(streamed.text)
    assert (name, data["error"], data["retryAfter"]) == ("error", "coach_unavailable", 45)
    assert [m.content for m in store.conversations.load_turn("u", 20).messages] == ["one", "two", "three"]


async def test_a_history_read_failure_is_logged_and_counted(
    dynamodb: Any,
    llm: BaseChatModel,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A failed history read: the turn goes on with empty history; operators see a warning and a metric."""
    orchestrator = OnboardingAgentOrchestrator(Conversations(dynamodb, "missing-table"), llm, settings)
    with caplog.at_level(logging.WARNING):
        agent = await orchestrator.get_current_agent("u")
    assert list(agent.context.conversation_history) == []
    assert any(r.levelno == logging.WARNING and "Could not load" in r.getMessage() for r in caplog.records)
    assert metrics_in(capsys.readouterr().out) == ["HistoryLoadFailed"]


def test_the_unit_fixture_keeps_the_default_policy_shape(settings: Settings) -> None:
    """Tests shorten the waits only; the number of tries is the product's default."""
    assert settings.retry.attempts == DEFAULT_LIMITS.retry.attempts


pytestmark = pytest.mark.unit


class FlakyReads:
    """Stands in for the conversation repository's `load_turn`: counts the reads, fails while `down`."""

    def __init__(self, store: Repositories) -> None:
        self.real = store.conversations.load_turn
        self.reads = 0
        self.down = True

    def __call__(self, *args: Any, **kwargs: Any) -> TurnContext:
        self.reads += 1
        if self.down:
            raise StoreError("the table did not answer")
        return self.real(*args, **kwargs)


async def _reply(service: TurnService, text: str) -> str:
    return (await (await service.start_turn("u", text)).collect()).reply


async def test_the_breaker_opens_skips_the_read_half_opens_and_closes_on_success(
    store: Repositories,
    llm: BaseChatModel,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()
    limits = settings_with(settings, store_circuit_failure_threshold=2, store_circuit_reset_s=15)
    breaker = CircuitBreaker(limits.store_breaker, clock, name="store")
    orchestrator = OnboardingAgentOrchestrator(store.conversations, llm, limits)
    service = TurnService(orchestrator, store, CircuitBreaker(limits.breaker), store_breaker=breaker)
    reads = FlakyReads(store)
    monkeypatch.setattr(store.conversations, "load_turn", reads)

    for n in (1, 2):  # two failed reads in a row: each turn tried, and went on without its memory
        assert (await _reply(service, f"failing {n}")).startswith(MEMORY_UNAVAILABLE_NOTICE)
    assert (reads.reads, breaker.state) == (2, "open")
    assert "StoreCircuitOpened" in metrics_in(capsys.readouterr().out)

    for n in (3, 4):  # open: no read at all, degraded at once
        assert (await _reply(service, f"skipped {n}")).startswith(MEMORY_UNAVAILABLE_NOTICE)
    assert reads.reads == 2
    assert metrics_in(capsys.readouterr().out).count("HistoryLoadSkipped") == 2

    clock.advance(15)  # half-open: one read is tried; it fails, so open again for a full reset time
    assert breaker.state == "half-open"
    await _reply(service, "trial")
    assert (reads.reads, breaker.state, breaker.retry_after_s()) == (3, "open", 15)
    await _reply(service, "skipped again")
    assert reads.reads == 3

    clock.advance(15)
    reads.down = False  # the store is back: the trial read succeeds and the breaker closes
    reply = await _reply(service, "back")
    assert not reply.startswith(MEMORY_UNAVAILABLE_NOTICE)
    assert (reads.reads, breaker.state) == (4, "closed")
    await _reply(service, "and again")
    assert reads.reads == 5

    # Every message was stored, the skipped turns' too: the breaker guards the read, not the writes.
    said = [m.content for m in store.conversations.load_turn("u", 40).messages if m.role == "user"]
    assert said == ["failing 1", "failing 2", "skipped 3", "skipped 4", "trial", "skipped again", "back", "and again"]


async def test_a_success_between_failures_keeps_the_breaker_closed(
    store: Repositories, llm: BaseChatModel, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = settings_with(settings, store_circuit_failure_threshold=2)
    breaker = CircuitBreaker(limits.store_breaker, FakeClock(), name="store")
    service = TurnService(
        OnboardingAgentOrchestrator(store.conversations, llm, limits),
        store,
        CircuitBreaker(limits.breaker),
        store_breaker=breaker,
    )
    reads = FlakyReads(store)
    monkeypatch.setattr(store.conversations, "load_turn", reads)
    await _reply(service, "one")
    reads.down = False
    await _reply(service, "two")
    reads.down = True
    await _reply(service, "three")
    assert (reads.reads, breaker.state) == (3, "closed")


def test_the_composition_root_gives_each_service_a_store_breaker_of_its_own(
    store: Repositories, llm: BaseChatModel, settings: Settings
) -> None:
    first, second = (build_turn_service(settings, store, llm) for _ in range(2))
    assert first._store_breaker is not second._store_breaker
    assert first._store_breaker.name == "store"
    assert first._deps.breaker.name == "model"
