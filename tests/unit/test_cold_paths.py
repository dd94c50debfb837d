"""What the functions' cold paths leave unbuilt until they need it (decision 0016)."""

from typing import Any

import boto3
import pytest

from onboarding.composition import build_webhook, build_worker
from onboarding.config import Settings, WebhookSettings, WorkerSettings
from onboarding.llm.bedrock import OnDemandClient, build_chat_model
from tests.unit.conftest import RECALL_INDEX_ARN

SMS = {"SMS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo", "IDEMPOTENCY_TABLE_NAME": "idem",
       "TWILIO_AUTH_TOKEN_PARAMETER": "/token", "TWILIO_WEBHOOK_URL": "https://example.com/sms"}  # fmt: skip


def test_the_model_makes_no_control_plane_client_until_one_is_used(settings: Settings) -> None:
    """langchain-aws asks for a `bedrock` client only to look up an application inference profile."""
    llm = build_chat_model(settings)
    client = llm.bedrock_client  # type: ignore[attr-defined]
    assert isinstance(client, OnDemandClient)
    assert client._client is None  # not made at init
    assert client.meta.service_model.service_name == "bedrock"  # made, and the right one, on first use
    assert client._client is not None


@pytest.mark.usefixtures("dynamodb")
def test_the_sms_functions_answer_and_keep_idempotency_records_on_one_dynamodb_client(
    settings: Settings, emulator: object
) -> None:
    webhook = build_webhook(settings, WebhookSettings.from_env(SMS))
    assert webhook.idempotency.client is webhook.intake._linking.store.phones._client
    worker = build_worker(settings, WorkerSettings.from_env(SMS | {"TWILIO_ACCOUNT_SID": "AC" + "0" * 32}))
    assert worker.idempotency.client is worker.responder._linking.store.phones._client


@pytest.mark.usefixtures("dynamodb")
def test_the_webhook_builds_no_index_client_until_an_erase_by_text_needs_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recall index's client is the webhook's only for YES DELETE: made then, not at init."""
    made: list[str] = []
    real_client: Any = boto3.client

    def counting_client(service: str, *args: Any, **kwargs: Any) -> Any:
        made.append(service)
        return real_client(service, *args, **kwargs)

    monkeypatch.setattr(boto3, "client", counting_client)
    with_index = settings.model_copy(update={"recall_index_arn": RECALL_INDEX_ARN})
    webhook = build_webhook(with_index, WebhookSettings.from_env(SMS))
    assert "s3vectors" not in made
    index = webhook.intake._account.index
    assert index is not None
    assert index.client.meta.service_model.service_name == "s3vectors"  # made, and the right one, when used
    assert made.count("s3vectors") == 1
    assert index.client is index.client  # and only once
    assert made.count("s3vectors") == 1
