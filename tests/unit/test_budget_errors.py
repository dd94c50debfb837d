"""A message that cannot fit next to the instructions gets a clear answer on every channel, and the
user's message is kept (it was stored before the prompt was built).

With settings that pass validation this cannot happen (the system prompt always
fits its allowance, and the largest message the up-front check accepts fits what the allowance
leaves; tests/unit/test_prompt_fitting.py). The guard stays for settings built without validation,
and these tests keep it honest on every channel."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from langchain_core.language_models import BaseChatModel

from functions.api.mobile_api.routes import create_app
from infra.local.twilio_emulator import TwilioEmulator
from onboarding.account import AccountService
from onboarding.breaker import CircuitBreaker
from onboarding.composition import sms_responder
from onboarding.config import Settings
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from onboarding.model.errors import MessageOverBudgetError
from onboarding.model.history import TurnContext
from onboarding.persistence import Repositories
from onboarding.replies import TOO_LONG
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService
from tests.unit.test_api import identity, parse_sse
from tests.unit.test_sms_worker import sender_for

pytestmark = pytest.mark.unit


@pytest.fixture
def tight(settings: Settings) -> Settings:
    """A budget and system-prompt allowance below what the settings accept (built without their
    validation): a new user's instructions alone are over this allowance, so a message can pass the
    up-front check (budget - allowance) and still not fit once the prompt is built."""
    changes = {"token_budget": 1000, "system_prompt_allowance": 500, "window_max_tokens": 400, "recall_max_tokens": 0}
    assert changes.keys() <= Settings.model_fields.keys()  # no misspelt name silently ignored
    with pytest.raises(ValueError, match="SYSTEM_PROMPT_ALLOWANCE must hold"):
        Settings.model_validate(settings.model_dump() | changes)
    return Settings.model_construct(**(settings.model_dump() | changes))


@pytest.fixture
def tight_orchestrator(store: Repositories, llm: BaseChatModel, tight: Settings) -> OnboardingAgentOrchestrator:
    return OnboardingAgentOrchestrator(store.conversations, llm, tight)


@pytest.fixture
def message(tight_orchestrator: OnboardingAgentOrchestrator, tight: Settings) -> str:
    """A message in the middle of the range that passes the up-front check but cannot fit next to a
    new user's instructions. Computed from the instructions, so a reworded prompt moves it along;
    the test fails here if the range is empty."""
    instructions = tight_orchestrator.prepare("u", TurnContext()).agent.get_system_prompt()
    instruction_tokens = count_tokens(instructions) + MESSAGE_OVERHEAD_TOKENS
    fewest = tight.token_budget - instruction_tokens + 1  # message tokens (with overhead) that cannot fit
    most = tight.prompt.max_message_tokens  # ... and the most the up-front check accepts
    assert fewest <= most, f"instructions of {instruction_tokens} tokens fit the allowance: nothing to test"
    words = ((fewest + most) // 2 - MESSAGE_OVERHEAD_TOKENS) * 3 // 5  # "word " is 5 ASCII chars: 5/3 tokens
    text = "word " * words
    assert fewest <= count_tokens(text) + MESSAGE_OVERHEAD_TOKENS <= most
    return text


@pytest.fixture
def tight_service(tight_orchestrator: OnboardingAgentOrchestrator, store: Repositories, tight: Settings) -> TurnService:
    store_breaker = CircuitBreaker(tight.store_breaker, name="store")
    return TurnService(tight_orchestrator, store, CircuitBreaker(tight.breaker), store_breaker=store_breaker)


@pytest.fixture
async def tight_client(tight_service: TurnService, account: AccountService) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(tight_service, account))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        yield http


async def test_the_turn_says_the_message_does_not_fit(
    tight_service: TurnService, store: Repositories, message: str
) -> None:
    turn = await tight_service.start_turn("u", message)
    with pytest.raises(MessageOverBudgetError, match="too long"):
        await turn.collect()
    assert [m.content for m in store.conversations.load_turn("u", 20).messages] == [message]


async def test_the_json_api_answers_413(tight_client: httpx.AsyncClient, message: str) -> None:
    response = await tight_client.post("/chat", json={"message": message}, headers=identity("u"))
    assert response.status_code == 413
    assert response.json()["error"] == "message_too_large"
    assert "too long" in response.json()["message"]


async def test_the_event_stream_sends_an_error_event(tight_client: httpx.AsyncClient, message: str) -> None:
    headers = identity("u") | {"accept": "text/event-stream"}
    response = await tight_client.post("/chat", json={"message": message}, headers=headers)
    events = parse_sse(response.text)
    assert [name for name, _ in events] == ["error"]
    assert events[0][1]["error"] == "message_too_large"
    assert events[0][1]["userMessageId"]


async def test_a_message_over_the_up_front_limit_is_refused_before_it_is_stored(
    tight_client: httpx.AsyncClient, store: Repositories
) -> None:
    response = await tight_client.post("/chat", json={"message": "word " * 3000}, headers=identity("u"))
    assert response.status_code == 413
    assert store.conversations.load_turn("u", 20).messages == ()


def test_an_sms_that_does_not_fit_gets_the_too_long_answer(
    tight_service: TurnService, store: Repositories, dynamodb: Any, message: str
) -> None:
    with TwilioEmulator() as twilio:
        responder = sms_responder(tight_service, store, sender_for(twilio))
        request = SmsTurnRequest(
            message_id="SM" + "1" * 32, user_id="u", from_phone="+15551230001", to_phone="+15550001111", text=message
        )
        asyncio.run(responder.respond(request))
        assert [s.body for s in twilio.sent] == [TOO_LONG]
