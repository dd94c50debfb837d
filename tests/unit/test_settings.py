"""Settings from the environment, and the chat model built from them.

SMS settings: where the webhook's public URL comes from, and clear errors when configuration is wrong.
"""

from typing import Any

import boto3
import pytest
from moto import mock_aws
from pydantic import ValidationError

from onboarding.composition import build_parameters, webhook_url
from onboarding.config import DEFAULT_MODEL_ID, BreakerPolicy, RateLimit, Settings, WebhookSettings, WorkerSettings
from onboarding.llm.bedrock import bedrock_client_config, build_chat_model

from .conftest import TABLE


def test_defaults_and_overrides() -> None:
    settings = Settings.from_env(
        {"TABLE_NAME": "t-1", "AWS_REGION": "eu-west-1", "BEDROCK_MAX_ATTEMPTS": "1", "HISTORY_LOAD_LIMIT": "30"}
    )
    assert (settings.table_name, settings.region, settings.model_id) == ("t-1", "eu-west-1", DEFAULT_MODEL_ID)
    assert (settings.model_max_attempts, settings.history_load_limit) == (1, 30)


@pytest.mark.parametrize(
    "environ",
    [{}, {"TABLE_NAME": "t-1", "BEDROCK_MAX_ATTEMPTS": "zero"}, {"TABLE_NAME": "t-1", "BEDROCK_TEMPERATURE": "3"}],
)
def test_bad_configuration_fails_loudly(environ: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Settings.from_env(environ)


def test_one_botocore_config_carries_retries_and_timeouts() -> None:
    settings = Settings(table_name="t-1", model_max_attempts=1, model_read_timeout_s=30)
    config = bedrock_client_config(settings)
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}  # type: ignore[attr-defined]
    assert config.read_timeout == 30  # type: ignore[attr-defined]
    model = build_chat_model(settings)
    client_config = model.client.meta.config  # type: ignore[attr-defined]
    assert client_config.retries["mode"] == "standard"
    assert client_config.retries["total_max_attempts"] == 1
    assert model.client.meta.region_name == "us-east-1"  # type: ignore[attr-defined]


def test_resilience_and_rate_limit_settings_reach_the_turn_service() -> None:
    from infra.local.template import load_template
    from onboarding.composition import build_turn_service

    environ = {
        "TABLE_NAME": "t-1",
        "RATE_LIMIT_MESSAGES": "7",
        "RATE_LIMIT_WINDOW_S": "30",
        "BEDROCK_STREAM_ATTEMPTS": "4",
        "BEDROCK_RETRY_BUDGET_S": "10.5",
        "CIRCUIT_FAILURE_THRESHOLD": "2",
        "CIRCUIT_RESET_S": "9",
    }
    settings = Settings.from_env(environ)
    service = build_turn_service(settings)
    assert service.limits.rate_limit == RateLimit(7, 30)
    assert (settings.model_stream_attempts, settings.model_retry_budget_s) == (4, 10.5)
    assert (service.limits.retry.attempts, service.limits.retry.budget_s) == (4, 10.5)
    assert (settings.circuit_failure_threshold, settings.circuit_reset_s) == (2, 9)
    assert service.limits.breaker == BreakerPolicy(2, 9)
    unlimited = build_turn_service(Settings.from_env({"TABLE_NAME": "t-1", "RATE_LIMIT_MESSAGES": "0"}))
    assert unlimited.limits.rate_limit is None
    # The template gives every function the rate limit from its parameters.
    variables = load_template()["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["RATE_LIMIT_MESSAGES"] == {"Ref": "RateLimitMessages"}
    assert variables["RATE_LIMIT_WINDOW_S"] == {"Ref": "RateLimitWindowSeconds"}


def test_memory_settings_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "TABLE_NAME": "t-1",
            "TOKEN_BUDGET": "20000",
            "CONVERSATION_GAP_S": "600",
            "RESET_KEYWORDS": "start over, begin again ,,",
            "MESSAGE_TTL_DAYS": "0",
        }
    )
    assert settings.token_budget == 20_000
    assert settings.conversation_gap_s == 600
    assert settings.reset_keywords == ("start over", "begin again")
    assert settings.message_ttl_days == 0


def test_a_budget_that_cannot_hold_the_window_fails_loudly() -> None:
    with pytest.raises(ValidationError, match="TOKEN_BUDGET must exceed"):
        Settings.from_env({"TABLE_NAME": "t-1", "TOKEN_BUDGET": "9000", "WINDOW_MAX_TOKENS": "4000"})


def test_message_expiry_reaches_the_store(dynamodb: Any) -> None:
    """MESSAGE_TTL_DAYS travels through the composition root to the items the store writes."""
    from onboarding.composition import build_repositories

    for days, user in ((2, "a"), (0, "b")):
        stored = build_repositories(Settings(table_name=TABLE, message_ttl_days=days)).writes.append_message(
            user, "user", "hi"
        )
        item = dynamodb.query(
            TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": f"USER#{user}"}}
        )["Items"][0]
        assert stored.created_at is not None
        expected = {"N": str(int(stored.created_at.timestamp()) + 2 * 24 * 3600)} if days else None
        assert item.get("expires_at") == expected


@pytest.mark.parametrize("settings", [Settings, WebhookSettings, WorkerSettings])
def test_every_setting_names_its_variable_on_its_field(settings: type[Settings]) -> None:
    """Each field carries its environment variable (`Field(validation_alias=...)`): none is read by
    its field name, and no two fields share a variable."""
    names = settings.env_names()
    assert set(names) == set(settings.model_fields)
    assert all(variable.isupper() for variable in names.values())
    assert len(set(names.values())) == len(names)


def test_aws_region_wins_over_aws_default_region_and_empty_keeps_the_default() -> None:
    both = Settings.from_env({"TABLE_NAME": "t-1", "AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"})
    assert both.region == "eu-west-1"
    assert Settings.from_env({"TABLE_NAME": "t-1", "AWS_DEFAULT_REGION": "us-west-2"}).region == "us-west-2"
    defaults = Settings.from_env({"TABLE_NAME": "t-1", "AWS_REGION": "", "HISTORY_LOAD_LIMIT": ""})
    assert (defaults.region, defaults.history_load_limit) == ("us-east-1", 20)


def test_code_passes_settings_by_field_name_and_a_misspelt_one_is_refused() -> None:
    assert Settings(table_name="t-1", history_load_limit=30).history_load_limit == 30
    with pytest.raises(ValidationError, match="history_load_limt"):
        Settings(table_name="t-1", history_load_limt=30)  # type: ignore[call-arg]


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
