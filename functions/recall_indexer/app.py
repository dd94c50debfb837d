"""Recall indexer: keeps the recall index in step with the conversation table, off the hot path.

Thin by design: Lambda's DynamoDB stream event source mapping hands over the table's changes (the
template's filter passes only message items); each record becomes a `MessageChange` for the
domain's `MessageIndexer`, which indexes a new message or deletes a removed one's vector. Failures
are reported per record (Powertools Batch), so only they are retried, in order per user.
"""

import time
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from onboarding.composition import build_indexer
from onboarding.config import Settings
from onboarding.recall.indexer import MessageIndexer

logger = Logger()


def make_handler(indexer: MessageIndexer) -> Any:
    """The Lambda handler (tests pass their own indexer)."""

    def apply(record: DynamoDBRecord) -> None:
        indexer.apply_record(record.raw_event, time.time())

    @logger.inject_lambda_context
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
        processor.raise_on_entire_batch_failure = False  # every record failing is a partial failure too
        response = process_partial_response(event=event, record_handler=apply, processor=processor, context=context)
        # One line a batch: its size and its failures (the records are retried), never a text.
        logger.info(
            "Indexed a batch of message changes",
            extra={"records": len(event.get("Records", [])), "failed": len(response["batchItemFailures"])},
        )
        return dict(response)

    return handler


lambda_handler = make_handler(build_indexer(Settings.from_env()))
