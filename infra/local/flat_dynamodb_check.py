"""What the flat-cost layer (infra/local/flat_dynamodb.py) relies on in moto, checked when it is
installed: a moto that changes a wrapped method's parameters, a table attribute the layer reads, or
its transactions' table copies fails loudly here rather than answering differently."""

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table

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
    """Raise if moto no longer has what this layer wraps, as it is written here."""
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
