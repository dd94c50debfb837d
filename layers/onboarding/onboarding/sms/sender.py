"""Owns sending texts through Twilio's REST API: what is retried, and what is final."""

import logging
from collections.abc import Callable
from typing import Protocol

from requests import RequestException
from requests.adapters import HTTPAdapter
from twilio.base.exceptions import TwilioRestException
from twilio.http.http_client import TwilioHttpClient
from twilio.rest import Client
from urllib3.util.retry import Retry

OPTED_OUT_ERROR = 21610  # Twilio: "Attempt to send to unsubscribed recipient"
# Twilio error codes after which the same text to the same number fails the same way, so it is
# recorded and not retried (twilio.com/docs/api/errors/<code>): 21211 invalid 'To' number, 21408
# no permission to send to its region, 21610 opted out, 21612 cannot route to it, 21614 not a
# mobile number, 21635 a landline; the delivery errors 30003 unreachable handset, 30004 blocked,
# 30005 unknown or inactive number, 30006 landline or unreachable carrier. (Those 300xx mostly
# arrive later, in the message's status; when one comes back at once it is just as final.)
PERMANENT_ERRORS = frozenset({21211, 21408, OPTED_OUT_ERROR, 21612, 21614, 21635, 30003, 30004, 30005, 30006})
# Answers a later try may not meet. Retried by the HTTP client with exponential backoff and
# jitter (honouring Retry-After), then left to the queue's own retry.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


class UndeliverableError(Exception):
    """Twilio says this number cannot get the text (a permanent error): retrying would not help."""

    def __init__(self, code: int) -> None:
        super().__init__(f"Twilio error {code}: the number cannot receive this text")
        self.code = code


class RecipientOptedOutError(UndeliverableError):
    """The number opted out (it texted STOP); nothing can be sent to it."""

    def __init__(self) -> None:
        super().__init__(OPTED_OUT_ERROR)


class SendError(Exception):
    """Twilio refused or failed to send for a reason a later try may not meet."""


class SmsSender(Protocol):
    def send(self, to_phone: str, from_phone: str, body: str) -> None: ...


class TwilioSender:
    """Sends through Twilio's REST API. The auth token is asked for at each send (its source caches
    it), so a rotated token is picked up without a restart and none is fetched before it is needed."""

    def __init__(
        self,
        account_sid: str,
        auth_token: Callable[[], str],
        api_base_url: str | None = None,
        attempts: int = 3,
        timeout_s: float = 10.0,
    ) -> None:
        self._account_sid = account_sid
        self._auth_token = auth_token
        self._api_base_url = api_base_url
        self._attempts = attempts
        self._timeout_s = timeout_s
        self._client: Client | None = None
        self._client_token: str | None = None

    def _current_client(self) -> Client:
        token = self._auth_token()
        if self._client is None or token != self._client_token:
            self._client = build_twilio_client(
                self._account_sid, token, self._api_base_url, self._attempts, self._timeout_s
            )
            self._client_token = token
        return self._client

    def send(self, to_phone: str, from_phone: str, body: str) -> None:
        try:
            self._current_client().messages.create(to=to_phone, from_=from_phone, body=body)
        except TwilioRestException as error:
            if error.code == OPTED_OUT_ERROR:
                raise RecipientOptedOutError from None
            if error.code in PERMANENT_ERRORS:
                raise UndeliverableError(error.code) from None
            # `from None`: Twilio's message often quotes the phone number, and must not reach the logs.
            raise SendError(f"Twilio error {error.code} (HTTP {error.status})") from None
        except RequestException as error:
            raise SendError(f"Twilio could not be reached ({type(error).__name__})") from None


def send_retry(attempts: int) -> Retry:
    """The HTTP client's retry of one send: refused connections and the transient statuses, with
    exponential backoff and jitter, and Retry-After honoured up to a bound (the worker's turn has a
    timeout). A read that timed out is not retried: Twilio may have sent that text already."""
    return Retry(
        total=attempts - 1,
        connect=attempts - 1,
        read=0,
        status=attempts - 1,
        other=0,
        allowed_methods=None,  # every method: a create is refused whole on these statuses
        status_forcelist=TRANSIENT_STATUSES,
        backoff_factor=0.5,
        backoff_jitter=0.25,
        backoff_max=4.0,
        retry_after_max=10,
        raise_on_status=False,  # the last answer comes back, and Twilio's client raises it
    )


def build_twilio_client(
    account_sid: str, auth_token: str, api_base_url: str | None = None, attempts: int = 3, timeout_s: float = 10.0
) -> Client:
    """Twilio's client; `api_base_url` points it at another server (a local stand-in), like AWS_ENDPOINT_URL_*."""
    # Twilio's HTTP client logs request bodies (phone numbers, message text) at INFO.
    logging.getLogger("twilio").setLevel(logging.WARNING)
    http_client = TwilioHttpClient(timeout=timeout_s)
    if http_client.session is not None:
        adapter = HTTPAdapter(max_retries=send_retry(attempts))
        for scheme in ("https://", "http://"):  # http: a local stand-in
            http_client.session.mount(scheme, adapter)
    client = Client(account_sid, auth_token, http_client=http_client)
    if api_base_url:
        client.api.base_url = api_base_url
    return client


def prime_twilio() -> None:
    """Import what Twilio's client loads on its first send (its message API: tens of milliseconds of
    a first call), without sending anything or reading the auth token."""
    _ = build_twilio_client("AC" + "0" * 32, "priming").api.v2010.account.messages
