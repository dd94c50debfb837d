"""No blocking call runs inside async code: an SMS turn (the worker's responder) and the API's
routes, built by the composition root as the functions build them, run over a table (and a Twilio)
reached through a TCP proxy that holds every request DELAY_S. asyncio's debug mode reports every
step that held the event loop longer than HELD_S; a table or Twilio call made on the loop's own
thread holds it DELAY_S, so any such step fails the test. Each side runs in a child process on the
local stack's environment, signing as its function, after one warm-up turn (first imports are
not what this test is about)."""

import multiprocessing
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from infra.local.stack import LocalStack
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

DELAY_S = 0.3
HELD_S = 0.15


def _catch_held_steps() -> list[str]:
    """asyncio's debug mode logs 'Executing <step> took N seconds' for each step that held the loop."""
    import logging

    held: list[str] = []

    class Held(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "took" in record.getMessage():
                held.append(record.getMessage()[:300])

    logger = logging.getLogger("asyncio")
    logger.addHandler(Held())
    logger.setLevel(logging.WARNING)
    return held


def _in_debug_loop(work: Any) -> None:
    import asyncio

    async def watched() -> None:
        asyncio.get_running_loop().slow_callback_duration = HELD_S
        await work()

    asyncio.run(watched(), debug=True)


def _sms_turns(env: dict[str, str], results: "multiprocessing.Queue[Any]") -> None:
    os.environ.clear()
    os.environ.update(env)
    import asyncio

    from onboarding.composition import build_worker
    from onboarding.config import Settings, WorkerSettings
    from onboarding.sms.inbound import SmsTurnRequest

    responder = build_worker(Settings.from_env(), WorkerSettings.from_env()).responder
    user, phone = f"async-{uuid.uuid4().hex[:8]}", "+15550001234"

    def text(body: str) -> SmsTurnRequest:
        sid = f"SM{uuid.uuid4().hex}"
        return SmsTurnRequest(
            message_id=sid,
            user_id=user,
            from_phone=phone,
            to_phone="+15550000000",
            text=body,
            received_at=datetime.now(UTC),
        )

    asyncio.run(responder.respond(text("Hi coach")))  # warm-up
    held = _catch_held_steps()

    async def answer() -> None:
        assert await responder.respond(text("I'm a beginner")) >= 1

    _in_debug_loop(answer)
    results.put(held)


def _api_calls(env: dict[str, str], results: "multiprocessing.Queue[Any]") -> None:
    os.environ.clear()
    os.environ.update(env)
    import asyncio
    import json

    import httpx

    from functions.api.mobile_api.routes import create_app
    from onboarding.composition import build_api
    from onboarding.config import Settings

    parts = build_api(Settings.from_env())
    app = create_app(parts.service, parts.account)
    user = f"async-{uuid.uuid4().hex[:8]}"
    context = {"x-amzn-request-context": json.dumps({"authorizer": {"claims": {"sub": user}}, "requestId": "r1"})}

    async def calls(client: httpx.AsyncClient) -> None:
        assert (await client.post("/chat", json={"message": "I'm a beginner"}, headers=context)).status_code == 200
        streamed = await client.post(
            "/chat", json={"message": "I run twice a week"}, headers={**context, "Accept": "text/event-stream"}
        )
        assert streamed.status_code == 200
        for method, path in (("GET", "/history"), ("GET", "/phones"), ("POST", "/phone-links"), ("DELETE", "/me")):
            assert (await client.request(method, path, headers=context)).status_code < 300, path

    async def session(debug_calls: bool) -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api", timeout=120) as client:
            if debug_calls:
                await calls(client)
            else:
                await client.post("/chat", json={"message": "Hi coach"}, headers=context)  # warm-up

    asyncio.run(session(False))
    held = _catch_held_steps()
    _in_debug_loop(lambda: session(True))
    results.put(held)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(api_port=0) as running:
        yield running


def _held_steps(stack: LocalStack, function: str, target: Any) -> list[str]:
    with TcpProxy(stack.dynamodb.port) as table, TcpProxy(int(stack.twilio.url.rsplit(":", 1)[1])) as twilio:
        table.delay_s = twilio.delay_s = DELAY_S
        env = {
            **stack.process_environment(function),
            "AWS_ENDPOINT_URL_DYNAMODB": table.url,
            "TWILIO_API_BASE_URL": twilio.url,
            "DYNAMODB_READ_TIMEOUT_S": "10",
        }
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        child = context.Process(target=target, args=(env, results))
        child.start()
        child.join(300)
        assert child.exitcode == 0
        held: list[str] = results.get(timeout=10)
        return held


def test_an_sms_turn_never_holds_the_event_loop(stack: LocalStack) -> None:
    assert _held_steps(stack, "SmsWorkerFunction", _sms_turns) == []


def test_the_apis_routes_never_hold_the_event_loop(stack: LocalStack) -> None:
    assert _held_steps(stack, "ApiFunction", _api_calls) == []
