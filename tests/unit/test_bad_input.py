"""Bad input, from clients and in the table: a clear 4xx, or skipped with a warning; never a crash,
never data loss. (Bodies the API rejects field by field are in test_api.py; generated ones in
property/test_api_fuzz.py; webhook bodies in test_sms_webhook.py.)"""

import json
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from functions.api.mobile_api.routes import create_app
from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.account import AccountService
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService
from tests.unit.conftest import TABLE
from tests.unit.test_api import identity

pytestmark = pytest.mark.unit


@pytest.fixture
async def client(service: TurnService, account: AccountService) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(service, account))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        yield http


async def post_chat(client: httpx.AsyncClient, body: bytes) -> httpx.Response:
    return await client.post("/chat", content=body, headers=identity("u") | {"content-type": "application/json"})


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (json.dumps({"message": "x" * 5_000_000}).encode(), 413, "message_too_large"),  # API Gateway allows 10 MB
        (json.dumps({"message": "hi", "padding": "x" * 5_000_000}).encode(), 400, "invalid_request"),
        (json.dumps({"message": "hi", "role": "system"}).encode(), 400, "invalid_request"),
        (json.dumps({"message": ["hi"]}).encode(), 400, "invalid_request"),
        (json.dumps([{"message": "hi"}]).encode(), 400, "invalid_request"),
        (b'{"message": "caf\xe9"}', 400, "invalid_request"),  # Latin-1, not UTF-8
        (b'{"message": "hi"', 400, "invalid_request"),
        (b'{"message": "a\\u0000b"}' + b" " * 10, 200, None),  # NUL is text like any other character
    ],
    ids=["5MB-message", "5MB-unknown-field", "unknown-field", "wrong-type", "array", "latin-1", "truncated", "nul"],
)
async def test_bad_bodies_get_a_clear_error_and_earlier_messages_stay(
    client: httpx.AsyncClient, store: Repositories, body: bytes, status: int, code: str | None
) -> None:
    assert (await post_chat(client, b'{"message": "I am a beginner"}')).status_code == 200
    response = await post_chat(client, body)
    assert response.status_code == status
    if code is not None:
        assert response.json()["error"] == code
        assert response.json()["message"]
    kept = [m.content for m in store.conversations.load_turn("u", 20).messages if m.role == "user"]
    assert kept[0] == "I am a beginner"
    assert len(kept) == (2 if status == 200 else 1)


def put_items(dynamodb: Any, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        dynamodb.batch_write_item(RequestItems={TABLE: batch})


def message_item(user_id: str, index: int, role: str = "user", content: str | None = None) -> dict[str, Any]:
    # A minute ago: within the conversation gap, so the history is the current conversation.
    created_ms = int((time.time() - 60) * 1000) + index
    return {
        "pk": {"S": f"USER#{user_id}"},
        "sk": {"S": f"MSG#{created_ms:013d}#{index:012x}"},
        "role": {"S": role},
        "content": {"S": content if content is not None else f"message {index}"},
        "created_at": {"S": datetime.fromtimestamp(created_ms / 1000, UTC).isoformat()},
    }


async def test_a_huge_history_costs_a_turn_one_small_query(
    service: TurnService, dynamodb: Any, emulator: BedrockEmulator
) -> None:
    put_items(dynamodb, [message_item("u", i, "user" if i % 2 == 0 else "assistant") for i in range(5_000)])
    queries: list[int] = []
    dynamodb.meta.events.register("after-call.dynamodb.Query", lambda parsed, **_: queries.append(parsed["Count"]))
    result = await (await service.start_turn("u", "what did I say?")).collect()
    assert result.assistant_message is not None
    assert queries == [23]  # the profile, state and summary slots and the newest 20 messages, of 5,000
    sent = emulator.requests[-1].conversation
    assert [(t.role, t.text) for t in sent[-2:]] == [("assistant", "message 4999"), ("user", "what did I say?")]


async def test_history_pages_through_a_huge_history(client: httpx.AsyncClient, dynamodb: Any) -> None:
    put_items(dynamodb, [message_item("u", i) for i in range(1_000)])
    seen, cursor = [], None
    for _ in range(20):  # bounded: 1,000 messages are 10 pages of 100
        params: dict[str, Any] = {"limit": 100} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/history", params=params, headers=identity("u"))).json()
        seen += [m["content"] for m in page["messages"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [f"message {i}" for i in reversed(range(1_000))]


MALFORMED = {
    "no-content": {"role": {"S": "user"}, "created_at": {"S": "2023-11-14T22:13:20+00:00"}},
    "content-not-a-string": {"role": {"S": "user"}, "content": {"N": "5"}, "created_at": {"S": "2023-11-14T22:13:20"}},
    "unknown-role": {"role": {"S": "system"}, "content": {"S": "obey"}, "created_at": {"S": "2023-11-14T22:13:20"}},
    "bad-date": {"role": {"S": "user"}, "content": {"S": "hi"}, "created_at": {"S": "yesterday"}},
    "no-role": {"content": {"S": "hi"}, "created_at": {"S": "2023-11-14T22:13:20"}},
}


@pytest.mark.parametrize("shape", list(MALFORMED))
async def test_malformed_stored_messages_are_skipped_with_a_warning(
    client: httpx.AsyncClient, dynamodb: Any, store: Repositories, caplog: pytest.LogCaptureFixture, shape: str
) -> None:
    good = [message_item("u", 0, "user", "I'm a beginner"), message_item("u", 2, "assistant", "Noted!")]
    bad = {"pk": {"S": "USER#u"}, "sk": {"S": f"MSG#{1_700_000_000_001:013d}#{1:012x}"}, **MALFORMED[shape]}
    put_items(dynamodb, [*good, bad])
    with caplog.at_level(logging.WARNING):
        chat = await client.post("/chat", json={"message": "and I run"}, headers=identity("u"))
        history = await client.get("/history", headers=identity("u"))
    assert chat.status_code == 200
    assert history.status_code == 200
    assert [m["content"] for m in history.json()["messages"]][-2:] == ["Noted!", "I'm a beginner"]
    assert any("malformed message" in r.getMessage() for r in caplog.records)
    # Nothing was lost or rewritten: the bad item is still there for someone to repair.
    assert dynamodb.get_item(TableName=TABLE, Key={"pk": bad["pk"], "sk": bad["sk"]})["Item"] == bad


@pytest.mark.parametrize(
    "state",
    [
        {"current_agent": {"S": "no_such_agent"}},
        {"current_agent": {"S": "goal_setting"}, "agent_context": {"S": "{not json"}},
        {"current_agent": {"N": "3"}},
        {"agent_context": {"S": "{}"}},
    ],
    ids=["unknown-agent", "context-not-json", "agent-not-a-string", "no-agent"],
)
async def test_a_corrupt_state_item_starts_the_user_at_the_first_step_with_a_warning(
    client: httpx.AsyncClient, dynamodb: Any, caplog: pytest.LogCaptureFixture, state: dict[str, Any]
) -> None:
    put_items(dynamodb, [{"pk": {"S": "USER#u"}, "sk": {"S": "~STATE"}, **state}])
    with caplog.at_level(logging.WARNING):
        chat = await client.post("/chat", json={"message": "hello again"}, headers=identity("u"))
    assert chat.status_code == 200
    assert "fitness" in chat.json()["reply"].lower()
    assert any("malformed onboarding state" in r.getMessage() for r in caplog.records)
