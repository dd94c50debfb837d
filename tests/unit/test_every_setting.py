"""Every setting has an effect someone can see: each test here sets one to a non-default value and
observes what changes, through the product's own composition root wherever the setting travels
through it. The last test holds the list against the settings classes, so a setting that nothing
reads (as MAX_ASKS once was) fails the suite.

The SMS functions' settings are in test_every_sms_setting.py.
"""

import io
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import httpx
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import EndpointConnectionError
from pydantic import ValidationError
from urllib3.response import HTTPResponse

from functions.api.mobile_api.routes import create_app
from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.coach import CoachReply, ToolCall
from infra.local.bedrock_emulator.recorded import Fault
from onboarding.account import AccountService
from onboarding.breaker import CircuitBreaker
from onboarding.composition import build_account, build_orchestrator, build_repositories, build_turn_service, sms_intake
from onboarding.config import Limits, Settings, WebhookSettings, WorkerSettings
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.llm.working_copy import WorkingCopy
from onboarding.memory.tokens import count_tokens
from onboarding.model.errors import (
    InvalidPageSizeError,
    MessageOverBudgetError,
    MessageTooLargeError,
    ModelUnavailableError,
    RateLimitedError,
    StoreError,
    TurnInProgressError,
)
from onboarding.model.history import TurnContext
from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingAgentType, OnboardingState
from onboarding.persistence import Repositories
from onboarding.persistence.codec import state_item
from onboarding.persistence.schema import client_key, erased_key
from onboarding.replies import ERASE_NOT_ASKED, RESET_REPLY_WITH_STEP
from onboarding.sms.inbound import InboundSms
from onboarding.sms.queue import TurnQueue
from onboarding.summary import fold_due
from onboarding.turn.run import TurnTimedOutError
from onboarding.turn.service import TurnService
from tests.support.clock import FakeClock
from tests.support.setting_effects import OBSERVED, observes
from tests.support.setting_runs import query_limits, repositories, run_turn, settings_with
from tests.support.tcp_proxy import TcpProxy
from tests.unit.test_api import identity

from .conftest import TABLE

STEP = OnboardingAgentType.FITNESS_ASSESSMENT
FIELD = STEP_PROMPTS[STEP].fields[0].key


def seed_conversation(store: Repositories, user: str, count: int) -> None:
    for i in range(count):
        store.writes.append_message(user, "user" if i % 2 == 0 else "assistant", f"message {i}")


@pytest.fixture
def built_clients(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every boto3 client the composition root builds (they are the real clients, recorded)."""
    real, built = boto3.client, []

    def recording(*args: Any, **kwargs: Any) -> Any:
        client = real(*args, **kwargs)
        built.append(client)
        return client

    monkeypatch.setattr(boto3, "client", recording)
    return built


# --- the turn's reads and the prompt ------------------------------------------------------------


@observes("history_load_limit")
async def test_the_turns_query_asks_for_history_load_limit_messages(dynamodb: Any, emulator: BedrockEmulator) -> None:
    for limit in (20, 33):  # the latest 20 messages by default, and a non-default
        settings = settings_with(history_load_limit=limit)
        store = repositories(dynamodb, settings)
        seed_conversation(store, f"u{limit}", 50)
        seen = query_limits(dynamodb)
        agent = await build_orchestrator(settings, store).get_current_agent(f"u{limit}")
        # The newest `limit` messages plus the state, profile and summary items, in one Query.
        assert seen == [limit + 3]
        assert [m["content"] for m in agent.context.conversation_history][-1] == "message 49"
        dynamodb.meta.events.unregister("provide-client-params.dynamodb.Query")


@observes("window_max_messages")
async def test_the_prompt_holds_window_max_messages_of_history(dynamodb: Any, emulator: BedrockEmulator) -> None:
    for window in (8, 30):  # even, so the window starts with the client's message
        settings = settings_with(window_max_messages=window, history_load_limit=40)
        store = repositories(dynamodb, settings)
        seed_conversation(store, f"u{window}", 40)
        before = len(emulator.requests)
        await run_turn(build_turn_service(settings, store), f"u{window}", "Hello again")
        prompt = emulator.requests[before].body["messages"]
        # The window, then the current message: the newest `window` stored messages.
        said = [block["text"] for message in prompt[:-1] for block in message["content"] if "text" in block]
        assert said == [f"message {i}" for i in range(40 - window, 40)]


@observes("window_max_tokens")
def test_a_fold_is_due_once_the_window_is_over_window_max_tokens() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    messages = [
        Message("user" if i % 2 == 0 else "assistant", "a sentence of about ten tokens, said twice", f"{i:04d}", now)
        for i in range(8)
    ]
    assert not fold_due(messages, 0, None, Limits().fold)
    assert fold_due(messages, 0, None, Limits(window_max_tokens=100).fold)


@observes("summary_max_tokens", "fold_read_limit")
async def test_the_fold_reads_fold_read_limit_messages_and_keeps_summary_max_tokens(
    dynamodb: Any, emulator: BedrockEmulator
) -> None:
    stored: dict[int, str] = {}
    for cap in (800, 60):
        settings = settings_with(
            window_max_messages=4, history_load_limit=4, fold_read_limit=150, summary_max_tokens=cap
        )
        store = repositories(dynamodb, settings)
        user = f"u{cap}"
        for i in range(20):
            store.writes.append_message(user, "user", f"My fact number {i} is that I like sport number {i}")
            store.writes.append_message(user, "assistant", "Noted.")
        seen = query_limits(dynamodb)
        await run_turn(build_turn_service(settings, store), user, "And one more thing")
        summary = store.conversations.load_turn(user, 4).summary
        assert summary is not None
        stored[cap] = summary.text
        assert seen[:2] == [4 + 3, 150]  # the turn's read, then the fold's own
        dynamodb.meta.events.unregister("provide-client-params.dynamodb.Query")
    assert count_tokens(stored[60]) <= 60 < count_tokens(stored[800])


@observes("token_budget", "system_prompt_allowance", "recall_max_tokens")
async def test_the_largest_message_follows_the_token_budget_and_the_system_and_recall_allowances(
    dynamodb: Any, emulator: BedrockEmulator
) -> None:
    message = "lift " * 2800  # about 4,700 tokens: fits the default 12,000 - 5,000 - 2,000 (recall)
    tokens = count_tokens(message)
    assert 4_000 < tokens < 4_990
    await run_turn(build_turn_service(settings_with(), repositories(dynamodb, settings_with())), "a", message)
    for changes in ({"token_budget": 11_500}, {"system_prompt_allowance": 5_500}, {"recall_max_tokens": 2_500}):
        settings = settings_with(**changes)
        store = repositories(dynamodb, settings)
        with pytest.raises(MessageOverBudgetError):
            await build_turn_service(settings, store).start_turn("b", message)
        assert store.conversations.load_turn("b", 5).messages == ()  # refused before anything is stored


@observes("max_tool_rounds")
async def test_a_turn_calls_the_model_at_most_max_tool_rounds_plus_one_times(
    dynamodb: Any, emulator: BedrockEmulator
) -> None:
    for rounds in (1, 2):
        settings = settings_with(max_tool_rounds=rounds)
        # A model that asks for a tool on every round (the coach emulator never does).
        for n in range(rounds + 1):
            call = ToolCall(f"tooluse_{rounds}_{n}", "ask_for", {"field": FIELD})
            emulator.script(CoachReply("Let me note that.", (call,)))
        before = len(emulator.requests)
        store = repositories(dynamodb, settings)
        reply = await run_turn(build_turn_service(settings, store), f"u{rounds}", "Hi")
        assert len(emulator.requests) - before == rounds + 1
        # The last round's calls are not run: the turn ends with the coach's words, not a tool result.
        stored = store.conversations.load_turn(f"u{rounds}", 20).messages
        assert [m.role for m in stored].count("tool") == rounds
        assert (stored[-1].role, stored[-1].tool_calls) == ("assistant", ())
        assert reply == " ".join(["Let me note that."] * (rounds + 1))


@observes("max_asks")
def test_a_field_is_skipped_after_max_asks_asks() -> None:
    def asks_until_skipped(limits: Limits) -> int:
        memory = WorkingCopy(STEP, OnboardingState(), UserProfile(), limits)
        for ask in range(1, 20):
            if "skipped" in memory.ask_for(FIELD):
                return ask
        raise AssertionError("never skipped")

    assert asks_until_skipped(Limits()) == 3  # asked twice, skipped on the third
    assert asks_until_skipped(Limits(max_asks=4)) == 5


@observes("profile_value_chars", "profile_other_facts")
def test_the_profile_keeps_profile_value_chars_and_profile_other_facts() -> None:
    memory = WorkingCopy(STEP, OnboardingState(), UserProfile(), Limits(profile_value_chars=25, profile_other_facts=2))
    for fact in ("has a dog called Rex", "works nights", "plays the cello " * 5):
        memory.remember("other", fact)
    assert memory.profile.other_facts == ("works nights", ("plays the cello " * 5)[:25].strip())
    default = WorkingCopy(STEP, OnboardingState(), UserProfile(), Limits())
    default.remember("other", "plays the cello " * 5)
    assert default.profile.other_facts == (" ".join(("plays the cello " * 5).split()),)


@observes("answer_history_values")
def test_an_answer_keeps_answer_history_values_earlier_values_and_always_its_first() -> None:
    def earlier_values(limits: Limits) -> list[str]:
        memory = WorkingCopy(STEP, OnboardingState(), UserProfile(), limits)
        for weight in ("80 kg", "79 kg", "78 kg", "77 kg", "76 kg"):
            memory.correct("fitness_assessment.age_and_body", weight)
        return [
            earlier["value"] for earlier in json.loads(memory.history("fitness_assessment.age_and_body"))["earlier"]
        ]

    assert earlier_values(Limits(answer_history_values=2)) == ["80 kg", "77 kg"]  # the first stays
    assert earlier_values(Limits()) == ["80 kg", "79 kg", "78 kg", "77 kg"]


@observes("conversation_gap_s", "reset_keywords")
async def test_the_conversation_rules_come_from_the_settings(dynamodb: Any, emulator: BedrockEmulator) -> None:
    now = datetime.now(UTC)
    earlier = [
        Message("user", "I run", "0001", now - timedelta(minutes=10)),
        Message("assistant", "Nice.", "0002", now - timedelta(minutes=10)),
    ]
    for gap_s, history in ((1800, ["I run", "Nice."]), (60, [])):
        settings = settings_with(conversation_gap_s=gap_s)
        orchestrator = build_orchestrator(settings, repositories(dynamodb, settings))
        prepared = orchestrator.prepare("u", TurnContext(messages=tuple(earlier)))
        assert [m["content"] for m in prepared.agent.context.conversation_history] == history
    reset_reply = RESET_REPLY_WITH_STEP.format(title=STEP_PROMPTS[STEP].title.lower())
    for keywords, is_reset in ((("start over",), False), (("begin again",), True)):
        settings = settings_with(reset_keywords=keywords)
        service = build_turn_service(settings, repositories(dynamodb, settings))
        reply = await run_turn(service, f"u{is_reset}", "Begin again")
        assert (reply == reset_reply) is is_reset  # a reset is answered without the model


# --- the model client and its guards -----------------------------------------------------------


@observes("model_id", "model_max_tokens", "model_temperature")
async def test_the_model_request_carries_the_model_settings(dynamodb: Any, emulator: BedrockEmulator) -> None:
    settings = settings_with(model_id="amazon.nova-lite-v1:0", model_max_tokens=333, model_temperature=0.25)
    await run_turn(build_turn_service(settings, repositories(dynamodb, settings)), "u", "Hi")
    request = emulator.requests[-1]
    assert request.model_id == "amazon.nova-lite-v1:0"
    assert request.body["inferenceConfig"] == {"maxTokens": 333, "temperature": 0.25}


@observes("model_max_attempts")
async def test_botocore_tries_a_refused_model_call_model_max_attempts_times(
    dynamodb: Any, emulator: BedrockEmulator
) -> None:
    settings = settings_with(model_max_attempts=2, model_stream_attempts=1)
    for _ in range(5):
        emulator.queue_fault(Fault("unavailable"))
    with pytest.raises(ModelUnavailableError):
        await run_turn(build_turn_service(settings, repositories(dynamodb, settings)), "u", "Hi")
    assert len(emulator.requests) == 2


@observes("model_stream_attempts", "model_retry_budget_s", "model_first_backoff_s", "model_max_backoff_s")
async def test_a_stream_that_fails_before_its_first_token_is_retried_by_the_retry_settings(
    dynamodb: Any, emulator: BedrockEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    async def failing_turn(**changes: Any) -> tuple[int, float]:
        settings = settings_with(**changes)
        for _ in range(10):
            emulator.queue_fault(Fault("stream_error"))
        before, started = len(emulator.requests), time.monotonic()
        with pytest.raises(ModelUnavailableError):
            await run_turn(build_turn_service(settings, repositories(dynamodb, settings)), "u", "Hi")
        while emulator.take_fault() is not None:
            pass
        return len(emulator.requests) - before, time.monotonic() - started

    assert (await failing_turn(model_stream_attempts=4))[0] == 4
    # Waits of 0.3 s, then 0.6 s (plus up to 0.3 s of jitter each): a budget of 0.8 s stops after two tries.
    attempts, _ = await failing_turn(
        model_stream_attempts=5, model_first_backoff_s=0.3, model_max_backoff_s=5, model_retry_budget_s=0.8
    )
    assert attempts == 2
    _, slow = await failing_turn(model_stream_attempts=3, model_first_backoff_s=0.4, model_max_backoff_s=0.4)
    assert slow >= 0.8  # two waits of at least the first backoff
    caplog.clear()
    await failing_turn(model_stream_attempts=3, model_first_backoff_s=0.01, model_max_backoff_s=0.02)
    retried = "Model failed before its first token; retrying"
    waits = [getattr(r, "wait_s") for r in caplog.records if r.getMessage() == retried]  # noqa: B009
    assert len(waits) == 2
    assert all(wait <= 0.02 + 0.01 for wait in waits)  # capped (the jitter is at most the first backoff)


@observes("model_read_timeout_s")
async def test_a_model_slower_than_model_read_timeout_s_fails_the_turn(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with BedrockEmulator(chunk_delay_s=0.25) as slow:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", slow.url)
        patient = settings_with()
        assert await run_turn(build_turn_service(patient, repositories(dynamodb, patient)), "u", "Hi")
        hasty = settings_with(model_read_timeout_s=0.1, model_stream_attempts=1, model_max_attempts=1)
        with pytest.raises(ModelUnavailableError):
            await run_turn(build_turn_service(hasty, repositories(dynamodb, hasty)), "u", "Hi")


@observes("turn_deadline_s", "store_reserve_s")
async def test_a_slow_model_is_cut_at_the_deadline_less_the_store_reserve(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that keeps streaming (each chunk within the read timeout) still ends the turn at
    TURN_DEADLINE_S - TURN_STORE_RESERVE_S, with the user's message kept; the defaults let it finish."""
    with BedrockEmulator(chunk_delay_s=0.15) as slow:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", slow.url)
        patient = settings_with()
        assert await run_turn(build_turn_service(patient, repositories(dynamodb, patient)), "patient", "Hi")
        hasty = settings_with(
            turn_deadline_s=1.6,
            store_reserve_s=0.8,
            model_retry_budget_s=0.1,
            model_max_attempts=1,
            model_connect_timeout_s=0.1,
            model_read_timeout_s=0.5,
            dynamodb_max_attempts=1,
            dynamodb_connect_timeout_s=0.2,
            dynamodb_read_timeout_s=0.5,
        )
        store = repositories(dynamodb, hasty)
        started = time.monotonic()
        with pytest.raises(TurnTimedOutError):
            await run_turn(build_turn_service(hasty, store), "hasty", "Hi")
        elapsed = time.monotonic() - started
    assert 0.7 <= elapsed < 1.3  # cut at 1.6 - 0.8 s, not at the deadline nor when the reply ended
    assert [m.role for m in store.conversations.load_turn("hasty", 20).messages] == ["user"]
    with pytest.raises(ValidationError, match="TURN_STORE_RESERVE_S"):
        settings_with(turn_deadline_s=10, store_reserve_s=10)
    with pytest.raises(ValidationError, match="must fit in TURN_DEADLINE_S"):
        settings_with(turn_deadline_s=30)  # the default retries and timeouts do not fit in 20 s


@observes("dynamodb_connect_timeout_s", "dynamodb_read_timeout_s")
def test_a_table_that_does_not_answer_fails_within_the_dynamodb_timeouts(
    monkeypatch: pytest.MonkeyPatch, built_clients: list[Any]
) -> None:
    """A DynamoDB endpoint that accepts and never answers: the read ends after the read timeout
    (times botocore's tries), not botocore's 60 s default."""
    with TcpProxy(1) as stalled:
        stalled.mode = "stall"
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", stalled.url)
        settings = settings_with(dynamodb_max_attempts=1, dynamodb_connect_timeout_s=0.4, dynamodb_read_timeout_s=0.3)
        store = build_repositories(settings)
        assert built_clients[-1].meta.config.connect_timeout == 0.4
        started = time.monotonic()
        with pytest.raises(StoreError):
            store.conversations.load_turn("u", 20)
        assert time.monotonic() - started < 2.0


@observes("memory_write_attempts")
async def test_a_commit_that_keeps_conflicting_gives_up_after_memory_write_attempts(
    dynamodb: Any, emulator: BedrockEmulator
) -> None:
    """Another writer saves the state before each of our commits: the turn re-reads and applies
    its changes again, MEMORY_WRITE_ATTEMPTS times in all, then fails as a store failure."""
    settings = settings_with(memory_write_attempts=3, rate_limit_messages=0)
    store = repositories(dynamodb, settings)
    commits: list[int] = []

    def another_turn_saves_first(params: dict[str, Any], **_: Any) -> None:
        if any("~STATE" in json.dumps(item) for item in params["TransactItems"]):
            commits.append(1)
            version = 10 + len(commits)
            state = OnboardingState(agent_context={"goal_setting": {"timeline": f"v{version}"}})
            dynamodb.put_item(TableName=TABLE, Item=state_item("u", state, time.time(), version))

    service = build_turn_service(settings, store)
    await run_turn(service, "u", "Hi")  # the coach asks its first question
    dynamodb.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", another_turn_saves_first)
    with pytest.raises(StoreError):
        await run_turn(service, "u", "I'm a beginner")  # the coach saves the answer with a tool
    assert len(commits) == 3


@observes("model_connect_timeout_s", "region")
def test_the_clients_are_built_with_the_connect_timeout_and_the_region(
    dynamodb: Any, emulator: BedrockEmulator, built_clients: list[Any]
) -> None:
    build_turn_service(settings_with(model_connect_timeout_s=1.5, region="eu-west-1"))
    by_service = {client.meta.service_model.service_name: client for client in built_clients}
    assert by_service["bedrock-runtime"].meta.config.connect_timeout == 1.5
    assert {client.meta.region_name for client in built_clients} == {"eu-west-1"}


@observes("circuit_failure_threshold", "circuit_reset_s")
def test_the_breaker_opens_after_the_threshold_and_half_opens_after_the_reset() -> None:
    clock = FakeClock(100.0)
    breaker = CircuitBreaker(Limits(circuit_failure_threshold=2, circuit_reset_s=7).breaker, clock)
    breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_failure()
    assert (breaker.state, breaker.retry_after_s()) == ("open", 7)
    clock.now += 7
    assert breaker.allows_call()  # half-open
    default = CircuitBreaker(Limits().breaker, clock)
    for _ in range(4):
        default.record_failure()
    assert default.state == "closed"  # five in a row by default


@observes("store_circuit_failure_threshold", "store_circuit_reset_s")
def test_the_store_breaker_opens_after_its_threshold_and_stays_open_for_its_reset(
    store: Repositories, llm: Any
) -> None:
    service = build_turn_service(settings_with(store_circuit_failure_threshold=2, store_circuit_reset_s=7), store, llm)
    breaker = service._store_breaker
    breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_failure()
    assert (breaker.state, breaker.retry_after_s()) == ("open", 7)
    default = build_turn_service(settings_with(), store, llm)._store_breaker
    for _ in range(2):
        default.record_failure()
    assert default.state == "closed"  # three in a row by default
    default.record_failure()
    assert (default.state, default.retry_after_s()) == ("open", 15)


# --- the store -----------------------------------------------------------------------------------


@observes("table_name")
def test_the_store_writes_to_table_name(dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName="other-table",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    build_repositories(settings_with(table_name="other-table")).writes.append_message("u", "user", "hello")
    assert dynamodb.scan(TableName="other-table")["Count"] == 1
    assert dynamodb.scan(TableName=TABLE)["Count"] == 0


def _server_error() -> AWSResponse:
    body = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"down"}'
    raw = HTTPResponse(body=io.BytesIO(body), status=500, preload_content=False)
    return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 500, HTTPHeaders(), raw)


@observes("dynamodb_max_attempts")
def test_botocore_tries_a_failing_table_call_dynamodb_max_attempts_times(
    dynamodb: Any, built_clients: list[Any]
) -> None:
    store = build_repositories(settings_with(dynamodb_max_attempts=2))
    sent: list[int] = []

    def refused(request: Any, **_: Any) -> AWSResponse:
        """Raised before moto's own before-send handler runs, so the write never lands."""
        sent.append(1)
        raise EndpointConnectionError(endpoint_url=request.url)

    built_clients[-1].meta.events.register_first("before-send.dynamodb.TransactWriteItems", refused)
    with pytest.raises(StoreError):
        store.writes.append_message("u", "user", "hello")
    assert len(sent) == 2
    assert dynamodb.scan(TableName=TABLE)["Count"] == 0


def test_a_write_answered_only_by_server_errors_after_it_landed_is_found_stored_once(
    dynamodb: Any, built_clients: list[Any]
) -> None:
    """botocore calls every before-send handler: moto behind ours stores the write, and the caller
    only ever sees 500s. The store looks before it reports a failure, and finds its own item."""
    store = build_repositories(settings_with(dynamodb_max_attempts=2))
    sent: list[int] = []

    def lost(**_: Any) -> AWSResponse:
        sent.append(1)
        return _server_error()

    built_clients[-1].meta.events.register_first("before-send.dynamodb.TransactWriteItems", lost)
    message = store.writes.append_message("u", "user", "hello")
    assert len(sent) == 2
    assert [item["content"]["S"] for item in dynamodb.scan(TableName=TABLE)["Items"]] == [message.content]


@observes("write_attempts")
def test_a_message_key_collision_is_retried_write_attempts_times(dynamodb: Any) -> None:
    sent: list[int] = []

    def taken(**_: Any) -> tuple[Any, dict[str, Any]]:
        """DynamoDB's answer when the message's new key is taken (by another item than ours)."""
        sent.append(1)
        error = {
            "Error": {"Code": "TransactionCanceledException", "Message": "taken"},
            "CancellationReasons": [{"Code": "ConditionalCheckFailed"}, {"Code": "None"}, {"Code": "None"}],
            "ResponseMetadata": {},
        }
        return type("Http", (), {"status_code": 400, "headers": {}})(), error

    dynamodb.meta.events.register("before-call.dynamodb.TransactWriteItems", taken)
    with pytest.raises(StoreError):
        repositories(dynamodb, settings_with(write_attempts=4)).writes.append_message("u", "user", "hello")
    assert len(sent) == 4


@observes("erase_batch_attempts")
def test_unprocessed_deletes_are_resent_erase_batch_attempts_times(dynamodb: Any) -> None:
    store = repositories(dynamodb, settings_with(erase_batch_attempts=3))
    store.writes.append_message("u", "user", "hello")
    sent: list[int] = []

    def throttled(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        sent.append(1)
        return type("Http", (), {"status_code": 200, "headers": {}})(), {
            "UnprocessedItems": json.loads(params["body"])["RequestItems"],
            "ResponseMetadata": {},
        }

    dynamodb.meta.events.register("before-call.dynamodb.BatchWriteItem", throttled)
    with pytest.raises(StoreError):
        store.erasure.erase("u")
    assert len(sent) == 3


@observes("erased_marker_lifetime_s")
def test_the_erase_mark_lasts_erased_marker_lifetime_s(dynamodb: Any) -> None:
    """Writes of turns that began before an erase are refused while the mark lasts, then it expires."""
    for lifetime in (7200, Limits().erased_marker_lifetime_s):
        now = time.time()
        repositories(dynamodb, settings_with(erased_marker_lifetime_s=lifetime)).erasure.erase("u")
        mark = dynamodb.get_item(TableName=TABLE, Key=erased_key("u"))["Item"]
        assert abs(int(mark["expires_at"]["N"]) - (now + lifetime)) <= 2
    assert Limits().erased_marker_lifetime_s > 14 * 24 * 3600  # longer than the SMS queue keeps a text


@observes("erase_confirmation_window_s")
def test_an_erase_by_text_is_confirmed_within_erase_confirmation_window_s(dynamodb: Any, sms_queue: str) -> None:
    clock = FakeClock(1_800_000_000.0)
    settings = settings_with(erase_confirmation_window_s=120)
    store = repositories(dynamodb, settings, clock)
    intake = sms_intake(
        store, TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue), settings, clock=clock
    )

    def text(sid: str, body: str) -> str | None:
        return intake.accept(InboundSms(message_id=sid, from_phone="+15551230001", to_phone="+15550000000", body=body))

    assert "within 2 minutes" in str(text("SM1", "DELETE MY DATA"))
    clock.advance(121)
    assert text("SM2", "YES DELETE") == ERASE_NOT_ASKED
    assert "within 2 minutes" in str(text("SM3", "DELETE MY DATA"))
    clock.advance(119)
    assert "erased" in str(text("SM4", "YES DELETE"))


@observes("message_ttl_days")
def test_messages_expire_message_ttl_days_after_they_were_written(dynamodb: Any) -> None:
    clock = FakeClock()
    for days, user in ((30, "a"), (0, "b")):
        stored = repositories(dynamodb, settings_with(message_ttl_days=days), clock).writes.append_message(
            user, "user", "hi"
        )
        item = dynamodb.query(
            TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": f"USER#{user}"}}
        )["Items"][0]
        assert stored.created_at is not None
        expected = {"N": str(int(stored.created_at.timestamp()) + 30 * 86400)} if days else None
        assert item.get("expires_at") == expected


@observes("client_record_lifetime_s")
def test_a_client_message_id_is_remembered_client_record_lifetime_s(dynamodb: Any) -> None:
    clock = FakeClock()
    store = repositories(dynamodb, settings_with(client_record_lifetime_s=7200), clock)
    store.writes.lease_user_message("u", "client-1", "hello")
    record = dynamodb.get_item(TableName=TABLE, Key=client_key("u", "client-1"))["Item"]
    assert record["expires_at"] == {"N": str(int(clock.now) + 7200)}


@observes("in_progress_retry_after_s")
def test_a_copy_of_a_message_being_answered_polls_after_in_progress_retry_after_s(dynamodb: Any) -> None:
    clock = FakeClock()
    settings = settings_with(in_progress_retry_after_s=7)
    store = repositories(dynamodb, settings, clock)
    store.writes.lease_user_message("u", "client-1", "hello")
    with pytest.raises(TurnInProgressError) as refused:
        store.writes.lease_user_message("u", "client-1", "hello")
    assert refused.value.retry_after_s == 7  # not the hold's 60 s
    clock.now += settings.turn_lease_s - 3
    with pytest.raises(TurnInProgressError) as refused:
        store.writes.lease_user_message("u", "client-1", "hello")
    assert refused.value.retry_after_s == 3  # never past the hold's end


@observes("link_code_lifetime_s")
def test_a_link_code_expires_after_link_code_lifetime_s(dynamodb: Any) -> None:
    clock = FakeClock()
    phones = repositories(dynamodb, settings_with(link_code_lifetime_s=120), clock).phones
    code = phones.create_link_code("app-user")
    assert code.expires_at == datetime.fromtimestamp(int(clock.now) + 120, UTC)
    clock.now += 121
    assert phones.link_by_code("+15551230001", code.code) is None


@observes("link_codes_per_window", "link_code_window_s")
async def test_link_codes_are_limited_per_window_over_http(
    dynamodb: Any, service: TurnService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POST /phone-links: LINK_CODE_RATE_LIMIT codes per LINK_CODE_RATE_WINDOW_S, then 429 with
    Retry-After; an erase does not reset the count; the next window allows codes again."""
    clock = FakeClock(1_800_000_000.0)
    settings = settings_with(link_codes_per_window=2, link_code_window_s=600)
    account = build_account(settings, repositories(dynamodb, settings, clock))
    transport = httpx.ASGITransport(app=create_app(service, account))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        statuses = [(await http.post("/phone-links", headers=identity("u"))).status_code for _ in range(2)]
        await http.delete("/me", headers=identity("u"))
        refused = await http.post("/phone-links", headers=identity("u"))
        clock.advance(600)
        again = await http.post("/phone-links", headers=identity("u"))
    assert statuses == [201, 201]
    assert (refused.status_code, refused.json()["error"]) == (429, "rate_limited")
    assert "phone-link codes" in refused.json()["message"]
    assert 1 <= int(refused.headers["retry-after"]) <= 600
    assert again.status_code == 201
    assert Limits().link_code_rate_limit.messages == 5


@observes("rate_limit_messages", "rate_limit_window_s")
def test_the_rate_limit_counts_rate_limit_messages_per_rate_limit_window_s(dynamodb: Any) -> None:
    clock = FakeClock(1_800_000_000.0)  # the start of a window
    settings = settings_with(rate_limit_messages=2, rate_limit_window_s=10)
    writes = repositories(dynamodb, settings, clock).writes
    for text in ("one", "two"):
        writes.append_message("u", "user", text, settings.rate_limit)
    with pytest.raises(RateLimitedError) as refused:
        writes.append_message("u", "user", "three", settings.rate_limit)
    assert refused.value.retry_after_s == 10
    clock.now += 10
    writes.append_message("u", "user", "three", settings.rate_limit)
    assert settings_with(rate_limit_messages=0).rate_limit is None  # 0 turns it off


@observes("max_message_bytes")
async def test_a_message_over_max_message_bytes_is_refused(dynamodb: Any, emulator: BedrockEmulator) -> None:
    settings = settings_with(max_message_bytes=10)
    service = build_turn_service(settings, repositories(dynamodb, settings))
    assert await run_turn(service, "u", "é" * 5)  # ten bytes of UTF-8
    with pytest.raises(MessageTooLargeError):
        await service.start_turn("u", "é" * 5 + "!")


@observes("history_page_max", "history_page_size")
async def test_history_pages_follow_history_page_size_and_max_over_http(dynamodb: Any, service: TurnService) -> None:
    """Through the API: without `limit`, a page holds HISTORY_PAGE_SIZE messages; a `limit` over
    HISTORY_PAGE_MAX is a 400 in the error shape (not a 500), and the default max admits more."""
    settings = settings_with(history_page_max=5, history_page_size=3)
    store = repositories(dynamodb, settings)
    seed_conversation(store, "u", 8)

    async def page(account: AccountService, query: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(service, account))
        async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
            return await http.get(f"/history{query}", headers=identity("u"))

    small = build_account(settings, store)
    assert len((await page(small, "")).json()["messages"]) == 3
    assert len((await page(small, "?limit=5")).json()["messages"]) == 5
    refused = await page(small, "?limit=6")
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_request")
    assert "between 1 and 5" in refused.json()["message"]
    with pytest.raises(InvalidPageSizeError):
        small.history("u", 6)
    defaults = build_account(settings_with(), store)
    assert len((await page(defaults, "")).json()["messages"]) == 8  # 20 by default: all 8
    assert len((await page(defaults, "?limit=6")).json()["messages"]) == 6
    with pytest.raises(ValidationError, match="HISTORY_PAGE_SIZE"):
        settings_with(history_page_max=5)  # the default page size, 20, is over it


# --- the list itself -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def every_setting() -> set[str]:
    # Imported for their @observes registrations: the SMS settings', the flags', the fold's, the link's
    # and the check-ins' tests.
    import tests.unit.test_check_ins
    import tests.unit.test_every_flag_setting
    import tests.unit.test_every_sms_setting
    import tests.unit.test_fold_catch_up
    import tests.unit.test_linking
    import tests.unit.test_recall  # noqa: F401

    return {
        *Settings.model_fields,
        *(f"webhook.{name}" for name in WebhookSettings.model_fields),
        *(f"worker.{name}" for name in WorkerSettings.model_fields),
    }


def test_every_setting_has_a_test_that_changes_it(every_setting: set[str]) -> None:
    assert sorted(every_setting - set(OBSERVED)) == []
    assert sorted(set(OBSERVED) - every_setting) == []  # no test claims a setting that does not exist
