"""Owns sending texts through Twilio's REST API."""

import logging
from collections.abc import Callable
from typing import Protocol

from twilio.base.exceptions import TwilioRestException
from twilio.rest import Client

OPTED_OUT_ERROR = 21610  # Twilio: "Attempt to send to unsubscribed recipient"


class RecipientOptedOutError(Exception):
    """The number opted out (it texted STOP); nothing can be sent to it."""


class SendError(Exception):
    """Twilio refused or failed to send (other than an opt-out)."""


class SmsSender(Protocol):
    def send(self, to_phone: str, from_phone: str, body: str) -> None: ...


class TwilioSender:
    """Sends through Twilio's REST API. The auth token is asked for at each send (its source caches
    it), so a rotated token is picked up without a restart and none is fetched before it is needed."""

    def __init__(self, account_sid: str, auth_token: Callable[[], str], api_base_url: str | None = None) -> None:
        self._account_sid = account_sid
        self._auth_token = auth_token
        self._api_base_url = api_base_url
        self._client: Client | None = None
        self._client_token: str | None = None

    def _current_client(self) -> Client:
        token = self._auth_token()
        if self._client is None or token != self._client_token:
            self._client = build_twilio_client(self._account_sid, token, self._api_base_url)
            self._client_token = token
        return self._client

    def send(self, to_phone: str, from_phone: str, body: str) -> None:
        try:
            self._current_client().messages.create(to=to_phone, from_=from_phone, body=body)
        except TwilioRestException as error:
            if error.code == OPTED_OUT_ERROR:
                raise RecipientOptedOutError from None
            # `from None`: Twilio's message often quotes the phone number, and must not reach the logs.
            raise SendError(f"Twilio error {error.code} (HTTP {error.status})") from None


def build_twilio_client(account_sid: str, auth_token: str, api_base_url: str | None = None) -> Client:
    """Twilio's client; `api_base_url` points it at another server (a local stand-in), like AWS_ENDPOINT_URL_*."""
    # Twilio's HTTP client logs request bodies (phone numbers, message text) at INFO.
    logging.getLogger("twilio").setLevel(logging.WARNING)
    client = Client(account_sid, auth_token)
    if api_base_url:
        client.api.base_url = api_base_url
    return client
