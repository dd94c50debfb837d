"""What each request of a measured turn costs, counted where it is made: botocore's event hooks on
boto3's default session, which every client of the functions is made from (a client copies its
session's hooks when it is created, so `install` runs before the functions' modules load).

A DynamoDB request is kept twice over: the capacity the server reported (moto's constant, or
nothing for a transaction; read as the product's own capacity hooks read it,
onboarding.persistence.capacity), and what DynamoDB would bill, computed by infra/bench/cost/capacity.py from
the request and answer as sent on the wire and, for a write, from the stored items it touches,
read just before and just after it with a client of the meter's own. Those reads are the meter's,
not the function's: their time is kept apart (`overhead_s`) so a function's duration can leave it
out. The same reads give the bytes a request adds to the table, and for how long they stay (the
item's TTL attribute, or `retention_months`). An SQS request counts once per 64 KB of its body.

Only requests made while `measuring()` are kept: seeding a history is not a turn.
"""

import json
import math
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from infra.bench.cost.capacity import WRITES, item_size, request_read_units, request_write_units, written_items
from infra.local.event_sources import on_stream_poller
from onboarding.persistence.capacity import READS, reported_units

SQS_CHUNK_BYTES = 64 * 1024
ITEM_STORAGE_OVERHEAD_BYTES = 100  # DynamoDB bills each stored item 100 bytes more
SECONDS_A_MONTH = 365.25 / 12 * 24 * 3600
_PENDING = "cost_meter"
_CONDITION_REFUSALS = ("ConditionalCheckFailedException", "TransactionCanceledException")


@dataclass(frozen=True)
class Metered:
    """One request as the meter counted it."""

    service: str
    operation: str
    read_units: float = 0.0  # computed by DynamoDB's rules
    write_units: float = 0.0
    reported_units: float | None = None  # what the server answered; None: nothing
    stored_bytes: float = 0.0  # bytes the request added to the table (with the per-item 100)
    stored_byte_months: float = 0.0  # those bytes times the months they stay
    billed_requests: int = 1  # SQS counts 64 KB chunks
    failed: bool = False


class Meter:
    def __init__(self, reader: Any, ttl_attributes: Mapping[str, str], retention_months: float) -> None:
        """`reader`: a DynamoDB client of another session (its requests are not metered);
        `ttl_attributes`: table name to its TTL attribute; `retention_months`: how long an item
        without one is assumed to stay."""
        self._reader = reader
        self._ttl = dict(ttl_attributes)
        self._retention_months = retention_months
        self._keys: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()
        self._active = threading.Event()
        self._metered: list[Metered] = []
        self._overhead_s = 0.0

    def install(self, session: Any) -> None:
        events = session.events
        events.register("before-call.dynamodb", self._before_dynamodb, unique_id="cost-meter-dynamodb-before")
        events.register("after-call.dynamodb", self._after_dynamodb, unique_id="cost-meter-dynamodb-after")
        events.register("before-call.sqs", self._sqs, unique_id="cost-meter-sqs")

    @contextmanager
    def measuring(self) -> Iterator["Meter"]:
        self._active.set()
        try:
            yield self
        finally:
            self._active.clear()

    def take(self) -> list[Metered]:
        """The requests counted since the last take."""
        with self._lock:
            metered, self._metered = self._metered, []
        return metered

    @property
    def overhead_s(self) -> float:
        """Seconds the meter's own reads have taken so far (a function's share is the difference)."""
        with self._lock:
            return self._overhead_s

    # DynamoDB

    def _key_names(self, table: str) -> tuple[str, ...]:
        if table not in self._keys:
            schema = self._reader.describe_table(TableName=table)["Table"]["KeySchema"]
            self._keys[table] = tuple(element["AttributeName"] for element in schema)
        return self._keys[table]

    def _stored(self, touched: list[tuple[str, str, Mapping[str, Any]]]) -> list[dict[str, Any] | None]:
        started = time.perf_counter()
        try:
            found = []
            for table, _, body in touched:
                source = body.get("Key") or body["Item"]
                key = {name: source[name] for name in self._key_names(table)}
                found.append(self._reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item"))
            return found
        finally:
            with self._lock:
                self._overhead_s += time.perf_counter() - started

    def _before_dynamodb(self, model: Any, params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        if not self._active.is_set() or model.name not in READS | WRITES or on_stream_poller():
            return  # (the recall indexer's requests are its own function's, off the turn's path)
        request = json.loads(params.get("body") or b"{}")
        before = self._stored(written_items(model.name, request)) if model.name in WRITES else []
        context[_PENDING] = (request, before)

    def _after_dynamodb(
        self, model: Any, http_response: Any, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        pending = context.pop(_PENDING, None)
        if pending is None:
            return
        request, before = pending
        failed = http_response.status_code >= 300
        reported = reported_units(parsed)
        if model.name in READS:
            response = json.loads(http_response.content or b"{}")
            units = 0.0 if failed else request_read_units(model.name, request, response)
            self._keep(Metered("dynamodb", model.name, read_units=units, reported_units=reported, failed=failed))
            return
        touched = written_items(model.name, request)
        after = self._stored(touched)
        refused = failed and str(parsed.get("Error", {}).get("Code", "")) in _CONDITION_REFUSALS
        sizes = [(_size(old), _size(new)) for old, new in zip(before, after, strict=True)]
        units = (
            request_write_units(model.name, request, sizes, condition_failed=refused) if refused or not failed else 0
        )
        stored, byte_months = self._growth(touched, before, after)
        self._keep(
            Metered(
                "dynamodb",
                model.name,
                write_units=units,
                reported_units=reported,
                stored_bytes=stored,
                stored_byte_months=byte_months,
                failed=failed,
            )
        )

    def _growth(
        self,
        touched: list[tuple[str, str, Mapping[str, Any]]],
        before: list[dict[str, Any] | None],
        after: list[dict[str, Any] | None],
    ) -> tuple[float, float]:
        """Bytes the request added to the table (negative when it removed some), and those bytes
        times the months they stay."""
        stored = byte_months = 0.0
        now = time.time()
        for (table, _, _), old, new in zip(touched, before, after, strict=True):
            change = _stored_size(new) - _stored_size(old)
            stored += change
            byte_months += change * self._months(table, new if new is not None else old, now)
        return stored, byte_months

    def _months(self, table: str, item: Mapping[str, Any] | None, now: float) -> float:
        attribute = self._ttl.get(table)
        expires = (item or {}).get(attribute or "", {}).get("N")
        if expires is None:
            return self._retention_months
        return max(0.0, float(expires) - now) / SECONDS_A_MONTH

    # SQS

    def _sqs(self, model: Any, params: Mapping[str, Any], **_: Any) -> None:
        if not self._active.is_set():
            return
        body = params.get("body") or b""
        chunks = max(1, math.ceil(len(body) / SQS_CHUNK_BYTES))
        self._keep(Metered("sqs", model.name, billed_requests=chunks))

    def _keep(self, metered: Metered) -> None:
        with self._lock:
            self._metered.append(metered)


def _size(item: Mapping[str, Any] | None) -> int | None:
    return None if item is None else item_size(item)


def _stored_size(item: Mapping[str, Any] | None) -> int:
    return 0 if item is None else item_size(item) + ITEM_STORAGE_OVERHEAD_BYTES
