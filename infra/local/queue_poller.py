"""Lambda's SQS event source mapping, locally: the functions template.yaml subscribes to a queue get
its messages in batches, as Lambda's poller gives them, and the ones the function did not report
as failed are deleted."""

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import boto3

from infra.local.iam.identity import acting_as
from infra.local.lambda_runner import invoke
from infra.local.template import load_template
from infra.local.terminal import say

POLL_S = 0.1  # how long the queue poller waits between receives that found nothing


def sqs_event_records(messages: Sequence[Mapping[str, Any]], queue_arn: str, region: str) -> list[dict[str, Any]]:
    """The `Records` of the event Lambda's SQS event source mapping makes of received messages."""
    return [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": {},
            "md5OfBody": m["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn,
            "awsRegion": region,
        }
        for m in messages
    ]


class QueuePoller:
    """Lambda's SQS event source mapping, locally: receive, invoke, delete what succeeded."""

    def __init__(self, logical_id: str, queue_url: str, batch_size: int = 10) -> None:
        self._logical_id = logical_id
        self._queue_url = queue_url
        self._batch_size = batch_size
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"poller-{logical_id}")
        self._sqs: Any = None

    def start(self) -> "QueuePoller":
        # Made here, not in the thread: a client takes its endpoint from the environment as it is made.
        with acting_as(self._logical_id):
            self._sqs = boto3.client("sqs")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        # Lambda's poller uses the function's execution role (SAM attaches AWSLambdaSQSQueueExecutionRole).
        with acting_as(self._logical_id):
            self._poll()

    def _poll(self) -> None:
        sqs = self._sqs
        while not self._stop.is_set():
            messages = sqs.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=self._batch_size,
                WaitTimeSeconds=0,
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                # Lambda's poller long-polls; this one waits on its stop signal instead, so that
                # stopping a stack does not wait out a receive (a text is still picked up in 0.1 s).
                self._stop.wait(POLL_S)
                continue
            arn = sqs.get_queue_attributes(QueueUrl=self._queue_url, AttributeNames=["QueueArn"])["Attributes"]
            records = sqs_event_records(messages, arn["QueueArn"], sqs.meta.region_name)
            try:
                response = invoke(self._logical_id, {"Records": records})
                failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
            except Exception:  # a failed invocation leaves the whole batch for a retry, as in Lambda
                failed = {record["messageId"] for record in records}
            for record in records:
                if record["messageId"] not in failed:
                    sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=record["receiptHandle"])
            handled = len(records) - len(failed)
            say(f"SMS queue -> {self._logical_id}: {handled} of {len(records)} text(s) handled")


def queue_subscribers(queue_logical_id: str) -> list[str]:
    """The functions template.yaml subscribes to a queue."""
    subscribers = []
    for logical_id, resource in load_template()["Resources"].items():
        for event in (
            resource.get("Properties", {}).get("Events", {}).values()
            if resource["Type"] == "AWS::Serverless::Function"
            else []
        ):
            if event["Type"] == "SQS" and event["Properties"]["Queue"] == {"Fn::GetAtt": f"{queue_logical_id}.Arn"}:
                subscribers.append(logical_id)
    return subscribers
