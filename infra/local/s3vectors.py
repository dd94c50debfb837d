"""Owns the local stand-in for Amazon S3 Vectors, which serves the recall index to the functions as
the deployed stack's vector bucket does: vector, full-text and hybrid search over one index.

It speaks the service's REST-JSON protocol, `POST /<Operation>`, so botocore's `s3vectors` client
runs against it unchanged through the standard `AWS_ENDPOINT_URL_S3VECTORS`: CreateVectorBucket,
CreateIndex and GetIndex (the local stack makes what the template declares), PutVectors,
DeleteVectors and QueryVectors (what the product calls; the others are answered 404). An index
is named by `indexArn` or by `vectorBucketName` and `indexName`. Every request is checked against
the caller's policy first (infra/local/iam/gate.py) and refused as S3 Vectors refuses it; limits
and wording are the documented ones (S3 User Guide, "Limitations and restrictions", "Metadata filtering", "Hybrid
search"): 1 to 4,096 dimensions, no zero vector for cosine, 2 KB of filterable metadata, 40 KB in
all, 500 vectors a write, top 100 a query, 1 to 10 query texts of at most 1,024 characters, each
on a distinct searchable key.

How it searches, in the ENHANCED mode the index runs in: the filter first (so a filter that keeps
few vectors still returns the best of them), then an exact ranking of what it kept, where an
approximate index on AWS may now and then miss a near vector. `queryVector` ranks by distance;
each `queryTexts` entry ranks by BM25 on its searchable key (`textSearchConfigurations`: the
text analysed as Lucene's English analyzer does for `en` (words, lower case, stop words, the
possessive, Porter's stemmer), a Snowball stemmer for the other languages it has one for, words in
lower case otherwise; k1 1.2, b 0.75, and the terms' statistics over the whole index, as a Lucene
index keeps them); both together are fused by reciprocal rank fusion, 1 / (60 + rank) summed over
the rankings (the service documents RRF, not its constant: 60 is the usual one).

`dump()` and `load()` carry the vectors across restarts (the local stack keeps them beside its data
file). `fail_next()` and `delay_s` are for the fault tests: an index that errs or answers slowly.
"""

import json
import math
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np

from infra.local.iam.gate import Gate
from infra.local.loopback import LoopbackService, StandInServer, send_json

SERVICE = "s3vectors"
MAX_PUT, MAX_TOP_K, MAX_QUERY_TEXTS, MAX_QUERY_TEXT = 500, 100, 10, 1024
MAX_FILTERABLE_BYTES, MAX_METADATA_BYTES, MAX_METADATA_KEYS = 2 * 1024, 40 * 1024, 50
LANGUAGES = ("en", "fr", "es", "pt", "it", "de", "nl", "zh", "ja", "ko")
STEMMERS = {"en": "porter", "fr": "french", "es": "spanish", "pt": "portuguese", "it": "italian", "de": "german",
            "nl": "dutch"}  # fmt: skip
_LUCENE_ENGLISH_STOP_WORDS = """a an and are as at be but by for if in into is it no not of on or such that the
their then there these they this to was will with"""
ENGLISH_STOP_WORDS = frozenset(_LUCENE_ENGLISH_STOP_WORDS.split())
BM25_K1, BM25_B, RRF_K = 1.2, 0.75, 60
_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")


class VectorRequestError(ValueError):
    """Answered as 400 ValidationException."""


class _NotFoundError(Exception):
    pass


class _ThrottledError(Exception):
    """Answered as 429 TooManyRequestsException."""


# The S3 User Guide's "Limitations and restrictions" of S3 Vectors, and the API reference's
# CreateIndex and MetadataConfiguration.
MAX_PAYLOAD_BYTES = 20 * 1024 * 1024
MAX_NON_FILTERABLE_KEYS, MAX_KEY_NAME = 10, 63
MAX_WRITE_REQUESTS_PER_S, MAX_WRITTEN_VECTORS_PER_S = 1_000, 2_500  # per index, PutVectors and DeleteVectors together
MAX_FILTER_CONSTRAINTS = 100  # on an ENHANCED index (the User Guide's "Changing a vector index's mode")
_INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class WriteRate:
    """An index's writes in the last second: past 1,000 requests or 2,500 vectors, refused."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._recent: deque[tuple[float, int]] = deque()  # (when, vectors) of each write request

    def take(self, vectors: int) -> None:
        now = self._clock()
        while self._recent and self._recent[0][0] <= now - 1.0:
            self._recent.popleft()
        written = sum(count for _, count in self._recent)
        if len(self._recent) + 1 > MAX_WRITE_REQUESTS_PER_S or written + vectors > MAX_WRITTEN_VECTORS_PER_S:
            raise _ThrottledError(
                f"Write rate exceeded for the index: at most {MAX_WRITE_REQUESTS_PER_S} requests and "
                f"{MAX_WRITTEN_VECTORS_PER_S} vectors a second"
            )
        self._recent.append((now, vectors))


@cache
def _stemmer(language: str) -> Callable[[list[str]], list[str]]:
    import snowballstemmer

    return snowballstemmer.stemmer(STEMMERS[language]).stemWords  # type: ignore[no-any-return]


def analyze(text: str, language: str | None) -> list[str]:
    """The terms a searchable key's text is indexed and queried as (the module's docstring)."""
    words = [w.replace("\u2019", "'") for w in _WORD.findall(text.lower())]
    if language == "en":
        words = [w.removesuffix("'s") for w in words if w not in ENGLISH_STOP_WORDS]
    return _stemmer(language)(words) if language in STEMMERS else words


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))


@dataclass
class Bm25:
    """BM25 over a changing set of documents, as a Lucene index scores one field: the terms of each
    document, how many documents hold each term, k1 1.2, b 0.75, and Lucene's IDF,
    log(1 + (N - n + 0.5) / (n + 0.5)), which stays positive for a term most documents hold. The
    stand-in's full-text search and the memory benchmark's BM25 baseline both score with it."""

    language: str | None = "en"
    terms: dict[str, Counter[str]] = field(default_factory=dict)  # document key -> its terms
    frequencies: Counter[str] = field(default_factory=Counter)  # term -> documents holding it

    def add(self, key: str, text: str) -> None:
        self.remove(key)
        self.terms[key] = Counter(analyze(text, self.language))
        self.frequencies.update(self.terms[key].keys())

    def remove(self, key: str) -> None:
        if (terms := self.terms.pop(key, None)) is not None:
            self.frequencies.subtract(terms.keys())

    def scores(self, text: str, keys: Sequence[str]) -> dict[str, float]:
        """The score of `text` for each of `keys` that holds a term of it."""
        count = len(self.terms)
        if not count:
            return {}
        average = sum(sum(terms.values()) for terms in self.terms.values()) / count
        asked = set(analyze(text, self.language))
        found: dict[str, float] = {}
        for key in keys:
            terms = self.terms.get(key)
            if terms is None or not asked & terms.keys():
                continue
            norm = BM25_K1 * (1 - BM25_B + BM25_B * sum(terms.values()) / average)
            found[key] = sum(
                math.log(1 + (count - self.frequencies[t] + 0.5) / (self.frequencies[t] + 0.5))
                * terms[t] * (BM25_K1 + 1) / (terms[t] + norm)
                for t in asked if t in terms
            )  # fmt: skip
        return found


@dataclass
class IndexState:
    """One vector index: its configuration, its vectors (key -> (vector, metadata)), and for each
    searchable key the BM25 statistics of every vector's text."""

    dimension: int
    distance_metric: str
    non_filterable_keys: frozenset[str] = frozenset()
    text_keys: Mapping[str, str | None] = field(default_factory=dict)  # searchable key -> language
    vectors: dict[str, tuple[np.ndarray, dict[str, Any]]] = field(default_factory=dict)
    searches: dict[str, Bm25] = field(default_factory=dict)  # searchable key -> its vectors' terms
    writes: WriteRate = field(default_factory=WriteRate)  # PutVectors and DeleteVectors of the last second

    def put(self, entries: Sequence[Mapping[str, Any]]) -> None:
        if not 1 <= len(entries) <= MAX_PUT:
            raise VectorRequestError(f"vectors must hold 1 to {MAX_PUT} vectors")
        for key, vector, metadata in [self._checked(entry) for entry in entries]:  # all or nothing
            self.delete([key])
            self.vectors[key] = (vector, metadata)
            for text_key, language in self.text_keys.items():
                if isinstance(metadata.get(text_key), str):
                    self.searches.setdefault(text_key, Bm25(language)).add(key, metadata[text_key])

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
        if any(k in self.text_keys and not isinstance(v, str) for k, v in metadata.items()):
            raise VectorRequestError(f"Invalid record for key '{key}': a full-text searchable key takes a string")
        return key, vector, metadata

    def delete(self, keys: Sequence[str]) -> None:
        if not 1 <= len(keys) <= MAX_PUT:
            raise VectorRequestError(f"keys must hold 1 to {MAX_PUT} keys")
        for key in keys:
            self.vectors.pop(key, None)
            for search in self.searches.values():
                search.remove(key)

    def query(
        self, vector: Sequence[float] | None, texts: Sequence[Mapping[str, Any]], top_k: int, where: Any
    ) -> list[tuple[str, dict[str, Any]]]:
        """(key, scores) of the best `top_k` vectors the filter keeps: by distance, by BM25, or
        fused (the module's docstring). `scores` holds `distance` and `bm25` ({text key: score})."""
        self._check_query(vector, texts, top_k, where)
        kept = [key for key, (_, metadata) in self.vectors.items() if where is None or matches(metadata, where)]
        rankings: list[list[str]] = []
        scores: dict[str, dict[str, Any]] = {key: {"bm25": {}} for key in kept}
        if vector is not None and kept:
            for key, distance in zip(kept, self._distances(kept, vector), strict=True):
                scores[key]["distance"] = distance
            rankings.append(sorted(kept, key=lambda k: scores[k]["distance"]))
        for text in texts:
            key_name = str(text["metadataKey"])
            search = self.searches.get(key_name)
            found = search.scores(str(text["text"]), kept) if search is not None else {}
            for key, score in found.items():
                scores[key]["bm25"][key_name] = score
            rankings.append(sorted(found, key=lambda k: -found[k]))
        if len(rankings) == 1:
            return [(key, scores[key]) for key in rankings[0][:top_k]]
        fused: dict[str, float] = dict.fromkeys(kept, 0.0)
        for ranking in rankings:
            for rank, key in enumerate(ranking, start=1):
                fused[key] += 1 / (RRF_K + rank)
        best = sorted((key for key in kept if fused[key]), key=lambda k: -fused[k])[:top_k]
        return [(key, scores[key] | {"fused": fused[key]}) for key in best]

    def _check_query(self, vector: Any, texts: Sequence[Mapping[str, Any]], top_k: int, where: Any) -> None:
        if not 1 <= top_k <= MAX_TOP_K:
            raise VectorRequestError(f"topK must be between 1 and {MAX_TOP_K}")
        if vector is None and not texts:
            raise VectorRequestError("Specify queryVector, queryTexts, or both")
        if vector is not None and len(vector) != self.dimension:
            raise VectorRequestError(
                f"Query vector dimension {len(vector)} does not match index dimension {self.dimension}"
            )
        keys = [text.get("metadataKey") for text in texts]
        if len(texts) > MAX_QUERY_TEXTS or len(set(keys)) < len(keys):
            raise VectorRequestError(f"queryTexts holds at most {MAX_QUERY_TEXTS} entries, each on a distinct key")
        for text in texts:
            if text.get("metadataKey") not in self.text_keys:
                raise VectorRequestError(
                    f"'{text.get('metadataKey')}' is not a full-text searchable metadata key of this index "
                    "(textSearchConfigurations)"
                )
            if not isinstance(text.get("text"), str) or not 1 <= len(text["text"]) <= MAX_QUERY_TEXT:
                raise VectorRequestError(f"A query text holds 1 to {MAX_QUERY_TEXT} characters")
        filtered = _filter_keys(where) if where is not None else []
        if len(filtered) > MAX_FILTER_CONSTRAINTS:
            raise VectorRequestError(f"Invalid filter: more than {MAX_FILTER_CONSTRAINTS} constraints")
        for key in filtered:
            if key in self.non_filterable_keys:
                raise VectorRequestError(f"Invalid filter: '{key}' is a non-filterable metadata key")

    def _distances(self, kept: Sequence[str], query: Sequence[float]) -> list[float]:
        matrix, q = np.stack([self.vectors[key][0] for key in kept]), np.asarray(query, dtype=np.float32)
        if self.distance_metric == "cosine":
            norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(q)) or 1.0)
            return [float(d) for d in 1.0 - (matrix @ q) / np.where(norms == 0, 1.0, norms)]
        return [float(d) for d in np.linalg.norm(matrix - q, axis=1)]


def _filter_keys(where: Any) -> list[str]:
    if not isinstance(where, Mapping):
        return []
    nested = [k for key in ("$and", "$or") for part in where.get(key) or [] for k in _filter_keys(part)]
    return [key for key in where if not key.startswith("$")] + nested


def matches(metadata: Mapping[str, Any], where: Any) -> bool:
    """Whether `metadata` passes the filter `where`: every top-level condition must hold. Read here
    as the service reads them: a value (equality), `$eq`, `$in`, `$and` and `$or` (a list value
    matches when one of its elements does). The product filters by equality alone, so the service's
    other operators are refused here rather than kept unused."""
    if not isinstance(where, Mapping):
        raise VectorRequestError("Invalid filter: a filter is a JSON object")
    for key, condition in where.items():
        if key in ("$and", "$or"):
            if not isinstance(condition, list) or not condition:
                raise VectorRequestError(f"Invalid filter: {key} takes a non-empty list")
            if not (all if key == "$and" else any)(matches(metadata, part) for part in condition):
                return False
            continue
        for operator, operand in (condition if isinstance(condition, Mapping) else {"$eq": condition}).items():
            if key.startswith("$") or operator not in ("$eq", "$in"):
                raise VectorRequestError(f"Invalid filter: the local stand-in does not read {key} {operator}")
            wanted = operand if operator == "$in" else [operand]
            if not isinstance(wanted, list):
                raise VectorRequestError("Invalid filter: $in takes a list")
            stored = metadata.get(key)
            values = stored if isinstance(stored, list) else [stored]
            if key not in metadata or not any(value == w for value in values for w in wanted):
                return False
    return True


# --- the service: its operations over HTTP ---------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence per-request logging (a request carries what people said)."""

    def do_POST(self) -> None:
        operation = self.path.strip("/").split("?", 1)[0]
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        stand_in: S3VectorsStandIn = self.server.stand_in
        if len(body) > MAX_PAYLOAD_BYTES:
            self._error(400, "ValidationException", f"The request payload is over {MAX_PAYLOAD_BYTES} bytes (20 MiB)")
            return
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
        if stand_in.gate is not None and (
            refused := stand_in.gate.check(SERVICE, operation, params, self.headers.get("Authorization"))
        ):
            self._error(refused.status, refused.code, refused.message)
            return
        if (fault := stand_in.take_fault()) is not None:
            self._error(fault[0], fault[1], "The vector index could not answer (a local fault)")
            return
        if stand_in.delay_s:
            threading.Event().wait(stand_in.delay_s)
        try:
            answer = _OPERATIONS[operation](stand_in, params)
        except VectorRequestError as error:
            self._error(400, "ValidationException", str(error))
        except _NotFoundError as missing:
            self._error(404, "NotFoundException", str(missing))
        except _ThrottledError as throttled:
            self._error(429, "TooManyRequestsException", str(throttled))
        except KeyError as conflict:
            self._error(409, "ConflictException", str(conflict.args[0]))
        else:
            send_json(self, 200, answer)

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
        self.lock = threading.Lock()
        self.queries = 0  # QueryVectors answered (a turn's recall is one)
        self.last_query: dict[str, Any] = {}  # the parameters of the last QueryVectors answered
        self.changes = 0  # vectors written or deleted so far (the local stack saves only after a change)
        super().__init__(host, port, _Handler, "s3vectors-stand-in")

    def fail_next(self, count: int, status: int = 503, code: str = "ServiceUnavailableException") -> None:
        with self.lock:
            self._faults.extend([(status, code)] * count)

    def take_fault(self) -> tuple[int, str] | None:
        with self.lock:
            return self._faults.popleft() if self._faults else None

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
        with self.lock:
            return {
                bucket: {name: _saved(index) for name, index in indexes.items()}
                for bucket, indexes in self.buckets.items()
            }

    def load(self, saved: Mapping[str, Any]) -> None:
        with self.lock:
            for bucket, indexes in saved.items():
                for name, state in indexes.items():
                    index = _new_index(state)
                    for start in range(0, len(state["vectors"]), MAX_PUT):
                        chunk = list(state["vectors"].items())[start : start + MAX_PUT]
                        index.put([{"key": k, "data": {"float32": v}, "metadata": m} for k, (v, m) in chunk])
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


def _configuration(state: IndexState) -> dict[str, Any]:
    """The index's configuration as CreateIndex takes it and GetIndex gives it."""
    searchable = [{"metadataKey": k} | ({"language": lang} if lang else {}) for k, lang in state.text_keys.items()]
    return {
        "dataType": "float32",
        "dimension": state.dimension,
        "distanceMetric": state.distance_metric,
        "metadataConfiguration": {
            "nonFilterableMetadataKeys": sorted(state.non_filterable_keys),
            "textSearchConfigurations": searchable,
        },
    }


def _saved(index: IndexState) -> dict[str, Any]:
    return _configuration(index) | {"vectors": {k: [v.tolist(), m] for k, (v, m) in index.vectors.items()}}


def _new_index(params: Mapping[str, Any]) -> IndexState:
    dimension, metric = params.get("dimension"), params.get("distanceMetric")
    if not isinstance(dimension, int) or not 1 <= dimension <= 4096:
        raise VectorRequestError("dimension must be an integer from 1 to 4096")
    if metric not in ("cosine", "euclidean") or params.get("dataType") != "float32":
        raise VectorRequestError("distanceMetric is cosine or euclidean, and dataType float32")
    configuration = params.get("metadataConfiguration") or {}
    non_filterable = list(configuration.get("nonFilterableMetadataKeys") or [])
    if len(non_filterable) > MAX_NON_FILTERABLE_KEYS or any(
        not 1 <= len(str(key)) <= MAX_KEY_NAME for key in non_filterable
    ):
        raise VectorRequestError(
            f"nonFilterableMetadataKeys: at most {MAX_NON_FILTERABLE_KEYS}, each of 1 to {MAX_KEY_NAME} characters"
        )
    searchable = list(configuration.get("textSearchConfigurations") or [])
    if len(searchable) > MAX_QUERY_TEXTS or any(
        not 1 <= len(str(c.get("metadataKey") or "")) <= 63 or c.get("language", "en") not in LANGUAGES
        for c in searchable
    ):
        raise VectorRequestError(
            f"textSearchConfigurations: at most 10, each a key of 1 to 63 characters and a language of {LANGUAGES}"
        )
    return IndexState(
        dimension, str(metric), frozenset(configuration.get("nonFilterableMetadataKeys") or ()),
        {str(c["metadataKey"]): c.get("language") for c in searchable},
    )  # fmt: skip


def _create_bucket(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    name = str(params.get("vectorBucketName", ""))
    with stand_in.lock:
        if name in stand_in.buckets:
            raise KeyError(f"The vector bucket {name} already exists")
        stand_in.buckets[name] = {}
    return {"vectorBucketArn": stand_in.bucket_arn(name)}


def _create_index(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    bucket = str(params.get("vectorBucketName") or str(params.get("vectorBucketArn", "")).partition(":bucket/")[2])
    name, index = str(params.get("indexName", "")), _new_index(params)
    if not _INDEX_NAME.match(name):
        raise VectorRequestError(
            "indexName: 3 to 63 characters of lowercase letters, numbers, hyphens and dots, "
            "beginning and ending with a letter or number"
        )
    with stand_in.lock:
        if bucket not in stand_in.buckets:
            raise _NotFoundError(f"The specified vector bucket could not be found: {bucket}")
        if name in stand_in.buckets[bucket]:
            raise KeyError(f"The index {name} already exists")
        stand_in.buckets[bucket][name] = index
    return {"indexArn": f"{stand_in.bucket_arn(bucket)}/index/{name}"}


def _get_index(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    (bucket, name), state = index_of(params), stand_in.index(params)
    configuration = _configuration(state)
    for searchable in configuration["metadataConfiguration"]["textSearchConfigurations"]:
        searchable["status"] = "ACTIVE"
    return {"index": {"vectorBucketName": bucket, "indexName": name, "indexMode": "ENHANCED",
                      "indexArn": f"{stand_in.bucket_arn(bucket)}/index/{name}", **configuration}}  # fmt: skip


def _put(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    state = stand_in.index(params)
    with stand_in.lock:
        vectors = list(params.get("vectors") or [])
        state.writes.take(len(vectors))
        state.put(vectors)
        stand_in.changes += 1
    return {}


def _delete(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    state = stand_in.index(params)
    with stand_in.lock:
        keys = [str(key) for key in params.get("keys") or []]
        state.writes.take(len(keys))
        state.delete(keys)
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


def _query(stand_in: S3VectorsStandIn, params: dict[str, Any]) -> dict[str, Any]:
    state = stand_in.index(params)
    if params.get("queryMode") == "CLASSIC":  # every index here is ENHANCED (QueryVectors' queryMode)
        raise VectorRequestError("queryMode CLASSIC can't be specified for an ENHANCED index")
    vector = (params.get("queryVector") or {}).get("float32") if "queryVector" in params else None
    if "queryVector" in params and not isinstance(vector, list):
        raise VectorRequestError("queryVector holds float32 values")
    texts = list(params.get("queryTexts") or [])
    with stand_in.lock:
        found = state.query(vector, texts, int(params.get("topK", 0)), params.get("filter"))
        answers = []
        for key, scores in found:
            answer = _described(state, key, False, bool(params.get("returnMetadata")))
            if params.get("returnDistance") and "distance" in scores:
                answer["distance"] = scores["distance"]
            if params.get("returnScores") and texts:
                bm25 = [{"metadataKey": k, "score": s} for k, s in scores["bm25"].items()]
                answer["scores"] = (
                    {"bm25Scores": bm25}
                    | ({"fused": scores["fused"]} if "fused" in scores else {})
                    | ({"vectorDistance": scores["distance"]} if "fused" in scores and "distance" in scores else {})
                )
            answers.append(answer)
        stand_in.queries += 1
        stand_in.last_query = dict(params)
    return {"vectors": answers, "distanceMetric": state.distance_metric}


_OPERATIONS = {
    "CreateVectorBucket": _create_bucket,
    "CreateIndex": _create_index,
    "GetIndex": _get_index,
    "PutVectors": _put,
    "DeleteVectors": _delete,
    "QueryVectors": _query,
}
