"""Per-user rate limit: counted in the same write that stores the message, on both channels."""

import json
from typing import Any

import httpx
import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from langchain_core.language_models import BaseChatModel

from functions.api.mobile_api.routes import create_app
from functions.sms_worker.app import make_handler
from infra.local.lambda_runner import LocalLambdaContext
from infra.local.twilio_emulator import TwilioEmulator
from onboarding.account import AccountService
from onboarding.breaker import CircuitBreaker
from onboarding.composition import sms_responder
from onboarding.config import RateLimit, Settings
from onboarding.model.errors import RateLimitedError, StoreError, TurnInProgressError
from onboarding.model.messages import Message
from onboarding.persistence import Repositories
from onboarding.replies import SLOW_DOWN
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.sms.sender import TwilioSender
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService
from tests.support.clock import FakeClock
from tests.support.faults import fail_nth_call
from tests.support.seed import commit
from tests.support.sqs_events import sqs_event, sqs_record
from tests.unit.conftest import TABLE

pytestmark = pytest.mark.unit

LIMIT = RateLimit(messages=3, window_s=60)


def identity(sub: str) -> dict[str, str]:
    """The header Lambda Web Adapter builds from API Gateway's request context."""
    return {"x-amzn-request-context": json.dumps({"requestId": "req-1", "authorizer": {"claims": {"sub": sub}}})}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def limited_settings(settings: Settings) -> Settings:
    """The test settings with LIMIT as the rate limit and 1000-byte messages."""
    limited = Settings.model_validate(
        settings.model_dump()
        | {"rate_limit_messages": LIMIT.messages, "rate_limit_window_s": LIMIT.window_s, "max_message_bytes": 1000}
    )
    assert limited.rate_limit == LIMIT
    return limited


@pytest.fixture
def limited_store(dynamodb: Any, limited_settings: Settings, clock: FakeClock) -> Repositories:
    return Repositories.over(dynamodb, TABLE, limited_settings, clock=clock)


@pytest.fixture
def limited_service(limited_store: Repositories, llm: BaseChatModel, limited_settings: Settings) -> TurnService:
    orchestrator = OnboardingAgentOrchestrator(limited_store.conversations, llm, limited_settings)
    store_breaker = CircuitBreaker(limited_settings.store_breaker, name="store")
    return TurnService(
        orchestrator, limited_store, CircuitBreaker(limited_settings.breaker), store_breaker=store_breaker
    )


def contents(store: Repositories, user_id: str = "u") -> list[str]:
    return [m.content for m in store.conversations.load_turn(user_id, 50).messages if m.role == "user"]


def test_the_message_over_the_limit_is_refused_and_not_stored(limited_store: Repositories, clock: FakeClock) -> None:
    for i in range(3):
        limited_store.writes.append_message("u", "user", f"m{i}", LIMIT)
    with pytest.raises(RateLimitedError) as refused:
        limited_store.writes.append_message("u", "user", "one too many", LIMIT)
    assert refused.value.retry_after_s == 50  # the window ends 50 s from now
    assert contents(limited_store) == ["m0", "m1", "m2"]
    limited_store.writes.append_message("u", "assistant", "replies are never limited")
    limited_store.writes.append_message("other-user", "user", "each user has their own count", LIMIT)
    clock.now += 50  # the next window
    limited_store.writes.append_message("u", "user", "later", LIMIT)
    assert contents(limited_store) == ["m0", "m1", "m2", "later"]


def test_the_counter_sorts_before_messages_and_expires(
    limited_store: Repositories, dynamodb: Any, clock: FakeClock
) -> None:
    """The newest-first Query of a turn never meets counters; TTL removes them after their window."""
    limited_store.writes.append_message("u", "user", "hi", LIMIT)
    items = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :limit)",
        ExpressionAttributeValues={":pk": {"S": "USER#u"}, ":limit": {"S": "LIMIT#"}},
    )["Items"]
    [counter] = items
    assert counter["sk"]["S"] < "MSG#"
    assert counter["message_count"]["N"] == "1"
    assert int(counter["expires_at"]["N"]) > clock.now + 50
    assert [m.content for m in limited_store.conversations.load_turn("u", 20).messages] == ["hi"]


async def test_a_repeated_client_message_id_does_not_count(
    limited_service: TurnService, limited_store: Repositories
) -> None:
    for _ in range(5):
        await (await limited_service.start_turn("u", "same message", "client-1")).collect()
    await (await limited_service.start_turn("u", "second", "client-2")).collect()
    await (await limited_service.start_turn("u", "third", "client-3")).collect()
    with pytest.raises(RateLimitedError):
        await limited_service.start_turn("u", "fourth", "client-4")
    assert contents(limited_store) == ["same message", "second", "third"]


def test_a_repeated_client_message_id_is_replayed_even_when_the_window_is_full(limited_store: Repositories) -> None:
    """Only a model call counts: a redelivery (an SQS retry) in a full window is told to wait while
    the first is answered, and gets the stored turn once it is, neither counted."""
    first = limited_store.writes.lease_user_message("u", "client-1", "m0", LIMIT)
    for i in (1, 2):
        limited_store.writes.lease_user_message("u", f"client-{i + 1}", f"m{i}", LIMIT)
    with pytest.raises(TurnInProgressError):
        limited_store.writes.lease_user_message("u", "client-1", "m0", LIMIT)
    commit(limited_store, "u", [Message("assistant", "Noted.")], client_id="client-1")
    again = limited_store.writes.lease_user_message("u", "client-1", "m0", LIMIT)
    assert (again.first, again.user_message) == (False, first.user_message)
    assert again.reply is not None
    assert contents(limited_store) == ["m0", "m1", "m2"]


async def test_a_refused_client_message_id_can_be_sent_again_later(
    limited_service: TurnService, limited_store: Repositories, clock: FakeClock
) -> None:
    for i in range(3):
        await limited_service.start_turn("u", f"m{i}")
    with pytest.raises(RateLimitedError):
        await limited_service.start_turn("u", "retry me", "client-9")
    clock.now += 60
    result = await (await limited_service.start_turn("u", "retry me", "client-9")).collect()
    assert result.user_message.content == "retry me"
    assert not result.replayed


async def test_the_api_answers_429_with_retry_after_and_stores_nothing(
    limited_service: TurnService, limited_store: Repositories, limited_settings: Settings
) -> None:
    transport = httpx.ASGITransport(app=create_app(limited_service, AccountService(limited_store, limited_settings)))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as client:
        for i in range(3):
            assert (await client.post("/chat", json={"message": f"m{i}"}, headers=identity("u"))).status_code == 200
        refused = await client.post(
            "/chat", json={"message": "too fast"}, headers=identity("u") | {"accept": "text/event-stream"}
        )
    assert (refused.status_code, refused.headers["retry-after"]) == (429, "50")
    assert refused.json()["error"] == "rate_limited"
    assert "try again in 50 s" in refused.json()["message"]
    assert contents(limited_store) == ["m0", "m1", "m2"]


def test_sms_over_the_limit_gets_one_slow_down_text_per_window(
    limited_service: TurnService,
    limited_store: Repositories,
    twilio: TwilioEmulator,
    idempotency_table: str,
    clock: FakeClock,
) -> None:
    sender = TwilioSender(twilio.account_sid, lambda: twilio.auth_token, twilio.url)
    handler = make_handler(
        sms_responder(limited_service, limited_store, sender), DynamoDBPersistenceLayer(table_name=idempotency_table)
    )

    def text(sid: str, body: str) -> dict[str, Any]:
        request = SmsTurnRequest(
            message_id=sid, user_id="u", from_phone="+15551230001", to_phone="+15550000000", text=body
        )
        context: Any = LocalLambdaContext(function_name="SmsWorkerFunction", aws_request_id=f"req-{sid}")
        return handler(sqs_event(sqs_record(request)), context)

    for i in range(6):
        assert text(f"SM{i}", f"text {i}")["batchItemFailures"] == []
    bodies = [sms.body for sms in twilio.sent]
    assert len(bodies) == 4
    assert bodies[3] == SLOW_DOWN
    assert contents(limited_store) == ["text 0", "text 1", "text 2"]
    clock.now += 60
    assert text("SM7", "text 7")["batchItemFailures"] == []
    assert twilio.sent[-1].body != SLOW_DOWN
    assert contents(limited_store)[-1] == "text 7"


def test_a_table_failure_while_recording_the_notice_is_a_store_error(
    limited_store: Repositories, dynamodb: Any
) -> None:
    for i in range(3):
        limited_store.writes.append_message("u", "user", f"m{i}", LIMIT)
    fail_nth_call(dynamodb, "update_item", 1)
    with pytest.raises(StoreError, match="rate-limit notice"):
        limited_store.rate_limits.take_notice("u", LIMIT)
    assert limited_store.rate_limits.take_notice("u", LIMIT) is True  # the failed call recorded nothing
    assert limited_store.rate_limits.take_notice("u", LIMIT) is False
