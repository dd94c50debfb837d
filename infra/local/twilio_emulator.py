"""A local stand-in for the part of Twilio's REST API the worker uses: sending a message.

`POST /2010-04-01/Accounts/{AccountSid}/Messages.json` with HTTP Basic auth (account SID and auth
token), answering as Twilio does: 201 with the message resource, or Twilio's error JSON — 20003
for bad credentials, 21617 for a body over 1,600 characters, 21610 for an opted-out recipient.
Also signs webhook calls the way Twilio does, so local tools and tests can post real ones.
"""

import base64
import re
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx
from twilio.request_validator import RequestValidator

from infra.local.loopback import LoopbackService, StandInServer, send_json
from onboarding.sms.split import SMS_BODY_LIMIT, sms_length

LOCAL_ACCOUNT_SID = "AC00000000000000000000000000000000"
LOCAL_AUTH_TOKEN = "local-twilio-auth-token"  # noqa: S105 - a local stand-in's token, not a secret


def sign_webhook(auth_token: str, url: str, params: dict[str, str]) -> str:
    """The `X-Twilio-Signature` Twilio would send for a webhook POST of `params` to `url`."""
    return str(RequestValidator(auth_token).compute_signature(url, params))


def post_signed_text(webhook_url: str, from_phone: str, text: str, timeout_s: float = 60) -> httpx.Response:
    """POST what Twilio would for a text from `from_phone` (a fresh MessageSid), signed with the local token."""
    form = webhook_form(f"SM{uuid.uuid4().hex}", from_phone, text)
    return httpx.post(
        webhook_url,
        content=urlencode(form),
        headers={
            "X-Twilio-Signature": sign_webhook(LOCAL_AUTH_TOKEN, webhook_url, form),
            "Content-Type": "application/x-www-form-urlencoded",
        },
        timeout=timeout_s,
    )


_ROUTE = re.compile(r"^/2010-04-01/Accounts/(?P<sid>AC[0-9a-zA-Z]+)/Messages\.json$")


@dataclass(frozen=True)
class SentSms:
    to: str
    from_: str
    body: str


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A response's headers and body are two small writes; with Nagle's algorithm on, the body waits
    # for the ACK of the headers, which the client may delay ~40 ms: a stall of the emulator, not ours.
    disable_nagle_algorithm = True
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence per-request logging (it would print phone numbers)."""

    def do_GET(self) -> None:
        """The sent messages, newest first (Twilio's list resource, one page, optional `To` filter)."""
        path, _, query = self.path.partition("?")
        if _ROUTE.match(path) is None or not self._authorized(path):
            self._error(401, 20003, "Authenticate")
            return
        to = dict(parse_qsl(query)).get("To")
        sent = [m for m in reversed(self.server.stand_in.sent) if to is None or m.to == to]
        messages = [{"to": m.to, "from": m.from_, "body": m.body} for m in sent]
        self._json(200, {"messages": messages, "next_page_uri": None})

    def _authorized(self, path: str) -> bool:
        emulator = self.server.stand_in
        route = _ROUTE.match(path)
        expected = base64.b64encode(f"{emulator.account_sid}:{emulator.auth_token}".encode()).decode()
        return (
            route is not None
            and route["sid"] == emulator.account_sid
            and self.headers.get("Authorization") == f"Basic {expected}"
        )

    def do_POST(self) -> None:
        form = dict(parse_qsl(self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()))
        emulator = self.server.stand_in
        route = _ROUTE.match(self.path.split("?", 1)[0])
        if route is None:
            self._error(404, 20404, "The requested resource was not found")
            return
        if not self._authorized(self.path.split("?", 1)[0]):
            self._error(401, 20003, "Authenticate")
            return
        to, from_, body = form.get("To", ""), form.get("From", ""), form.get("Body", "")
        emulator.attempts += 1
        if emulator.delay_s:
            time.sleep(emulator.delay_s)
        if emulator.transient:  # an overloaded or failing Twilio, for as many requests as listed
            status = emulator.transient.pop(0)
            self._error(status, 20429 if status == 429 else 20500, "Try again later", {"Retry-After": "0"})
        elif to in emulator.refusals:  # a number Twilio cannot deliver to (21211, 21614, ...)
            self._error(400, emulator.refusals[to], "The 'To' number cannot receive this message")
        elif not to or not from_ or not body:
            self._error(400, 21602, "Message body, To and From are required")
        elif sms_length(body) > SMS_BODY_LIMIT:
            self._error(400, 21617, "The concatenated message body exceeds the 1600 character limit")
        elif to in emulator.opted_out:
            self._error(400, 21610, "Attempt to send to unsubscribed recipient")
        else:
            sent = SentSms(to, from_, body)
            emulator.record(sent)
            self._json(201, {"sid": f"SM{uuid.uuid4().hex}", "to": to, "from": from_, "body": body, "status": "queued"})

    def _error(self, status: int, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._json(status, {"code": code, "message": message, "more_info": "", "status": status}, headers)

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        send_json(self, status, payload, headers)


class TwilioEmulator(LoopbackService):
    """Run with `with TwilioEmulator() as twilio:`; `twilio.url` is the base URL for the client."""

    def __init__(
        self,
        account_sid: str = LOCAL_ACCOUNT_SID,
        auth_token: str = LOCAL_AUTH_TOKEN,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.opted_out: set[str] = set()
        self.refusals: dict[str, int] = {}  # number -> the Twilio error code a send to it gets
        self.transient: list[int] = []  # HTTP statuses (429, 5xx) the next sends get, one each
        self.delay_s = 0.0  # how long each send waits before it is answered
        self.attempts = 0  # sends received, answered or not
        self._sent: list[SentSms] = []
        self._lock = threading.Condition()
        super().__init__(host, port, _Handler, "twilio-stand-in")

    @property
    def sent(self) -> list[SentSms]:
        with self._lock:
            return list(self._sent)

    def record(self, sent: SentSms) -> None:
        with self._lock:
            self._sent.append(sent)
            self._lock.notify_all()

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[SentSms]:
        """The sent messages once there are at least `count` (or whatever arrived by the timeout)."""
        with self._lock:
            self._lock.wait_for(lambda: len(self._sent) >= count, timeout=timeout_s)
            return list(self._sent)

    def sign(self, url: str, params: dict[str, str]) -> str:
        """The `X-Twilio-Signature` Twilio would send for a webhook POST of `params` to `url`."""
        return sign_webhook(self.auth_token, url, params)


def webhook_form(
    message_sid: str, from_phone: str, body: str, to_phone: str = "+15550000000", **extra: str
) -> dict[str, str]:
    """The POST parameters of an inbound SMS webhook, as Twilio sends them (abridged)."""
    return {
        "ToCountry": "US",
        "SmsMessageSid": message_sid,
        "NumMedia": "0",
        "MessageSid": message_sid,
        "AccountSid": LOCAL_ACCOUNT_SID,
        "From": from_phone,
        "To": to_phone,
        "Body": body,
        "FromCity": "",  # Twilio sends blank values; they are part of the signature
        "NumSegments": "1",
        "ApiVersion": "2010-04-01",
        **extra,
    }
