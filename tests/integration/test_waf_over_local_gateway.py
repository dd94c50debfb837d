"""The stage's WAF rate rules from template.yaml, applied by the local gateway: one client over its
rate gets WAF's 429 before any function runs, and other clients are not affected. Each test sends
from a loopback address of its own (127.0.0.0/8 is all loopback on Linux), so the per-IP counts of
one test do not reach another's."""

import uuid
from collections.abc import Iterator

import httpx
import pytest

from infra.local.stack import LocalStack

pytestmark = pytest.mark.integration

TOKEN_LIMIT = 10
IP_LIMIT = 20


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    limits = {"ClientRequestsPerMinute": str(TOKEN_LIMIT), "RequestsPerMinutePerIp": str(IP_LIMIT)}
    with LocalStack(api_port=0, parameters=limits) as running:
        yield running


def client_from(address: str) -> httpx.Client:
    """An HTTP client whose requests come from `address` (the client IP the WAF sees)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


def test_one_token_over_its_rate_is_refused_by_waf_and_others_are_not(stack: LocalStack) -> None:
    history = f"{stack.api_url}/history"
    with client_from("127.0.0.11") as http:
        answers = [
            http.get(history, headers={"Authorization": "Bearer waf-a"}).status_code for _ in range(TOKEN_LIMIT + 2)
        ]
        assert answers == [200] * TOKEN_LIMIT + [429, 429]
        refused = http.get(history, headers={"Authorization": "Bearer waf-a"})
        assert refused.json() == {
            "error": "throttled",
            "message": "too many requests from this client; try again in a minute",
        }
        assert refused.headers["retry-after"] == "60"
        assert http.get(history, headers={"Authorization": "Bearer waf-b"}).status_code == 200


def test_requests_without_a_token_are_counted_by_address(stack: LocalStack) -> None:
    with client_from("127.0.0.12") as http:
        answers = [http.post(f"{stack.api_url}/sms", content=b"").status_code for _ in range(IP_LIMIT + 1)]
    assert answers[:IP_LIMIT] == [403] * IP_LIMIT  # the webhook itself refuses an unsigned text
    assert answers[IP_LIMIT] == 429


def test_a_flood_that_rotates_a_junk_token_is_limited_by_its_address(stack: LocalStack) -> None:
    """The per-IP rule counts every request: counting only those without an Authorization header,
    a junk one, different each time, would meet only the per-token rule, a fresh count per token,
    and never a limit."""
    history = f"{stack.api_url}/history"
    with client_from("127.0.0.13") as http:
        answers = [
            http.get(history, headers={"Authorization": f"Bearer junk-{uuid.uuid4().hex}"}).status_code
            for _ in range(IP_LIMIT + 3)
        ]
    assert answers == [200] * IP_LIMIT + [429] * 3
    with client_from("127.0.0.14") as http:  # another address is not affected
        assert http.get(history, headers={"Authorization": "Bearer junk-other"}).status_code == 200


def test_with_waf_disabled_nothing_is_counted() -> None:
    with LocalStack(api_port=0, parameters={"WafRateLimiting": "Disabled", "ClientRequestsPerMinute": "10"}) as stack:
        answers = {httpx.get(f"{stack.api_url}/history", headers={"Authorization": "Bearer c"}).status_code
                   for _ in range(TOKEN_LIMIT + 5)}  # fmt: skip
    assert answers == {200}
