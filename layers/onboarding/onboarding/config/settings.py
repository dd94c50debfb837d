"""Owns every tunable limit with its default (`Limits`), the deployment's names (`Settings`, and what
the SMS functions read besides: `WebhookSettings`, `WorkerSettings`, which template.yaml sets), and
the policies derived from the limits: no other module holds a default that could drift from these.
"""

from datetime import time
from typing import Self

from pydantic import AliasChoices, Field, field_validator, model_validator

from onboarding.config.env import _FromEnv
from onboarding.config.policies import (
    BreakerPolicy,
    ConversationRules,
    FoldPolicy,
    PromptLimits,
    QuietHours,
    RateLimit,
    RecallMode,
    RecallPolicy,
    RetryPolicy,
)

DEFAULT_MODEL_ID = "us.anthropic.claude-haiku-4-5-20251001-v1:0"


DEFAULT_EMBEDDING_MODEL_ID = "amazon.titan-embed-text-v2:0"


TURN_LEASE_MARGIN_S = 5.0  # clock differences between instances (Lambda keeps them within a second or so)


# What the system prompt always shows (docs/decisions/0011, "A prompt that always fits"): our own
# text, at most PROMPT_INSTRUCTIONS_TOKENS in any step and mode (with the memory sections' headers
# and the line naming what gave way: tests/unit/test_prompt_fitting.py holds it to that), and
# PROMPT_KEPT_VALUES saved values: the current step's answers (four a step) and the client's name
# (in "Address as" and the returning client's greeting). A value is at most PROFILE_VALUE_CHARS
# characters, each at most 3 estimated tokens (a character outside the BMP), and its line adds at
# most PROMPT_VALUE_LINE_TOKENS ("- fitness_assessment.current_activity: ... (corrected <day>; ...)").
PROMPT_INSTRUCTIONS_TOKENS = 1_100


PROMPT_KEPT_VALUES = 6


PROMPT_VALUE_LINE_TOKENS = 40


WORST_TOKENS_PER_CHAR = 3


def kept_prompt_tokens(value_chars: int) -> int:
    """The most estimated tokens of what the system prompt always shows, for values of `value_chars`."""
    return PROMPT_INSTRUCTIONS_TOKENS + PROMPT_KEPT_VALUES * (
        WORST_TOKENS_PER_CHAR * value_chars + PROMPT_VALUE_LINE_TOKENS
    )


_CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"  # a local clock time, HH:MM


def _clock(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


class Limits(_FromEnv):
    """Every tunable limit, with its default. (`Settings` adds the deployment's names.)"""

    # A turn ends by TURN_DEADLINE_S after it began (below the functions' 60 s timeout), keeping
    # the last TURN_STORE_RESERVE_S for storing the reply. Every client's timeouts and retries are
    # bounded to fit (see `_limits_agree`), and the deadline itself cuts what still runs over.
    turn_deadline_s: float = Field(default=55.0, gt=0, le=900, validation_alias="TURN_DEADLINE_S")
    store_reserve_s: float = Field(default=10.0, gt=0, validation_alias="TURN_STORE_RESERVE_S")
    model_max_attempts: int = Field(default=2, ge=1, le=10, validation_alias="BEDROCK_MAX_ATTEMPTS")
    model_connect_timeout_s: float = Field(default=2.0, gt=0, validation_alias="BEDROCK_CONNECT_TIMEOUT_S")
    model_read_timeout_s: float = Field(default=15.0, gt=0, validation_alias="BEDROCK_READ_TIMEOUT_S")
    model_max_tokens: int = Field(default=1024, ge=1, validation_alias="BEDROCK_MAX_TOKENS")
    model_temperature: float = Field(default=0.5, ge=0, le=1, validation_alias="BEDROCK_TEMPERATURE")
    dynamodb_max_attempts: int = Field(default=3, ge=1, le=10, validation_alias="DYNAMODB_MAX_ATTEMPTS")
    dynamodb_connect_timeout_s: float = Field(default=1.0, gt=0, validation_alias="DYNAMODB_CONNECT_TIMEOUT_S")
    dynamodb_read_timeout_s: float = Field(default=2.0, gt=0, validation_alias="DYNAMODB_READ_TIMEOUT_S")
    # Tries of a turn's commit when another turn saved the state or profile first (re-read, apply again).
    memory_write_attempts: int = Field(default=5, ge=1, le=20, validation_alias="MEMORY_WRITE_ATTEMPTS")
    # The turn's one Query: this many newest messages, plus the state, profile and summary items
    # (the latest 20 messages by default).
    history_load_limit: int = Field(default=20, ge=1, le=1000, validation_alias="HISTORY_LOAD_LIMIT")
    history_page_max: int = Field(default=100, ge=1, le=1000, validation_alias="HISTORY_PAGE_MAX")
    # A /history page when the app names no limit.
    history_page_size: int = Field(default=20, ge=1, le=1000, validation_alias="HISTORY_PAGE_SIZE")
    # The fold's own read, when one is due: the oldest unsummarized messages, this many; and the
    # most estimated tokens of them one fold summarises (a backlog is caught up over several turns).
    fold_read_limit: int = Field(default=200, ge=2, le=5000, validation_alias="FOLD_READ_LIMIT")
    fold_max_tokens: int = Field(default=8_000, ge=100, le=100_000, validation_alias="FOLD_MAX_TOKENS")
    # A backlog's folds come at most this often (since the summary was last stored): each is a model
    # call after a turn, and a person who chats fast should not wait on one after every reply.
    fold_backlog_interval_s: float = Field(default=60.0, ge=0, le=86_400, validation_alias="FOLD_BACKLOG_INTERVAL_S")
    max_message_bytes: int = Field(default=32 * 1024, ge=1, le=256 * 1024, validation_alias="MAX_MESSAGE_BYTES")
    rate_limit_messages: int = Field(default=20, ge=0, le=10_000, validation_alias="RATE_LIMIT_MESSAGES")  # 0: no limit
    rate_limit_window_s: int = Field(default=60, ge=1, le=24 * 3600, validation_alias="RATE_LIMIT_WINDOW_S")
    model_stream_attempts: int = Field(default=3, ge=1, le=10, validation_alias="BEDROCK_STREAM_ATTEMPTS")
    model_retry_budget_s: float = Field(default=10.0, gt=0, validation_alias="BEDROCK_RETRY_BUDGET_S")
    model_first_backoff_s: float = Field(default=0.5, gt=0, validation_alias="BEDROCK_RETRY_FIRST_BACKOFF_S")
    model_max_backoff_s: float = Field(default=4.0, gt=0, validation_alias="BEDROCK_RETRY_MAX_BACKOFF_S")
    circuit_failure_threshold: int = Field(default=5, ge=1, validation_alias="CIRCUIT_FAILURE_THRESHOLD")
    circuit_reset_s: float = Field(default=30.0, gt=0, validation_alias="CIRCUIT_RESET_S")
    # The store's breaker (decision 0010): turn reads failed in a row before turns stop reading, and for how long.
    store_circuit_failure_threshold: int = Field(default=3, ge=1, validation_alias="STORE_CIRCUIT_FAILURE_THRESHOLD")
    store_circuit_reset_s: float = Field(default=15.0, gt=0, validation_alias="STORE_CIRCUIT_RESET_S")
    # Memory beyond the window (docs/decisions/0011-memory-beyond-the-window.md).
    token_budget: int = Field(default=12_000, ge=1000, le=200_000, validation_alias="TOKEN_BUDGET")
    system_prompt_allowance: int = Field(default=5_000, ge=500, validation_alias="SYSTEM_PROMPT_ALLOWANCE")
    window_max_messages: int = Field(default=15, ge=2, le=200, validation_alias="WINDOW_MAX_MESSAGES")
    window_max_tokens: int = Field(default=4_000, ge=100, validation_alias="WINDOW_MAX_TOKENS")
    summary_max_tokens: int = Field(default=800, ge=50, validation_alias="SUMMARY_MAX_TOKENS")
    conversation_gap_s: int = Field(default=30 * 60, ge=1, validation_alias="CONVERSATION_GAP_S")
    reset_keywords: tuple[str, ...] = Field(
        default=("start over", "reset", "new topic"), validation_alias="RESET_KEYWORDS"
    )
    # 0: messages never expire
    message_ttl_days: int = Field(default=365, ge=0, le=3650, validation_alias="MESSAGE_TTL_DAYS")
    max_asks: int = Field(default=2, ge=1, le=10, validation_alias="MAX_ASKS")
    max_tool_rounds: int = Field(default=3, ge=1, le=10, validation_alias="MAX_TOOL_ROUNDS")
    # How long a client (or Twilio) message id is remembered: deliveries are retried for minutes
    # or hours, not weeks.
    client_record_lifetime_s: int = Field(default=7 * 24 * 3600, ge=3600, validation_alias="CLIENT_RECORD_LIFETIME_S")
    # 409 in_progress's Retry-After: a copy polls this often for a reply stored within seconds (decision 0009).
    in_progress_retry_after_s: int = Field(default=1, ge=1, le=60, validation_alias="IN_PROGRESS_RETRY_AFTER_S")
    link_code_lifetime_s: int = Field(default=600, ge=60, le=24 * 3600, validation_alias="LINK_CODE_LIFETIME_S")
    # DELETE MY DATA, then YES DELETE
    erase_confirmation_window_s: int = Field(
        default=600, ge=60, le=24 * 3600, validation_alias="ERASE_CONFIRMATION_WINDOW_S"
    )
    # phone-link codes a user may create...
    link_codes_per_window: int = Field(default=5, ge=1, le=1000, validation_alias="LINK_CODE_RATE_LIMIT")
    # ... in this many seconds
    link_code_window_s: int = Field(default=3600, ge=60, le=7 * 24 * 3600, validation_alias="LINK_CODE_RATE_WINDOW_S")
    # LINK <code>, then YES within this many seconds: nothing is linked or merged before the phone agrees.
    link_confirmation_window_s: int = Field(
        default=600, ge=60, le=24 * 3600, validation_alias="LINK_CONFIRMATION_WINDOW_S"
    )
    # wrong codes one phone may send...
    link_failures_per_window: int = Field(default=5, ge=1, le=100, validation_alias="LINK_FAILURE_LIMIT")
    # ... then it is locked out till its end
    link_failure_window_s: int = Field(default=3600, ge=60, le=7 * 24 * 3600, validation_alias="LINK_FAILURE_WINDOW_S")
    # Sized against SYSTEM_PROMPT_ALLOWANCE: what the prompt always shows must fit it (`_limits_agree`).
    profile_value_chars: int = Field(default=200, ge=20, le=4000, validation_alias="PROFILE_VALUE_CHARS")
    profile_other_facts: int = Field(default=20, ge=0, le=200, validation_alias="PROFILE_OTHER_FACTS")
    # Earlier values kept per answer after corrections (the first one always stays; decision 0020).
    answer_history_values: int = Field(default=10, ge=1, le=100, validation_alias="ANSWER_HISTORY_VALUES")
    # fresh keys after a key collision
    write_attempts: int = Field(default=3, ge=1, le=10, validation_alias="DYNAMODB_WRITE_ATTEMPTS")
    erase_batch_attempts: int = Field(default=8, ge=1, le=20, validation_alias="ERASE_BATCH_ATTEMPTS")
    # How long an erase refuses the writes of turns that began before it: longer than a queued
    # text can wait (the SMS queue keeps messages 14 days).
    erased_marker_lifetime_s: int = Field(default=15 * 24 * 3600, ge=3600, validation_alias="ERASED_MARKER_LIFETIME_S")
    # Feature flags (docs/rollout.md): how long fetched flags are used before they are fetched
    # again (a change reaches every instance within this), and how long one fetch may wait.
    feature_flags_max_age_s: int = Field(default=60, ge=1, le=3600, validation_alias="FEATURE_FLAGS_MAX_AGE_S")
    feature_flags_timeout_s: float = Field(default=1.0, gt=0, le=10, validation_alias="FEATURE_FLAGS_TIMEOUT_S")
    # Recall of older messages (docs/decisions/0025-recall-of-older-messages.md, 0033-hybrid-recall.md):
    # the "From earlier conversations" section's own share of the token budget, how many matches the
    # index is asked for, how long the turn waits for the embedding and the index query together,
    # and what the query ranks by: `hybrid` (the words, BM25, and the embedding, fused by the index),
    # `lexical` (the words alone: no embedding is made) or `dense` (the embedding alone).
    recall_mode: RecallMode = Field(default="hybrid", validation_alias="RECALL_MODE")
    recall_max_tokens: int = Field(default=2_000, ge=0, le=50_000, validation_alias="RECALL_MAX_TOKENS")
    recall_top_k: int = Field(default=100, ge=1, le=100, validation_alias="RECALL_TOP_K")
    recall_timeout_s: float = Field(default=1.0, gt=0, le=10, validation_alias="RECALL_TIMEOUT_S")
    # Two hits of one speaker whose words overlap at least this much (shared words over all their
    # words) are near-duplicates: the newer is shown first (a correction); at the repeat share they
    # say the same again (a question asked on eight days, the coach's recap at each return), and
    # only the newest is shown, at the best rank of its copies (onboarding.recall.recaller).
    recall_near_duplicate_share: float = Field(default=0.35, gt=0, le=1, validation_alias="RECALL_NEAR_DUPLICATE_SHARE")
    recall_repeat_share: float = Field(default=0.8, gt=0, le=1, validation_alias="RECALL_REPEAT_SHARE")
    # Titan Text Embeddings V2's output size (the index is made with the same), and how much text of a
    # message (with the one it answers) is embedded.
    embedding_dimensions: int = Field(default=1024, validation_alias="EMBEDDING_DIMENSIONS")
    # At most the ASCII characters Titan's 8,192 tokens hold by recall/embeddings.py's estimate.
    embedding_max_chars: int = Field(default=8_000, ge=100, le=24_000, validation_alias="EMBEDDING_MAX_CHARS")
    # Check-ins (docs/decisions/0035-check-ins.md): the local hours none is sent in (from START to
    # END, across midnight), the minutes EventBridge Scheduler may deliver one late (its flexible
    # window), and the longest check-in sent (two SMS segments by default).
    check_in_quiet_start: str = Field(default="21:00", pattern=_CLOCK, validation_alias="CHECK_IN_QUIET_START")
    check_in_quiet_end: str = Field(default="08:00", pattern=_CLOCK, validation_alias="CHECK_IN_QUIET_END")
    check_in_window_minutes: int = Field(default=5, ge=1, le=60, validation_alias="CHECK_IN_WINDOW_MINUTES")
    check_in_max_chars: int = Field(default=320, ge=60, le=1600, validation_alias="CHECK_IN_MAX_CHARS")

    @field_validator("reset_keywords", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        """RESET_KEYWORDS is comma-separated; blanks between commas are dropped."""
        return tuple(k.strip() for k in value.split(",") if k.strip()) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _limits_agree(self) -> Self:
        # Between folds the whole unsummarized window must fit next to the system prompt and the
        # recalled messages...
        if self.system_prompt_allowance + self.recall_max_tokens + self.window_max_tokens >= self.token_budget:
            raise ValueError("TOKEN_BUDGET must exceed SYSTEM_PROMPT_ALLOWANCE + RECALL_MAX_TOKENS + WINDOW_MAX_TOKENS")
        # ... and what the system prompt always shows must fit its allowance, or a user with a rich
        # memory would be refused every message (the rest of the memory gives way: decision 0011).
        if (kept := kept_prompt_tokens(self.profile_value_chars)) > self.system_prompt_allowance:
            raise ValueError(
                f"SYSTEM_PROMPT_ALLOWANCE must hold the instructions and the current step's answers at "
                f"PROFILE_VALUE_CHARS={self.profile_value_chars}: at least {kept} tokens"
            )
        if self.embedding_dimensions not in (256, 512, 1024):
            raise ValueError("EMBEDDING_DIMENSIONS is one of Titan Text Embeddings V2's sizes: 256, 512 or 1024")
        # ... and the turn's Query must reach back over all of it, or the messages beyond the read
        # would be in neither the prompt nor the summary.
        if self.window_max_messages > self.history_load_limit:
            raise ValueError("HISTORY_LOAD_LIMIT must be at least WINDOW_MAX_MESSAGES")
        # botocore's tries and ours together end before the deadline: no new try of the model
        # starts after the retry budget, and the last one ends within botocore's own tries.
        model_phase = self.turn_deadline_s - self.store_reserve_s
        if model_phase <= 0:
            raise ValueError("TURN_DEADLINE_S must exceed TURN_STORE_RESERVE_S")
        one_model_try = self.model_max_attempts * (self.model_connect_timeout_s + self.model_read_timeout_s)
        if self.model_retry_budget_s + one_model_try > model_phase:
            raise ValueError(
                "BEDROCK_RETRY_BUDGET_S + BEDROCK_MAX_ATTEMPTS x (BEDROCK_CONNECT_TIMEOUT_S + BEDROCK_READ_TIMEOUT_S) "
                "must fit in TURN_DEADLINE_S - TURN_STORE_RESERVE_S"
            )
        one_store_call = self.dynamodb_max_attempts * (self.dynamodb_connect_timeout_s + self.dynamodb_read_timeout_s)
        if one_store_call > self.store_reserve_s:
            raise ValueError(
                "DYNAMODB_MAX_ATTEMPTS x (DYNAMODB_CONNECT_TIMEOUT_S + DYNAMODB_READ_TIMEOUT_S) must fit in "
                "TURN_STORE_RESERVE_S"
            )
        if self.history_page_size > self.history_page_max:
            raise ValueError("HISTORY_PAGE_SIZE must be at most HISTORY_PAGE_MAX")
        if self.fold_read_limit < self.history_load_limit:
            raise ValueError("FOLD_READ_LIMIT must be at least HISTORY_LOAD_LIMIT")
        return self

    @property
    def prompt(self) -> PromptLimits:
        return PromptLimits(
            token_budget=self.token_budget,
            system_allowance=self.system_prompt_allowance,
            recall_allowance=self.recall_max_tokens,
            window_messages=self.window_max_messages,
            max_tool_rounds=self.max_tool_rounds,
        )

    @property
    def fold(self) -> FoldPolicy:
        # A fold leaves half of each limit, so the next one is several turns away.
        return FoldPolicy(
            max_messages=self.window_max_messages,
            max_tokens=self.window_max_tokens,
            keep_messages=max(1, self.window_max_messages // 2),
            keep_tokens=self.window_max_tokens // 2,
            summary_max_tokens=self.summary_max_tokens,
            backlog_interval_s=self.fold_backlog_interval_s,
        )

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(
            attempts=self.model_stream_attempts,
            budget_s=self.model_retry_budget_s,
            first_backoff_s=self.model_first_backoff_s,
            max_backoff_s=self.model_max_backoff_s,
        )

    @property
    def breaker(self) -> BreakerPolicy:
        return BreakerPolicy(self.circuit_failure_threshold, self.circuit_reset_s)

    @property
    def store_breaker(self) -> BreakerPolicy:
        return BreakerPolicy(self.store_circuit_failure_threshold, self.store_circuit_reset_s)

    @property
    def turn_lease_s(self) -> float:
        """How long the lease of the delivery that answers a client message id runs (decision 0009): a turn
        ends by TURN_DEADLINE_S, and the instances' clocks may differ by a few seconds. A copy that
        arrives meanwhile is told to try again (409 in_progress); after it, the id is free again."""
        return self.turn_deadline_s + TURN_LEASE_MARGIN_S

    @property
    def quiet_hours(self) -> QuietHours:
        return QuietHours(
            _clock(self.check_in_quiet_start), _clock(self.check_in_quiet_end), self.check_in_window_minutes
        )

    @property
    def rate_limit(self) -> RateLimit | None:
        return RateLimit(self.rate_limit_messages, self.rate_limit_window_s) if self.rate_limit_messages else None

    @property
    def link_code_rate_limit(self) -> RateLimit:
        return RateLimit(self.link_codes_per_window, self.link_code_window_s)

    @property
    def link_failure_limit(self) -> RateLimit:
        """Wrong link codes one phone may text per fixed window; past them it is locked out."""
        return RateLimit(self.link_failures_per_window, self.link_failure_window_s)

    @property
    def recall(self) -> RecallPolicy:
        return RecallPolicy(
            max_tokens=self.recall_max_tokens,
            mode=self.recall_mode,
            top_k=self.recall_top_k,
            timeout_s=self.recall_timeout_s,
            near_duplicate_share=self.recall_near_duplicate_share,
            repeat_share=self.recall_repeat_share,
            dimensions=self.embedding_dimensions,
            max_chars=self.embedding_max_chars,
        )

    @property
    def conversations(self) -> ConversationRules:
        return ConversationRules(self.conversation_gap_s, self.reset_keywords)

    @property
    def message_ttl_s(self) -> int | None:
        """Messages expire this long after they were written; None keeps them until erased."""
        return self.message_ttl_days * 24 * 3600 or None


DEFAULT_LIMITS = Limits()


class Settings(Limits):
    """The limits, plus where the deployment's things are (the table, the region, the model)."""

    table_name: str = Field(min_length=3, validation_alias="TABLE_NAME")
    # Lambda sets AWS_REGION; AWS_DEFAULT_REGION is the SDKs' other name for it.
    region: str = Field(default="us-east-1", validation_alias=AliasChoices("AWS_REGION", "AWS_DEFAULT_REGION"))
    model_id: str = Field(default=DEFAULT_MODEL_ID, validation_alias="BEDROCK_MODEL_ID")
    # Where the feature flags come from (docs/rollout.md): the AppConfig application, environment
    # and configuration profile, or a JSON file (local runs). Neither: the default flags.
    feature_flags_application: str | None = Field(default=None, validation_alias="FEATURE_FLAGS_APPLICATION")
    feature_flags_environment: str | None = Field(default=None, validation_alias="FEATURE_FLAGS_ENVIRONMENT")
    feature_flags_profile: str | None = Field(default=None, validation_alias="FEATURE_FLAGS_PROFILE")
    feature_flags_file: str | None = Field(default=None, validation_alias="FEATURE_FLAGS_FILE")
    # The recall index (an S3 Vectors index, by ARN) and the embedding model. Without an index the
    # turns recall nothing (the feature is off, as before it existed).
    recall_index_arn: str | None = Field(default=None, validation_alias="RECALL_INDEX_ARN")
    embedding_model_id: str = Field(default=DEFAULT_EMBEDDING_MODEL_ID, validation_alias="EMBEDDING_MODEL_ID")
    # Check-in schedules (EventBridge Scheduler): the schedule group, the CheckInFunction they
    # invoke and the role they invoke it with. Without a group no schedule is made.
    check_in_schedule_group: str | None = Field(default=None, validation_alias="CHECK_IN_SCHEDULE_GROUP")
    check_in_function_arn: str | None = Field(default=None, validation_alias="CHECK_IN_FUNCTION_ARN")
    check_in_role_arn: str | None = Field(default=None, validation_alias="CHECK_IN_ROLE_ARN")

    @model_validator(mode="after")
    def _one_flag_source(self) -> Self:
        names = (self.feature_flags_application, self.feature_flags_environment, self.feature_flags_profile)
        if any(names) and not all(names):
            raise ValueError(
                "FEATURE_FLAGS_APPLICATION, FEATURE_FLAGS_ENVIRONMENT and FEATURE_FLAGS_PROFILE are set together"
            )
        return self


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


class CheckInSettings(_FromEnv):
    """What the check-in function reads besides `Settings` (template.yaml sets it): Twilio, for
    the check-ins by SMS, and the number they are sent from. Without an account, SMS check-ins
    are stored and not sent."""

    twilio_account_sid: str | None = Field(default=None, validation_alias="TWILIO_ACCOUNT_SID")
    twilio_auth_token_parameter: str | None = Field(default=None, validation_alias="TWILIO_AUTH_TOKEN_PARAMETER")
    twilio_api_base_url: str | None = Field(default=None, pattern=r"^https?://", validation_alias="TWILIO_API_BASE_URL")
    twilio_from_number: str | None = Field(default=None, validation_alias="TWILIO_FROM_NUMBER")
    twilio_send_attempts: int = Field(default=3, ge=1, le=10, validation_alias="TWILIO_SEND_ATTEMPTS")
    twilio_timeout_s: float = Field(default=10.0, gt=0, le=60, validation_alias="TWILIO_TIMEOUT_S")
    parameter_max_age_s: int = Field(default=300, ge=1, validation_alias="SSM_PARAMETER_MAX_AGE_S")
