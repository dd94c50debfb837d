"""Configuration, read once from the environment (Lambda sets it from template.yaml)."""

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_MODEL_ID = "us.anthropic.claude-haiku-4-5-20251001-v1:0"


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    table_name: str = Field(min_length=3)
    region: str = "us-east-1"
    model_id: str = DEFAULT_MODEL_ID
    model_max_attempts: int = Field(default=3, ge=1, le=10)
    model_connect_timeout_s: float = Field(default=5.0, gt=0)
    model_read_timeout_s: float = Field(default=60.0, gt=0)
    model_max_tokens: int = Field(default=1024, ge=1)
    model_temperature: float = Field(default=0.5, ge=0, le=1)
    dynamodb_max_attempts: int = Field(default=5, ge=1, le=10)
    # Messages read per turn: the window's candidates plus room for what the summary has not taken
    # yet (folds run after a turn, so at most one turn's messages more than the fold policy keeps).
    history_load_limit: int = Field(default=60, ge=0, le=1000)
    max_message_bytes: int = Field(default=32 * 1024, ge=1, le=256 * 1024)
    # Per-user message rate limit on both channels: at most `rate_limit_messages` per window (0 = off).
    rate_limit_messages: int = Field(default=20, ge=0, le=10_000)
    rate_limit_window_s: int = Field(default=60, ge=1, le=24 * 3600)
    # Tries of a model reply that fails before its first token (throttling, a broken stream), within
    # `model_retry_budget_s` in all; each try also has botocore's own retries of the HTTP call.
    model_stream_attempts: int = Field(default=3, ge=1, le=10)
    model_retry_budget_s: float = Field(default=20.0, gt=0)
    # After this many model failures in a row, the instance stops calling the model for
    # `circuit_reset_s` seconds and answers at once that the coach will be back shortly.
    circuit_failure_threshold: int = Field(default=5, ge=1)
    circuit_reset_s: float = Field(default=30.0, gt=0)
    # Memory beyond the window (docs/decisions/0011-memory-beyond-the-window.md).
    token_budget: int = Field(default=12_000, ge=1000, le=200_000)
    system_prompt_allowance: int = Field(default=5_000, ge=500)
    window_max_messages: int = Field(default=15, ge=2, le=200)
    window_max_tokens: int = Field(default=4_000, ge=100)
    summary_max_tokens: int = Field(default=800, ge=50)
    conversation_gap_s: int = Field(default=30 * 60, ge=1)
    reset_keywords: tuple[str, ...] = ("start over", "reset", "new topic")
    message_ttl_days: int = Field(default=365, ge=0, le=3650)  # 0: messages never expire
    max_asks: int = Field(default=2, ge=1, le=10)
    max_tool_rounds: int = Field(default=3, ge=1, le=10)

    @model_validator(mode="after")
    def _budget_holds_the_window(self) -> "Settings":
        # Between folds the whole unsummarized window must fit next to the system prompt.
        if self.system_prompt_allowance + self.window_max_tokens >= self.token_budget:
            raise ValueError("TOKEN_BUDGET must exceed SYSTEM_PROMPT_ALLOWANCE + WINDOW_MAX_TOKENS")
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """Settings from environment variables; unset ones keep their defaults."""
        env = os.environ if environ is None else environ
        names = {
            "table_name": "TABLE_NAME",
            "model_id": "BEDROCK_MODEL_ID",
            "model_max_attempts": "BEDROCK_MAX_ATTEMPTS",
            "model_connect_timeout_s": "BEDROCK_CONNECT_TIMEOUT_S",
            "model_read_timeout_s": "BEDROCK_READ_TIMEOUT_S",
            "model_max_tokens": "BEDROCK_MAX_TOKENS",
            "model_temperature": "BEDROCK_TEMPERATURE",
            "dynamodb_max_attempts": "DYNAMODB_MAX_ATTEMPTS",
            "history_load_limit": "HISTORY_LOAD_LIMIT",
            "max_message_bytes": "MAX_MESSAGE_BYTES",
            "rate_limit_messages": "RATE_LIMIT_MESSAGES",
            "rate_limit_window_s": "RATE_LIMIT_WINDOW_S",
            "model_stream_attempts": "BEDROCK_STREAM_ATTEMPTS",
            "model_retry_budget_s": "BEDROCK_RETRY_BUDGET_S",
            "circuit_failure_threshold": "CIRCUIT_FAILURE_THRESHOLD",
            "circuit_reset_s": "CIRCUIT_RESET_S",
            "token_budget": "TOKEN_BUDGET",
            "system_prompt_allowance": "SYSTEM_PROMPT_ALLOWANCE",
            "window_max_messages": "WINDOW_MAX_MESSAGES",
            "window_max_tokens": "WINDOW_MAX_TOKENS",
            "summary_max_tokens": "SUMMARY_MAX_TOKENS",
            "conversation_gap_s": "CONVERSATION_GAP_S",
            "message_ttl_days": "MESSAGE_TTL_DAYS",
            "max_asks": "MAX_ASKS",
            "max_tool_rounds": "MAX_TOOL_ROUNDS",
        }
        values: dict[str, object] = {field: env[var] for field, var in names.items() if var in env}
        if "RESET_KEYWORDS" in env:  # comma-separated
            values["reset_keywords"] = tuple(k.strip() for k in env["RESET_KEYWORDS"].split(",") if k.strip())
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            values["region"] = region
        return cls.model_validate(values)
