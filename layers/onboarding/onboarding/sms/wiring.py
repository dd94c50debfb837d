"""Composition of the SMS functions' dependencies (explicit, no singletons)."""

from collections.abc import Callable

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.parameters import get_parameter

from onboarding.settings import Settings
from onboarding.sms.intake import SmsIntake
from onboarding.sms.queue import TurnQueue
from onboarding.sms.settings import WebhookSettings
from onboarding.store_factory import build_store

AUTH_TOKEN_MAX_AGE_S = 300  # a rotated token is picked up within five minutes


def twilio_auth_token(parameter_name: str) -> str:
    """The Twilio auth token, from an SSM SecureString (cached by Powertools Parameters)."""
    return str(get_parameter(parameter_name, decrypt=True, max_age=AUTH_TOKEN_MAX_AGE_S))


def webhook_url(settings: WebhookSettings) -> Callable[[], str]:
    """Where the webhook's public URL comes from: the setting, or its SSM parameter (cached)."""
    if settings.twilio_webhook_url is not None:
        return lambda: str(settings.twilio_webhook_url)
    name = str(settings.twilio_webhook_url_parameter)
    return lambda: str(get_parameter(name, max_age=AUTH_TOKEN_MAX_AGE_S))


def build_idempotency_layer(table_name: str) -> DynamoDBPersistenceLayer:
    return DynamoDBPersistenceLayer(table_name=table_name)


def build_intake(settings: Settings, queue_url: str) -> SmsIntake:
    return SmsIntake(build_store(settings), TurnQueue(boto3.client("sqs", region_name=settings.region), queue_url))
