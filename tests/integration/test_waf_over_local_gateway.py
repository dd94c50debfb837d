"""The stage's WAF rate rules from template.yaml, applied by the local gateway: one client over its
rate gets WAF's 429 before any function runs, and other clients are not affected."""

from collections.abc import Iterator

import httpx
import pytest

from infra.local.stack import LocalStack

LIMIT = 10


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    limits = {"ClientRequestsPerMinute": str(LIMIT), "UnauthenticatedRequestsPerMinutePerIp": str(LIMIT)}
    with LocalStack(api_port=0, parameters=limits) as running:
        yield running


def test_one_token_over_its_rate_is_refused_by_waf_and_others_are_not(stack: LocalStack) -> None:
    history = f"{stack.api_url}/history"
    answers = [httpx.get(history, headers={"Authorization": "Bearer waf-a"}).status_code for _ in range(LIMIT + 2)]
    assert answers == [200] * LIMIT + [429, 429]
    refused = httpx.get(history, headers={"Authorization": "Bearer waf-a"})
    assert refused.json() == {
        "error": "throttled",
        "message": "too many requests from this client; try again in a minute",
    }
    assert refused.headers["retry-after"] == "60"
    assert httpx.get(history, headers={"Authorization": "Bearer waf-b"}).status_code == 200


def test_requests_without_a_token_are_counted_by_address(stack: LocalStack) -> None:
    answers = [httpx.post(f"{stack.api_url}/sms", content=b"").status_code for _ in range(LIMIT + 1)]
    assert answers[:LIMIT] == [403] * LIMIT  # the webhook itself refuses an unsigned text
    assert answers[LIMIT] == 429


def test_with_waf_disabled_nothing_is_counted() -> None:
    with LocalStack(api_port=0, parameters={"WafRateLimiting": "Disabled", "ClientRequestsPerMinute": "10"}) as stack:
        answers = {httpx.get(f"{stack.api_url}/history", headers={"Authorization": "Bearer c"}).status_code
                   for _ in range(LIMIT + 5)}  # fmt: skip
    assert answers == {200}
