"""Owns the Bedrock chat model: building it (the only place that does), and opening its stream
with retries before the first token.

Endpoints are never passed here: botocore reads `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` itself, so the
same code talks to real Bedrock or to the local emulator.

botocore already retries a ConverseStream call the model refuses outright (HTTP 429/5xx, with its
standard retry mode). It cannot retry a stream that opens and then fails before any text, e.g. a
`throttlingException` or `modelStreamErrorException` event: that arrives while the stream is read.
`open_stream` retries those with tenacity (exponential backoff with jitter), within a time budget
so the retries end well inside the Lambda's timeout. Once text has reached the user a retry would
repeat it, so failures after the first chunk are never retried. The breaker that stops calling a
failing model is onboarding/breaker.py.
"""

from collections.abc import AsyncIterator, Callable
from typing import Any

from aws_lambda_powertools import Logger
from botocore.config import Config
from botocore.exceptions import EventStreamError, ReadTimeoutError, ResponseStreamingError
from langchain_core.language_models import BaseChatModel
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)

from onboarding.config import RetryPolicy, Settings
from onboarding.metrics import count_metric

logger = Logger(child=True)

# The ConverseStream event-stream errors that mean "try again later".
TRANSIENT_STREAM_ERRORS = frozenset(
    {"throttlingException", "serviceUnavailableException", "internalServerException", "modelStreamErrorException"}
)


def is_transient_model_error(error: BaseException) -> bool:
    """True for failures inside an opened stream that a later try may not meet.

    An error *response* (HTTP 429/5xx, a refused connection) is not retried here: botocore's
    standard retry mode has already retried it, and retrying its retries would multiply the calls
    an outage costs. A stream that breaks while it is read (an error event, a cut connection, a
    read timeout) is not something botocore can retry.
    """
    if isinstance(error, EventStreamError):
        return error.response.get("Error", {}).get("Code") in TRANSIENT_STREAM_ERRORS
    return isinstance(error, ResponseStreamingError | ReadTimeoutError)


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    logger.warning(
        "Model failed before its first token; retrying",
        extra={"attempt": state.attempt_number, "reason": type(error).__name__, "wait_s": state.upcoming_sleep},
    )
    count_metric("ModelRetry")


async def open_stream(
    start: Callable[[], AsyncIterator[str]], policy: RetryPolicy
) -> tuple[AsyncIterator[str], str | None]:
    """The stream and its first chunk (None if it ended without one), retrying transient failures
    that happen before that first chunk."""
    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.attempts) | stop_before_delay(policy.budget_s),
        wait=wait_exponential_jitter(
            multiplier=policy.first_backoff_s, max=policy.max_backoff_s, jitter=policy.first_backoff_s
        ),
        retry=retry_if_exception(is_transient_model_error),
        before_sleep=_log_retry,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            stream = aiter(start())
            try:
                return stream, await anext(stream)
            except StopAsyncIteration:
                return stream, None
    raise RuntimeError("unreachable: tenacity either returns or re-raises")  # pragma: no cover


class OnDemandClient:
    """A boto3 client made on its first use. langchain-aws wants a `bedrock` (control plane) client,
    which it uses only to look up an application inference profile; making it costs a cold start
    about 25 ms (its service model and endpoint rules), for a call most deployments never make."""

    def __init__(self, service: str, region: str, config: Config) -> None:
        self._args = (service, region, config)
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            import boto3

            service, region, config = self._args
            self._client = boto3.client(service, region_name=region, config=config)  # type: ignore[call-overload]
        return getattr(self._client, name)


def bedrock_client_config(settings: Settings) -> Config:
    # One Config carries retries and timeouts: passing `max_retries`/`timeout` to
    # ChatBedrockConverse as well would replace the retries dict and lose the retry mode.
    return Config(
        retries={"mode": "standard", "total_max_attempts": settings.model_max_attempts},
        connect_timeout=settings.model_connect_timeout_s,
        read_timeout=settings.model_read_timeout_s,
    )


def build_chat_model(settings: Settings) -> BaseChatModel:
    """A streaming-capable Converse chat model configured from `settings`."""
    # Imported here: langchain_aws is the heaviest import of the project (about a second), and
    # only functions that call the model should pay for it.
    import boto3
    from langchain_aws import ChatBedrockConverse

    config = bedrock_client_config(settings)
    return ChatBedrockConverse(
        model_id=settings.model_id,
        region_name=settings.region,
        # Clients on boto3's default session, as every other client of ours. Left to itself the
        # model builds a boto3 session for each of its two clients whenever credentials are in the
        # environment (as in Lambda); each new session reads botocore's endpoint data again, about
        # 0.1 s of a cold start apiece. `bedrock` (control plane) serves only application inference
        # profiles' lookups: made if one is ever looked up.
        client=boto3.client("bedrock-runtime", region_name=settings.region, config=config),
        bedrock_client=OnDemandClient("bedrock", settings.region, config),
        config=config,
        max_tokens=settings.model_max_tokens,
        temperature=settings.model_temperature,
    )
