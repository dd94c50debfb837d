"""The mobile API: SSE and JSON replies, history pages, phone links, identity, and every error path."""

import io
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from functions.api.mobile_api.routes import create_app
from functions.api.mobile_api.sse import accepts_event_stream
from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.coach import CoachReply, ToolCall
from infra.local.bedrock_emulator.recorded import Fault
from onboarding.account import AccountService
from onboarding.persistence import Repositories
from onboarding.turn.service import TurnService


def identity(sub: str | None, request_id: str = "req-1") -> dict[str, str]:
    """The header Lambda Web Adapter builds from API Gateway's request context."""
    context: dict[str, Any] = {"requestId": request_id}
    if sub is not None:
        context["authorizer"] = {"claims": {"sub": sub}}
    return {"x-amzn-request-context": json.dumps(context)}


@pytest.fixture
async def client(service: TurnService, account: AccountService) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(service, account))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        yield http


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


async def test_json_reply_for_clients_that_do_not_ask_for_a_stream(
    client: httpx.AsyncClient, store: Repositories
) -> None:
    response = await client.post("/chat", json={"message": "Hi"}, headers=identity("user-1"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["reply"].startswith("Hi, I'm your coach!")
    stored = store.conversations.load_turn("user-1", 20).messages
    assert [m.message_id for m in stored] == [body["userMessageId"], body["assistantMessageId"]]


async def test_event_stream_sends_each_chunk_then_the_stored_ids(
    client: httpx.AsyncClient, store: Repositories, emulator: BedrockEmulator
) -> None:
    headers = identity("user-1") | {"accept": "text/event-stream"}
    response = await client.post("/chat", json={"message": "Hi 🦵"}, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    chunks = [data["text"] for name, data in events if name == "chunk"]
    assert len(chunks) > 1, "the reply must arrive in several events, not one"
    name, done = events[-1]
    assert name == "done"
    stored = store.conversations.load_turn("user-1", 20).messages
    assert [m.message_id for m in stored] == [done["userMessageId"], done["assistantMessageId"]]
    assert stored[1].content == "".join(chunks)


async def test_a_stream_that_fails_mid_reply_ends_with_an_error_event_and_keeps_the_users_turn(
    client: httpx.AsyncClient, store: Repositories, emulator: BedrockEmulator
) -> None:
    emulator.queue_fault(Fault("stream_error", after_chunks=2))
    headers = identity("user-1") | {"accept": "text/event-stream"}
    events = parse_sse((await client.post("/chat", json={"message": "Hi"}, headers=headers)).text)
    name, error = events[-1]
    assert name == "error"
    assert error["error"] == "model_unavailable"
    assert [name for name, _ in events[:-1]] == ["chunk", "chunk"]
    stored = store.conversations.load_turn("user-1", 20).messages
    assert [(m.message_id, m.role) for m in stored] == [(error["userMessageId"], "user")]


async def test_model_failure_without_a_stream_is_502_and_keeps_the_users_turn(
    client: httpx.AsyncClient, store: Repositories, emulator: BedrockEmulator
) -> None:
    emulator.queue_fault(Fault("stream_error", after_chunks=1))
    response = await client.post("/chat", json={"message": "Hi"}, headers=identity("user-1"))
    assert response.status_code == 502
    assert response.json()["error"] == "model_unavailable"
    assert [m.role for m in store.conversations.load_turn("user-1", 20).messages] == ["user"]


@pytest.mark.parametrize(
    ("accept", "streams"),
    [
        (None, False),
        ("*/*", False),
        ("application/json", False),
        ("text/event-stream", True),
        ("application/json, text/event-stream;q=0.5", True),
        ("TEXT/EVENT-STREAM", True),
        ("text/event-stream;q=0", False),
        ("text/event-stream; q=0.0", False),
        ("text/event-stream;q=abc", False),
    ],
)
def test_accept_negotiation(accept: str | None, streams: bool) -> None:
    assert accepts_event_stream(accept) is streams


@pytest.mark.parametrize(
    "header",
    [
        {},
        identity(None),
        {"x-amzn-request-context": "not json"},
        {"x-amzn-request-context": json.dumps({"authorizer": {"claims": {"sub": ""}}})},
        {"x-amzn-request-context": json.dumps({"authorizer": {"claims": {"sub": 42}}})},
        {"x-amzn-request-context": json.dumps(["a", "list"])},
    ],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/chat"), ("GET", "/history"), ("POST", "/phone-links"), ("GET", "/phones"), ("DELETE", "/me")],
)
async def test_every_route_needs_a_verified_identity(
    client: httpx.AsyncClient, store: Repositories, header: dict[str, str], method: str, path: str
) -> None:
    response = await client.request(method, path, json={"message": "hi"}, headers=header)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


async def test_the_user_comes_from_the_verified_claims_not_the_body(
    client: httpx.AsyncClient, store: Repositories
) -> None:
    response = await client.post("/chat", json={"message": "hi", "user_id": "someone-else"}, headers=identity("me"))
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert store.conversations.load_turn("someone-else", 20).messages == ()
    assert store.conversations.load_turn("me", 20).messages == ()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"", 400, "invalid_request"),
        (b"not json", 400, "invalid_request"),
        (b"\xff\xfe{", 400, "invalid_request"),
        (b'{"message": 5}', 400, "invalid_request"),
        (b'{"message": "   "}', 400, "invalid_message"),
        # Invisible characters only: NUL, zero-width spaces and joiners, a word joiner, a BOM.
        (b'{"message": "\\u0000"}', 400, "invalid_message"),
        (b'{"message": "\\u200b\\u200c \\u200d\\u2060\\ufeff"}', 400, "invalid_message"),
        (b'{"message": "\\ud800"}', 400, "invalid_message"),
        (json.dumps({"message": "x" * 40_000}).encode(), 413, "message_too_large"),
    ],
)
async def test_bad_bodies_get_clear_errors_and_store_nothing(
    client: httpx.AsyncClient, store: Repositories, body: bytes, status: int, code: str
) -> None:
    response = await client.post(
        "/chat", content=body, headers=identity("user-1") | {"content-type": "application/json"}
    )
    assert response.status_code == status
    assert response.json()["error"] == code
    assert response.json()["message"]
    assert store.conversations.load_turn("user-1", 20).messages == ()


WRITE_OPERATIONS = ("put_item", "transact_write_items")


def _fail_dynamodb(dynamodb: Any, operation: str) -> None:
    def fail(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, operation)

    setattr(dynamodb, operation, fail)


async def test_a_failed_write_is_503_with_retry_after(client: httpx.AsyncClient, dynamodb: Any) -> None:
    # Every write fails: the user's message is a single Put, or a transaction with its rate-limit count.
    for operation in WRITE_OPERATIONS:
        _fail_dynamodb(dynamodb, operation)
    response = await client.post("/chat", json={"message": "hi"}, headers=identity("user-1"))
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"] == "store_unavailable"


@pytest.mark.parametrize(
    ("operation", "method", "path"),
    [
        ("query", "GET", "/history"),
        ("transact_write_items", "POST", "/phone-links"),
        ("query", "GET", "/phones"),
        ("query", "DELETE", "/me"),
    ],
)
async def test_store_failures_on_other_routes_are_503(
    client: httpx.AsyncClient, dynamodb: Any, operation: str, method: str, path: str
) -> None:
    _fail_dynamodb(dynamodb, operation)
    response = await client.request(method, path, headers=identity("user-1"))
    assert response.status_code == 503
    assert response.json()["error"] == "store_unavailable"


async def test_history_pages_newest_first_and_only_the_callers(client: httpx.AsyncClient, store: Repositories) -> None:
    store.writes.append_message("user-2", "user", "not yours")
    for text in ("one", "two", "three"):
        store.writes.append_message("user-1", "user", text)

    first = (await client.get("/history", params={"limit": 2}, headers=identity("user-1"))).json()
    assert [m["content"] for m in first["messages"]] == ["three", "two"]
    second = await client.get(
        "/history", params={"limit": 2, "cursor": first["nextCursor"]}, headers=identity("user-1")
    )
    assert [m["content"] for m in second.json()["messages"]] == ["one"]
    assert second.json()["nextCursor"] is None

    # user-2 replaying user-1's cursor reads on in user-2's own partition, never user-1's.
    replay = await client.get("/history", params={"cursor": first["nextCursor"]}, headers=identity("user-2"))
    assert [m["content"] for m in replay.json()["messages"]] == ["not yours"]


@pytest.mark.parametrize(
    "params", [{"limit": 0}, {"limit": 101}, {"limit": "many"}, {"cursor": "garbage"}, {"cursor": "x" * 600}]
)
async def test_bad_history_queries_are_400(
    client: httpx.AsyncClient, store: Repositories, params: dict[str, Any]
) -> None:
    response = await client.get("/history", params=params, headers=identity("user-1"))
    assert response.status_code == 400
    assert response.json()["error"] in {"invalid_request", "invalid_cursor"}


async def test_phone_link_codes_and_linked_phones(client: httpx.AsyncClient, store: Repositories) -> None:
    created = await client.post("/phone-links", headers=identity("user-1"))
    assert created.status_code == 201
    code = created.json()["code"]
    linked = store.phones.link_by_code("+15551230001", code)
    assert linked is not None
    assert linked.user_id == "user-1"
    phones = await client.get("/phones", headers=identity("user-1"))
    assert phones.json() == {"phones": ["+15551230001"]}
    assert (await client.get("/phones", headers=identity("user-2"))).json() == {"phones": []}


async def test_the_openapi_document_describes_every_route_and_both_reply_types(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    assert set(document["paths"]) == {"/chat", "/history", "/phone-links", "/phones", "/check-ins", "/me"}
    chat_200 = document["paths"]["/chat"]["post"]["responses"]["200"]["content"]
    assert set(chat_200) == {"application/json", "text/event-stream"}
    assert "x-amzn-request-context" not in json.dumps(document)
    assert document["components"]["securitySchemes"]["HTTPBearer"]["type"] == "http"


async def test_health_check_for_the_adapter(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [("GET", "/nowhere", 404, "not_found"), ("DELETE", "/chat", 405, "method_not_allowed")],
)
async def test_unknown_routes_and_methods_get_the_same_error_shape(
    client: httpx.AsyncClient, method: str, path: str, status: int, code: str
) -> None:
    response = await client.request(method, path, headers=identity("user-1"))
    assert response.status_code == status
    assert response.json()["error"] == code


def _fail_the_second_write(dynamodb: Any) -> None:
    """The user's message is stored; the coach's reply is not. (Each is a single Put or a
    transaction, depending on the rate limit and on what the turn changed: count both.)"""
    writes: list[str] = []
    for operation in WRITE_OPERATIONS:
        real = getattr(dynamodb, operation)

        def maybe_fail(real: Any = real, operation: str = operation, **request: Any) -> Any:
            writes.append(operation)
            if len(writes) == 2:
                raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, operation)
            return real(**request)

        setattr(dynamodb, operation, maybe_fail)


async def test_a_reply_that_cannot_be_saved_ends_the_stream_with_an_error_event(
    client: httpx.AsyncClient, store: Repositories, dynamodb: Any
) -> None:
    _fail_the_second_write(dynamodb)
    headers = identity("user-1") | {"accept": "text/event-stream"}
    events = parse_sse((await client.post("/chat", json={"message": "Hi"}, headers=headers)).text)
    name, error = events[-1]
    assert (name, error["error"]) == ("error", "store_unavailable")
    assert [m.message_id for m in store.conversations.load_turn("user-1", 20).messages] == [error["userMessageId"]]


async def test_a_reply_that_cannot_be_saved_is_503_without_a_stream(client: httpx.AsyncClient, dynamodb: Any) -> None:
    _fail_the_second_write(dynamodb)
    response = await client.post("/chat", json={"message": "Hi"}, headers=identity("user-1"))
    assert response.status_code == 503
    assert response.json()["error"] == "store_unavailable"


async def test_an_unexpected_failure_is_500_in_the_error_shape(service: TurnService, account: AccountService) -> None:
    async def broken(
        user_id: str,
        message: str,
        client_message_id: str | None = None,
        received_at: Any = None,
        channel: str = "",
        caller: Any = None,
    ) -> Any:
        raise ValueError("Failed to create agent")  # what the orchestrator raises (spec)

    service.start_turn = broken  # type: ignore[method-assign]
    transport = httpx.ASGITransport(app=create_app(service, account), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        response = await http.post("/chat", json={"message": "Hi"}, headers=identity("user-1"))
    assert response.status_code == 500
    assert response.json()["error"] == "internal_error"


async def test_an_unexpected_failure_mid_stream_still_ends_with_an_error_event(
    client: httpx.AsyncClient, store: Repositories, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever fails while the reply streams, the client gets `error` (never a stream that just
    stops); the user's message stays."""

    async def broken_commit(self: Any, reply_text: str) -> None:
        raise RuntimeError("not a failure the error table knows")

    monkeypatch.setattr("onboarding.turn.run.Turn._commit", broken_commit)
    headers = identity("user-1") | {"accept": "text/event-stream"}
    events = parse_sse((await client.post("/chat", json={"message": "Hi"}, headers=headers)).text)
    name, error = events[-1]
    assert (name, error["error"]) == ("error", "internal_error")
    assert [e for e, _ in events[:-1]] == ["chunk"] * (len(events) - 1)
    assert [m.message_id for m in store.conversations.load_turn("user-1", 20).messages] == [error["userMessageId"]]


async def test_a_resend_returns_the_reply_byte_for_byte_even_after_a_tool_round(
    client: httpx.AsyncClient, store: Repositories, emulator: BedrockEmulator
) -> None:
    """The first answer had text before and after a tool call (two model rounds); a resend, as
    JSON or as a stream, returns exactly what was sent the first time, not only the last round."""
    await client.post("/chat", json={"message": "Hi"}, headers=identity("user-1"))
    # The local coach speaks once, after its tools; a model may also speak before them.
    save = ToolCall("tooluse_resend0000000000000", "save_fitness_assessment", {"fitness_level": "beginner"})
    emulator.script(CoachReply("Thanks! ", (save,)))
    emulator.script(CoachReply("Noted your fitness level."))
    body = {"message": "I'm a beginner", "clientMessageId": "app-answer-1"}
    first = (await client.post("/chat", json=body, headers=identity("user-1"))).json()
    assert first["reply"] == "Thanks! Noted your fitness level."
    rounds = [m for m in store.conversations.load_turn("user-1", 20).messages if m.role == "assistant"]
    assert any(m.tool_calls and m.content for m in rounds)  # a round with text and a tool call
    calls = len(emulator.requests)
    again = (await client.post("/chat", json=body, headers=identity("user-1"))).json()
    stream = await client.post("/chat", json=body, headers=identity("user-1") | {"accept": "text/event-stream"})
    streamed = "".join(data["text"] for name, data in parse_sse(stream.text) if name == "chunk")
    assert again["reply"].encode() == first["reply"].encode()
    assert streamed.encode() == first["reply"].encode()
    assert len(emulator.requests) == calls  # answered from the store, not the model


async def test_a_retried_client_message_id_returns_the_same_turn(
    client: httpx.AsyncClient, store: Repositories
) -> None:
    body = {"message": "Hi", "clientMessageId": "app-7f3a"}
    first = (await client.post("/chat", json=body, headers=identity("user-1"))).json()
    stream = await client.post("/chat", json=body, headers=identity("user-1") | {"accept": "text/event-stream"})
    events = parse_sse(stream.text)
    assert "".join(data["text"] for name, data in events if name == "chunk") == first["reply"]
    assert events[-1][1] == {"userMessageId": first["userMessageId"], "assistantMessageId": first["assistantMessageId"]}
    assert len(store.conversations.load_turn("user-1", 20).messages) == 2


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"message": "Something else", "clientMessageId": "app-7f3a"}, 409, "duplicate_message_id"),
        ({"message": "Hi", "clientMessageId": "not valid!"}, 400, "invalid_request"),
    ],
)
async def test_client_message_id_errors(
    client: httpx.AsyncClient, store: Repositories, body: dict[str, str], status: int, code: str
) -> None:
    await client.post("/chat", json={"message": "Hi", "clientMessageId": "app-7f3a"}, headers=identity("user-1"))
    response = await client.post("/chat", json=body, headers=identity("user-1"))
    assert (response.status_code, response.json()["error"]) == (status, code)
    assert len(store.conversations.load_turn("user-1", 20).messages) == 2


async def test_every_line_of_a_streamed_reply_carries_its_request_id(client: httpx.AsyncClient) -> None:
    """The reply streams after the response began: its lines (`turn_responded`, written when the
    stream ends) keep the request's correlation id, which a middleware clearing it as soon as the
    response starts would take from them. Read as the function's log handler formats them, in the
    task that logs."""
    service = logging.getLogger(os.environ["POWERTOOLS_SERVICE_NAME"])
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    handler.setFormatter(service.powertools_handler.formatter)  # type: ignore[attr-defined]
    service.addHandler(handler)
    try:
        streamed = await client.post(
            "/chat", json={"message": "Hi"}, headers=identity("u", "req-sse") | {"accept": "text/event-stream"}
        )
        answered = await client.post("/chat", json={"message": "beginner"}, headers=identity("u", "req-json"))
    finally:
        service.removeHandler(handler)
    assert (streamed.status_code, answered.status_code) == (200, 200)
    lines = [json.loads(line) for line in written.getvalue().splitlines()]
    ids = [(line["message"], line.get("correlation_id")) for line in lines if line["message"] == "turn_responded"]
    assert ids == [("turn_responded", "req-sse"), ("turn_responded", "req-json")]
