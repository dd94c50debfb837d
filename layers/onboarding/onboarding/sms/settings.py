"""Configuration of the SMS functions, from the environment template.yaml sets."""

import os
from collections.abc import Mapping
from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _FromEnv(BaseModel):
    model_config = ConfigDict(frozen=True)

    ENV_NAMES: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        return cls.model_validate({field: env[var] for field, var in cls.ENV_NAMES.items() if env.get(var)})


class WebhookSettings(_FromEnv):
    queue_url: str = Field(min_length=1)
    idempotency_table_name: str = Field(min_length=3)
    twilio_auth_token_parameter: str = Field(min_length=1)
    # The exact public URL Twilio calls: signatures are computed over it, so it is configured, never
    # rebuilt from the request. Given directly, or as the name of an SSM parameter holding it (the
    # deployed stack writes it there, since the function cannot reference its own API).
    twilio_webhook_url: str | None = Field(default=None, pattern=r"^https?://")
    twilio_webhook_url_parameter: str | None = Field(default=None, pattern=r"^/")
    dedupe_window_s: int = Field(default=24 * 3600, ge=300)

    @model_validator(mode="after")
    def _one_webhook_url_source(self) -> Self:
        if (self.twilio_webhook_url is None) == (self.twilio_webhook_url_parameter is None):
            raise ValueError("set exactly one of TWILIO_WEBHOOK_URL and TWILIO_WEBHOOK_URL_PARAMETER")
        return self

    ENV_NAMES: ClassVar[dict[str, str]] = {
        "queue_url": "SMS_QUEUE_URL",
        "idempotency_table_name": "IDEMPOTENCY_TABLE_NAME",
        "twilio_auth_token_parameter": "TWILIO_AUTH_TOKEN_PARAMETER",
        "twilio_webhook_url": "TWILIO_WEBHOOK_URL",
        "twilio_webhook_url_parameter": "TWILIO_WEBHOOK_URL_PARAMETER",
        "dedupe_window_s": "SMS_DEDUPE_WINDOW_S",
    }


class WorkerSettings(_FromEnv):
    idempotency_table_name: str = Field(min_length=3)
    twilio_account_sid: str = Field(min_length=1)
    twilio_auth_token_parameter: str = Field(min_length=1)
    twilio_api_base_url: str | None = Field(default=None, pattern=r"^https?://")
    dedupe_window_s: int = Field(default=24 * 3600, ge=300)

    ENV_NAMES: ClassVar[dict[str, str]] = {
        "idempotency_table_name": "IDEMPOTENCY_TABLE_NAME",
        "twilio_account_sid": "TWILIO_ACCOUNT_SID",
        "twilio_auth_token_parameter": "TWILIO_AUTH_TOKEN_PARAMETER",
        "twilio_api_base_url": "TWILIO_API_BASE_URL",
        "dedupe_window_s": "SMS_DEDUPE_WINDOW_S",
    }
