"""Text embeddings for memory search: an offline hashing embedder and an OpenAI one.

The openai SDK is imported only when an `OpenAIEmbedder` builds its own client, so importing
this module (and the memory adapters that use it) costs no cold-start time.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from missions.core.errors import DependencyUnavailable

_WORD = re.compile(r"[^\W_]+")  # letters and digits; "_" splits snake_case keys into words
_OPENAI_BATCH = 2048  # inputs per embeddings request accepted by the API


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity in [-1, 1]; 0.0 when either vector is all zeros."""
    if len(a) != len(b):
        raise ValueError(f"cannot compare vectors of {len(a)} and {len(b)} dimensions")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    if norm == 0.0:
        return 0.0
    return max(-1.0, min(1.0, dot / norm))  # float32 storage can overshoot 1 by an ulp


def text_of(value: Any) -> str:
    """The searchable text of a JSON value: its keys and string values, depth first."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            parts.append(node)
        elif isinstance(node, dict):
            for key, child in node.items():
                parts.append(str(key))
                walk(child)
        elif isinstance(node, (list, tuple)):
            for child in node:
                walk(child)

    walk(value)
    return " ".join(part for part in parts if part.strip())


class HashingEmbedder:
    """Deterministic, offline embeddings (the feature-hashing trick).

    Words and their character trigrams are hashed with blake2b (stable across processes,
    unlike `hash()`) into signed buckets, so texts sharing words or sub-words score high.
    """

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be positive")
        self.dimensions = dimensions

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._embed_one(text) for text in texts]

    def _embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for feature, weight in _features(text):
            digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
            sign = 1.0 if digest & 1 else -1.0
            vector[(digest >> 1) % self.dimensions] += sign * weight
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector


def _features(text: str) -> list[tuple[str, float]]:
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    features: list[tuple[str, float]] = []
    for word in words:
        features.append((f"w:{word}", 1.0))
        padded = f"<{word}>"
        trigrams = [padded[i : i + 3] for i in range(len(padded) - 2)]
        # trigrams of a word weigh as much as the word itself, whatever its length
        features.extend((f"t:{gram}", 1.0 / math.sqrt(len(trigrams))) for gram in trigrams)
    return features


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible endpoint (`dimensions` is sent with each request)."""

    def __init__(
        self,
        *,
        client: Any = None,
        api_key: str | None = None,
        base_url: str | None = None,
        model: str = "text-embedding-3-small",
        dimensions: int = 256,
        timeout: float = 30.0,
        max_retries: int = 2,
    ) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be positive")
        if client is None:
            import openai  # lazily: only processes that really embed pay for the SDK

            from missions.core.llm.provider import LLMError

            try:
                client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries)
            except openai.OpenAIError as exc:  # e.g. no key in the arguments or OPENAI_API_KEY
                raise LLMError(f"cannot create the OpenAI client: {exc}") from exc
        self._client = client
        self._secrets = (api_key,) if api_key else ()
        self.model = model
        self.dimensions = dimensions

    def _described(self, exc: Exception) -> str:
        """The error's kind and the server's status and own words (llama.cpp's server without --embeddings
        answers 501 "This server does not support embeddings..."), without a credential it may quote."""
        message = getattr(exc, "message", None)  # the SDK's: "Error code: 501 - <the server's message>"
        text = type(exc).__name__ + (f": {message}" if message else "")
        from missions.core.redaction import redact

        return redact(text, self._secrets)[:300]

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = [[0.0] * self.dimensions for _ in texts]
        # The API refuses empty inputs; blank texts keep the zero vector (similar to nothing).
        wanted = [i for i, text in enumerate(texts) if text.strip()]
        for start in range(0, len(wanted), _OPENAI_BATCH):
            batch = wanted[start : start + _OPENAI_BATCH]
            try:
                response = self._client.embeddings.create(
                    model=self.model,
                    input=[texts[i] for i in batch],
                    dimensions=self.dimensions,
                    encoding_format="float",
                )
            except Exception as exc:  # the SDK's errors (after its own retries): the service is unavailable
                raise DependencyUnavailable(
                    f"the embedding service failed: {self._described(exc)} "
                    "(a server without embeddings: set embeddings to local, MISSIONS_EMBEDDINGS=local)"
                ) from exc
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise ValueError(f"asked {len(batch)} embeddings of {self.model}, got {len(data)}")
            for i, datum in zip(batch, data, strict=True):
                vector = [float(x) for x in datum.embedding]
                if len(vector) != self.dimensions:
                    raise ValueError(
                        f"{self.model} returned {len(vector)} dimensions, not {self.dimensions}: "
                        "does the endpoint support the dimensions parameter?"
                    )
                vectors[i] = vector
        return vectors
