"""The local stand-ins recall runs against, each through the real client: the Bedrock emulator's
Titan Text Embeddings V2 (through langchain-aws's BedrockEmbeddings) and the S3 Vectors stand-in
(through botocore's s3vectors client), with the refusals their services give."""

import math
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from langchain_aws import BedrockEmbeddings

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.embeddings import lexical_embedding, stem
from infra.local.iam.gate import Gate
from infra.local.iam.identity import access_key_of
from infra.local.s3vectors import S3VectorsStandIn
from infra.local.vector_search import VectorRequestError, matches

pytestmark = pytest.mark.unit
MODEL = "amazon.titan-embed-text-v2:0"


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def embedder(emulator: BedrockEmulator, dimensions: int = 256, model: str = MODEL) -> BedrockEmbeddings:
    client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=emulator.url)
    return BedrockEmbeddings(client=client, model_id=model, dimensions=dimensions)


def test_the_emulator_embeds_as_titan_v2_answers(emulator: BedrockEmulator) -> None:
    embeddings = embedder(emulator, 512)
    race = embeddings.embed_query("I ran a charity race for mental health last Saturday")
    asked = embeddings.embed_query("What did the charity race raise awareness for?")
    other = embeddings.embed_query("My sister adopted a guinea pig")
    assert len(race) == 512
    assert math.isclose(sum(v * v for v in race), 1.0, rel_tol=1e-6)  # normalised, as Titan's default
    assert cosine(race, asked) > 0.2 > cosine(race, other)  # shared words, and none
    assert emulator.embeddings == 3


def test_the_embedding_is_lexical_words_and_stems_not_meaning() -> None:
    assert stem("racing") == stem("races") == stem("raced") == stem("race")
    knee, injury = lexical_embedding("I hurt my knee", 256), lexical_embedding("a leg injury", 256)
    assert abs(cosine(knee, injury)) < 0.2  # what a semantic model would join, this cannot
    assert any(lexical_embedding("the and of", 256))  # only stop words: still not a zero vector


@pytest.mark.parametrize(
    ("body", "says"),
    [({"dimensions": 300}, "dimensions"), ({"text": ""}, "inputText"), ({"text": "x" * 50_001}, "maxLength")],
)
def test_what_titan_refuses_is_refused_with_a_validation_exception(
    emulator: BedrockEmulator, body: dict[str, Any], says: str
) -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=emulator.url)
    request: dict[str, Any] = {"inputText": body.get("text", "hello")}
    if "dimensions" in body:
        request["dimensions"] = body["dimensions"]
    with pytest.raises(ClientError, match=says) as refused:
        client.invoke_model(modelId=MODEL, body=__import__("json").dumps(request))
    assert refused.value.response["Error"]["Code"] == "ValidationException"


def test_only_the_embedding_model_is_invoked(emulator: BedrockEmulator) -> None:
    with pytest.raises(ClientError, match="model identifier is invalid"):
        embedder(emulator, model="anthropic.claude-v2").embed_query("hello")


# --- the S3 Vectors stand-in ----------------------------------------------------------------------


@pytest.fixture
def vectors() -> Iterator[tuple[S3VectorsStandIn, Any]]:
    with S3VectorsStandIn("us-east-1", "123456789012") as stand_in:
        client = boto3.client("s3vectors", region_name="us-east-1", endpoint_url=stand_in.url)
        client.create_vector_bucket(vectorBucketName="bkt")
        client.create_index(
            vectorBucketName="bkt", indexName="idx", dataType="float32", dimension=3, distanceMetric="cosine",
            metadataConfiguration={"nonFilterableMetadataKeys": ["text"]},
        )  # fmt: skip
        yield stand_in, client


INDEX = {"vectorBucketName": "bkt", "indexName": "idx"}


def put(client: Any, key: str, data: list[float], user: str, text: str = "t") -> None:
    client.put_vectors(
        **INDEX, vectors=[{"key": key, "data": {"float32": data}, "metadata": {"user": user, "text": text}}]
    )


def test_a_query_finds_the_nearest_of_one_user_only(vectors: tuple[S3VectorsStandIn, Any]) -> None:
    _, client = vectors
    put(client, "a1", [1, 0, 0], "a", "first")
    put(client, "a2", [0.6, 0.8, 0], "a")
    put(client, "b1", [1, 0, 0.01], "b")
    answer = client.query_vectors(
        **INDEX, topK=5, queryVector={"float32": [1, 0.1, 0]}, filter={"user": "a"},
        returnMetadata=True, returnDistance=True,
    )  # fmt: skip
    assert [v["key"] for v in answer["vectors"]] == ["a1", "a2"]
    assert answer["vectors"][0]["metadata"] == {"user": "a", "text": "first"}
    assert answer["vectors"][0]["distance"] < answer["vectors"][1]["distance"]
    assert client.query_vectors(**INDEX, topK=1, queryVector={"float32": [0, 1, 0]})["vectors"][0]["key"] == "a2"


def test_deleted_vectors_are_gone_and_listed_ones_are_paged(vectors: tuple[S3VectorsStandIn, Any]) -> None:
    stand_in, client = vectors
    for n in range(3):
        put(client, f"k{n}", [1, n, 0], "a")
    client.delete_vectors(**INDEX, keys=["k1", "never-there"])
    assert [v["key"] for v in client.get_vectors(**INDEX, keys=["k0", "k1"])["vectors"]] == ["k0"]
    first = client.list_vectors(**INDEX, maxResults=1)
    assert [v["key"] for v in first["vectors"]] == ["k0"]
    assert first["nextToken"]
    assert stand_in.dump()["bkt"]["idx"]["dimension"] == 3


@pytest.mark.parametrize(
    ("call", "code", "says"),
    [
        (lambda c: put(c, "k", [1, 0], "a"), "ValidationException", "dimension"),
        (lambda c: put(c, "k", [0, 0, 0], "a"), "ValidationException", "zero vectors"),
        (lambda c: put(c, "k", [1, 0, 0], "x" * 3000), "ValidationException", "2 KB"),
        (
            lambda c: c.query_vectors(**INDEX, topK=1, queryVector={"float32": [1, 0, 0]}, filter={"text": "t"}),
            "ValidationException",
            "non-filterable",
        ),
        (
            lambda c: c.query_vectors(**INDEX, topK=101, queryVector={"float32": [1, 0, 0]}),
            "ValidationException",
            "topK",
        ),
        (
            lambda c: c.query_vectors(vectorBucketName="bkt", indexName="nope", topK=1, queryVector={"float32": [1]}),
            "NotFoundException",
            "could not be found",
        ),
    ],
)
def test_what_s3_vectors_refuses_is_refused(
    vectors: tuple[S3VectorsStandIn, Any], call: Any, code: str, says: str
) -> None:
    _, client = vectors
    with pytest.raises(ClientError, match=says) as refused:
        call(client)
    assert refused.value.response["Error"]["Code"] == code


def test_a_caller_without_the_permission_is_refused_as_s3_vectors_refuses(
    vectors: tuple[S3VectorsStandIn, Any],
) -> None:
    stand_in, _ = vectors
    index = "arn:aws:s3vectors:us-east-1:123456789012:bucket/bkt/index/idx"
    stand_in.gate = Gate({"ApiFunction": [{"Effect": "Allow", "Action": "s3vectors:QueryVectors", "Resource": index}]},
                         "123456789012", "stack")  # fmt: skip
    client = boto3.client(
        "s3vectors", region_name="us-east-1", endpoint_url=stand_in.url,
        aws_access_key_id=access_key_of("ApiFunction"), aws_secret_access_key="local",  # noqa: S106
    )  # fmt: skip
    assert client.query_vectors(indexArn=index, topK=1, queryVector={"float32": [1, 0, 0]})["vectors"] == []
    with pytest.raises(ClientError, match="s3vectors:GetVectors") as refused:  # a filter needs GetVectors too
        client.query_vectors(indexArn=index, topK=1, queryVector={"float32": [1, 0, 0]}, filter={"user": "a"})
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({"user": "a"}, True),
        ({"user": {"$ne": "a"}}, False),
        ({"n": {"$gte": 2, "$lt": 3}}, True),
        ({"tags": "x"}, True),  # a list value matches when an element does
        ({"user": {"$in": ["b", "c"]}}, False),
        ({"user": {"$nin": ["b"]}}, True),
        ({"missing": {"$exists": False}}, True),
        ({"user": {"$startsWith": "a"}}, True),
        ({"$or": [{"user": "b"}, {"n": 2}]}, True),
        ({"$and": [{"user": "a"}, {"n": 3}]}, False),
    ],
)
def test_metadata_filters_read_as_the_service_documents(where: dict[str, Any], expected: bool) -> None:
    assert matches({"user": "a", "n": 2, "tags": ["x", "y"]}, where) is expected


def test_an_unknown_filter_operator_is_refused() -> None:
    with pytest.raises(VectorRequestError, match=r"\$near"):
        matches({"n": 1}, {"n": {"$near": 1}})
