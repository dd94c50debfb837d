"""Both channels over real HTTP on loopback: the local gateway (API routes from template.yaml), the
moto server (DynamoDB, SQS, SSM), the Bedrock emulator and the Twilio stand-in."""

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import boto3
import httpx
import pytest

from infra.local.stack import LocalStack
from infra.local.twilio_emulator import webhook_form
from tests.support.deployed_flows import replies_to, text

# Generous: a loaded CI machine must not turn a slow answer into a failure; loops stay bounded.
HTTP = httpx.Client(timeout=60)


@pytest.fixture(scope="module")
def gateway_stack() -> Iterator[LocalStack]:
    with LocalStack(api_port=0, chunk_delay_s=0.02) as stack:
        yield stack


def bearer(user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user_id}"}


def text_sms(stack: LocalStack, sid: str, phone: str, body: str) -> httpx.Response:
    return text(stack, phone, body, sid)


def test_the_reply_streams_chunk_by_chunk_before_the_model_has_finished(
    gateway_stack: LocalStack, user_id: str
) -> None:
    arrivals: list[tuple[float, str]] = []
    with httpx.stream(
        "POST",
        f"{gateway_stack.api_url}/chat",
        json={"message": "Hi"},
        headers=bearer(user_id) | {"Accept": "text/event-stream"},
        timeout=30,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                arrivals.append((time.monotonic(), line.removeprefix("event: ")))
    names = [name for _, name in arrivals]
    assert names[-1] == "done"
    assert names.count("chunk") > 5
    # With 20 ms between the emulator's chunks, a buffered reply would arrive all at once.
    assert arrivals[-1][0] - arrivals[0][0] > 0.1


def test_the_api_refuses_callers_without_a_token_and_serves_its_openapi_document(gateway_stack: LocalStack) -> None:
    assert HTTP.post(f"{gateway_stack.api_url}/chat", json={"message": "hi"}).status_code == 401
    spoofed = {"x-amzn-request-context": json.dumps({"authorizer": {"claims": {"sub": "victim"}}})}
    assert HTTP.get(f"{gateway_stack.api_url}/history", headers=spoofed).status_code == 401
    document = HTTP.get(f"{gateway_stack.api_url}/openapi.json").json()
    assert {"/chat", "/history", "/phone-links", "/phones"} <= set(document["paths"])


def test_a_spoofed_context_header_cannot_borrow_another_users_identity(gateway_stack: LocalStack, user_id: str) -> None:
    HTTP.post(
        f"{gateway_stack.api_url}/chat", json={"message": "secret of the victim"}, headers=bearer("victim-" + user_id)
    )
    spoofed = bearer(user_id) | {
        "x-amzn-request-context": json.dumps({"authorizer": {"claims": {"sub": "victim-" + user_id}}})
    }
    history = HTTP.get(f"{gateway_stack.api_url}/history", headers=spoofed).json()
    assert history["messages"] == []


def _partition(stack: LocalStack, user_id: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=stack.dynamodb.url)
    items: list[dict[str, Any]] = client.query(
        TableName=stack.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"USER#{user_id}"}},
        ConsistentRead=True,
    )["Items"]
    return items


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/chat"), ("GET", "/history"), ("POST", "/phone-links"), ("GET", "/phones"),
                         ("DELETE", "/me")],
)  # fmt: skip
def test_every_route_serves_the_token_s_user_whatever_context_header_is_sent(
    gateway_stack: LocalStack, user_id: str, method: str, path: str
) -> None:
    """Through the gateway the Authorization header decides the user: A, sending a context header
    that names B, reaches only A on every route, the erase route included, and B's items stay as
    they were, byte for byte."""
    a, b = f"a-{user_id}", f"b-{user_id}"
    said = HTTP.post(f"{gateway_stack.api_url}/chat", json={"message": "B's private knee story"}, headers=bearer(b))
    assert said.status_code == 200
    before = _partition(gateway_stack, b)
    spoofed = bearer(a) | {"x-amzn-request-context": json.dumps({"authorizer": {"claims": {"sub": b}}})}
    body = {"json": {"message": "hi"}} if path == "/chat" else {}
    answered = HTTP.request(method, f"{gateway_stack.api_url}{path}", headers=spoofed, **body)  # type: ignore[arg-type]
    assert answered.status_code in (200, 201), answered.text
    assert "knee" not in answered.text
    assert _partition(gateway_stack, b) == before
    if method == "DELETE":
        assert answered.json()["total"] == 0  # A had nothing; B's memory was not counted, let alone erased
    if (method, path) == ("POST", "/chat"):
        assert _partition(gateway_stack, a) != []


def test_a_text_is_answered_by_sms_through_the_queue(gateway_stack: LocalStack) -> None:
    phone = "+15557770001"
    response = text_sms(gateway_stack, "SMit0001", phone, "Hi coach")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/xml")
    replies = replies_to(gateway_stack, phone, 1)
    assert replies[0].startswith("Hi, I'm your coach!")


def test_a_forged_text_is_403_and_nothing_is_queued_or_sent(gateway_stack: LocalStack) -> None:
    phone = "+15557770002"
    form = webhook_form("SMit0002", phone, "Hi")
    response = HTTP.post(
        f"{gateway_stack.api_url}/sms",
        content=urlencode(form),
        headers={"X-Twilio-Signature": "Zm9yZ2Vk", "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 403
    time.sleep(1.5)
    assert [s for s in gateway_stack.twilio.sent if s.to == phone] == []


def test_a_person_who_started_in_the_app_continues_by_text(gateway_stack: LocalStack, user_id: str) -> None:
    """Facts told in the app are in the memory the SMS turn sees, and the reverse."""
    api, phone = gateway_stack.api_url, "+15557770003"
    for message in ("Hi", "I'm a beginner"):
        assert HTTP.post(f"{api}/chat", json={"message": message}, headers=bearer(user_id)).status_code == 200
    code = HTTP.post(f"{api}/phone-links", headers=bearer(user_id)).json()["code"]
    assert "Reply YES" in text_sms(gateway_stack, "SMit0003", phone, f"LINK {code}").text
    linked = text_sms(gateway_stack, "SMit0003b", phone, "YES")
    assert "Linked!" in linked.text
    assert HTTP.get(f"{api}/phones", headers=bearer(user_id)).json() == {"phones": [phone]}

    text_sms(gateway_stack, "SMit0004", phone, "I walk 5 km most days")
    [reply] = replies_to(gateway_stack, phone, 1)
    # The SMS turn saw what was said in the app: it goes on to the injuries, never back to the level.
    assert reply.endswith("Do you have any injuries, pain or health conditions I should plan around?"), reply
    assert "fitness level" not in reply
    history = HTTP.get(f"{api}/history", params={"limit": 10}, headers=bearer(user_id)).json()["messages"]
    contents = [m["content"] for m in history]
    answered_at = contents.index("I walk 5 km most days")
    # The reply is stored as said before and after its tool call (newest first in the history).
    assert " ".join(reversed(contents[:answered_at])) == reply
