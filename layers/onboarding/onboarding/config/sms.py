"""Owns what the SMS functions read besides `Settings` (template.yaml sets it)."""

from typing import Self

from pydantic import Field, model_validator

from onboarding.config.env import _FromEnv


class WebhookSettings(_FromEnv):
    """What the SMS webhook reads besides `Settings` (template.yaml sets it)."""

    queue_url: str = Field(min_length=1, validation_alias="SMS_QUEUE_URL")
    idempotency_table_name: str = Field(min_length=3, validation_alias="IDEMPOTENCY_TABLE_NAME")
    twilio_auth_token_parameter: str = Field(min_length=1, validation_alias="TWILIO_AUTH_TOKEN_PARAMETER")
    # The exact public URL Twilio calls: signatures are computed over it, so it is configured, never
    # rebuilt from the request. Given directly, or as the name of an SSM parameter holding it (the
    # deployed stack writes it there, since the function cannot reference its own API).
    twilio_webhook_url: str | None = Field(default=None, pattern=r"^https?://", validation_alias="TWILIO_WEBHOOK_URL")
    twilio_webhook_url_parameter: str | None = Field(
        default=None, pattern=r"^/", validation_alias="TWILIO_WEBHOOK_URL_PARAMETER"
    )
    dedupe_window_s: int = Field(default=24 * 3600, ge=300, validation_alias="SMS_DEDUPE_WINDOW_S")
    # a rotated auth token is picked up this soon
    parameter_max_age_s: int = Field(default=300, ge=1, validation_alias="SSM_PARAMETER_MAX_AGE_S")

    @model_validator(mode="after")
    def _one_webhook_url_source(self) -> Self:
        if (self.twilio_webhook_url is None) == (self.twilio_webhook_url_parameter is None):
            raise ValueError("set exactly one of TWILIO_WEBHOOK_URL and TWILIO_WEBHOOK_URL_PARAMETER")
        return self


class WorkerSettings(_FromEnv):
    """What the SMS worker reads besides `Settings` (template.yaml sets it)."""

    idempotency_table_name: str = Field(min_length=3, validation_alias="IDEMPOTENCY_TABLE_NAME")
    twilio_account_sid: str = Field(min_length=1, validation_alias="TWILIO_ACCOUNT_SID")
    twilio_auth_token_parameter: str = Field(min_length=1, validation_alias="TWILIO_AUTH_TOKEN_PARAMETER")
    twilio_api_base_url: str | None = Field(default=None, pattern=r"^https?://", validation_alias="TWILIO_API_BASE_URL")
    # Tries of one send when Twilio answers 429/5xx or cannot be reached (then the queue retries),
    # and how long one request to Twilio may take.
    twilio_send_attempts: int = Field(default=3, ge=1, le=10, validation_alias="TWILIO_SEND_ATTEMPTS")
    twilio_timeout_s: float = Field(default=10.0, gt=0, le=60, validation_alias="TWILIO_TIMEOUT_S")
    dedupe_window_s: int = Field(default=24 * 3600, ge=300, validation_alias="SMS_DEDUPE_WINDOW_S")
    parameter_max_age_s: int = Field(default=300, ge=1, validation_alias="SSM_PARAMETER_MAX_AGE_S")
