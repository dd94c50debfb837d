"""Owns a small layer over moto's DynamoDB that makes a request's cost independent of the table's
size, as DynamoDB's is. moto stays the engine; two of its methods are wrapped:

- `DynamoDBBackend.transact_write_items` deep-copies every table a transaction names, once per
  item, to roll back if it is cancelled: a commit costs O(items in the table). Wrapped, it first
  journals the items the transaction touches (their prior state, or their absence), lets moto run
  with a table's "copy" being the table itself, and on cancellation puts the journal back. A
  table with a stream keeps moto's own copies (the journal does not take back stream records).
- `Table.query` walks `all_items()`, which sorts every item of the table. Wrapped, a Query on the
  table's own keys (no index) hands moto only the keys it can reach: the partition's, within the
  key condition's range, after the ExclusiveStartKey, at most Limit + 1 of them (the extra one is
  how moto decides on a LastEvaluatedKey). Each partition's sort keys are kept sorted as items are
  put and deleted, so finding that window is a bisection.

Everything else (parsing, conditions, projections, filters, sizes, errors) is moto's own, so its
answers are unchanged: tests/tooling/test_flat_dynamodb.py compares them, with and without the layer,
on random tables, queries and transactions, and fails if a moto upgrade changes a method or an
attribute this relies on. `install()` applies it (once per process): the local DynamoDB server
(infra/local/dynamodb_server.py) and the unit tests' moto fixture do. Decision 0004 has the figures.
"""

import bisect
import copy
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import moto.dynamodb.models as backend_module
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

_RANGE_OPERATORS = {"=": "=", "EQ": "=", "<": "<", "LT": "<", "<=": "<=", "LE": "<=", ">": ">", "GT": ">",
                    ">=": ">=", "GE": ">=", "BETWEEN": "BETWEEN", "BEGINS_WITH": "BEGINS_WITH"}  # fmt: skip

_lock = threading.RLock()  # moto is not thread-safe; in process, tests may call it from several threads
_local = threading.local()  # `journaling`: inside a journaled transaction; `window`: a query's items
_originals: dict[str, Callable[..., Any]] = {}

# What this layer relies on (the parameters of each method it wraps), checked at install: a moto
# that changes them fails loudly here rather than answering differently.
RELIED_ON = {
    "DynamoDBBackend.transact_write_items": ["self", "transact_items"],
    "Table.query": [
        "self", "hash_key", "range_comparison", "range_objs", "limit", "exclusive_start_key", "scan_index_forward",
        "projection_expressions", "index_name", "consistent_read", "filter_expression", "hash_key_conditions",
        "range_key_conditions", "filter_kwargs",
    ],
    "Table.put_item": ["self", "item_attrs", "expected", "condition_expression", "expression_attribute_names",
                       "expression_attribute_values", "overwrite", "return_values_on_condition_check_failure"],
    "Table.delete_item": ["self", "hash_key", "range_key"],
    "Table.all_items": ["self"],
}  # fmt: skip


def check_moto(originals: Mapping[str, Callable[..., Any]]) -> None:
    """Raise unless moto has what this layer wraps, as it is written here."""
    owners = {"DynamoDBBackend": DynamoDBBackend, "Table": Table}
    for name, expected in RELIED_ON.items():
        owner, method = name.split(".")
        function = originals.get(name) or getattr(owners[owner], method)
        if list(inspect.signature(function).parameters) != expected:
            raise RuntimeError(
                f"moto's {name} changed: {inspect.signature(function)}; see infra/local/flat_dynamodb.py"
            )
    for attribute in ("items", "range_key_attr", "hash_key_attr", "stream_shard"):
        if attribute not in inspect.getsource(Table.__init__):
            raise RuntimeError(f"moto's Table no longer has {attribute}; see infra/local/flat_dynamodb.py")
    if "copy.deepcopy(" not in inspect.getsource(
        originals.get("DynamoDBBackend.transact_write_items", DynamoDBBackend.transact_write_items)
    ):
        raise RuntimeError("moto's transactions no longer copy tables; see infra/local/flat_dynamodb.py")


class _TableCopies:
    """Stands in for the `copy` module in moto's backend: while a transaction journals, a table's
    copy is the table itself (the journal restores what the transaction changed)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        if getattr(_local, "journaling", False) and isinstance(value, Table):
            return value
        return copy.deepcopy(value, memo)


def _sorted_keys(table: Table, hash_key: DynamoType) -> list[DynamoType]:
    """The partition's sort keys, in order (rebuilt if something changed the partition unseen)."""
    partitions: dict[DynamoType, list[DynamoType]] = table.__dict__.setdefault("_flat_sorted_keys", {})
    partition = table.items.get(hash_key, {})
    keys = partitions.get(hash_key)
    if keys is None or len(keys) != len(partition):
        keys = partitions[hash_key] = sorted(partition)
    return keys


def _key_put(table: Table, hash_key: DynamoType, range_key: DynamoType | None) -> None:
    partitions = table.__dict__.get("_flat_sorted_keys")
    if range_key is None or partitions is None or (keys := partitions.get(hash_key)) is None:
        return
    index = bisect.bisect_left(keys, range_key)
    if index == len(keys) or keys[index] != range_key:
        keys.insert(index, range_key)


def _key_deleted(table: Table, hash_key: DynamoType, range_key: DynamoType | None) -> None:
    partitions = table.__dict__.get("_flat_sorted_keys")
    if range_key is None or partitions is None or (keys := partitions.get(hash_key)) is None:
        return
    index = bisect.bisect_left(keys, range_key)
    if index < len(keys) and keys[index] == range_key:
        del keys[index]


def _put_item(self: Table, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    with _lock:
        item = _originals["Table.put_item"](self, item_attrs, *args, **kwargs)
        _key_put(self, item.hash_key, item.range_key)
        return item


def _delete_item(self: Table, hash_key: DynamoType, range_key: DynamoType | None) -> Any:
    with _lock:
        item = _originals["Table.delete_item"](self, hash_key, range_key)
        if item is not None:
            _key_deleted(self, hash_key, range_key)
        return item


def _touched(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> list[tuple[Table, Any, Any]] | None:
    """The (table, hash key, range key) of each item; None when the journal cannot stand in for
    moto's copies (a missing table or key: moto's own path reports it)."""
    touched = []
    for entry in transact_items:
        for kind, operation in entry.items():
            table = backend.tables.get(operation.get("TableName"))
            if table is None:
                return None
            key = operation.get("Item") if kind == "Put" else operation.get("Key")
            if not isinstance(key, dict) or table.hash_key_attr not in key:
                return None
            range_attr = table.range_key_attr
            if range_attr is not None and range_attr not in key:
                return None
            hash_key = DynamoType(key[table.hash_key_attr])
            touched.append((table, hash_key, DynamoType(key[range_attr]) if range_attr else None))
    return touched


def _transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    with _lock:
        touched = _touched(self, transact_items)
        if touched is None:
            return _originals["DynamoDBBackend.transact_write_items"](self, transact_items)  # type: ignore[no-any-return]
        journal = []
        for table, hash_key, range_key in touched:
            prior = table.items.get(hash_key, {}).get(range_key) if range_key is not None else table.items.get(hash_key)
            journal.append((table, hash_key, range_key, copy.deepcopy(prior)))
        shards = [table.stream_shard for table, _, _ in touched if table.stream_shard is not None]
        streams = {id(shard): (shard, len(shard.items)) for shard in shards}
        _local.journaling = True
        try:
            _originals["DynamoDBBackend.transact_write_items"](self, transact_items)
        except BaseException:
            for table, hash_key, range_key, prior in reversed(journal):
                _restore(table, hash_key, range_key, prior)
            for shard, length in streams.values():
                del shard.items[length:]  # the cancelled writes' stream records
            raise
        finally:
            _local.journaling = False
        return None


def _restore(table: Table, hash_key: DynamoType, range_key: DynamoType | None, prior: Any) -> None:
    """Put back one item as it was before the transaction (its stream records are taken back apart)."""
    if range_key is None:
        if prior is None:
            table.items.pop(hash_key, None)
        else:
            table.items[hash_key] = prior
        return
    partition = table.items[hash_key]
    if prior is None:
        if partition.pop(range_key, None) is not None:
            _key_deleted(table, hash_key, range_key)
    else:
        partition[range_key] = prior
        _key_put(table, hash_key, range_key)


def _window(
    table: Table,
    hash_key: DynamoType,
    comparison: str | None,
    bounds: list[DynamoType],
    limit: int | None,
    start_key: dict[str, Any] | None,
    forward: bool,
) -> list[Any]:
    """The partition's items moto's Query could reach, ascending (it sorts and reverses them itself)."""
    keys = _sorted_keys(table, hash_key)
    low, high = 0, len(keys)  # the key condition's range: keys[low:high]
    if comparison in ("=", "BETWEEN"):
        low, high = bisect.bisect_left(keys, bounds[0]), bisect.bisect_right(keys, bounds[-1])
    elif comparison == "<":
        high = bisect.bisect_left(keys, bounds[0])
    elif comparison == "<=":
        high = bisect.bisect_right(keys, bounds[0])
    elif comparison == ">":
        low = bisect.bisect_right(keys, bounds[0])
    elif comparison == ">=":
        low = bisect.bisect_left(keys, bounds[0])
    elif comparison == "BEGINS_WITH":
        low = high = bisect.bisect_left(keys, bounds[0])
        while high < len(keys) and keys[high].compare("BEGINS_WITH", bounds):
            high += 1
    if start_key is not None and table.range_key_attr in start_key:
        start = DynamoType(start_key[table.range_key_attr])
        if forward:
            low = max(low, bisect.bisect_right(keys, start))
        else:
            high = min(high, bisect.bisect_left(keys, start))
    reach = len(keys) if limit is None else limit + 1  # one more than Limit: moto's LastEvaluatedKey
    # Forward: up to `reach` keys from the range's start, and at most one past its end; backward, the same mirrored.
    last, first = min(len(keys), low + reach, high + 1), max(0, high - reach, low - 1)
    chosen = keys[low:last] if forward else keys[first:high]
    partition = table.items[hash_key]
    return [partition[key] for key in chosen]


def _query(
    self: Table, hash_key: Any, range_comparison: Any, range_objs: Any, limit: Any, *args: Any, **kwargs: Any
) -> Any:
    call = inspect.signature(_originals["Table.query"]).bind(
        self, hash_key, range_comparison, range_objs, limit, *args, **kwargs
    )
    arguments = call.arguments
    comparison = _RANGE_OPERATORS.get(range_comparison) if range_comparison is not None else None
    reachable = (
        arguments.get("index_name") is None
        and hash_key is not None
        and self.range_key_attr is not None
        and (range_comparison is None or comparison is not None)
        and len(arguments.get("range_key_conditions") or []) <= 1
        and not arguments.get("filter_kwargs")
    )
    with _lock:
        if not reachable:
            return _originals["Table.query"](self, hash_key, range_comparison, range_objs, limit, *args, **kwargs)
        window = _window(
            self,
            hash_key,
            comparison,
            list(range_objs),
            limit,
            arguments.get("exclusive_start_key"),
            bool(arguments.get("scan_index_forward", True)),
        )
        with _only(window):
            return _originals["Table.query"](self, hash_key, range_comparison, range_objs, limit, *args, **kwargs)


@contextmanager
def _only(items: list[Any]) -> Iterator[None]:
    _local.window = items
    try:
        yield
    finally:
        _local.window = None


def _all_items(self: Table) -> Any:
    window = getattr(_local, "window", None)
    return list(window) if window is not None else _originals["Table.all_items"](self)


def install() -> None:
    """Apply the layer to moto in this process (again: nothing more)."""
    with _lock:
        if _originals:
            return
        check_moto(_originals)
        for name, replacement, owner in (
            ("DynamoDBBackend.transact_write_items", _transact_write_items, DynamoDBBackend),
            ("Table.query", _query, Table),
            ("Table.put_item", _put_item, Table),
            ("Table.delete_item", _delete_item, Table),
            ("Table.all_items", _all_items, Table),
        ):
            _originals[name] = getattr(owner, name.split(".")[1])
            setattr(owner, name.split(".")[1], replacement)
        backend_module.copy = _TableCopies()  # type: ignore[attr-defined, assignment]


def uninstall() -> None:
    """Back to moto as it is (for the tests that compare the two)."""
    with _lock:
        owners = {"DynamoDBBackend": DynamoDBBackend, "Table": Table}
        for name, original in _originals.items():
            owner, method = name.split(".")
            setattr(owners[owner], method, original)
        _originals.clear()
        backend_module.copy = copy  # type: ignore[attr-defined]
