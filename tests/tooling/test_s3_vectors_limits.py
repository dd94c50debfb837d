"""The S3 Vectors stand-in refuses what S3 Vectors refuses, each limit as documented: the S3 User
Guide's "Limitations and restrictions" page of S3 Vectors (request payload 20 MiB; 1,000 PutVectors
and DeleteVectors requests and 2,500 vectors written or deleted a second per index; 10
non-filterable metadata keys per index) and the API reference's CreateIndex (an index name of 3 to
63 lowercase letters, numbers, hyphens and dots) and MetadataConfiguration (a non-filterable key of
1 to 63 characters), the index-mode page (at most 100 filter constraints on an ENHANCED index) and
QueryVectors (no `queryMode` CLASSIC on an ENHANCED index). And the product keeps to them: an
erase of a 20,000-message user finishes under the stand-in's throttling, every vector gone."""

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from infra.local.s3vectors import MAX_PAYLOAD_BYTES, S3VectorsStandIn, WriteRate, _ThrottledError
from onboarding.recall.vectors import PACED_VECTORS_PER_S, VectorIndex, vector_key

REGION, ACCOUNT = "us-east-1", "123456789012"
INDEX = {"vectorBucketName": "bkt", "indexName": "idx"}
ONE_TRY = Config(retries={"total_max_attempts": 1, "mode": "standard"})


@pytest.fixture
def stand_in() -> Iterator[tuple[S3VectorsStandIn, Any]]:
    with S3VectorsStandIn(REGION, ACCOUNT) as running:
        client = boto3.client("s3vectors", region_name=REGION, endpoint_url=running.url, config=ONE_TRY)
        client.create_vector_bucket(vectorBucketName="bkt")
        client.create_index(**INDEX, dataType="float32", dimension=2, distanceMetric="cosine")
        yield running, client


def _refused(call: Any, code: str, says: str) -> None:
    with pytest.raises(ClientError, match=says) as refused:
        call()
    assert refused.value.response["Error"]["Code"] == code


def test_a_request_over_20_mib_is_refused(stand_in: tuple[S3VectorsStandIn, Any]) -> None:
    _, client = stand_in
    over = "x" * (MAX_PAYLOAD_BYTES + 1024)
    _refused(lambda: client.delete_vectors(**INDEX, keys=[over]), "ValidationException", "20 MiB")


def test_writes_past_2500_vectors_a_second_are_throttled(stand_in: tuple[S3VectorsStandIn, Any]) -> None:
    _, client = stand_in
    for batch in range(5):  # 2,500 vectors
        client.delete_vectors(**INDEX, keys=[f"k{batch}-{n}" for n in range(500)])
    _refused(lambda: client.delete_vectors(**INDEX, keys=["one-more"]), "TooManyRequestsException", "2500 vectors")


def test_write_requests_past_1000_a_second_are_throttled() -> None:
    now = [0.0]
    rate = WriteRate(lambda: now[0])
    for _ in range(1_000):
        rate.take(1)
    with pytest.raises(_ThrottledError, match="1000 requests"):
        rate.take(1)
    now[0] = 1.01  # the window has moved on
    rate.take(1)


@pytest.mark.parametrize(
    ("keys", "says"),
    [([f"k{n}" for n in range(11)], "at most 10"), (["k" * 64], "1 to 63 characters")],
    ids=["11 non-filterable keys", "a key of 64 characters"],
)
def test_non_filterable_keys_past_the_documented_limits_are_refused(
    stand_in: tuple[S3VectorsStandIn, Any], keys: list[str], says: str
) -> None:
    _, client = stand_in
    index = {"vectorBucketName": "bkt", "indexName": "other", "dataType": "float32", "dimension": 2}
    configuration = {"nonFilterableMetadataKeys": keys}
    _refused(
        lambda: client.create_index(**index, distanceMetric="cosine", metadataConfiguration=configuration),
        "ValidationException",
        says,
    )


@pytest.mark.parametrize("name", ["Messages", "my_index", "-index", "index."])
def test_index_names_outside_the_documented_form_are_refused(stand_in: tuple[S3VectorsStandIn, Any], name: str) -> None:
    _, client = stand_in
    _refused(
        lambda: client.create_index(
            vectorBucketName="bkt", indexName=name, dataType="float32", dimension=2, distanceMetric="cosine"
        ),
        "ValidationException",
        "lowercase",
    )


def test_an_erase_of_a_20000_message_user_finishes_under_the_throttling(
    stand_in: tuple[S3VectorsStandIn, Any],
) -> None:
    """The product's own deletes (VectorIndex.delete, as an erase calls it) over HTTP: 40 requests
    of 500 keys, paced to PACED_VECTORS_PER_S, never throttled, every vector gone."""
    running, _ = stand_in
    user, ids = "long-time-user", [f"{n:013d}-0a1b2c3d4e5f" for n in range(20_000)]
    state = running.buckets["bkt"]["idx"]
    for start in range(0, len(ids), 500):  # straight into the stand-in's state: the test's set-up, not paced
        state.put([{"key": vector_key(user, i), "data": {"float32": [1.0, 0.5]}} for i in ids[start : start + 500]])
    client = boto3.client("s3vectors", region_name=REGION, endpoint_url=running.url)  # botocore's own tries
    index = VectorIndex(client, f"arn:aws:s3vectors:{REGION}:{ACCOUNT}:bucket/bkt/index/idx", 8_000)
    started = time.monotonic()
    assert index.delete(user, ids) == 20_000
    elapsed = time.monotonic() - started
    assert state.vectors == {}
    assert elapsed >= (20_000 - 500) / PACED_VECTORS_PER_S  # paced, not back to back


def test_a_filter_of_101_constraints_is_refused(stand_in: tuple[S3VectorsStandIn, Any]) -> None:
    _, client = stand_in
    query = {"topK": 1, "queryVector": {"float32": [1.0, 0.0]}}
    client.query_vectors(**INDEX, **query, filter={"$and": [{f"k{n}": n} for n in range(100)]})
    where = {"$and": [{f"k{n}": n} for n in range(101)]}
    _refused(lambda: client.query_vectors(**INDEX, **query, filter=where), "ValidationException", "100 constraints")


def test_query_mode_classic_on_an_enhanced_index_is_refused(stand_in: tuple[S3VectorsStandIn, Any]) -> None:
    _, client = stand_in
    query = {"topK": 1, "queryVector": {"float32": [1.0, 0.0]}}
    client.query_vectors(**INDEX, **query, queryMode="ENHANCED")
    _refused(lambda: client.query_vectors(**INDEX, **query, queryMode="CLASSIC"), "ValidationException", "CLASSIC")
