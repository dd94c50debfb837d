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
"""

import base64
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

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
