"""Owns the local stand-in for AWS AppConfig's data plane (`appconfigdata`), which serves the memory's
feature flags profile to the functions as the deployed stack's AppConfig does.

Two operations, as botocore calls them: `POST /configurationsessions` (StartConfigurationSession:
application, environment and profile identifiers in, a token out) and `GET /configuration`
(GetLatestConfiguration: the token in; the configuration, the next token and the poll interval
out). As AppConfig does, an unchanged configuration comes back empty within a session. The content
is read from its source at every poll: the `--flags` file, or the template's first hosted version.
A source that cannot be read answers 500, as a failed fetch, so the functions keep their last
known flags. Every request is checked against the caller's policy first (infra/local/iam/gate.py).
"""

import hashlib
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from infra.local.iam.gate import Gate, Refusal
from infra.local.loopback import LoopbackService, StandInServer, send_json

SERVICE = "appconfigdata"


@dataclass(frozen=True)
class Profile:
    """The one configuration the stand-in serves: its identifiers, as the template's Refs give them."""

    application: str
    environment: str
    profile: str


@dataclass
class _Session:
    identifiers: dict[str, str]
    served: str | None = None  # the digest of what this session last received


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence per-request logging."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if urlsplit(self.path).path != "/configurationsessions":
            self._error(404, "ResourceNotFoundException", f"No operation at {self.path}")
            return
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            self._error(400, "BadRequestException", "Request body is not valid JSON")
            return
        stand_in = self.server.stand_in
        if (
            refused := stand_in.check("StartConfigurationSession", params, self.headers.get("Authorization"))
        ) is not None:
            self._refusal(refused)
            return
        wanted = stand_in.profile
        given = (params.get("ApplicationIdentifier"), params.get("EnvironmentIdentifier"),
                 params.get("ConfigurationProfileIdentifier"))  # fmt: skip
        if given != (wanted.application, wanted.environment, wanted.profile):
            self._error(404, "ResourceNotFoundException", "Requested resource not found")
            return
        token = stand_in.open_session(params)
        send_json(self, 201, {"InitialConfigurationToken": token})

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        token = parse_qs(url.query).get("configuration_token", [""])[0]
        stand_in = self.server.stand_in
        session = stand_in.session(token) if url.path == "/configuration" else None
        if session is None:
            self._error(400, "BadRequestException", "Request failed: the configuration token is not valid")
            return
        check = stand_in.check("GetLatestConfiguration", session.identifiers, self.headers.get("Authorization"))
        if check is not None:
            self._refusal(check)
            return
        try:
            content = stand_in.content()
        except OSError:
            self._error(500, "InternalServerException", "The configuration could not be read")
            return
        digest = hashlib.sha256(content).hexdigest()
        data = b"" if digest == session.served else content
        session.served = digest
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Next-Poll-Configuration-Token", stand_in.next_token(token, session))
        self.send_header("Next-Poll-Interval-In-Seconds", "60")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _refusal(self, refused: Refusal) -> None:
        self.send_response(refused.status)
        for name, value in refused.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(refused.body)))
        self.end_headers()
        self.wfile.write(refused.body)

    def _error(self, status: int, code: str, message: str) -> None:
        self._refusal(Refusal(status, {"x-amzn-ErrorType": code, "Content-Type": "application/json"},
                              json.dumps({"Message": message}).encode(), code, message))  # fmt: skip


class AppConfigStandIn(LoopbackService):
    """Serves `profile`'s content, read from `source` at every poll; `gate` checks each caller."""

    def __init__(
        self, profile: Profile, source: Callable[[], bytes], gate: Gate | None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.profile = profile
        self.content = source
        self.gate = gate
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        super().__init__(host, port, _Handler, "appconfig-stand-in")

    def check(self, operation: str, params: dict[str, Any], authorization: str | None) -> Refusal | None:
        if self.gate is None:
            return None
        return self.gate.check(SERVICE, operation, params, authorization)

    def open_session(self, params: dict[str, Any]) -> str:
        identifiers = {
            key: str(params[key])
            for key in ("ApplicationIdentifier", "EnvironmentIdentifier", "ConfigurationProfileIdentifier")
        }
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._sessions[token] = _Session(identifiers)
        return token

    def session(self, token: str) -> _Session | None:
        with self._lock:
            return self._sessions.get(token)

    def next_token(self, used: str, session: _Session) -> str:
        """A token is good once: the next poll uses the new one (the old one is forgotten)."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._sessions.pop(used, None)
            self._sessions[token] = session
        return token
