"""Owns Lambda's DynamoDB stream event source mapping, locally: reading the table's stream (moto's
DynamoDB Streams) and invoking the subscribed function with what its filter lets through.

As the service does: records are read in order from the shard, a batch at a time, as the function
(its execution role, AWSLambdaDynamoDBExecutionRole, signs the stream reads: the local stack checks
them); the template's `FilterCriteria` drops what matches no pattern (dropped records are consumed);
the event is Lambda's (`Records` with `eventSourceARN`); a function that reports
`batchItemFailures` gets the batch again from the first failed record, and a record that still
fails after `MaximumRetryAttempts` tries is skipped, as it would be without an on-failure
destination. `StartingPosition` is LATEST: what a stack loaded from its data file is not indexed
again (its vectors were saved beside it).

`drain()` waits until everything written so far has been handed to the function: the benchmark
and the tests call it before they read what the indexer wrote.
"""

import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from infra.local.iam.identity import acting_as
from infra.local.lambda_runner import invoke
from infra.local.template import load_template

IDLE_POLL_S = (0.05, 1.0)  # the pause between empty reads grows from the first to the second


THREAD_PREFIX = "stream-"  # a poller's thread: the functions it invokes run on it


def on_stream_poller() -> bool:
    """Whether the running code is a stream subscriber's (the recall indexer, off a turn's path),
    invoked by this process's local stack: measurements of a turn leave its requests out."""
    return threading.current_thread().name.startswith(THREAD_PREFIX)


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


def stream_subscriptions(table_logical_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(function, the DynamoDB event's properties) for each function subscribed to the table's stream."""
    found = []
    for logical_id, resource in load_template()["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        for event in resource.get("Properties", {}).get("Events", {}).values():
            stream = event.get("Properties", {}).get("Stream")
            if event["Type"] == "DynamoDB" and stream == {"Fn::GetAtt": f"{table_logical_id}.StreamArn"}:
                found.append((logical_id, dict(event["Properties"])))
    return found


class StreamPoller:
    """One event source mapping: `logical_id` fed from the stream at `stream_arn`."""

    def __init__(self, logical_id: str, stream_arn: str, region: str, properties: Mapping[str, Any]) -> None:
        self._logical_id, self._stream_arn, self._region = logical_id, stream_arn, region
        self._batch_size = int(properties.get("BatchSize", 100))
        self._max_attempts = int(properties.get("MaximumRetryAttempts", 2)) + 1
        filters = (properties.get("FilterCriteria") or {}).get("Filters", [])
        self._patterns = [json.loads(f["Pattern"]) for f in filters]
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._caught_up_at = 0.0  # when a read last found nothing new (time.monotonic)
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"{THREAD_PREFIX}{logical_id}")
        self._client: Any = None
        self._iterator: str | None = None
        self.invocations = 0
        self.skipped = 0  # records dropped after MaximumRetryAttempts

    def start(self) -> "StreamPoller":
        import boto3

        with acting_as(self._logical_id):  # a client takes its endpoint and credentials as it is made
            self._client = boto3.client("dynamodbstreams", region_name=self._region)
            shard = self._client.describe_stream(StreamArn=self._stream_arn)["StreamDescription"]["Shards"][0]
            self._iterator = self._client.get_shard_iterator(
                StreamArn=self._stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
            )["ShardIterator"]
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def drain(self, timeout_s: float = 60.0) -> None:
        """Return once a read that began after this call found nothing new (all handed over)."""
        asked = time.monotonic()
        with self._idle:
            if not self._idle.wait_for(lambda: self._caught_up_at > asked, timeout=timeout_s):
                raise TimeoutError(f"{self._logical_id} did not catch up with the stream within {timeout_s} s")

    def _run(self) -> None:
        pause = IDLE_POLL_S[0]
        with acting_as(self._logical_id):
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
