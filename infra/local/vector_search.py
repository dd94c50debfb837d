"""Owns what the local S3 Vectors stand-in does with the vectors of one index: checking a write as the
service does, metadata filters, and an exact similarity search (infra/local/s3vectors.py serves it).

The search is brute force over the vectors the filter keeps: the filter first, as an index in
ENHANCED mode applies it (pre-filtering, so a filter that keeps few vectors still returns the
nearest of them), then every kept vector's distance. An approximate index on AWS may miss a near
vector now and then; this never does, so a local figure is the exact search's.

Limits and wording are the documented ones (S3 User Guide, "Limitations and restrictions" and
"Metadata filtering"): 1 to 4,096 dimensions, no zero vector for cosine, 2 KB of filterable
metadata, 40 KB in all, 50 keys, 500 vectors a write, top 100 a query, filter operators `$eq`,
`$ne`, `$gt`, `$gte`, `$lt`, `$lte`, `$in`, `$nin`, `$exists`, `$startsWith`, `$and`, `$or`.
"""

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_PUT = 500
MAX_GET = 100
MAX_TOP_K = 100
MAX_FILTERABLE_BYTES = 2 * 1024
MAX_METADATA_BYTES = 40 * 1024
MAX_METADATA_KEYS = 50
_COMPARISONS = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


class VectorRequestError(ValueError):
    """Answered as 400 ValidationException."""


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))


@dataclass
class IndexState:
    """One vector index: its configuration and its vectors (key -> (vector, metadata))."""

    dimension: int
    distance_metric: str
    non_filterable_keys: frozenset[str] = frozenset()
    vectors: dict[str, tuple[np.ndarray, dict[str, Any]]] = field(default_factory=dict)

    def put(self, entries: Sequence[Mapping[str, Any]]) -> None:
        if not 1 <= len(entries) <= MAX_PUT:
            raise VectorRequestError(f"vectors must hold 1 to {MAX_PUT} vectors")
        checked = [self._checked(entry) for entry in entries]
        for key, vector, metadata in checked:  # all or nothing, as a request is
            self.vectors[key] = (vector, metadata)

    def _checked(self, entry: Mapping[str, Any]) -> tuple[str, np.ndarray, dict[str, Any]]:
        key = entry.get("key")
        if not isinstance(key, str) or not 1 <= len(key) <= 1024:
            raise VectorRequestError("Each vector needs a key of 1 to 1024 characters")
        data = (entry.get("data") or {}).get("float32")
        if not isinstance(data, list) or len(data) != self.dimension:
            raise VectorRequestError(
                f"Invalid record for key '{key}': vector dimension {len(data or [])} does not match index "
                f"dimension {self.dimension}"
            )
        vector = np.asarray(data, dtype=np.float32)
        if not np.all(np.isfinite(vector)):
            raise VectorRequestError(f"Invalid record for key '{key}': vector data must be finite numbers")
        if self.distance_metric == "cosine" and not np.any(vector):
            raise VectorRequestError(f"Invalid record for key '{key}': zero vectors are not allowed for cosine")
        metadata = dict(entry.get("metadata") or {})
        filterable = {k: v for k, v in metadata.items() if k not in self.non_filterable_keys}
        if len(metadata) > MAX_METADATA_KEYS:
            raise VectorRequestError(f"Invalid record for key '{key}': more than {MAX_METADATA_KEYS} metadata keys")
        if _size(filterable) > MAX_FILTERABLE_BYTES:
            raise VectorRequestError(f"Invalid record for key '{key}': filterable metadata is over 2 KB")
        if _size(metadata) > MAX_METADATA_BYTES:
            raise VectorRequestError(f"Invalid record for key '{key}': metadata is over 40 KB")
        return key, vector, metadata

    def delete(self, keys: Sequence[str]) -> None:
        if not 1 <= len(keys) <= MAX_PUT:
            raise VectorRequestError(f"keys must hold 1 to {MAX_PUT} keys")
        for key in keys:
            self.vectors.pop(key, None)

    def query(self, query: Sequence[float], top_k: int, where: Mapping[str, Any] | None) -> list[tuple[str, float]]:
        """(key, distance) of the `top_k` nearest vectors the filter keeps, nearest first."""
        if not 1 <= top_k <= MAX_TOP_K:
            raise VectorRequestError(f"topK must be between 1 and {MAX_TOP_K}")
        if len(query) != self.dimension:
            raise VectorRequestError(
                f"Query vector dimension {len(query)} does not match index dimension {self.dimension}"
            )
        if where is not None:
            self._check_filter_keys(where)
        kept = [key for key, (_, metadata) in self.vectors.items() if where is None or matches(metadata, where)]
        if not kept:
            return []
        matrix = np.stack([self.vectors[key][0] for key in kept])
        q = np.asarray(query, dtype=np.float32)
        if self.distance_metric == "cosine":
            norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(q)) or 1.0)
            distances = 1.0 - (matrix @ q) / np.where(norms == 0, 1.0, norms)
        else:
            distances = np.linalg.norm(matrix - q, axis=1)
        order = np.argsort(distances, kind="stable")[:top_k]
        return [(kept[i], float(distances[i])) for i in order]

    def _check_filter_keys(self, where: Mapping[str, Any]) -> None:
        for key, value in where.items():
            if key in ("$and", "$or"):
                for part in value if isinstance(value, list) else []:
                    self._check_filter_keys(part)
            elif key in self.non_filterable_keys:
                raise VectorRequestError(f"Invalid filter: '{key}' is a non-filterable metadata key")


def matches(metadata: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """Whether `metadata` passes the filter `where` (every top-level condition must hold)."""
    if not isinstance(where, Mapping):
        raise VectorRequestError("Invalid filter: a filter is a JSON object")
    for key, condition in where.items():
        if key in ("$and", "$or"):
            if not isinstance(condition, list) or not condition:
                raise VectorRequestError(f"Invalid filter: {key} takes a non-empty list")
            results = [matches(metadata, part) for part in condition]
            if not (all(results) if key == "$and" else any(results)):
                return False
        elif key.startswith("$"):
            raise VectorRequestError(f"Invalid filter: unknown operator {key}")
        elif not _holds(metadata.get(key), key in metadata, condition):
            return False
    return True


def _holds(value: Any, present: bool, condition: Any) -> bool:
    if not isinstance(condition, Mapping):
        return present and _equal(value, condition)
    for operator, operand in condition.items():
        if operator == "$eq":
            ok = present and _equal(value, operand)
        elif operator == "$ne":
            ok = not (present and _equal(value, operand))
        elif operator in _COMPARISONS:
            ok = present and _comparable(value, operand) and _COMPARISONS[operator](value, operand)
        elif operator in ("$in", "$nin"):
            if not isinstance(operand, list):
                raise VectorRequestError(f"Invalid filter: {operator} takes a list")
            inside = present and any(_equal(value, item) for item in operand)
            ok = inside if operator == "$in" else not inside
        elif operator == "$exists":
            ok = present == bool(operand)
        elif operator == "$startsWith":
            ok = present and isinstance(value, str) and isinstance(operand, str) and value.startswith(operand)
        else:
            raise VectorRequestError(f"Invalid filter: unknown operator {operator}")
        if not ok:
            return False
    return True


def _equal(value: Any, operand: Any) -> bool:
    """Equality as the service reads it: a list value matches when any element does."""
    if isinstance(value, list):
        return any(_equal(item, operand) for item in value)
    if isinstance(value, (int, float)) and isinstance(operand, (int, float)):
        return math.isclose(value, operand)
    return bool(value == operand)


def _comparable(value: Any, operand: Any) -> bool:
    return isinstance(value, (int, float)) and isinstance(operand, (int, float))
