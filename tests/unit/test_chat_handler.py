"""The chat function's handler: event in, response out, and every error path."""

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from functions.chat.app import make_handler
from infra.bedrock_emulator import BedrockEmulator
from infra.bedrock_emulator.server import Fault
from infra.invoke import LocalLambdaContext
from onboarding.store import ConversationStore
from onboarding.turns import TurnService

from .conftest import TABLE

SAMPLE_EVENT = json.loads((Path(__file__).parents[2] / "events" / "chat_message.json").read_text(encoding="utf-8"))
CONTEXT = LocalLambdaContext(function_name="ChatFunction", aws_request_id="req-1")


def _event(body: str | None, sub: str | None = "user-1", base64_encoded: bool = False) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(json.dumps(SAMPLE_EVENT))
    event["body"] = body
    event["isBase64Encoded"] = base64_encoded
    if sub is None:
        del event["requestContext"]["authorizer"]
    else:
        event["requestContext"]["authorizer"]["claims"]["sub"] = sub
    return event


def _call(service: TurnService, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = make_handler(service)(event, CONTEXT)  # type: ignore[arg-type]
    assert response["headers"]["Content-Type"] == "application/json"
    body: dict[str, Any] = json.loads(response["body"])
    return response["statusCode"], body


def test_sample_event_gets_a_reply(service: TurnService, store: ConversationStore) -> None:
    status, body = _call(service, SAMPLE_EVENT)
    assert status == 200
    assert body["reply"].startswith("Hi, I'm your coach!")
    stored = store.load_turn_context("sample-user-0001").messages
    assert [m.message_id for m in stored] == [body["userMessageId"], body["assistantMessageId"]]


def test_the_user_comes_from_the_verified_claims_not_the_body(service: TurnService, store: ConversationStore) -> None:
    status, body = _call(service, _event(json.dumps({"message": "hi", "user_id": "someone-else"}), sub="me"))
    assert status == 400
    assert body["error"] == "invalid_request"
    assert store.load_turn_context("someone-else").messages == ()


def test_no_identity_is_401_and_nothing_is_stored(service: TurnService, store: ConversationStore) -> None:
    status, body = _call(service, _event(json.dumps({"message": "hi"}), sub=None))
    assert (status, body["error"]) == (401, "unauthorized")


@pytest.mark.parametrize(
    ("body", "base64_encoded"),
    [
        ("not json", False),
        (json.dumps({"msg": "typo"}), False),
        (json.dumps({"message": 42}), False),
        (json.dumps(["message"]), False),
        (None, False),
        ("%%%not base64%%%", True),
        (base64.b64encode(b'{"message": "\xff\xfe"}').decode(), True),
    ],
)
def test_bad_bodies_are_400_with_a_clear_error(
    service: TurnService, store: ConversationStore, body: str | None, base64_encoded: bool
) -> None:
    status, payload = _call(service, _event(body, base64_encoded=base64_encoded))
    assert status == 400
    assert payload["error"] == "invalid_request"
    assert payload["message"]
    assert store.load_turn_context("user-1").messages == ()


def test_base64_bodies_are_decoded(service: TurnService) -> None:
    body = base64.b64encode(json.dumps({"message": "Salut 👋"}).encode()).decode()
    status, payload = _call(service, _event(body, base64_encoded=True))
    assert status == 200
    assert payload["reply"]


@pytest.mark.parametrize(
    ("message", "status", "code"),
    [("   ", 400, "invalid_message"), ("x" * 40_000, 413, "message_too_large"), ("\ud800", 400, "invalid_request")],
)
def test_invalid_messages(service: TurnService, store: ConversationStore, message: str, status: int, code: str) -> None:
    got_status, payload = _call(service, _event(json.dumps({"message": message})))
    assert (got_status, payload["error"]) == (status, code)
    assert store.load_turn_context("user-1").messages == ()


def test_model_failure_is_502_and_the_user_turn_is_kept(
    service: TurnService, store: ConversationStore, emulator: BedrockEmulator
) -> None:
    emulator.queue_fault(Fault("stream_error", after_chunks=2))
    status, payload = _call(service, _event(json.dumps({"message": "hello"})))
    assert (status, payload["error"]) == (502, "model_unavailable")
    assert [m.role for m in store.load_turn_context("user-1").messages] == ["user"]


def test_store_failure_is_503_with_retry_after(service: TurnService, store: ConversationStore, dynamodb: Any) -> None:
    dynamodb.delete_table(TableName=TABLE)
    response = make_handler(service)(_event(json.dumps({"message": "hello"})), CONTEXT)  # type: ignore[arg-type]
    assert response["statusCode"] == 503
    assert response["headers"]["Retry-After"] == "2"
    assert json.loads(response["body"])["error"] == "store_unavailable"
