"""Model wrappers that answer from a cache: ``CachedEmbedder``,
``CachedSummarizer`` and ``CachedChat`` (persistent, over a ``ModelCache``), and
``MemoEmbedder`` (in-process, filled in batches)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import InputError, SummarizerError
from memlab.memory.models.cache import ModelCache, request_key, text_key, texts_key
from memlab.memory.models.chat import ChatClient, Completion, Message, check_messages
from memlab.memory.models.embedder import Embedder, check_embeddings
from memlab.memory.models.summarizer import Summarizer


def _open_cache(cache: ModelCache | str | Path | None) -> ModelCache:
    return cache if isinstance(cache, ModelCache) else ModelCache(cache)


@dataclass(frozen=True)
class CacheStats:
    """Counters of a cached embedder or summarizer since creation (or ``reset_stats``).

    ``hits``: inputs answered from the cache (a text repeated within one batch
    counts as a hit after its first occurrence); ``misses``: inputs the wrapped
    model computed; ``model_seconds``: time spent in the wrapped model;
    ``cache_seconds``: time spent reading and writing the cache.
    """

    hits: int
    misses: int
    model_seconds: float
    cache_seconds: float

    @property
    def hit_rate(self) -> float:
        """hits / (hits + misses); 0.0 when nothing was asked."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "cache_hits": self.hits,
            "cache_misses": self.misses,
            "cache_hit_rate": self.hit_rate,
            "model_seconds": self.model_seconds,
            "cache_seconds": self.cache_seconds,
        }

    def __str__(self) -> str:
        return (
            f"{self.hits} hits, {self.misses} misses ({100 * self.hit_rate:.1f}% hit rate); "
            f"{self.model_seconds:.2f} s in the model, {self.cache_seconds:.2f} s in the cache"
        )


class _CacheFront:
    """What CachedEmbedder and CachedSummarizer share: the cache they answer from
    and their hit/miss and time counters (``stats``)."""

    def __init__(self, cache: ModelCache | str | Path | None) -> None:
        self.cache = _open_cache(cache)
        self.reset_stats()

    def reset_stats(self) -> None:
        self.hits = 0
        self.misses = 0
        self.model_seconds = 0.0
        self.cache_seconds = 0.0

    @property
    def stats(self) -> CacheStats:
        return CacheStats(self.hits, self.misses, self.model_seconds, self.cache_seconds)

    def close(self) -> None:
        self.cache.close()


class CachedEmbedder(_CacheFront):
    """An Embedder that answers from a ``ModelCache`` and embeds only the misses.

    Each ``embed`` call looks up the whole batch at once, embeds the distinct
    misses in one call to the wrapped embedder, and writes them back in one
    transaction. If the wrapped embedder fails nothing is written. Vectors come
    back bit-identical to what the wrapped embedder produced.

    Args:
        inner: the embedder to cache; its ``name`` (model and dims) keys the cache.
        cache: a ModelCache, a cache file path, or None for the default location.
    """

    def __init__(self, inner: Embedder, cache: ModelCache | str | Path | None = None) -> None:
        self.inner = inner
        super().__init__(cache)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dims(self) -> int:
        return self.inner.dims

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {self.cache!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch, computing only what the cache lacks.

        Returns:
            ``(len(texts), dims)`` float32.
        """
        if isinstance(texts, str):
            raise InputError("embed() takes a list of texts, not a single string")
        items = list(texts)
        name, dims = self.inner.name, self.inner.dims
        t0 = time.perf_counter()
        keys = [text_key(t) for t in items]
        found = self.cache.get_embeddings(name, dims, list(dict.fromkeys(keys)))
        self.cache_seconds += time.perf_counter() - t0
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, items, strict=True):
            if key not in found and key not in missing:
                missing[key] = text
        if missing:
            t1 = time.perf_counter()
            fresh = check_embeddings(
                self.inner.embed(list(missing.values())), len(missing), dims, name
            )
            self.model_seconds += time.perf_counter() - t1
            t2 = time.perf_counter()
            pairs = list(zip(missing, fresh, strict=True))
            self.cache.put_embeddings(name, dims, pairs)
            found.update(pairs)
            self.cache_seconds += time.perf_counter() - t2
        self.misses += len(missing)
        self.hits += len(items) - len(missing)
        out = np.empty((len(items), dims), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = found[key]
        return out


class CachedSummarizer(_CacheFront):
    """A Summarizer that answers from a ``ModelCache``: the same input texts with
    the same summarizer (``name``: model, prompt version, word limit) give the
    stored note, so a rerun is reproducible and free.

    Args:
        inner: the summarizer to cache.
        cache: a ModelCache, a cache file path, or None for the default location.
    """

    def __init__(self, inner: Summarizer, cache: ModelCache | str | Path | None = None) -> None:
        self.inner = inner
        super().__init__(cache)

    @property
    def name(self) -> str:
        return self.inner.name

    def __repr__(self) -> str:
        return f"CachedSummarizer({self.inner!r}, {self.cache!r})"

    def summarize(self, texts: Sequence[str]) -> str:
        if isinstance(texts, str):
            raise InputError("summarize() takes a list of texts, not a single string")
        items = list(texts)
        name = self.inner.name
        t0 = time.perf_counter()
        key = texts_key(items)
        cached = self.cache.get_summary(name, key)
        self.cache_seconds += time.perf_counter() - t0
        if cached is not None:
            self.hits += 1
            return cached
        t1 = time.perf_counter()
        summary = self.inner.summarize(items)
        self.model_seconds += time.perf_counter() - t1
        if not isinstance(summary, str):
            raise SummarizerError(
                f"summarizer {name} returned {type(summary).__name__}, not a string"
            )
        t2 = time.perf_counter()
        self.cache.put_summary(name, key, summary)
        self.cache_seconds += time.perf_counter() - t2
        self.misses += 1
        return summary


class CachedChat(_CacheFront):
    """A chat client that answers from a ``ModelCache``: the same request (the
    model's ``name``, the messages and the parameters: temperature, max_tokens)
    gives the stored completion, marked ``cached``, and sends nothing. Safe to
    share between threads (the lab asks it from several at once).

    Args:
        inner: the chat client to cache (e.g. ``OpenAIChat``).
        cache: a ModelCache, a cache file path, or None for the default location.
    """

    def __init__(self, inner: ChatClient, cache: ModelCache | str | Path | None = None) -> None:
        self.inner = inner
        self._counting = threading.Lock()
        super().__init__(cache)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def params(self) -> dict[str, Any]:
        return self.inner.params

    def __repr__(self) -> str:
        return f"CachedChat({self.inner!r}, {self.cache!r})"

    def key(self, messages: Sequence[Message]) -> bytes:
        """The cache key of a request: sha256 of its messages and parameters."""
        sent = check_messages(messages, self.name)
        return request_key({"messages": sent, "params": self.inner.params})

    def lookup(self, messages: Sequence[Message]) -> Completion | None:
        """The cached completion of this request (counted as a hit), or None
        (nothing is sent, nothing counted)."""
        t0 = time.perf_counter()
        found = self.cache.get_completion(self.name, self.key(messages))
        with self._counting:
            self.cache_seconds += time.perf_counter() - t0
            self.hits += found is not None
        return None if found is None else Completion.from_dict(found, cached=True)

    def complete(self, messages: Sequence[Message]) -> Completion:
        """The cached completion, or the model's (then stored).

        Raises:
            ChatEndpointError: the model failed (nothing is stored).
        """
        key = self.key(messages)
        t0 = time.perf_counter()
        found = self.cache.get_completion(self.name, key)
        t1 = time.perf_counter()
        if found is not None:
            with self._counting:
                self.hits += 1
                self.cache_seconds += t1 - t0
            return Completion.from_dict(found, cached=True)
        fresh = self.inner.complete(messages)
        t2 = time.perf_counter()
        self.cache.put_completion(self.name, key, fresh.as_dict())
        with self._counting:
            self.misses += 1
            self.model_seconds += t2 - t1
            self.cache_seconds += (t1 - t0) + (time.perf_counter() - t2)
        return replace(fresh, cached=False)

    def __call__(self, messages: list[Message]) -> str:
        return self.complete(messages).text

    def check(self) -> None:
        check = getattr(self.inner, "check", None)
        if check is not None:
            check()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
        super().close()


class MemoEmbedder:
    """An in-process memo in front of any Embedder, filled in batches.

    ``prefetch(texts)`` embeds every text it has not seen in one batched call (in
    chunks of ``batch_size``); later ``embed`` calls for those texts are dictionary
    lookups, and only unseen texts reach the wrapped embedder. ``clear`` frees the
    memo (the lab clears it between transcripts to bound memory).

    Args:
        inner: the embedder (often a CachedEmbedder, so prefetching also warms the
            persistent cache).
        batch_size: texts per call to the wrapped embedder when prefetching.
    """

    def __init__(self, inner: Embedder, batch_size: int = 256) -> None:
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        self.inner = inner
        self.batch_size = batch_size
        self._memo: dict[str, np.ndarray] = {}
        self.calls = 0  # calls that reached the wrapped embedder

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dims(self) -> int:
        return self.inner.dims

    def __repr__(self) -> str:
        return f"MemoEmbedder({self.inner!r})"

    def prefetch(self, texts: Sequence[str]) -> None:
        """Embed every text not yet memoized, ``batch_size`` at a time."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        for i in range(0, len(todo), self.batch_size):
            self._embed_into_memo(todo[i : i + self.batch_size])

    def _embed_into_memo(self, texts: list[str]) -> None:
        self.calls += 1
        vectors = check_embeddings(self.inner.embed(texts), len(texts), self.dims, self.name)
        self._memo.update(zip(texts, vectors, strict=True))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise InputError("embed() takes a list of texts, not a single string")
        items = list(texts)
        missing = [t for t in dict.fromkeys(items) if t not in self._memo]
        if missing:
            self._embed_into_memo(missing)
        out = np.empty((len(items), self.dims), dtype=np.float32)
        for row, text in enumerate(items):
            out[row] = self._memo[text]
        return out

    def clear(self) -> None:
        self._memo.clear()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


__all__ = ["CacheStats", "CachedChat", "CachedEmbedder", "CachedSummarizer", "MemoEmbedder"]
