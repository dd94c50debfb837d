"""User A tries to read or write user B's memory through every route: 0 successes.

The API takes the user only from the Cognito `sub` API Gateway verified (`x-amzn-request-context`,
which Lambda Web Adapter sets from the request context, replacing any client copy). So A tries B's id
everywhere else a client controls: body fields, query parameters, headers, B's history cursor, B's
client message ids, B's phone. Every route joins ROUTES, the erase route (`DELETE /me`) too.
"""

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from functions.api.mobile_api.routes import create_app
from onboarding.account import AccountService
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService
from tests.unit.conftest import TABLE

pytestmark = pytest.mark.unit

A, B = "user-a", "user-b"
B_PRIVATE_TEXT = "B's secret: my left knee was operated on in 2019"
B_PHONE = "+15551230002"
ROUTES = [("POST", "/chat"), ("GET", "/history"), ("POST", "/phone-links"), ("GET", "/phones"), ("DELETE", "/me")]


def identity(sub: str) -> dict[str, str]:
    """The header Lambda Web Adapter builds from API Gateway's request context."""
    return {"x-amzn-request-context": json.dumps({"requestId": "req-1", "authorizer": {"claims": {"sub": sub}}})}


@pytest.fixture
async def client(service: TurnService, account: AccountService) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(service, account))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        yield http


@pytest.fixture
async def b_memory(client: httpx.AsyncClient, store: Repositories, dynamodb: Any) -> dict[str, Any]:
    """B's conversation (with a client message id), a linked phone, and a cursor into B's history."""
    chat = await client.post("/chat", json={"message": B_PRIVATE_TEXT, "clientMessageId": "msg-1"}, headers=identity(B))
    assert chat.status_code == 200
    await client.post("/chat", json={"message": "and I swim"}, headers=identity(B))
    store.phones.link(B_PHONE, B)
    page = (await client.get("/history", params={"limit": 1}, headers=identity(B))).json()
    return {"reply": chat.json()["reply"], "cursor": page["nextCursor"], "items": partition(dynamodb, B)}


def partition(dynamodb: Any, user_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"USER#{user_id}"}},
        ConsistentRead=True,
    )["Items"]
    return items


ATTEMPTS: list[tuple[str, dict[str, Any]]] = [
    ("body userId", {"json": {"message": "hi", "userId": B}}),
    ("body user_id", {"json": {"message": "hi", "user_id": B}}),
    ("body sub", {"json": {"message": "hi", "sub": B}}),
    ("query userId", {"params": {"userId": B, "user_id": B, "sub": B}}),
    ("header x-user-id", {"headers": {"x-user-id": B, "x-amzn-user-id": B}}),
    ("bearer token", {"headers": {"authorization": f"Bearer {B}"}}),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize(("place", "request_parts"), ATTEMPTS, ids=[a[0] for a in ATTEMPTS])
async def test_b_in_any_client_controlled_place_reaches_only_a(
    client: httpx.AsyncClient,
    dynamodb: Any,
    b_memory: dict[str, Any],
    method: str,
    path: str,
    place: str,
    request_parts: dict[str, Any],
) -> None:
    headers = identity(A) | request_parts.get("headers", {})
    json_body = request_parts.get("json", {"message": "hi"}) if method == "POST" and path == "/chat" else None
    response = await client.request(method, path, json=json_body, params=request_parts.get("params"), headers=headers)
    assert response.status_code < 500
    assert B_PRIVATE_TEXT not in response.text
    assert b_memory["reply"] not in response.text or path == "/chat"  # the scripted coach greets everyone alike
    assert B_PHONE not in response.text
    assert partition(dynamodb, B) == b_memory["items"]


async def test_bs_history_cursor_pages_only_as_own_history(
    client: httpx.AsyncClient, dynamodb: Any, b_memory: dict[str, Any]
) -> None:
    await client.post("/chat", json={"message": "A's own words"}, headers=identity(A))
    page = await client.get("/history", params={"cursor": b_memory["cursor"]}, headers=identity(A))
    assert page.status_code == 200
    assert B_PRIVATE_TEXT not in page.text
    assert {m["content"] for m in page.json()["messages"]} <= {
        m["content"]["S"] for m in partition(dynamodb, A) if "content" in m
    }


async def test_bs_client_message_id_is_a_new_turn_for_a_not_bs_reply(
    client: httpx.AsyncClient, store: Repositories, dynamodb: Any, b_memory: dict[str, Any]
) -> None:
    """Client message ids are per user: A reusing B's id neither replays B's turn nor conflicts with it."""
    response = await client.post(
        "/chat", json={"message": B_PRIVATE_TEXT, "clientMessageId": "msg-1"}, headers=identity(A)
    )
    assert response.status_code == 200
    a_messages = store.conversations.load_turn(A, 20).messages
    assert response.json()["userMessageId"] == a_messages[0].message_id
    assert {m.message_id for m in a_messages}.isdisjoint(
        {m.message_id for m in store.conversations.load_turn(B, 20).messages}
    )
    assert partition(dynamodb, B) == b_memory["items"]


async def test_as_phone_list_never_shows_bs_phone(client: httpx.AsyncClient, b_memory: dict[str, Any]) -> None:
    assert (await client.get("/phones", headers=identity(A))).json() == {"phones": []}
    assert (await client.get("/phones", headers=identity(B))).json() == {"phones": [B_PHONE]}
