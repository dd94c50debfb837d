"""The local stand-ins recall runs against, each through the real client: the Bedrock emulator's
Titan Text Embeddings V2 (a real dense model, all-MiniLM-L6-v2, through the product's own
TitanEmbeddings) and the S3 Vectors stand-in (through botocore's s3vectors client): vector,
full-text and hybrid search, with the refusals their services give."""

import json
import math
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.iam.gate import Gate
from infra.local.iam.identity import access_key_of
from infra.local.s3vectors import S3VectorsStandIn, VectorRequestError, analyze, matches
from onboarding.recall.embeddings import TitanEmbeddings

pytestmark = pytest.mark.unit
MODEL = "amazon.titan-embed-text-v2:0"


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def embedder(emulator: BedrockEmulator, dimensions: int = 256, model: str = MODEL) -> TitanEmbeddings:
    client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=emulator.url)
    return TitanEmbeddings(client, model, dimensions)


def test_the_emulator_embeds_with_all_minilm_l6_v2_as_published(emulator: BedrockEmulator) -> None:
    """The first values sentence-transformers gives for this sentence (the model card's example):
    the weights, the tokenizer and the forward pass are the model's own."""
    vector = embedder(emulator, 1024).embed_query("This is an example sentence")
    assert [round(v, 4) for v in vector[:5]] == [0.0677, 0.0635, 0.0487, 0.0793, 0.0374]
    assert vector[384:] == [0.0] * 640  # padded to Titan's size: every cosine unchanged
    assert math.isclose(sum(v * v for v in vector), 1.0, rel_tol=1e-5)  # normalised, as Titan's default


@pytest.mark.parametrize("dimensions", [256, 512, 1024])
def test_the_embedding_joins_what_means_the_same_at_every_titan_size(
    emulator: BedrockEmulator, dimensions: int
) -> None:
    embeddings = embedder(emulator, dimensions)
    knee, injury, pizza = (embeddings.embed_query(t) for t in ("I hurt my knee", "my leg injury", "I like pizza"))
    assert len(knee) == dimensions
    assert cosine(knee, injury) > 0.6 > 0.3 > cosine(knee, pizza)  # no word shared, the meaning is


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"dimensions": 300}, "dimensions"),
        ({"text": ""}, "inputText"),
        ({"text": "x" * 50_001}, "maxLength"),  # Titan V2: 50,000 characters
        ({"text": "🏃" * 4_097}, "Too many input tokens"),  # and 8,192 tokens, counted no lower than Titan would
    ],
)
def test_what_titan_refuses_is_refused_with_a_validation_exception(
    emulator: BedrockEmulator, body: dict[str, Any], says: str
) -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=emulator.url)
    request: dict[str, Any] = {"inputText": body.get("text", "hello")}
    if "dimensions" in body:
        request["dimensions"] = body["dimensions"]
    with pytest.raises(ClientError, match=says) as refused:
        client.invoke_model(modelId=MODEL, body=json.dumps(request))
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
            metadataConfiguration={"nonFilterableMetadataKeys": ["text"],
                                   "textSearchConfigurations": [{"metadataKey": "text", "language": "en"}]},
        )  # fmt: skip
        yield stand_in, client


INDEX = {"vectorBucketName": "bkt", "indexName": "idx"}


def put(client: Any, key: str, data: list[float], user: str, text: Any = "t") -> None:
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


def test_deleted_vectors_are_gone_and_the_index_is_kept_across_a_restart(vectors: tuple[S3VectorsStandIn, Any]) -> None:
    stand_in, client = vectors
    for n in range(3):
        put(client, f"k{n}", [1, n, 0], "a")
    client.delete_vectors(**INDEX, keys=["k1", "never-there"])
    assert sorted(stand_in.buckets["bkt"]["idx"].vectors) == ["k0", "k2"]
    saved = stand_in.dump()
    assert saved["bkt"]["idx"]["dimension"] == 3
    stand_in.buckets.clear()
    stand_in.load(saved)
    assert sorted(stand_in.buckets["bkt"]["idx"].vectors) == ["k0", "k2"]


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
        (
            lambda c: c.query_vectors(**INDEX, topK=1, queryTexts=[{"text": "x", "metadataKey": "user"}]),
            "ValidationException",
            "not a full-text searchable",
        ),
        (
            lambda c: c.query_vectors(**INDEX, topK=1, queryTexts=[{"text": "x" * 1025, "metadataKey": "text"}]),
            "ValidationException",
            "1 to 1024",
        ),
        (
            lambda c: c.query_vectors(**INDEX, topK=1, queryTexts=[{"text": "x", "metadataKey": "text"}] * 2),
            "ValidationException",
            "distinct",
        ),
        (lambda c: c.query_vectors(**INDEX, topK=1), "ValidationException", "queryVector, queryTexts, or both"),
        (lambda c: put(c, "k", [1, 0, 0], "a", ["not", "text"]), "ValidationException", "takes a string"),
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
        ({"user": {"$eq": "b"}}, False),
        ({"tags": "x"}, True),  # a list value matches when an element does
        ({"user": {"$in": ["b", "c"]}}, False),
        ({"missing": "a"}, False),
        ({"$or": [{"user": "b"}, {"n": 2}]}, True),
        ({"$and": [{"user": "a"}, {"n": 3}]}, False),
    ],
)
def test_metadata_filters_read_as_the_service_documents(where: dict[str, Any], expected: bool) -> None:
    assert matches({"user": "a", "n": 2, "tags": ["x", "y"]}, where) is expected


def test_a_filter_the_stand_in_does_not_read_is_refused_not_misread() -> None:
    with pytest.raises(VectorRequestError, match=r"\$near"):
        matches({"n": 1}, {"n": {"$near": 1}})


def test_words_are_searched_by_bm25_with_the_english_analyzer(vectors: tuple[S3VectorsStandIn, Any]) -> None:
    stand_in, client = vectors
    put(client, "long", [1, 0, 0], "a", "Racing again: " + "and then I walked home, " * 8)
    put(client, "race", [1, 0, 0], "a", "I ran two races for the charity")
    put(client, "cat", [1, 0, 0], "a", "My cat's name is Pixel")
    put(client, "b", [1, 0, 0], "b", "racing racing racing")
    assert analyze("The cat's races", "en") == ["cat", "race"]  # stop words, the possessive, Porter's stems
    answer = client.query_vectors(
        **INDEX, topK=5, queryTexts=[{"text": "the racing", "metadataKey": "text"}], filter={"user": "a"},
        returnScores=True,
    )  # fmt: skip
    assert [v["key"] for v in answer["vectors"]] == ["race", "long"]  # the shorter text first; no word, not found
    assert answer["vectors"][0]["scores"]["bm25Scores"][0]["metadataKey"] == "text"
    client.delete_vectors(**INDEX, keys=["race"])
    stand_in.load(stand_in.dump())  # the words are analysed again when the index is loaded
    texts = [{"text": "races", "metadataKey": "text"}]
    assert [v["key"] for v in client.query_vectors(**INDEX, topK=5, queryTexts=texts, filter={"user": "a"})[
        "vectors"]] == ["long"]  # fmt: skip


def test_a_hybrid_query_fuses_both_rankings(vectors: tuple[S3VectorsStandIn, Any]) -> None:
    _, client = vectors
    put(client, "words", [0, 1, 0], "a", "my dog Biscuit")
    put(client, "meaning", [1, 0, 0], "a", "the puppy")
    put(client, "both", [0.9, 0.1, 0], "a", "Biscuit the puppy")
    put(client, "neither", [0, 0, 1], "a", "the weather")
    answer = client.query_vectors(
        **INDEX, topK=3, queryVector={"float32": [1, 0, 0]}, queryTexts=[{"text": "Biscuit", "metadataKey": "text"}],
        returnScores=True,
    )  # fmt: skip
    assert [v["key"] for v in answer["vectors"]] == ["both", "words", "meaning"]  # every vector is ranked by distance
    scores = answer["vectors"][0]["scores"]
    assert math.isclose(scores["fused"], 1 / 62 + 1 / 61)  # second by distance, first by words
    assert scores["vectorDistance"] < 0.1
