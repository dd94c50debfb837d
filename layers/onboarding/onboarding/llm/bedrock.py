"""Owns building the Bedrock chat model: the only place that does.

Endpoints are never passed here: botocore reads `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` itself, so the
same code talks to real Bedrock or to the local emulator.
"""

from typing import Any

from botocore.config import Config
from langchain_core.language_models import BaseChatModel

from onboarding.config import Settings


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
