"""The emulator's stand-in for Amazon Titan Text Embeddings V2 (`InvokeModel` on
`amazon.titan-embed-text-v2:0`): a real lexical embedding, so that offline recall figures are a
lower bound a semantic model should beat, not noise.

The vector is hashed word and word-pair counts: the text is lowercased and split into words, common
English function words are dropped, each word is cut to a crude stem (so "races", "raced" and
"racing" meet), and every word and every pair of neighbouring words is hashed into one of the
requested dimensions with a sign (feature hashing), weighted by 1 + ln(count), pairs at half weight.
Two texts are then close exactly when they share words, which is all it can know: "I hurt my knee"
and "my leg injury" share nothing here, while Titan would put them together.

The request and answer are Titan V2's: `inputText`, optional `dimensions` (256, 512 or 1024, default
1024) and `normalize` (default true); the answer holds `embedding`, `embeddingsByType` and
`inputTextTokenCount`. What Titan refuses (no text, too much text, another size) is refused with
Bedrock's 400 ValidationException.
"""

import hashlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

TITAN_TEXT_V2 = "amazon.titan-embed-text-v2"
DIMENSIONS = (256, 512, 1024)
DEFAULT_DIMENSIONS = 1024
MAX_INPUT_CHARS = 50_000  # Titan Text Embeddings V2's documented limit (and 8,192 tokens)
PAIR_WEIGHT = 0.5
_MALFORMED = "Malformed input request: {}, please reformat your input and try again."
_WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each even ever every few for from
    further had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves im ive id ill youre youve thats its dont didnt doesnt isnt
    wasnt cant wont oh hey hi hello yeah yes ok okay really so well just like got get gets getting lot lots
    thing things""".split()  # noqa: SIM905 - a word list reads best as words
)


class EmbeddingRequestError(ValueError):
    """Answered as HTTP 400 ValidationException, as Bedrock does."""


def is_embedding_model(model_id: str) -> bool:
    return model_id.rpartition("/")[2].startswith(TITAN_TEXT_V2)


def stem(word: str) -> str:
    """A crude suffix cut, the same for a stored text and a query (which is all that matters here)."""
    for suffix, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: len(word) - len(suffix)] + replacement
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]  # running -> runn -> run
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def words(text: str) -> list[str]:
    return [stem(w) for w in _WORD.findall(text.lower().replace("'", "").replace("\u2019", "")) if w not in STOP_WORDS]


def lexical_embedding(text: str, dimensions: int = DEFAULT_DIMENSIONS, normalize: bool = True) -> list[float]:
    """Hashed word and word-pair counts of `text` (see the module's docstring)."""
    found = words(text)
    features = Counter(found)
    for a, b in itertools.pairwise(found):
        features[f"{a} {b}"] += 1
    if not features:  # Titan never answers a zero vector (and S3 Vectors refuses one for cosine)
        features["<no words>"] = 1
    vector = [0.0] * dimensions
    for feature, count in features.items():
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        weight = (1 + math.log(count)) * (PAIR_WEIGHT if " " in feature else 1.0)
        vector[int.from_bytes(digest[:4], "little") % dimensions] += weight if digest[4] & 1 else -weight
    if normalize:
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        vector = [v / norm for v in vector]
    return vector


def embed_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """Titan V2's answer to an InvokeModel body, or EmbeddingRequestError with Bedrock's wording."""
    text = body.get("inputText")
    if not isinstance(text, str) or not text:
        raise EmbeddingRequestError(_MALFORMED.format("#: required key [inputText] not found"))
    if len(text) > MAX_INPUT_CHARS:
        raise EmbeddingRequestError(
            _MALFORMED.format(f"#/inputText: expected maxLength: {MAX_INPUT_CHARS}, actual: {len(text)}")
        )
    dimensions = body.get("dimensions", DEFAULT_DIMENSIONS)
    if dimensions not in DIMENSIONS:
        raise EmbeddingRequestError(_MALFORMED.format(f"#/dimensions: {dimensions} is not a valid enum value"))
    vector = lexical_embedding(text, int(dimensions), bool(body.get("normalize", True)))
    return {
        "embedding": vector,
        "embeddingsByType": {"float": vector},
        "inputTextTokenCount": max(1, len(text) // 4),
    }
