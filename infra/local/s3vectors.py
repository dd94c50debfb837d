"""Owns the local stand-in for Amazon S3 Vectors, which serves the recall index to the functions as the
deployed stack's vector bucket does (the searching itself is infra/local/vector_search.py).

It speaks the service's REST-JSON protocol, `POST /<Operation>`, so botocore's `s3vectors` client
runs against it unchanged through the standard `AWS_ENDPOINT_URL_S3VECTORS`: CreateVectorBucket,
CreateIndex and GetIndex (the local stack makes what the template declares), PutVectors,
GetVectors, ListVectors, DeleteVectors and QueryVectors. An index is named by `indexArn` or by
`vectorBucketName` and `indexName`, as the API allows. Every request is checked against the
caller's policy first (infra/local/iam/gate.py), and refused as S3 Vectors refuses it.

`dump()` and `load()` carry the vectors across restarts (the local stack keeps them beside its data
file). `fail_next()` and `delay_s` are for the fault tests: an index that errs or answers slowly.
"""

import json
import threading
from collections import deque
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np

from infra.local.iam.gate import Gate, Refusal
from infra.local.loopback import LoopbackService, StandInServer, send_json
from infra.local.vector_search import MAX_GET, IndexState, VectorRequestError

SERVICE = "s3vectors"


class _NotFoundError(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence per-request logging (a request carries what people said)."""

    def do_POST(self) -> None:
        operation = self.path.strip("/").split("?", 1)[0]
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        stand_in: S3VectorsStandIn = self.server.stand_in
        try:
            params = json.loads(body or b"{}")
            if not isinstance(params, dict):
                raise ValueError("not an object")
        except ValueError:
            self._error(400, "ValidationException", "The request body is not valid JSON")
            return
        if operation not in _OPERATIONS:
            self._error(404, "UnknownOperationException", f"No operation at {self.path}")
            return
        if (refused := stand_in.check(operation, params, self.headers.get("Authorization"))) is not None:
            self._refusal(refused)
            return
        if (fault := stand_in.take_fault()) is not None:
            self._error(fault[0], fault[1], "The vector index could not answer (a local fault)")
            return
        stand_in.wait()
        try:
            answer = _OPERATIONS[operation](stand_in, params)
        except VectorRequestError as error:
            self._error(400, "ValidationException", str(error))
            return
        except _NotFoundError as missing:
            self._error(404, "NotFoundException", str(missing))
            return
        except KeyError as conflict:
            self._error(409, "ConflictException", str(conflict.args[0]))
            return
        send_json(self, 200, answer)

    def _refusal(self, refused: Refusal) -> None:
        self._error(refused.status, refused.code, refused.message)

    def _error(self, status: int, code: str, message: str) -> None:
        send_json(self, status, {"message": message}, {"x-amzn-ErrorType": code})


class S3VectorsStandIn(LoopbackService):
    """Vector buckets and their indexes, in memory; `gate` checks each caller."""

    def __init__(
        self, region: str, account: str, gate: Gate | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.region, self.account, self.gate = region, account, gate
        self.buckets: dict[str, dict[str, IndexState]] = {}
        self.delay_s = 0.0
        self._faults: deque[tuple[int, str]] = deque()
        self._lock = threading.Lock()
        self.queries = 0  # QueryVectors answered (a turn's recall is one)
        self.last_query: dict[str, Any] = {}  # the parameters of the last QueryVectors answered
        self.changes = 0  # vectors written or deleted so far (the local stack saves only after a change)
        super().__init__(host, port, _Handler, "s3vectors-stand-in")

    def check(self, operation: str, params: dict[str, Any], authorization: str | None) -> Refusal | None:
        return None if self.gate is None else self.gate.check(SERVICE, operation, params, authorization)

    def fail_next(self, count: int, status: int = 503, code: str = "ServiceUnavailableException") -> None:
        with self._lock:
            self._faults.extend([(status, code)] * count)

    def take_fault(self) -> tuple[int, str] | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def wait(self) -> None:
        if self.delay_s:
            threading.Event().wait(self.delay_s)

    def bucket_arn(self, bucket: str) -> str:
        return f"arn:aws:s3vectors:{self.region}:{self.account}:bucket/{bucket}"

    def index(self, params: Mapping[str, Any]) -> IndexState:
        bucket, name = index_of(params)
        found = self.buckets.get(bucket, {}).get(name)
        if found is None:
            raise _NotFoundError(f"The specified index could not be found: {bucket}/{name}")
        return found

    def dump(self) -> dict[str, Any]:
        """Every bucket, index and vector, as JSON (what `load` reads back)."""
        with self._lock:
            return {
                bucket: {
                    name: {
                        "dimension": state.dimension,
                        "distanceMetric": state.distance_metric,
                        "nonFilterableMetadataKeys": sorted(state.non_filterable_keys),
                        "vectors": {k: [v.tolist(), m] for k, (v, m) in state.vectors.items()},
                    }
                    for name, state in indexes.items()
                }
                for bucket, indexes in self.buckets.items()
            }

    def load(self, saved: Mapping[str, Any]) -> None:
        with self._lock:
            for bucket, indexes in saved.items():
                for name, state in indexes.items():
                    index = IndexState(
                        int(state["dimension"]), str(state["distanceMetric"]),
                        frozenset(state.get("nonFilterableMetadataKeys", ())),
                    )  # fmt: skip
                    index.vectors = {
                        k: (np.asarray(v, dtype=np.float32), dict(m)) for k, (v, m) in state["vectors"].items()
                    }
                    self.buckets.setdefault(bucket, {})[name] = index


def index_of(params: Mapping[str, Any]) -> tuple[str, str]:
    """(bucket, index) a request names: by `indexArn`, or `vectorBucketName` and `indexName`."""
    arn = params.get("indexArn")
    if isinstance(arn, str) and "/index/" in arn:
        bucket_part, _, index_part = arn.partition(":bucket/")[2].partition("/index/")
        return bucket_part, index_part
    bucket, index = params.get("vectorBucketName"), params.get("indexName")
    if not isinstance(bucket, str) or not isinstance(index, str):
        raise VectorRequestError("Specify the index by indexArn, or by vectorBucketName and indexName")
    return bucket, index


def _create_bucket(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    name = str(params.get("vectorBucketName", ""))
    with stand_in._lock:
        if name in stand_in.buckets:
            raise KeyError(f"The vector bucket {name} already exists")
        stand_in.buckets[name] = {}
    return {"vectorBucketArn": stand_in.bucket_arn(name)}


def _create_index(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    bucket = str(params.get("vectorBucketName") or str(params.get("vectorBucketArn", "")).partition(":bucket/")[2])
    name, dimension = str(params.get("indexName", "")), params.get("dimension")
    if not isinstance(dimension, int) or not 1 <= dimension <= 4096:
        raise VectorRequestError("dimension must be an integer from 1 to 4096")
    if params.get("distanceMetric") not in ("cosine", "euclidean") or params.get("dataType") != "float32":
        raise VectorRequestError("distanceMetric is cosine or euclidean, and dataType float32")
    keys = frozenset((params.get("metadataConfiguration") or {}).get("nonFilterableMetadataKeys", ()))
    with stand_in._lock:
        if bucket not in stand_in.buckets:
            raise _NotFoundError(f"The specified vector bucket could not be found: {bucket}")
        if name in stand_in.buckets[bucket]:
            raise KeyError(f"The index {name} already exists")
        stand_in.buckets[bucket][name] = IndexState(dimension, str(params["distanceMetric"]), keys)
    return {"indexArn": f"{stand_in.bucket_arn(bucket)}/index/{name}"}


def _get_index(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    bucket, name = index_of(params)
    state = stand_in.index(params)
    return {
        "index": {
            "vectorBucketName": bucket,
            "indexName": name,
            "indexArn": f"{stand_in.bucket_arn(bucket)}/index/{name}",
            "dataType": "float32",
            "dimension": state.dimension,
            "distanceMetric": state.distance_metric,
            "metadataConfiguration": {"nonFilterableMetadataKeys": sorted(state.non_filterable_keys)},
            "indexMode": "ENHANCED",
        }
    }


def _put(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    state = stand_in.index(params)
    with stand_in._lock:
        state.put(list(params.get("vectors") or []))
        stand_in.changes += 1
    return {}


def _delete(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    state = stand_in.index(params)
    with stand_in._lock:
        state.delete([str(key) for key in params.get("keys") or []])
        stand_in.changes += 1
    return {}


def _described(state: IndexState, key: str, data: bool, metadata: bool) -> dict[str, Any]:
    vector, meta = state.vectors[key]
    found: dict[str, Any] = {"key": key}
    if data:
        found["data"] = {"float32": vector.tolist()}
    if metadata:
        found["metadata"] = meta
    return found


def _get(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    state, keys = stand_in.index(params), [str(key) for key in params.get("keys") or []]
    if not 1 <= len(keys) <= MAX_GET:
        raise VectorRequestError(f"keys must hold 1 to {MAX_GET} keys")
    data, metadata = bool(params.get("returnData")), bool(params.get("returnMetadata"))
    with stand_in._lock:
        return {"vectors": [_described(state, key, data, metadata) for key in keys if key in state.vectors]}


def _list(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    state = stand_in.index(params)
    start, size = int(params.get("nextToken") or 0), min(int(params.get("maxResults") or 500), 1000)
    data, metadata = bool(params.get("returnData")), bool(params.get("returnMetadata"))
    with stand_in._lock:
        keys = sorted(state.vectors)[start : start + size]
        page = [_described(state, key, data, metadata) for key in keys]
        more = start + size < len(state.vectors)
    return {"vectors": page, **({"nextToken": str(start + size)} if more else {})}


def _query(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    state = stand_in.index(params)
    if params.get("queryTexts"):
        raise VectorRequestError("Full-text search needs textSearchConfigurations on the index; this one has none")
    query = (params.get("queryVector") or {}).get("float32")
    if not isinstance(query, list):
        raise VectorRequestError("queryVector is required")
    with stand_in._lock:
        found = state.query(query, int(params.get("topK", 0)), params.get("filter"))
        vectors = []
        for key, distance in found:
            entry = _described(state, key, False, bool(params.get("returnMetadata")))
            if params.get("returnDistance"):
                entry["distance"] = distance
            vectors.append(entry)
        stand_in.queries += 1
        stand_in.last_query = dict(params)
    return {"vectors": vectors, "distanceMetric": state.distance_metric}


_OPERATIONS = {
    "CreateVectorBucket": _create_bucket,
    "CreateIndex": _create_index,
    "GetIndex": _get_index,
    "PutVectors": _put,
    "DeleteVectors": _delete,
    "GetVectors": _get,
    "ListVectors": _list,
    "QueryVectors": _query,
}
