"""The local gateway refuses as the deployed API Gateway does, in the API's one
error shape: the bodies come from template.yaml's GatewayResponses."""

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from infra.local.gateway import GatewayApp, api_routes, gateway_response
from infra.local.template import load_template


@pytest.fixture
async def gateway() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=GatewayApp(api_routes()))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client


def _template_body(response_type: str) -> dict[str, str]:
    configured = load_template()["Resources"]["ChatApi"]["Properties"]["GatewayResponses"][response_type]
    body: dict[str, str] = json.loads(configured["ResponseTemplates"]["application/json"])
    return body


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer "}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "me"}],
    ids=["missing", "empty", "another scheme", "no scheme"],
)
async def test_a_request_without_a_valid_bearer_is_401_in_the_error_shape(
    gateway: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await gateway.post("/chat", json={"message": "hi"}, headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/json"
    assert response.json() == _template_body("UNAUTHORIZED")
    assert set(response.json()) == {"error", "message"}


@pytest.mark.parametrize(("method", "path"), [("GET", "/nowhere"), ("DELETE", "/chat"), ("PUT", "/history")])
async def test_a_missing_route_is_404_in_the_error_shape(gateway: httpx.AsyncClient, method: str, path: str) -> None:
    response = await gateway.request(method, path, headers={"Authorization": "Bearer me"})
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "message": "no such route (path and method)"}


def test_throttling_carries_retry_after() -> None:
    throttled = gateway_response("THROTTLED")
    assert throttled.status == 429
    assert throttled.headers == {"Retry-After": "1"}
    assert json.loads(throttled.body)["error"] == "throttled"
