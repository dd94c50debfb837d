"""SMS settings: where the webhook's public URL comes from, and clear errors when configuration is wrong."""

import boto3
import pytest
from moto import mock_aws
from pydantic import ValidationError

from onboarding.composition import build_parameters, webhook_url
from onboarding.config import WebhookSettings, WorkerSettings

BASE = {"SMS_QUEUE_URL": "q", "IDEMPOTENCY_TABLE_NAME": "idem", "TWILIO_AUTH_TOKEN_PARAMETER": "/token"}


def test_the_webhook_url_may_be_given_directly() -> None:
    settings = WebhookSettings.from_env(BASE | {"TWILIO_WEBHOOK_URL": "https://example.com/sms"})
    assert webhook_url(settings, build_parameters())() == "https://example.com/sms"


def test_the_deployed_stack_gives_the_webhook_url_through_ssm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_SSM", raising=False)
    with mock_aws():
        boto3.client("ssm", region_name="us-east-1").put_parameter(
            Name="/stack/twilio-webhook-url",
            Value="https://abc.execute-api.us-east-1.amazonaws.com/v1/sms",
            Type="String",
        )
        settings = WebhookSettings.from_env(BASE | {"TWILIO_WEBHOOK_URL_PARAMETER": "/stack/twilio-webhook-url"})
        assert webhook_url(settings, build_parameters())() == "https://abc.execute-api.us-east-1.amazonaws.com/v1/sms"


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"TWILIO_WEBHOOK_URL": "https://x/sms", "TWILIO_WEBHOOK_URL_PARAMETER": "/p"},
        {"TWILIO_WEBHOOK_URL": "ftp://x"},
    ],
)
def test_the_webhook_needs_exactly_one_valid_url_source(extra: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        WebhookSettings.from_env(BASE | extra)


def test_the_worker_says_what_is_missing() -> None:
    with pytest.raises(ValidationError, match="TWILIO_ACCOUNT_SID"):  # the variable to set
        WorkerSettings.from_env({"IDEMPOTENCY_TABLE_NAME": "idem", "TWILIO_AUTH_TOKEN_PARAMETER": "/token"})
