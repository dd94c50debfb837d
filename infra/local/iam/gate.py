"""Owns the check each local server runs on a request before answering it, and the refusal AWS
would give instead.

The caller is named by the access key in the request's SigV4 `Authorization` header (see
infra/local/iam/identity.py): a function's key is checked against that function's statements, the
operator's is let through, any other key is refused as AWS refuses an unknown one. Every
authorisation the operation table lists for the request must be allowed (infra/local/iam/actions.py);
an operation or a policy the check cannot evaluate refuses the request and says why.

A refusal has the status, error code and body shape of the service's own protocol, so botocore
raises the same ClientError it raises against AWS, and the product's own error handling runs.
"""

import io
import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote

from aws_lambda_powertools import Logger

from infra.local.iam.actions import Authorization, Place, UnknownOperation, authorizations
from infra.local.iam.identity import OPERATOR_ACCESS_KEY, function_of
from infra.local.iam.policy import Statement, UnsupportedPolicy, decide

if TYPE_CHECKING:
    from infra.local.deployment import LocalDeployment

logger = Logger(service="local-iam")

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/[^/]+/([^/]+)/")
_SIGNED_SERVICE = re.compile(r"Credential=[^/,\s]+/[^/]+/[^/]+/([^/]+)/")
# EventBridge Scheduler's REST operations on one schedule, by method (its path: /schedules/<name>).
_SCHEDULE_OPERATIONS = {
    "POST": "CreateSchedule",
    "PUT": "UpdateSchedule",
    "GET": "GetSchedule",
    "DELETE": "DeleteSchedule",
}
_KEPT_REFUSALS = 200


@dataclass(frozen=True)
class Refusal:
    """What the service answers instead: HTTP status, headers and body."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    code: str
    message: str


# How each service's protocol carries an error: (HTTP status, content type, prefix of __type, or
# None for REST services, which name the error in a header).
_PROTOCOLS: Mapping[str, tuple[int, str, str | None]] = {
    "dynamodb": (400, "application/x-amz-json-1.0", "com.amazon.coral.service#"),
    "ssm": (400, "application/x-amz-json-1.1", ""),
    "sqs": (403, "application/x-amz-json-1.0", "com.amazon.coral.service#"),
    "bedrock-runtime": (403, "application/json", None),
    "appconfigdata": (403, "application/json", None),
    "s3vectors": (403, "application/json", None),
    "dynamodbstreams": (400, "application/x-amz-json-1.0", "com.amazon.coral.service#"),
}
# SQS is query-compatible: botocore reads its error code from this header (AccessDenied, ...).
_SQS_QUERY_CODES = {"AccessDeniedException": "AccessDenied", "UnrecognizedClientException": "InvalidClientTokenId"}


def refusal(service: str, code: str, message: str) -> Refusal:
    status, content_type, type_prefix = _PROTOCOLS.get(service, (403, "application/json", None))
    headers = {"Content-Type": content_type}
    if type_prefix is None:
        headers["x-amzn-ErrorType"] = code
        body = {"message": message}
    else:
        body = {"__type": type_prefix + code, "message": message}
    if service == "sqs":
        headers["x-amzn-query-error"] = f"{_SQS_QUERY_CODES.get(code, code)};Sender"
    return Refusal(status, headers, json.dumps(body).encode(), code, message)


def caller(authorization_header: str | None) -> tuple[str, str] | None:
    """(access key, region) from a SigV4 `Authorization` header, or None when it has none."""
    match = _CREDENTIAL.search(authorization_header or "")
    return None if match is None else (match[1], match[2])


class Gate:
    """The template's policies for each function, checked on each request."""

    def __init__(
        self,
        roles: Mapping[str, Sequence[Statement]],
        account: str,
        stack_name: str,
        unreadable: Mapping[str, str] | None = None,
    ) -> None:
        """`roles`: each function's statements; `unreadable`: functions whose policy could not be
        read, with why (their requests are all refused, saying so)."""
        self._roles = roles
        self._unreadable = dict(unreadable or {})
        self._account = account
        self._stack_name = stack_name
        self._lock = threading.Lock()
        self._refusals: list[Refusal] = []
        self._granted: Counter[tuple[str, str, str]] = Counter()

    @property
    def granted(self) -> dict[tuple[str, str, str], int]:
        """How often each (function, action, resource) was allowed so far: what the functions use of
        their policies."""
        with self._lock:
            return dict(self._granted)

    def replace(self, other: "Gate") -> None:
        """Enforce `other`'s policies from now on (the template was edited), keeping what was refused."""
        with self._lock:
            self._roles, self._unreadable = other._roles, other._unreadable
            self._account, self._stack_name = other._account, other._stack_name

    @property
    def refusals(self) -> list[Refusal]:
        """The latest refusals, oldest first (for a person, or a test, asking what was refused)."""
        with self._lock:
            return list(self._refusals)

    def _principal(self, logical_id: str) -> str:
        return f"arn:aws:sts::{self._account}:assumed-role/{self._stack_name}-{logical_id}Role/{logical_id}"

    def check(
        self, service: str, operation: str, params: Mapping[str, object], authorization_header: str | None
    ) -> Refusal | None:
        """None when the request may go on; else the refusal to answer with."""
        found = caller(authorization_header)
        if found is None:
            return self._refuse(
                service, "MissingAuthenticationTokenException", "Request is missing Authentication Token"
            )
        access_key, region = found
        if access_key == OPERATOR_ACCESS_KEY:
            return None
        logical_id = function_of(access_key)
        if logical_id is None:
            return self._refuse(
                service, "UnrecognizedClientException", "The security token included in the request is invalid."
            )
        principal = self._principal(logical_id)
        with self._lock:
            roles, unreadable = self._roles, self._unreadable
        if logical_id not in roles and logical_id not in unreadable:
            return self._refuse(
                service, "UnrecognizedClientException", "The security token included in the request is invalid."
            )
        if logical_id in unreadable:
            return self._refuse(
                service,
                "AccessDeniedException",
                f"User: {principal} is not authorized to perform: {service}:{operation} because the local IAM check "
                f"cannot read its policy: {unreadable[logical_id]}",
            )
        try:
            needed = authorizations(service, operation, params, Place(region, self._account))
            for request in needed:
                denied = self._denied(principal, roles[logical_id], request)
                if denied is not None:
                    return self._refuse(service, "AccessDeniedException", denied)
            with self._lock:
                self._granted.update((logical_id, request.action, request.resource) for request in needed)
        except UnknownOperation as unknown:
            return self._refuse(
                service,
                "AccessDeniedException",
                f"User: {principal} is not authorized to perform: {service}:{operation} because the local IAM check "
                f"does not know {unknown} (infra/local/iam/actions.py lists what it knows)",
            )
        return None

    @staticmethod
    def _denied(principal: str, statements: Sequence[Statement], request: Authorization) -> str | None:
        try:
            decision = decide(statements, request)
        except UnsupportedPolicy as unsupported:
            return (
                f"User: {principal} is not authorized to perform: {request.action} on resource: {request.resource} "
                f"because the local IAM check cannot evaluate {unsupported} in its policy"
            )
        if decision.allowed:
            return None
        why = (
            "with an explicit deny in an identity-based policy"
            if decision.explicit_deny
            else f"because no identity-based policy allows the {request.action} action"
        )
        return f"User: {principal} is not authorized to perform: {request.action} on resource: {request.resource} {why}"

    def _refuse(self, service: str, code: str, message: str) -> Refusal:
        """The refusal, kept for `refusals` (whole) and logged (its code: a log line holds tokens only)."""
        refused = refusal(service, code, message)
        with self._lock:
            self._refusals = [*self._refusals[-(_KEPT_REFUSALS - 1) :], refused]
        logger.warning("Refused by the template's policy", extra={"code": code, "aws_service": service})
        return refused


def gate_settings(deployment: "LocalDeployment") -> dict[str, object]:
    """What a Gate for `deployment` needs, as JSON (the local DynamoDB server runs in a process of
    its own and is handed this)."""
    from infra.local.deployment import UnresolvableError
    from infra.local.iam.roles import function_statements

    roles: dict[str, list[Statement]] = {}
    unreadable: dict[str, str] = {}
    for logical_id in deployment.functions():
        try:
            roles[logical_id] = function_statements(deployment, logical_id)
        except (UnsupportedPolicy, UnresolvableError) as error:
            unreadable[logical_id] = str(error)
    return {
        "roles": roles,
        "unreadable": unreadable,
        "account": deployment.account,
        "stack_name": deployment.stack_name,
    }


def gate_from(settings: Mapping[str, object]) -> Gate:
    return Gate(
        roles=settings["roles"],  # type: ignore[arg-type]
        account=str(settings["account"]),
        stack_name=str(settings["stack_name"]),
        unreadable=settings.get("unreadable"),  # type: ignore[arg-type]
    )


# --- in front of moto's server (DynamoDB, SQS, SSM, DynamoDB Streams): the operation from
# `X-Amz-Target`, its parameters from the body, the caller from the signature; a refused request
# never reaches moto.

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


def rest_call(environ: Mapping[str, Any], body: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(service, operation, parameters) of a REST-JSON request (EventBridge Scheduler's): the
    service from its signature, the operation from its method and path, the parameters from its
    path, query and body. Any other such request is an operation the table does not know."""
    signed = _SIGNED_SERVICE.search(environ.get("HTTP_AUTHORIZATION", ""))
    service = signed.group(1) if signed else "unknown"
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    kind, _, name = path.strip("/").partition("/")
    if service != "scheduler" or kind != "schedules" or not name or method not in _SCHEDULE_OPERATIONS:
        return service, f"{method} {path}", body
    query = {key: values[0] for key, values in parse_qs(environ.get("QUERY_STRING", "")).items()}
    group = body.get("GroupName") or query.get("groupName")
    return service, _SCHEDULE_OPERATIONS[method], {**body, "Name": unquote(name), "GroupName": group}


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
        if "HTTP_X_AMZ_TARGET" not in environ and isinstance(params, dict):
            service, operation, params = rest_call(environ, params)
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
