"""Embeddings behind one function: the Embedder protocol, the EMBEDDERS registry,
output checks shared by every embedder, and the offline HashEmbedder."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np

from memlab.errors import EmbedderError, InputError
from memlab.memory.checks import check_number, check_strings
from memlab.memory.text import content_words
from memlab.registry import Registry

EMBEDDERS: Registry[type] = Registry("embedder", "memlab.memory.models", error=InputError)
"""Embedders by name (``hash``, ``minilm``, ``openai``); a module in
``memlab.memory.models`` registers its class with ``@EMBEDDERS.register("name")``."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors.

    ``name`` identifies the model and its settings (it keys embedding caches);
    ``dims`` is the vector size; ``embed`` takes a batch and returns an
    ``(len(texts), dims)`` float32 array.
    """

    @property
    def name(self) -> str: ...

    @property
    def dims(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def check_embeddings(vectors: object, n: int, dims: int, who: str) -> np.ndarray:
    """Validate an embedder's output: shape (n, dims), finite values; return float32.

    Raises:
        EmbedderError: naming the embedder and what was wrong.
    """
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise EmbedderError(
            f"{who} returned {arr.shape[0] if arr.ndim else 0} vectors for {n} texts "
            f"(shape {arr.shape}); the endpoint or model is misbehaving"
        )
    if arr.shape[1] != dims:
        raise EmbedderError(
            f"{who} returned vectors of {arr.shape[1]} dimensions, expected {dims}; "
            "check the model name and the configured dims"
        )
    if not np.all(np.isfinite(arr)):
        raise EmbedderError(f"{who} returned NaN or infinite values")
    return arr


def check_texts(texts: Sequence[str], who: str) -> list[str]:
    """The batch as a list of str, or InputError naming the embedder (``who``)."""
    if isinstance(texts, str):
        raise InputError(f"{who}.embed() takes a list of texts, not a single string")
    return check_strings(texts, f"{who}.embed() texts")


def l2_normalize(arr: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (arr / norms).astype(np.float32, copy=False)


@EMBEDDERS.register("hash")
class HashEmbedder:
    """Deterministic offline embedder: signed feature hashing, L2-normalized.

    Features are content words (weight 1), bigrams of consecutive content words
    (0.5) and character trigrams of each word with boundary marks (0.25 each,
    so a typo or plural still overlaps). Each feature is hashed with BLAKE2b,
    never Python's salted ``hash()``, so vectors are identical across processes
    and machines.

    Args:
        dims: vector size.
    """

    VERSION = 1

    def __init__(self, dims: int = 384) -> None:
        check_number(dims, "HashEmbedder dims", lo=8, integer=True)
        self._dims = dims
        self._feature = lru_cache(maxsize=200_000)(self._feature_uncached)

    @property
    def name(self) -> str:
        return f"hash-v{self.VERSION}-{self._dims}"

    @property
    def dims(self) -> int:
        return self._dims

    def _feature_uncached(self, feature: str) -> tuple[int, float]:
        h = int.from_bytes(
            hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little"
        )
        return h % self._dims, (1.0 if (h >> 63) & 1 else -1.0)

    def _features(self, text: str) -> list[tuple[str, float]]:
        toks = content_words(text)
        feats: list[tuple[str, float]] = [("w:" + w, 1.0) for w in toks]
        feats += [("b:" + a + " " + b, 0.5) for a, b in itertools.pairwise(toks)]
        for w in toks:
            marked = f"<{w}>"
            feats += [("c:" + marked[i : i + 3], 0.25) for i in range(len(marked) - 2)]
        return feats

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch of texts.

        Returns:
            ``(len(texts), dims)`` float32, each row of unit length (a text with no
            content words gives a zero vector).
        """
        texts = check_texts(texts, "HashEmbedder")
        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        for row, text in enumerate(texts):
            vec = out[row]
            for feat, weight in self._features(text):
                idx, sign = self._feature(feat)
                vec[idx] += sign * weight
        return l2_normalize(out)
