"""A Docker-less stand-in for API Gateway, serving template.yaml's functions.

- Routes come from the template's `Api` events. A Lambda Web Adapter function (the mobile API) gets
  the HTTP request itself, streamed both ways, as the adapter gives it in Lambda; other functions
  get an API Gateway REST proxy event through `infra.invoke`.
- Authorization stand-in: on routes that need the Cognito authorizer, `Authorization: Bearer <user id>`
  is accepted as that user (no token is verified: this is a local tool, never deployed). It becomes
  the `x-amzn-request-context` header the adapter sends; a client-sent copy is dropped, as there.
- `/openapi.json` comes from the mobile API's app, unauthenticated; `/docs` is Swagger UI over it,
  with its JavaScript, CSS and icon served by the gateway itself, so the page works offline.
  FastAPI's own `/docs` loads Swagger UI from a CDN (blank without a network); the assets come from
  the `fastapi-offline` package (a dev dependency: it ships Swagger UI 5's dist files, which render
  FastAPI's OpenAPI 3.1), and the page is FastAPI's own `get_swagger_ui_html`, pointed at them. The
  deployed API routes neither `/docs` nor `/openapi.json`.

Lambda's SQS poller, which feeds the queue to the functions, is infra/local/event_sources.py.
"""

import asyncio
import base64
import json
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http import HTTPStatus
from importlib.resources import files
from typing import Any

import uvicorn
from aws_lambda_powertools import Logger
from fastapi.openapi.docs import get_swagger_ui_html

from infra.local.errors import LocalToolError
from infra.local.iam.identity import acting_as
from infra.local.lambda_runner import REQUEST_CONTEXT_HEADER, asgi_app, invoke, log_as
from infra.local.template import load_template, web_adapter_app
from infra.local.terminal import say
from infra.local.waf import LocalWaf

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
PUBLIC_DOCUMENTS = ("/openapi.json",)
KEEP_ALIVE_S = 60  # seconds an idle client connection stays open (see LocalGateway)
logger = Logger(service="local-gateway")

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets/"
# The only files served, and their types: nothing else under the package's folder is reachable.
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}


def docs_page(openapi_url: str = "/openapi.json") -> bytes:
    page = get_swagger_ui_html(
        openapi_url=openapi_url,
        title="Onboarding coach API (local)",
        swagger_js_url=f"{ASSETS_PATH}swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}favicon.png",
        # Swagger UI would send the document to an online validator for its badge otherwise.
        swagger_ui_parameters={"validatorUrl": None},
    )
    return bytes(page.body)


def asset(path: str) -> tuple[bytes, str] | None:
    """The content and type of the asset at `path` (under ASSETS_PATH), or None."""
    name = path.removeprefix(ASSETS_PATH)
    if not path.startswith(ASSETS_PATH) or name not in ASSETS:
        return None
    return (files("fastapi_offline") / "static" / name).read_bytes(), ASSETS[name]


@dataclass(frozen=True)
class Route:
    logical_id: str
    method: str
    path: str
    authorized: bool


def api_routes() -> list[Route]:
    """Every `Api` event of every function in template.yaml."""
    template = load_template()
    default_auth = bool(
        template["Resources"].get("ChatApi", {}).get("Properties", {}).get("Auth", {}).get("DefaultAuthorizer")
    )
    routes = []
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        for event in resource["Properties"].get("Events", {}).values():
            if event["Type"] != "Api":
                continue
            properties = event["Properties"]
            authorizer = properties.get("Auth", {}).get("Authorizer")
            authorized = default_auth and authorizer != "NONE"
            routes.append(Route(logical_id, properties["Method"].upper(), properties["Path"], authorized))
    return routes


async def _respond(
    send: Send, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
) -> None:
    raw_headers = [(b"content-type", content_type.encode())]
    raw_headers += [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True)
class GatewayResponse:
    """One of API Gateway's own answers, as template.yaml's `GatewayResponses` configure it."""

    status: int
    body: bytes
    headers: dict[str, str]


# API Gateway's status for each response type the template may leave at its default.
_DEFAULT_STATUS = {
    "UNAUTHORIZED": 401,
    "MISSING_AUTHENTICATION_TOKEN": 403,  # nosec B105 - a response type's name, not a secret
    "DEFAULT_4XX": 400,
    "DEFAULT_5XX": 500,
}


def gateway_response(response_type: str) -> GatewayResponse:
    """The answer API Gateway gives for `response_type`, read from template.yaml (the API's
    `GatewayResponses`, falling back to DEFAULT_4XX / DEFAULT_5XX as API Gateway does)."""
    configured = load_template()["Resources"]["ChatApi"]["Properties"].get("GatewayResponses", {})
    status = int(configured.get(response_type, {}).get("StatusCode") or _DEFAULT_STATUS.get(response_type, 500))
    fallback = configured.get(response_type) or configured.get("DEFAULT_5XX" if status >= 500 else "DEFAULT_4XX", {})
    body = fallback.get("ResponseTemplates", {}).get("application/json", json.dumps({"message": response_type}))
    headers = {
        name: str(value).strip("'")  # a static header value is a quoted literal in the template
        for name, value in fallback.get("ResponseParameters", {}).get("Headers", {}).items()
    }
    return GatewayResponse(status, body.encode(), headers)


def _naming_the_request(send: Send, request_id: str) -> Send:
    """`send`, with API Gateway's `x-amzn-RequestId` header on the response: the request's id
    (`requestContext.requestId`, the functions' correlation id in their log lines)."""

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"x-amzn-requestid", request_id.encode())]}
        await send(message)

    return sending


async def _refuse(send: Send, response_type: str) -> None:
    response = gateway_response(response_type)
    await _respond(send, response.status, response.body, headers=response.headers)


async def read_body(receive: Receive) -> bytes:
    """An ASGI request's whole body (the console's recorder reads it the same way)."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


class GatewayApp:
    """The ASGI app of the local gateway; `waf`, the stage's web ACL (infra/local/waf.py)."""

    def __init__(self, routes: list[Route], waf: "LocalWaf | None" = None) -> None:
        self._routes = {(route.method, route.path): route for route in routes}
        self._waf = waf
        self._documents_from = next((r.logical_id for r in routes if web_adapter_app(r.logical_id)), None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if (scope["method"], scope["path"]) not in self._routes:  # the docs page, its assets, a 403
            await self._handle(scope, receive, send)
            return
        # One line on the tool's terminal for each request to a route (the JSON logs go to a file).
        started, status = time.perf_counter(), [0]

        async def watched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self._handle(scope, receive, watched)
        finally:
            took = (time.perf_counter() - started) * 1000
            say(f"{scope['method']} {scope['path']} -> {status[0] or 'no answer'} ({took:.0f} ms)")

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        request_id = str(uuid.uuid4())
        send = _naming_the_request(send, request_id)
        if path == DOCS_PATH and method == "GET":
            await _respond(send, 200, docs_page(), "text/html; charset=utf-8")
            return
        if path.startswith(ASSETS_PATH) and method == "GET" and (found := asset(path)) is not None:
            await _respond(send, 200, found[0], found[1])
            return
        if path in PUBLIC_DOCUMENTS and self._documents_from is not None:
            log_as(self._documents_from)  # this request's task only
            with acting_as(self._documents_from):
                await asgi_app(self._documents_from)(scope, receive, send)
            return
        if self._waf is not None:
            client_ip = (scope.get("client") or ("127.0.0.1", 0))[0]
            request_headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            if (blocked := self._waf.check(request_headers, client_ip)) is not None:
                await _respond(send, blocked.status, blocked.body, blocked.content_type, dict(blocked.headers))
                return
        route = self._routes.get((method, path))
        if route is None:  # API Gateway answers an unknown path and an unknown method alike
            await _refuse(send, "MISSING_AUTHENTICATION_TOKEN")
            return
        headers = [(k, v) for k, v in scope["headers"] if k.decode("latin-1").lower() != REQUEST_CONTEXT_HEADER]
        request_context: dict[str, Any] = {"requestId": request_id, "stage": "v1", "httpMethod": method}
        if route.authorized:
            user_id = self._bearer(headers)
            if user_id is None:
                await _refuse(send, "UNAUTHORIZED")
                return
            request_context["authorizer"] = {"claims": {"sub": user_id}}
        if web_adapter_app(route.logical_id) is not None:
            log_as(route.logical_id)  # this request's task only (uvicorn runs each in a task of its own)
            headers.append((REQUEST_CONTEXT_HEADER.encode(), json.dumps(request_context).encode()))
            # As the function: every request it makes carries its credentials (the wrapping console's own don't).
            with acting_as(route.logical_id):
                await asgi_app(route.logical_id)(scope | {"headers": headers}, receive, send)
            return
        await self._invoke(route, scope, headers, request_context, await read_body(receive), send)

    @staticmethod
    def _bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
        for key, value in headers:
            if key.decode("latin-1").lower() == "authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer" and token.strip():
                    return token.strip()
        return None

    @staticmethod
    async def _invoke(
        route: Route,
        scope: Scope,
        headers: list[tuple[bytes, bytes]],
        request_context: dict[str, Any],
        body: bytes,
        send: Send,
    ) -> None:
        try:
            text, encoded = body.decode("utf-8"), False
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(body).decode(), True
        event = {
            "resource": route.path,
            "path": route.path,
            "httpMethod": route.method,
            "headers": {k.decode("latin-1"): v.decode("latin-1") for k, v in headers},
            "queryStringParameters": None,
            "requestContext": request_context,
            "body": text,
            "isBase64Encoded": encoded,
        }
        try:
            response = await asyncio.to_thread(invoke, route.logical_id, event)
        except Exception:  # a function that raised: API Gateway answers 502, in the DEFAULT_5XX body
            logger.exception("The local function raised", extra={"function": route.logical_id})
            refusal = gateway_response("DEFAULT_5XX")
            await _respond(send, HTTPStatus.BAD_GATEWAY, refusal.body, headers=refusal.headers)
            return
        body_out = response.get("body") or ""
        raw = base64.b64decode(body_out) if response.get("isBase64Encoded") else body_out.encode()
        out_headers = [(k.lower().encode(), str(v).encode()) for k, v in (response.get("headers") or {}).items()]
        await send({"type": "http.response.start", "status": response["statusCode"], "headers": out_headers})
        await send({"type": "http.response.body", "body": raw})


class LocalGateway:
    """The gateway served by uvicorn on a background thread."""

    def __init__(
        self, listener: socket.socket, wrap: Callable[[Any], Any] | None = None, waf: "LocalWaf | None" = None
    ) -> None:
        """Serves on `listener`, a socket the stack bound (infra/local/ports.py). `wrap`, if given,
        wraps the gateway's ASGI app (the memory console serves and meters through it); `waf` is the
        stage's web ACL."""
        app: Any = GatewayApp(api_routes(), waf)
        app = wrap(app) if wrap is not None else app
        host, self._port = listener.getsockname()[:2]
        # uvicorn closes an idle connection after 5 s, the same age at which httpx and other clients
        # reuse one: a request sent on it as it closes is lost ("Server disconnected"). API Gateway
        # keeps idle connections far longer, so the local one does too.
        config = uvicorn.Config(
            app, host=host, port=self._port, log_level="warning", access_log=False, timeout_keep_alive=KEEP_ALIVE_S
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [listener]}, daemon=True, name="local-gateway"
        )

    def start(self, timeout_s: float = 30.0) -> "LocalGateway":
        self._thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout_s / 0.05)):
            if self._server.started:
                return self
            if not self._thread.is_alive():  # uvicorn gave up (it could not listen): say so now
                raise LocalToolError(f"the API could not serve on port {self._port}")
            deadline.wait(0.05)
        raise LocalToolError(f"the API (port {self._port}) did not start within {timeout_s:g} s")

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
