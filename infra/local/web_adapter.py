"""What Lambda Web Adapter does in Lambda, done in process: an API Gateway REST proxy event becomes an
HTTP request to the function's ASGI app, with the request context in `x-amzn-request-context`, and the
app's response becomes the proxy response. Used by `infra.invoke` for functions whose handler is a
start-up script."""

import base64
import json
from typing import Any
from urllib.parse import urlencode

import httpx

REQUEST_CONTEXT_HEADER = "x-amzn-request-context"


def _is_text(content_type: str) -> bool:
    return content_type.startswith(("text/", "application/json", "application/xml")) or "+json" in content_type


async def invoke_asgi(app: Any, event: dict[str, Any]) -> dict[str, Any]:
    """The proxy response `app` gives for `event`, as the adapter would produce it (buffered)."""
    body = event.get("body") or ""
    content = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8", "surrogatepass")
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != REQUEST_CONTEXT_HEADER}
    # The adapter replaces any client-sent copy of this header with the real request context.
    headers[REQUEST_CONTEXT_HEADER] = json.dumps(event.get("requestContext") or {})
    query = urlencode(event.get("multiValueQueryStringParameters") or event.get("queryStringParameters") or {}, True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
        response = await client.request(
            event.get("httpMethod", "GET"),
            event.get("path", "/") + (f"?{query}" if query else ""),
            content=content,
            headers=headers,
        )
    content_type = response.headers.get("content-type", "")
    text = _is_text(content_type)
    return {
        "statusCode": response.status_code,
        "headers": dict(response.headers),
        "body": response.text if text else base64.b64encode(response.content).decode(),
        "isBase64Encoded": not text,
    }
