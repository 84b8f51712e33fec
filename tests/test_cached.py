"""CachedEmbedder, CachedSummarizer and MemoEmbedder: only misses reach the model, in one batch;
nothing is cached from a failing or misbehaving model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memlab.errors import EmbedderError, InputError
from memlab.memory import (
    CachedEmbedder,
    CachedSummarizer,
    Embedder,
    ExtractiveSummarizer,
    HashEmbedder,
    ModelCache,
    Summarizer,
)

DIMS = 16


class Counting:
    """An Embedder that records every batch it is asked to embed."""

    def __init__(self, dims: int = DIMS, fail: bool = False) -> None:
        self.inner = HashEmbedder(dims)
        self.calls: list[list[str]] = []
        self.fail = fail

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dims(self) -> int:
        return self.inner.dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.fail:
            raise EmbedderError("endpoint down")
        return self.inner.embed(texts)


class CountingSummarizer:
    def __init__(self, name: str = "extractive-test") -> None:
        self.inner = ExtractiveSummarizer()
        self.calls = 0
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def summarize(self, texts: Sequence[str]) -> str:
        self.calls += 1
        return self.inner.summarize(texts)


# -- CachedEmbedder -----------------------------------------------------------------
def test_embeds_only_misses_in_one_batch_and_counts(tmp_path: Path) -> None:
    inner = Counting()
    emb = CachedEmbedder(inner, ModelCache(tmp_path / "c.sqlite"))
    assert isinstance(emb, Embedder)
    assert emb.name == inner.name and emb.dims == DIMS
    first = emb.embed(["alpha beta", "gamma delta", "alpha beta"])
    assert inner.calls == [["alpha beta", "gamma delta"]]  # distinct misses, one call
    assert (emb.hits, emb.misses) == (1, 2)  # the repeat within the batch is a hit
    second = emb.embed(["gamma delta", "epsilon", "alpha beta"])
    assert inner.calls[-1] == ["epsilon"]
    assert (emb.hits, emb.misses) == (3, 3)
    expected = HashEmbedder(DIMS).embed(["alpha beta", "gamma delta", "epsilon"])
    assert np.array_equal(first, expected[[0, 1, 0]])  # bit-identical to the model
    assert np.array_equal(second, expected[[1, 2, 0]])
    assert first.dtype == np.float32 and first.flags.writeable
    stats = emb.stats
    assert stats.hit_rate == 0.5 and stats.model_seconds > 0 and stats.cache_seconds > 0
    assert "3 hits, 3 misses (50.0% hit rate)" in str(stats)
    assert set(stats.as_dict()) >= {"cache_hits", "cache_misses", "model_seconds"}
    assert emb.embed([]).shape == (0, DIMS)
    emb.reset_stats()
    assert (emb.hits, emb.misses) == (0, 0)
    with pytest.raises(InputError):
        emb.embed("a string")  # type: ignore[arg-type]


def test_persists_and_separates_models(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CachedEmbedder(Counting(), path).embed(["one", "two"])
    again = Counting()
    warm = CachedEmbedder(again, path)  # a new handle on the same file
    warm.embed(["one", "two"])
    assert again.calls == [] and warm.hits == 2
    other = Counting(dims=DIMS * 2)  # another name and dims: no sharing
    cold = CachedEmbedder(other, path)
    out = cold.embed(["one"])
    assert other.calls == [["one"]] and out.shape == (1, DIMS * 2)
    assert ModelCache(path).info()["embeddings"] == 3


def test_a_failing_model_writes_nothing(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "c.sqlite")
    emb = CachedEmbedder(Counting(fail=True), cache)
    with pytest.raises(EmbedderError):
        emb.embed(["a", "b"])
    assert cache.info()["embeddings"] == 0 and emb.misses == 0


def test_bad_model_output_is_not_cached(tmp_path: Path) -> None:
    class Broken(Counting):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.full((len(texts), DIMS), np.nan, dtype=np.float32)

    cache = ModelCache(tmp_path / "c.sqlite")
    with pytest.raises(EmbedderError, match="NaN"):
        CachedEmbedder(Broken(), cache).embed(["a"])
    assert cache.info()["embeddings"] == 0


# -- CachedSummarizer ----------------------------------------------------------------
def test_cached_summarizer(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    inner = CountingSummarizer()
    s = CachedSummarizer(inner, path)
    assert isinstance(s, Summarizer) and s.name == inner.name
    texts = ["We deploy on GKE in europe-west1.", "thanks!"]
    first = s.summarize(texts)
    assert first == "We deploy on GKE in europe-west1."
    assert s.summarize(texts) == first and inner.calls == 1
    assert s.summarize(["thanks!"]) == "" and s.summarize(["thanks!"]) == ""
    assert inner.calls == 2  # an empty summary is cached too
    assert (s.hits, s.misses) == (2, 2)
    rerun = CountingSummarizer()
    assert CachedSummarizer(rerun, path).summarize(texts) == first and rerun.calls == 0
    other = CountingSummarizer("another-model")
    CachedSummarizer(other, path).summarize(texts)
    assert other.calls == 1
    with pytest.raises(InputError):
        s.summarize("a string")  # type: ignore[arg-type]


def test_memo_embedder_prefetches_in_batches_and_matches() -> None:
    from memlab.memory import HashEmbedder, MemoEmbedder

    calls: list[int] = []

    class Counting(HashEmbedder):
        def embed(self, texts):  # type: ignore[no-untyped-def]
            calls.append(len(texts))
            return super().embed(texts)

    memo = MemoEmbedder(Counting(64), batch_size=4)
    texts = [f"text number {i}" for i in range(10)]
    memo.prefetch(texts + texts[:3])
    assert calls == [4, 4, 2]  # distinct texts, batch_size at a time
    out = memo.embed([texts[3], texts[0], texts[3]])
    assert calls == [4, 4, 2]  # served from the memo
    assert np.array_equal(out, HashEmbedder(64).embed([texts[3], texts[0], texts[3]]))
    memo.embed(["something new", texts[1]])
    assert calls[-1] == 1  # only the unseen text reaches the model
    memo.clear()
    memo.embed([texts[0]])
    assert calls[-1] == 1 and memo.name == HashEmbedder(64).name and memo.dims == 64
