"""A message that cannot fit next to the instructions gets a clear answer on every channel, and the
user's message is kept (it was stored before the prompt was built)."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from langchain_core.language_models import BaseChatModel

from functions.api.app import create_app
from infra.twilio_emulator import TwilioEmulator
from onboarding.agents.base import PromptLimits
from onboarding.orchestrator import OnboardingAgentOrchestrator
from onboarding.sms.messages import SmsTurnRequest
from onboarding.sms.responder import TOO_LONG, SmsResponder
from onboarding.store import ConversationStore
from onboarding.turns import MessageOverBudgetError, TurnService
from tests.unit.conftest import FAST_RETRIES
from tests.unit.test_api import identity, parse_sse
from tests.unit.test_sms_worker import sender_for

pytestmark = pytest.mark.unit

# The instructions alone are about 600 tokens, over this allowance (nothing to trim without a
# summary), so a 500-token message passes the up-front check and cannot fit once the prompt is built.
TIGHT = PromptLimits(token_budget=1000, system_allowance=200)
MESSAGE = "word " * 300


@pytest.fixture
def tight_service(store: ConversationStore, llm: BaseChatModel) -> TurnService:
    orchestrator = OnboardingAgentOrchestrator(store, llm, limits=TIGHT)
    return TurnService(orchestrator, store, 32 * 1024, retry_policy=FAST_RETRIES, limits=TIGHT)


@pytest.fixture
async def tight_client(tight_service: TurnService, store: ConversationStore) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(tight_service, store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        yield http


async def test_the_turn_says_the_message_does_not_fit(tight_service: TurnService, store: ConversationStore) -> None:
    turn = await tight_service.start_turn("u", MESSAGE)
    with pytest.raises(MessageOverBudgetError, match="too long"):
        await turn.collect()
    assert [m.content for m in store.load_turn_context("u").messages] == [MESSAGE]


async def test_the_json_api_answers_413(tight_client: httpx.AsyncClient) -> None:
    response = await tight_client.post("/chat", json={"message": MESSAGE}, headers=identity("u"))
    assert response.status_code == 413
    assert response.json()["error"] == "message_too_large"
    assert "too long" in response.json()["message"]


async def test_the_event_stream_sends_an_error_event(tight_client: httpx.AsyncClient) -> None:
    headers = identity("u") | {"accept": "text/event-stream"}
    response = await tight_client.post("/chat", json={"message": MESSAGE}, headers=headers)
    events = parse_sse(response.text)
    assert [name for name, _ in events] == ["error"]
    assert events[0][1]["error"] == "message_too_large"
    assert events[0][1]["userMessageId"]


async def test_a_message_over_the_up_front_limit_is_refused_before_it_is_stored(
    tight_client: httpx.AsyncClient, store: ConversationStore
) -> None:
    response = await tight_client.post("/chat", json={"message": "word " * 3000}, headers=identity("u"))
    assert response.status_code == 413
    assert store.load_turn_context("u").messages == ()


def test_an_sms_that_does_not_fit_gets_the_too_long_answer(
    tight_service: TurnService, store: ConversationStore, dynamodb: Any
) -> None:
    with TwilioEmulator() as twilio:
        responder = SmsResponder(tight_service, store, sender_for(twilio))
        request = SmsTurnRequest(
            message_id="SM" + "1" * 32, user_id="u", from_phone="+15551230001", to_phone="+15550001111", text=MESSAGE
        )
        asyncio.run(responder.respond(request))
        assert [s.body for s in twilio.sent] == [TOO_LONG]
