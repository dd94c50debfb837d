"""Owns the policy check in front of the local server of the JSON-protocol services (DynamoDB, SQS,
SSM): the operation from `X-Amz-Target`, its parameters from the body, the caller from the
signature. A refused request never reaches moto."""

import io
import json
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus
from typing import Any

from infra.local.iam.gate import Gate, gate_from

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# The X-Amz-Target prefix of each service (botocore's `targetPrefix`).
TARGET_SERVICES: Mapping[str, str] = {
    "DynamoDB_20120810": "dynamodb",
    "AmazonSQS": "sqs",
    "AmazonSSM": "ssm",
    "DynamoDBStreams_20120810": "dynamodbstreams",
}
LOCAL_ADMIN_PATHS = ("/moto-api",)  # the local server's own controls, not an AWS API
DECISIONS_PATH = "/_local/iam/decisions"  # GET: the latest refusals and the grants so far, as JSON
POLICIES_PATH = "/_local/iam/policies"  # PUT: the policies to enforce from now on (gate_settings JSON)


def decisions(gate: Gate) -> dict[str, Any]:
    """What a gate refused (the latest) and granted (counts by function, action and resource), as JSON."""
    return {
        "refusals": [refused.message for refused in gate.refusals],
        "granted": [[*grant, count] for grant, count in gate.granted.items()],
    }


def policy_checked(app: WsgiApp, gate: Gate) -> WsgiApp:
    def checked(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == DECISIONS_PATH and environ.get("REQUEST_METHOD") == "GET":
            listed = json.dumps(decisions(gate)).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(listed)))])
            return [listed]
        if environ.get("PATH_INFO") == POLICIES_PATH and environ.get("REQUEST_METHOD") == "PUT":
            settings = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            gate.replace(gate_from(json.loads(settings)))
            start_response("204 No Content", [("Content-Length", "0")])
            return [b""]
        unsigned_probe = "HTTP_X_AMZ_TARGET" not in environ and "HTTP_AUTHORIZATION" not in environ
        if unsigned_probe or environ.get("PATH_INFO", "").startswith(LOCAL_ADMIN_PATHS):
            # Not an AWS API call: the stack's check that the server answers, or moto's own controls.
            return app(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        prefix, _, operation = environ.get("HTTP_X_AMZ_TARGET", "").partition(".")
        service = TARGET_SERVICES.get(prefix, "unknown")
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            params = {}
        refused = gate.check(
            service,
            operation or environ.get("PATH_INFO", ""),
            params if isinstance(params, dict) else {},
            environ.get("HTTP_AUTHORIZATION"),
        )
        if refused is None:
            return app(environ, start_response)
        headers = [*refused.headers.items(), ("Content-Length", str(len(refused.body)))]
        start_response(f"{refused.status} {HTTPStatus(refused.status).phrase}", headers)
        return [refused.body]

    return checked
