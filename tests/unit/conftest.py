"""Unit-test fixtures: DynamoDB is moto in-process; Bedrock is the emulator on loopback."""

from collections.abc import Iterator

import boto3
import pytest
from langchain_core.language_models import BaseChatModel
from moto import mock_aws

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.s3vectors import S3VectorsStandIn
from infra.local.template import table_create_request
from infra.local.twilio_emulator import TwilioEmulator
from onboarding.account import AccountService
from onboarding.breaker import CircuitBreaker
from onboarding.config import Settings
from onboarding.llm.bedrock import build_chat_model
from onboarding.persistence import Repositories
from onboarding.recall.vectors import NON_FILTERABLE_KEYS, SEARCHED_KEY
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService

TABLE = "onboarding-memory-test"


MOTO_SERVED = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_SSM")


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    # In-process moto; an endpoint left by a running local stack (of another test module on this
    # worker) must not redirect the calls moto serves here. (The Bedrock emulator's and the index
    # stand-in's endpoints, which a test's own fixtures set, stay.)
    for name in MOTO_SERVED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TABLE_NAME", TABLE)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(**table_create_request("ConversationTable", TABLE))
        yield client


@pytest.fixture
def settings() -> Settings:
    """The defaults, with one model attempt and retry backoffs short enough for tests."""
    return Settings(
        table_name=TABLE,
        model_max_attempts=1,
        model_retry_budget_s=5.0,
        model_first_backoff_s=0.01,
        model_max_backoff_s=0.05,
    )


RECALL_INDEX_ARN = "arn:aws:s3vectors:us-east-1:123456789012:bucket/recall-test/index/messages"
RECALL_DIMENSIONS = 256  # small and fast; the index and the embedding agree


@pytest.fixture
def vector_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3VectorsStandIn]:
    """The S3 Vectors stand-in on loopback with the recall index made as the template makes it, and
    botocore pointed at it by the standard variable."""
    with S3VectorsStandIn("us-east-1", "123456789012") as stand_in:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3VECTORS", stand_in.url)
        client = boto3.client("s3vectors", region_name="us-east-1")
        client.create_vector_bucket(vectorBucketName="recall-test")
        client.create_index(
            vectorBucketName="recall-test", indexName="messages", dataType="float32", dimension=RECALL_DIMENSIONS,
            distanceMetric="cosine", metadataConfiguration={
                "nonFilterableMetadataKeys": list(NON_FILTERABLE_KEYS),
                "textSearchConfigurations": [{"metadataKey": SEARCHED_KEY, "language": "en"}],
            },
        )  # fmt: skip
        yield stand_in


@pytest.fixture
def recall_settings(settings: Settings, vector_index: S3VectorsStandIn, emulator: BedrockEmulator) -> Settings:
    """The test settings with recall on: the stand-in's index, embeddings of its size."""
    return settings.model_copy(update={"recall_index_arn": RECALL_INDEX_ARN, "embedding_dimensions": RECALL_DIMENSIONS})


@pytest.fixture
def store(dynamodb: object, settings: Settings) -> Repositories:
    return Repositories.over(dynamodb, TABLE, settings)  # type: ignore[arg-type]


@pytest.fixture
def llm(emulator: BedrockEmulator, settings: Settings) -> BaseChatModel:
    return build_chat_model(settings)


@pytest.fixture
def orchestrator(store: Repositories, llm: BaseChatModel, settings: Settings) -> OnboardingAgentOrchestrator:
    return OnboardingAgentOrchestrator(store.conversations, llm, settings)


@pytest.fixture
def service(orchestrator: OnboardingAgentOrchestrator, store: Repositories, settings: Settings) -> TurnService:
    store_breaker = CircuitBreaker(settings.store_breaker, name="store")
    return TurnService(orchestrator, store, CircuitBreaker(settings.breaker), store_breaker=store_breaker)


@pytest.fixture
def account(store: Repositories, settings: Settings) -> AccountService:
    return AccountService(store, settings)


IDEMPOTENCY_TABLE = "onboarding-idempotency-test"


@pytest.fixture
def idempotency_table(dynamodb: object) -> str:
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(**table_create_request("IdempotencyTable", IDEMPOTENCY_TABLE))
    return IDEMPOTENCY_TABLE


@pytest.fixture
def sms_queue(dynamodb: object, monkeypatch: pytest.MonkeyPatch) -> str:
    """An SQS FIFO queue in the same in-process moto as the table; returns its URL."""
    monkeypatch.delenv("AWS_ENDPOINT_URL_SQS", raising=False)
    sqs = boto3.client("sqs", region_name="us-east-1")
    return sqs.create_queue(QueueName="sms-turns.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]


@pytest.fixture
def twilio() -> Iterator[TwilioEmulator]:
    """The Twilio stand-in on loopback (the SMS worker's sender talks to it over HTTP)."""
    with TwilioEmulator() as running:
        yield running
