"""Lambda's event source mappings, locally: a poller on a thread of its own reads a source as the
subscribed function (its execution role signs the reads, as SAM's managed policy lets Lambda's
poller: the local stack checks them) and invokes the function with what it read.

- **An SQS queue** (the SMS worker): messages in batches, as Lambda's poller gives them; the ones
  the function did not report as failed are deleted, and a failed invocation leaves the whole batch
  for a retry. Each batch is one line on the tool's terminal.
- **The table's stream** (the recall indexer): records read in order from the shard, a batch at a
  time; the template's `FilterCriteria` drops what matches no pattern (dropped records are
  consumed); the event is Lambda's (`Records` with `eventSourceARN`); a function that reports
  `batchItemFailures` gets the batch again from the first failed record, and a record that still
  fails after `MaximumRetryAttempts` tries is skipped, as it would be without an on-failure
  destination. `StartingPosition` is LATEST: what a stack loaded from its data file is not indexed
  again (its vectors were saved beside it). `drain()` waits until everything written so far has
  been handed to the function: the benchmark and the tests call it before they read what the
  indexer wrote.
"""

import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Self

from infra.local.iam.identity import acting_as
from infra.local.lambda_runner import invoke
from infra.local.template import load_template
from infra.local.terminal import say

QUEUE_POLL_S = 0.1  # how long the queue poller waits between receives that found nothing
IDLE_POLL_S = (0.05, 1.0)  # the stream poller's pause between empty reads grows from the first to the second
THREAD_PREFIX = "stream-"  # a stream poller's thread: the functions it invokes run on it


def on_stream_poller() -> bool:
    """Whether the running code is a stream subscriber's (the recall indexer, off a turn's path),
    invoked by this process's local stack: measurements of a turn leave its requests out."""
    return threading.current_thread().name.startswith(THREAD_PREFIX)


def subscriptions(event_type: str, source: str, source_key: str) -> list[tuple[str, dict[str, Any]]]:
    """(function, the event's properties) for each function template.yaml subscribes to `source`
    (the event's `source_key` property: an `SQS` event's `Queue`, a `DynamoDB` event's `Stream`)."""
    found = []
    for logical_id, resource in load_template()["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        for event in resource.get("Properties", {}).get("Events", {}).values():
            if event["Type"] == event_type and event.get("Properties", {}).get(source_key) == {"Fn::GetAtt": source}:
                found.append((logical_id, dict(event["Properties"])))
    return found


class _Poller:
    """One event source mapping on a thread of its own: `start`, then `stop`."""

    def __init__(self, logical_id: str, service: str, region: str | None, thread_name: str) -> None:
        self._logical_id, self._service, self._region = logical_id, service, region
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=thread_name)
        self._client: Any = None

    def start(self) -> Self:
        import boto3

        with acting_as(self._logical_id):  # a client takes its endpoint and credentials as it is made
            self._client = boto3.client(self._service, region_name=self._region)  # type: ignore[call-overload]
            self._begin()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        with acting_as(self._logical_id):
            self._poll()

    def _begin(self) -> None:
        """What the mapping does once, as the function, before it polls."""

    def _poll(self) -> None:
        raise NotImplementedError


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


class QueuePoller(_Poller):
    """Lambda's SQS event source mapping: receive, invoke, delete what succeeded."""

    def __init__(self, logical_id: str, queue_url: str, batch_size: int = 10) -> None:
        super().__init__(logical_id, "sqs", None, f"poller-{logical_id}")
        self._queue_url, self._batch_size = queue_url, batch_size

    def _poll(self) -> None:
        sqs = self._client
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
                self._stop.wait(QUEUE_POLL_S)
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
            handled, texts = len(records) - len(failed), "text" if len(records) == 1 else "texts"
            say(f"SMS queue -> {self._logical_id}: {handled} of {len(records)} {texts} handled")


def matches(pattern: Mapping[str, Any], event: Any) -> bool:
    """Whether `event` matches a Lambda event filter pattern (the subset of EventBridge's syntax the
    template uses: literal values, `prefix`, `anything-but`, `exists`, nested objects)."""
    if not isinstance(event, Mapping):
        return False
    for key, expected in pattern.items():
        present = key in event
        value = event.get(key)
        if isinstance(expected, Mapping):
            if not matches(expected, value):
                return False
        elif isinstance(expected, list):
            if not any(_matches_one(rule, value, present) for rule in expected):
                return False
        else:
            raise ValueError(f"a filter pattern's value is an object or a list, not {expected!r}")
    return True


def _matches_one(rule: Any, value: Any, present: bool) -> bool:
    if not isinstance(rule, Mapping):
        return present and value == rule
    if "prefix" in rule:
        return present and isinstance(value, str) and value.startswith(str(rule["prefix"]))
    if "exists" in rule:
        return present == bool(rule["exists"])
    if "anything-but" in rule:
        excluded = rule["anything-but"]
        return present and value not in (excluded if isinstance(excluded, list) else [excluded])
    raise ValueError(f"the local event filter does not know the rule {dict(rule)!r}")


class StreamPoller(_Poller):
    """Lambda's DynamoDB stream event source mapping: `logical_id` fed from the stream at `stream_arn`."""

    def __init__(self, logical_id: str, stream_arn: str, region: str, properties: Mapping[str, Any]) -> None:
        super().__init__(logical_id, "dynamodbstreams", region, f"{THREAD_PREFIX}{logical_id}")
        self._stream_arn = stream_arn
        self._batch_size = int(properties.get("BatchSize", 100))
        self._max_attempts = int(properties.get("MaximumRetryAttempts", 2)) + 1
        filters = (properties.get("FilterCriteria") or {}).get("Filters", [])
        self._patterns = [json.loads(f["Pattern"]) for f in filters]
        self._idle = threading.Condition()
        self._caught_up_at = 0.0  # when a read last found nothing new (time.monotonic)
        self._iterator: str | None = None
        self.invocations = 0
        self.skipped = 0  # records dropped after MaximumRetryAttempts

    def _begin(self) -> None:
        shard = self._client.describe_stream(StreamArn=self._stream_arn)["StreamDescription"]["Shards"][0]
        self._iterator = self._client.get_shard_iterator(
            StreamArn=self._stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
        )["ShardIterator"]

    def drain(self, timeout_s: float = 60.0) -> None:
        """Return once a read that began after this call found nothing new (all handed over)."""
        asked = time.monotonic()
        with self._idle:
            if not self._idle.wait_for(lambda: self._caught_up_at > asked, timeout=timeout_s):
                raise TimeoutError(f"{self._logical_id} did not catch up with the stream within {timeout_s} s")

    def _poll(self) -> None:
        pause = IDLE_POLL_S[0]
        while not self._stop.is_set():
            read_at = time.monotonic()
            try:
                handled = self._poll_once()
            except Exception:  # the service retries a failed read; so does this
                handled = 0
            if handled:
                pause = IDLE_POLL_S[0]
                continue
            with self._idle:
                self._caught_up_at = read_at
                self._idle.notify_all()
            self._stop.wait(pause)
            pause = min(pause * 2, IDLE_POLL_S[1])

    def _poll_once(self) -> int:
        answer = self._client.get_records(ShardIterator=self._iterator, Limit=self._batch_size)
        records: list[dict[str, Any]] = answer.get("Records", [])
        wanted = [r for r in records if not self._patterns or any(matches(p, r) for p in self._patterns)]
        self._deliver(wanted)
        self._iterator = answer["NextShardIterator"]
        return len(records)

    def _deliver(self, records: Sequence[dict[str, Any]]) -> None:
        """Invoke the function with `records`, again from the first failure, each record at most
        MaximumRetryAttempts + 1 times."""
        pending, attempts = list(records), 0
        while pending:
            attempts += 1
            self.invocations += 1
            failed_at = self._invoke(pending)
            if failed_at is None:
                return
            if attempts >= self._max_attempts:
                self.skipped += 1
                pending, attempts = pending[failed_at + 1 :], 0
            else:
                pending = pending[failed_at:]

    def _invoke(self, records: Sequence[dict[str, Any]]) -> int | None:
        """Index of the first record the function reported failed (None: all succeeded)."""
        event = {"Records": [{**r, "awsRegion": self._region, "eventSourceARN": self._stream_arn} for r in records]}
        try:
            response = invoke(self._logical_id, event) or {}
        except Exception:  # a failed invocation fails the whole batch, as in Lambda
            return 0
        failed = {item.get("itemIdentifier") for item in response.get("batchItemFailures", [])}
        numbers = [r["dynamodb"]["SequenceNumber"] for r in records]
        return next((i for i, number in enumerate(numbers) if number in failed), None)
