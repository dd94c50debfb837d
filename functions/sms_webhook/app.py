"""SMS webhook: Twilio's POST in, TwiML out, within a second.

Thin by design: it reads the event with Powertools' `APIGatewayProxyEvent` (headers in any case,
the body decoded when API Gateway base64-encoded it), checks Twilio's signature against the
configured public URL, turns the form into an `InboundSms`, and lets `SmsIntake` decide
(opt-outs, phone links, or queueing the turn for the worker). Each `MessageSid` is handled once
(Powertools Idempotency). It never imports LangChain: its cold start is inside Twilio's 15-second
budget.
"""

import binascii
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError
from twilio.request_validator import RequestValidator
from twilio.twiml.messaging_response import MessagingResponse

from onboarding.composition import build_parameters, build_webhook, twilio_auth_token
from onboarding.composition import webhook_url as webhook_url_source
from onboarding.config import Settings, WebhookSettings
from onboarding.model.errors import StoreError
from onboarding.redaction import RedactingFormatter
from onboarding.sms.inbound import InboundSms, OptOut
from onboarding.sms.intake import SmsIntake
from onboarding.sms.queue import QueueError

logger = Logger(logger_formatter=RedactingFormatter())

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def twiml(reply: str | None) -> dict[str, Any]:
    response = MessagingResponse()
    if reply:
        response.message(reply)
    return {"statusCode": 200, "headers": {"Content-Type": "text/xml"}, "body": str(response)}


def _plain(status: HTTPStatus, text: str) -> dict[str, Any]:
    return {"statusCode": int(status), "headers": {"Content-Type": "text/plain"}, "body": text}


def _form(event: APIGatewayProxyEvent) -> dict[str, str]:
    """The POST parameters exactly as Twilio signed them (blank values kept)."""
    return dict(parse_qsl(event.decoded_body or "", keep_blank_values=True, strict_parsing=False))


def _signed(auth_token: str, url: str, form: dict[str, str], signature: str | None) -> bool:
    return bool(RequestValidator(auth_token).validate(url, form, signature))


def _inbound(form: dict[str, str]) -> InboundSms:
    opt_out = form.get("OptOutType", "").upper()
    return InboundSms(
        message_id=form.get("MessageSid", ""),
        from_phone=form.get("From", ""),
        to_phone=form.get("To", ""),
        body=form.get("Body", ""),
        opt_out=OptOut(opt_out) if opt_out in OptOut.__members__ else None,
    )


def make_handler(
    intake: SmsIntake,
    auth_token: Callable[[], str],
    webhook_url: Callable[[], str],
    persistence: BasePersistenceLayer,
    dedupe_window_s: int = 24 * 3600,
) -> Handler:
    """The Lambda handler (tests pass their own intake, token source and persistence layer)."""
    config = IdempotencyConfig(event_key_jmespath="message_id", expires_after_seconds=dedupe_window_s)

    @idempotent_function(data_keyword_argument="sms", persistence_store=persistence, config=config)  # type: ignore[untyped-decorator]
    def accept_once(sms: InboundSms) -> dict[str, str | None]:
        return {"reply": intake.accept(sms)}

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
    def handler(raw_event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        config.register_lambda_context(context)
        event = APIGatewayProxyEvent(raw_event)
        signature = event.headers.get("X-Twilio-Signature")  # Powertools' headers ignore case
        try:
            form = _form(event)
        except (binascii.Error, UnicodeDecodeError, ValueError):
            form = None
        try:
            valid = bool(signature and form is not None and _signed(auth_token(), webhook_url(), form, signature))
        except GetParameterError:
            logger.exception("Could not read the Twilio auth token or the webhook URL")
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, "could not check the signature; please retry")
        if not valid or form is None:
            logger.warning("Rejected a webhook call with a missing or invalid Twilio signature")
            return _plain(HTTPStatus.FORBIDDEN, "invalid Twilio signature")
        try:
            sms = _inbound(form)
        except ValidationError as error:
            logger.warning("Signed webhook call without a usable message", extra={"fields": _fields(error)})
            return _plain(HTTPStatus.BAD_REQUEST, "expected MessageSid, From (E.164), To and Body")
        try:
            outcome = accept_once(sms=sms)
        except IdempotencyAlreadyInProgressError:
            # Another delivery of this text has its in-progress record, and may yet fail: a 200 here
            # could acknowledge a text nobody queues. Twilio sends it again (its Fallback URL, or the
            # retries of the URL's connection overrides); by then the first has finished (the same
            # answer) or its record has run out (this one does the work). A retried write of our own is no such
            # delivery: the idempotency store knows its own call (persistence/idempotency.py).
            logger.info("Another delivery of this text is in progress; asked to send it again")
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, "this message is being handled; please retry")
        except (StoreError, QueueError, IdempotencyPersistenceLayerError):
            # Twilio does not retry a failed webhook; with its Fallback URL set to this same URL it
            # tries once more, and the idempotency record (deleted on failure) lets that through.
            logger.exception("Could not accept the text")
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, "could not accept the message; please retry")
        return twiml(outcome["reply"])

    return handler


def _fields(error: ValidationError) -> list[str]:
    return [".".join(str(part) for part in item["loc"]) for item in error.errors(include_input=False)]


_sms = WebhookSettings.from_env()
_parameters = build_parameters()
_parts = build_webhook(Settings.from_env(), _sms)
lambda_handler = make_handler(
    _parts.intake,
    lambda: twilio_auth_token(_parameters, _sms.twilio_auth_token_parameter, _sms.parameter_max_age_s),
    webhook_url_source(_sms, _parameters),
    _parts.idempotency,
    _sms.dedupe_window_s,
)
