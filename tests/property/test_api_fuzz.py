"""Schemathesis against the mobile API's own OpenAPI document: 1,000 generated requests in the slow
tier (a tenth of them in the default run), valid and invalid, with and without a verified user, as
JSON and as Server-Sent Events. No request may get a 5xx, and every rejection must carry the API's
error body (`{"error": code, "message": text}`).

The app runs in process with the real store (moto) and the real langchain-aws client against the
Bedrock emulator, so `POST /chat` really runs turns."""

import json
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import CheckContext

from functions.api.mobile_api.routes import create_app
from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.account import AccountService
from onboarding.turn.service import TurnService

pytestmark = pytest.mark.property

# Generated cases per operation: 1,000 in all (the slow tier); the default run generates a tenth.
EXAMPLES = {("/chat", "POST"): 400, ("/history", "GET"): 300, ("/phone-links", "POST"): 150, ("/phones", "GET"): 150}
SCALES = [pytest.param(10, id="tenth"), pytest.param(1, marks=pytest.mark.slow, id="all")]


def identity(sub: str) -> str:
    return json.dumps({"requestId": "fuzz", "authorizer": {"claims": {"sub": sub}}})


def error_body_check(ctx: CheckContext, response: Any, case: Any) -> bool | None:
    """Every 4xx and 5xx answers in the API's error shape, with a code and a message for people."""
    if response.status_code < 400:
        return None
    body = response.json()
    assert isinstance(body, dict), "an error body must be a JSON object"
    assert isinstance(body.get("error"), str), "an error body needs a code in `error`"
    assert body["error"], "an error body needs a code in `error`"
    assert isinstance(body.get("message"), str), "an error body needs a `message`"
    assert body["message"], "an error body needs a `message`"
    return None


def no_server_error(ctx: CheckContext, response: Any, case: Any) -> bool | None:
    assert response.status_code < 500, f"{response.status_code} for {case.method} {case.path}"
    return None


@pytest.mark.parametrize("divisor", SCALES)
@pytest.mark.parametrize(("path", "method"), list(EXAMPLES))
def test_generated_requests_never_get_a_5xx_and_every_rejection_explains_itself(
    service: TurnService, account: AccountService, emulator: BedrockEmulator, path: str, method: str, divisor: int
) -> None:
    examples = EXAMPLES[(path, method)] // divisor
    app = create_app(service, account)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operation = schema[path][method]
    cases = st.one_of(operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE))
    seen: dict[int, int] = {}

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    @given(case=cases, who=st.sampled_from(["verified", "verified", "verified", "nobody", "broken"]), sse=st.booleans())
    def check(case: Any, who: str, sse: bool) -> None:
        headers = dict(case.headers or {})
        if who == "verified":
            headers["x-amzn-request-context"] = identity("fuzz-user")
        elif who == "broken":
            headers["x-amzn-request-context"] = "{not json"
        if sse:
            headers["accept"] = "text/event-stream"
        case.headers = headers
        response = case.call()
        seen[int(response.status_code)] = seen.get(int(response.status_code), 0) + 1
        if (response.headers.get("content-type") or [""])[0].startswith("text/event-stream"):
            assert response.status_code == 200
            events = [line for line in response.text.splitlines() if line.startswith("event: ")]
            assert events[-1] in ("event: done", "event: error"), "a stream ends with `done` or `error`"
            return
        case.validate_response(
            response,
            checks=[no_server_error, error_body_check],
        )

    check()
    print(f"{method} {path}: status codes {dict(sorted(seen.items()))}")
    assert sum(seen.values()) == examples
    if (path, method) == ("/chat", "POST"):
        assert seen.get(200, 0) > 0, "some generated messages must reach the coach"
        assert seen.get(400, 0) > 0, "some must be rejected as invalid"
        assert seen.get(401, 0) > 0, "some must be rejected as unauthenticated"
