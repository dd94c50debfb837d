"""The local stack's own administration, standing in for CloudFormation and backups: the operator's
clients, what the template makes (tables, queues, parameters, the recall index) made on the local
servers, and the table loaded from and saved to the data file. None of it is application code."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.local.data import atomic_write, item_line, read_items
from infra.local.deployment import LocalDeployment
from infra.local.dynamodb_process import FIRST_ANSWER_TIMEOUT_S
from infra.local.errors import LocalToolError
from infra.local.ports import NotAnsweringError, check_answers
from infra.local.stack_template import (
    IDEMPOTENCY_TABLE_NAME,
    RECALL_BUCKET_NAME,
    TABLE_LOGICAL_ID,
    queue_request,
    recall_index_request,
)

if TYPE_CHECKING:
    from infra.local.s3vectors import S3VectorsStandIn

# Region and dummy credentials for the local servers; no real AWS credentials are involved.
LOCAL_REGION = "us-east-1"
LOCAL_AWS_ENVIRONMENT = {
    "AWS_REGION": LOCAL_REGION,
    "AWS_DEFAULT_REGION": LOCAL_REGION,
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
}


def admin_client(service: str, region: str, endpoint_url: str, first: bool = False) -> Any:
    """A client of the operator's, who may do anything (the stack's own administration)."""
    import boto3
    from botocore.config import Config

    # The first request to a fresh server gets one short try, so a server that never answers is
    # reported in seconds; later ones botocore's usual retries.
    config = (
        Config(read_timeout=FIRST_ANSWER_TIMEOUT_S, connect_timeout=2, retries={"total_max_attempts": 1})
        if first
        else None
    )
    return boto3.client(  # type: ignore[call-overload]
        service,
        region_name=region,
        endpoint_url=endpoint_url,
        aws_access_key_id=LOCAL_AWS_ENVIRONMENT["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key="local",  # noqa: S106 - the local server's dummy credentials
        config=config,
    )


def create_resources(
    deployment: LocalDeployment,
    dynamodb_url: str,
    dynamodb_port: int,
    s3vectors_url: str,
    table_name: str,
    twilio_auth_token: str,
    webhook_url: str,
) -> None:
    """What the template makes that the functions use: the tables, the queue and its dead-letter
    queue, the recall index, and the parameters the SMS functions read (the Twilio token is the
    stand-in's)."""
    from botocore.exceptions import BotoCoreError

    from infra.local.template import table_create_request

    region = deployment.region
    try:
        check_answers(dynamodb_url, f"the local DynamoDB server (port {dynamodb_port})", FIRST_ANSWER_TIMEOUT_S)
        first = admin_client("dynamodb", region, dynamodb_url, first=True)
        first.create_table(**table_create_request(TABLE_LOGICAL_ID, table_name))
    except (NotAnsweringError, BotoCoreError) as error:
        raise LocalToolError(str(error)) from None
    dynamodb = admin_client("dynamodb", region, dynamodb_url)
    dynamodb.create_table(**table_create_request("IdempotencyTable", IDEMPOTENCY_TABLE_NAME))
    sqs = admin_client("sqs", region, dynamodb_url)
    for logical_id in ("SmsDeadLetterQueue", "SmsQueue"):
        name, attributes = queue_request(deployment, logical_id)
        created = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        expected = deployment.resolve({"Ref": logical_id})
        if created != expected:
            raise LocalToolError(f"the local queue {name} is at {created}, not at {expected}")
    vectors = admin_client("s3vectors", region, s3vectors_url)
    vectors.create_vector_bucket(vectorBucketName=RECALL_BUCKET_NAME)
    vectors.create_index(**recall_index_request(deployment))
    ssm = admin_client("ssm", region, dynamodb_url)
    token_parameter = deployment.parameter("TwilioAuthTokenParameterName")
    ssm.put_parameter(Name=token_parameter, Value=twilio_auth_token, Type="SecureString", Overwrite=True)
    webhook_parameter = deployment.resolve({"Ref": "TwilioWebhookUrlParameter"})
    ssm.put_parameter(Name=webhook_parameter, Value=webhook_url, Type="String", Overwrite=True)


def table_items(client: Any, table_name: str) -> Iterator[dict[str, Any]]:
    for page in client.get_paginator("scan").paginate(TableName=table_name):
        yield from page["Items"]


def save_items(data_file: Path, items: Iterator[dict[str, Any]]) -> None:
    """Every item to `data_file`, one DynamoDB-JSON item a line, atomically."""
    atomic_write(data_file, (item_line(item) for item in items))


def load_items(client: Any, table_name: str, data_file: Path) -> None:
    """The data file's items into the table (all of it read first: a damaged file is moved aside,
    not half loaded)."""
    items = read_items(data_file)
    for start in range(0, len(items), 25):
        requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        pending: dict[str, Any] = {table_name: requests}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})


def save_vectors(vectors_file: Path, s3vectors: "S3VectorsStandIn", saved_changes: int) -> int:
    """The recall index beside the data file, atomically, if it changed since `saved_changes` (or
    the file is gone); returns the changes now saved."""
    if s3vectors.changes != saved_changes or not vectors_file.exists():
        atomic_write(vectors_file, [json.dumps(s3vectors.dump())])
    return s3vectors.changes


def load_vectors(vectors_file: Path, s3vectors: "S3VectorsStandIn") -> None:
    if vectors_file.exists():
        s3vectors.load(json.loads(vectors_file.read_text(encoding="utf-8")))
