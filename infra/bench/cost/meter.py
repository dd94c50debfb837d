"""DynamoDB's documented capacity rules, as arithmetic: an item's size, and the request units a
request consumes given the sizes of the items it reads and writes.

Why computed: the local server does not say what DynamoDB would bill. moto answers
`ReturnConsumedCapacity` with a constant per operation whatever the sizes (1.0 for Query and
PutItem, 0.5 for GetItem and UpdateItem) and nothing for TransactWriteItems; DynamoDB reports
what the rules below give. The rules, from the DynamoDB Developer Guide ("DynamoDB read and write
operations", "DynamoDB item sizes and formats", "Amazon DynamoDB Transactions: how it works"):

- Sizes: an attribute is its name's UTF-8 bytes plus its value: a string's UTF-8 bytes, a
  binary's raw bytes, a number about 1 byte per two significant digits plus 1, a Boolean or null
  1 byte, a list or map 3 bytes plus its elements plus 1 byte per element. 1 KB is 1,024 bytes.
- Reads: 1 read request unit per 4 KB strongly consistent, half that eventually consistent.
  GetItem rounds the item up to 4 KB (an absent item still costs the minimum); Query and Scan
  round the sum of the items read up to 4 KB; BatchGetItem rounds each item.
- Writes: 1 write request unit per 1 KB, per item. PutItem counts the larger of the new item and
  the one it replaces, UpdateItem the larger of the item before and after, DeleteItem the deleted
  item; an absent item costs the minimum, 1.
- Transactions: 2 units per 1 KB for each item of a TransactWriteItems (DynamoDB prepares and
  commits each item), a ConditionCheck's item included.

The meter counts each request of a measured turn where it is made: botocore's event hooks on
boto3's default session, which every client of the functions is made from (a client copies its
session's hooks when it is created, so `install` runs before the functions' modules load).

A DynamoDB request is kept twice over: the capacity the server reported (moto's constant, or
nothing for a transaction; read as the product's own capacity hooks read it,
onboarding.persistence.capacity), and what DynamoDB would bill, computed by the rules above from
the request and answer as sent on the wire and, for a write, from the stored items it touches,
read just before and just after it with a client of the meter's own. Those reads are the meter's,
not the function's: their time is kept apart (`overhead_s`) so a function's duration can leave it
out. The same reads give the bytes a request adds to the table, and for how long they stay (the
item's TTL attribute, or `retention_months`). An SQS request counts once per 64 KB of its body.

Only requests made while `measuring()` are kept: seeding a history is not a turn.
"""

import base64
import json
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from infra.local.event_sources import on_stream_poller
from onboarding.persistence.capacity import READS, reported_units

KB = 1024
READ_UNIT_BYTES = 4 * KB
WRITE_UNIT_BYTES = KB
TRANSACTION_FACTOR = 2
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
# The actions of one TransactWriteItems item, and where each names its item.
TRANSACTION_ACTIONS = ("Put", "Update", "Delete", "ConditionCheck")

AttributeValue = Mapping[str, Any]
Item = Mapping[str, AttributeValue]


def number_size(text: str) -> int:
    """Bytes of a number: 1 per two significant digits (leading and trailing zeros trimmed), plus 1."""
    try:
        digits = Decimal(text).as_tuple().digits  # exact: normalize() would round to 28 digits
    except InvalidOperation as error:
        raise ValueError(f"{text!r} is not a DynamoDB number") from error
    significant = "".join(map(str, digits)).strip("0")
    return math.ceil(len(significant) / 2) + 1


def _binary_size(value: Any) -> int:
    # The wire form is base64 text; botocore hands over bytes. The raw bytes count.
    if isinstance(value, bytes | bytearray):
        return len(value)
    return len(base64.b64decode(str(value)))


def value_size(value: AttributeValue) -> int:
    """Bytes of one attribute value (its name not included), in DynamoDB's wire form (`{"S": ...}`)."""
    if len(value) != 1:
        raise ValueError(f"an attribute value has exactly one type, not {sorted(value)}")
    kind, content = next(iter(value.items()))
    if kind == "S":
        return len(str(content).encode("utf-8"))
    if kind == "N":
        return number_size(str(content))
    if kind == "B":
        return _binary_size(content)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(element).encode("utf-8")) for element in content)
    if kind == "NS":
        return sum(number_size(str(element)) for element in content)
    if kind == "BS":
        return sum(_binary_size(element) for element in content)
    if kind == "L":
        return 3 + sum(value_size(element) + 1 for element in content)
    if kind == "M":
        return 3 + sum(len(name.encode("utf-8")) + value_size(element) + 1 for name, element in content.items())
    raise ValueError(f"unknown attribute type {kind!r}")


def item_size(item: Item) -> int:
    """Bytes of an item: each attribute's name and value."""
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def read_units(size_bytes: int, consistent: bool) -> float:
    """Read request units of one read of `size_bytes` (an item, or a Query's items together)."""
    units = max(1, math.ceil(size_bytes / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


def write_units(size_bytes: int, transactional: bool = False) -> float:
    """Write request units of writing one item of `size_bytes` (0: an absent item, the minimum)."""
    units = max(1, math.ceil(size_bytes / WRITE_UNIT_BYTES))
    return float(units * (TRANSACTION_FACTOR if transactional else 1))


def _consistent(request: Mapping[str, Any]) -> bool:
    return bool(request.get("ConsistentRead", False))


def request_read_units(operation: str, request: Mapping[str, Any], response: Mapping[str, Any]) -> float:
    """What a read request consumed, from the items its answer holds. (With a ProjectionExpression
    DynamoDB still counts whole items, so a projected read is undercounted here; the turn path
    projects none, and a FilterExpression's dropped items are not seen either: it uses none.)"""
    if operation == "GetItem":
        item = response.get("Item")
        return read_units(item_size(item) if item else 0, _consistent(request))
    if operation in ("Query", "Scan"):
        return read_units(sum(item_size(item) for item in response.get("Items", [])), _consistent(request))
    if operation == "BatchGetItem":
        total = 0.0
        for table, items in response.get("Responses", {}).items():
            consistent = _consistent(request.get("RequestItems", {}).get(table, {}))
            total += sum(read_units(item_size(item), consistent) for item in items)
        return total
    raise ValueError(f"{operation} is not a read")


def _larger(*sizes: int | None) -> int:
    return max((size for size in sizes if size is not None), default=0)


def written_items(operation: str, request: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(table, action, body) of each item a write request touches; action is Put, Update, Delete or
    ConditionCheck, and body holds `Item` (a Put) or `Key` (the others)."""
    if operation == "PutItem":
        return [(request["TableName"], "Put", request)]
    if operation == "UpdateItem":
        return [(request["TableName"], "Update", request)]
    if operation == "DeleteItem":
        return [(request["TableName"], "Delete", request)]
    if operation == "BatchWriteItem":
        touched: list[tuple[str, str, Mapping[str, Any]]] = []
        for table, writes in request.get("RequestItems", {}).items():
            for write in writes:
                if "PutRequest" in write:
                    touched.append((table, "Put", write["PutRequest"]))
                else:
                    touched.append((table, "Delete", write["DeleteRequest"]))
        return touched
    if operation == "TransactWriteItems":
        return [
            (body["TableName"], action, body)
            for entry in request.get("TransactItems", [])
            for action, body in entry.items()
            if action in TRANSACTION_ACTIONS
        ]
    raise ValueError(f"{operation} is not a write")


def item_write_units(
    action: str, body: Mapping[str, Any], before: int | None, after: int | None, transactional: bool
) -> float:
    """Units of one written item: `before` and `after` are the stored item's sizes around the
    request (None: absent); a Put's new item is in its body."""
    if action == "Put":
        size = _larger(item_size(body["Item"]), before)
    elif action == "Update":
        size = _larger(before, after)
    else:  # Delete, ConditionCheck: the item as it was
        size = _larger(before)
    return write_units(size, transactional)


def request_write_units(
    operation: str,
    request: Mapping[str, Any],
    sizes: Sequence[tuple[int | None, int | None]],
    condition_failed: bool = False,
) -> float:
    """What a write request consumed; `sizes` holds (before, after) for each of its
    `written_items`, in order. A write refused by its condition still consumes the units of the
    item as it is stored (at least 1); that is assumed of a cancelled transaction's items too."""
    touched = written_items(operation, request)
    if len(sizes) != len(touched):
        raise ValueError(f"{len(touched)} items written but {len(sizes)} sizes given")
    transactional = operation == "TransactWriteItems"
    if condition_failed:
        return sum(write_units(_larger(before), transactional) for before, _ in sizes)
    return sum(
        item_write_units(action, body, before, after, transactional)
        for (_, action, body), (before, after) in zip(touched, sizes, strict=True)
    )


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
