"""The audit trail of context access: one "Context access" line for each read or erase of a user's
memory (a turn, a history page, the inspect command, the console, an erase by the app or by text),
with who, whose, why and counts by kind, and never a word of what the user said."""

import io
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import boto3
import httpx
import pytest

from functions.api.mobile_api.routes import create_app
from infra.console.context import ConsoleContext
from infra.inspect_prompt import inspect
from onboarding.account import AccountService
from onboarding.composition import sms_intake
from onboarding.config import Settings
from onboarding.persistence import Repositories
from onboarding.sms.inbound import InboundSms
from onboarding.sms.queue import TurnQueue
from onboarding.turn.service import TurnService
from tests.unit.test_api import identity

pytestmark = pytest.mark.unit

# A message no code or fixture could produce by itself: if it shows up in an audit field, it leaked.
DISTINCTIVE = "zebra-quartz 4471, a made-up word pair"  # answers no onboarding item: a turn without tools
RECORD_ATTRIBUTES = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The fields each audit line added (what `extra` put on the record)."""
    return [
        {key: value for key, value in vars(record).items() if key not in RECORD_ATTRIBUTES}
        for record in caplog.records
        if record.getMessage() == "Context access"
    ]


def assert_no_text(lines: list[dict[str, Any]]) -> None:
    assert lines
    dumped = json.dumps(lines, default=str)
    for piece in (DISTINCTIVE, *(word for word in DISTINCTIVE.split() if len(word) >= 6)):
        assert piece not in dumped
    for line in lines:
        assert line["audit"] is True
        assert all(isinstance(value, bool | int) for key, value in line.items() if key.startswith("what_"))


@pytest.fixture
async def client(service: TurnService, account: AccountService) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(service, account))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        yield http


async def _said_the_distinctive_text(client: httpx.AsyncClient, user: str = "user-1") -> None:
    response = await client.post("/chat", json={"message": DISTINCTIVE}, headers=identity(user))
    assert response.status_code == 200


async def test_a_turn_over_the_api_is_audited_as_the_verified_caller(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    await _said_the_distinctive_text(client)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        await _said_the_distinctive_text(client)  # this turn reads the first one's message and reply
    [line] = audit_lines(caplog)
    assert line | {"what_answers": 0, "what_profile_fields": 0} == {
        "audit": True,
        "access": "read",
        "who": "cognito:user-1",
        "whose": "user-1",
        "why": "POST:/chat",
        "what_messages": 2,
        "what_answers": 0,
        "what_profile_fields": 0,
        "what_summary": 0,
    }
    assert_no_text([line])


async def test_a_turn_without_a_caller_is_audited_as_the_function(
    service: TurnService, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "onboarding-SmsWorkerFunction")
    await (await service.start_turn("sms-1", DISTINCTIVE, "SM1", channel="sms")).collect()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        await (await service.start_turn("sms-1", "and again, coach", "SM2", channel="sms")).collect()
    [line] = audit_lines(caplog)
    assert (line["who"], line["whose"], line["why"]) == ("function:onboarding-SmsWorkerFunction", "sms-1", "sms-turn")
    assert line["what_messages"] == 2
    assert_no_text([line])


async def test_a_history_page_is_audited_with_the_messages_it_showed(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    await _said_the_distinctive_text(client)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        response = await client.get("/history?limit=1", headers=identity("user-1"))
    assert response.status_code == 200
    [line] = audit_lines(caplog)
    assert (line["who"], line["whose"], line["why"], line["what_messages"]) == (
        "cognito:user-1",
        "user-1",
        "GET:/history",
        1,
    )
    assert_no_text([line])


async def test_an_erase_is_audited_with_what_it_deleted(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    await _said_the_distinctive_text(client)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        response = await client.delete("/me", headers=identity("user-1"))
    assert response.status_code == 200
    [line] = audit_lines(caplog)
    assert (line["access"], line["who"], line["whose"], line["why"]) == (
        "erase",
        "cognito:user-1",
        "user-1",
        "DELETE:/me",
    )
    assert line["what_messages"] == response.json()["deleted"]["messages"] == 2
    assert line["what_state_items"] == response.json()["deleted"]["stateItems"]
    assert_no_text([line])


async def test_an_erase_by_text_is_audited_as_the_webhook_function(
    store: Repositories, settings: Settings, sms_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    intake = sms_intake(store, TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue), settings)

    def text(sid: str, body: str) -> str | None:
        return intake.accept(InboundSms(message_id=sid, from_phone="+15551230001", to_phone="+15550000000", body=body))

    text("SM1", DISTINCTIVE)
    text("SM2", "DELETE MY DATA")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert "erased" in str(text("SM3", "YES DELETE"))
    [line] = audit_lines(caplog)
    assert (line["access"], line["who"], line["why"]) == ("erase", "function:local", "sms:erase-by-text")
    assert line["whose"].startswith("sms-")
    assert_no_text([line])


async def test_the_inspect_command_is_audited_as_the_command(
    service: TurnService, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    await (await service.start_turn("u", DISTINCTIVE)).collect()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        await inspect(settings, "u", "what next?", personal_data=True, out=io.StringIO())
    [line] = audit_lines(caplog)
    assert (line["who"], line["whose"], line["why"], line["what_messages"]) == (
        "command:infra.inspect_prompt",
        "u",
        "infra.inspect_prompt",
        2,
    )
    assert_no_text([line])


async def test_the_console_reads_are_audited_as_the_console(
    service: TurnService, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    await (await service.start_turn("u", DISTINCTIVE)).collect()
    context = ConsoleContext(settings, personal_data=True)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        await context.memory("u")
        await context.plan("u", "what next?")
    lines = audit_lines(caplog)
    assert [(line["who"], line["why"], line["whose"]) for line in lines] == [
        ("command:infra.console", "console:memory", "u"),
        ("command:infra.console", "console:prompt", "u"),
    ]
    assert lines[0]["what_messages"] == 2
    assert_no_text(lines)


async def test_a_read_that_failed_is_not_audited(
    client: httpx.AsyncClient, dynamodb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing was shown to anyone: the trail holds reads that returned memory."""
    from botocore.exceptions import EndpointConnectionError

    def refuse(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="http://dynamodb.local")

    dynamodb.meta.events.register("before-call.dynamodb.Query", refuse)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        await client.get("/history", headers=identity("user-1"))
    assert audit_lines(caplog) == []
