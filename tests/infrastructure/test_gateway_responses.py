"""API Gateway's own refusals (no token, a missing route, throttling, 4xx, 5xx) use
the API's one error shape, {"error", "message"}, in the deployed template."""

import json
from typing import Any

import pytest

EXPECTED = {
    "UNAUTHORIZED": ("401", "unauthorized"),
    "EXPIRED_TOKEN": ("401", "unauthorized"),
    "ACCESS_DENIED": ("403", "forbidden"),
    "WAF_FILTERED": ("403", "blocked"),
    "MISSING_AUTHENTICATION_TOKEN": ("404", "not_found"),
    "THROTTLED": ("429", "throttled"),
    "REQUEST_TOO_LARGE": ("413", "request_too_large"),
    "INTEGRATION_TIMEOUT": ("504", "timeout"),
    "DEFAULT_4XX": (None, "invalid_request"),
    "DEFAULT_5XX": (None, "internal_error"),
}


@pytest.fixture(scope="module")
def gateway_responses(transformed: dict[str, Any]) -> dict[str, Any]:
    body = transformed["Resources"]["ChatApi"]["Properties"]["Body"]
    responses: dict[str, Any] = body["x-amazon-apigateway-gateway-responses"]
    return responses


@pytest.mark.parametrize("response_type", EXPECTED)
def test_each_gateway_response_uses_the_error_shape(gateway_responses: dict[str, Any], response_type: str) -> None:
    status, code = EXPECTED[response_type]
    response = gateway_responses[response_type]
    assert response.get("statusCode") == status
    body = json.loads(response["responseTemplates"]["application/json"])
    assert set(body) == {"error", "message"}
    assert body["error"] == code
    assert body["message"]
    assert "$" not in response["responseTemplates"]["application/json"]  # static: the local gateway serves it as is


def test_throttling_says_when_to_retry(gateway_responses: dict[str, Any]) -> None:
    assert gateway_responses["THROTTLED"]["responseParameters"] == {"gatewayresponse.header.Retry-After": "'1'"}
