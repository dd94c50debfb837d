"""Owns counting what the table's requests consume: every request asks DynamoDB for the capacity it
consumed (`ReturnConsumedCapacity`, which costs nothing), and each answer, with the units it
reports, goes to a recorder. The turn's recorder is its ledger (`onboarding.telemetry`); the local
tools count the same answers with recorders of their own (the console's per-turn figures) or read
them the same way (the cost ledger's column of what the local server reported)."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onboarding.telemetry import record_table_request

if TYPE_CHECKING:
    from botocore.hooks import BaseEventHooks

READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem"})
_ASK = "ReturnConsumedCapacity"


@dataclass(frozen=True)
class TableAnswer:
    """One answer of the table: its operation, and the capacity units it reported (None: none)."""

    operation: str
    units: float | None

    @property
    def read(self) -> bool:
        return self.operation in READS


def reported_units(parsed: Mapping[str, Any]) -> float | None:
    """The units of an answer's `ConsumedCapacity` (one entry, or a list of them for a transaction or
    a batch), or None when it reports none (moto answers a transaction with an empty list)."""
    consumed = parsed.get("ConsumedCapacity")
    entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
    if not entries:
        return None
    return sum(float(entry.get("CapacityUnits", 0) or 0) for entry in entries)


def count_capacity(events: "BaseEventHooks", record: Callable[[TableAnswer], None], name: str) -> None:
    """Every DynamoDB request made through `events` (a client's, or a session's, which each client
    made from it copies) asks for the capacity it consumes, and each answer goes to `record`. `name`
    keeps one recorder's hooks apart from another's: botocore ignores a second handler registered
    under a unique id it already holds."""

    def ask(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.input_shape is not None and _ASK in model.input_shape.members:
            params.setdefault(_ASK, "TOTAL")

    def answered(parsed: Mapping[str, Any], model: Any, **_: Any) -> None:
        record(TableAnswer(model.name, reported_units(parsed)))

    events.register("before-parameter-build.dynamodb", ask, unique_id=f"{name}-ask")
    events.register("after-call.dynamodb", answered, unique_id=f"{name}-answered")


def to_the_running_turn(answer: TableAnswer) -> None:
    """The recorder of the product's table client: the running turn's ledger, reads and writes apart."""
    units = answer.units or 0.0
    record_table_request(units if answer.read else 0.0, 0.0 if answer.read else units)
