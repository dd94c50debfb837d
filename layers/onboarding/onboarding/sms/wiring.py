"""Composition of the SMS functions' dependencies (explicit, no singletons)."""

from collections.abc import Callable

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.parameters import SSMProvider

from onboarding.settings import Settings
from onboarding.sms.intake import SmsIntake
from onboarding.sms.queue import TurnQueue
from onboarding.sms.settings import WebhookSettings
from onboarding.store_factory import build_store

AUTH_TOKEN_MAX_AGE_S = 300  # a rotated token is picked up within five minutes


# Every AWS client here comes from boto3's default session, as the store's does. Powertools'
# providers and persistence layer otherwise build a session each, and a new session reads botocore's
# endpoint data again: about 0.1 s apiece of a cold start (the webhook's goal is 0.35 s in all).


def build_parameters() -> SSMProvider:
    """SSM parameters, cached by Powertools for `AUTH_TOKEN_MAX_AGE_S` per name."""
    return SSMProvider(boto3_client=boto3.client("ssm"))


def twilio_auth_token(parameters: SSMProvider, parameter_name: str) -> str:
    """The Twilio auth token, from an SSM SecureString."""
    return str(parameters.get(parameter_name, decrypt=True, max_age=AUTH_TOKEN_MAX_AGE_S))


def webhook_url(settings: WebhookSettings, parameters: SSMProvider) -> Callable[[], str]:
    """Where the webhook's public URL comes from: the setting, or its SSM parameter (cached)."""
    if settings.twilio_webhook_url is not None:
        return lambda: str(settings.twilio_webhook_url)
    name = str(settings.twilio_webhook_url_parameter)
    return lambda: str(parameters.get(name, max_age=AUTH_TOKEN_MAX_AGE_S))


def build_idempotency_layer(table_name: str) -> DynamoDBPersistenceLayer:
    return DynamoDBPersistenceLayer(table_name=table_name, boto3_client=boto3.client("dynamodb"))


def build_intake(settings: Settings, queue_url: str) -> SmsIntake:
    return SmsIntake(build_store(settings), TurnQueue(boto3.client("sqs", region_name=settings.region), queue_url))
