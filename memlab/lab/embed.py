"""Pre-warming the persistent embedding cache: ``memlab embed`` and the start of
every run with a cached embedder.

A replay embeds each transcript's turns when it reaches that transcript. A
model is far faster on texts of similar length (a forward pass is padded to its
longest text), so ``prewarm`` takes the distinct texts of a whole dataset that
the cache lacks, sorts them by length and embeds them in chunks through the
``CachedEmbedder``: each chunk is one transaction in the cache, so an interrupted
pass (Ctrl-C) loses at most the chunks in flight and the next pass resumes where
it stopped. With ``workers`` > 1 the chunks go to that many processes, each with
its own model (and cores / workers threads), all writing to the one cache file.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.errors import ConfigError
from memlab.lab.config import Plugin
from memlab.lab.transcripts import Transcript
from memlab.memory import CachedEmbedder, ModelCache
from memlab.memory.models.cache import text_key
from memlab.progress import bar

DEFAULT_CHUNK = 256


def dataset_texts(transcripts: Iterable[Transcript]) -> list[str]:
    """The distinct turn texts of ``transcripts`` (what a replay embeds), in order."""
    return list(dict.fromkeys(turn.text for t in transcripts for turn in t.turns))


@dataclass(frozen=True)
class Prewarmed:
    """What a pre-warming pass found and did."""

    texts: int  # distinct texts asked for
    cached: int  # already in the cache
    embedded: int  # embedded by this pass
    seconds: float
    workers: int

    def line(self, name: str) -> str:
        rate = self.embedded / self.seconds if self.seconds > 0 else 0.0
        return (
            f"{self.texts:,} distinct texts for {name}: {self.cached:,} were cached, "
            f"{self.embedded:,} embedded in {self.seconds:.1f} s ({rate:,.1f} texts/s, "
            f"{self.workers} worker{'s' if self.workers != 1 else ''})"
        )


def missing_texts(cache: ModelCache, name: str, dims: int, texts: Sequence[str]) -> list[str]:
    """The texts whose vectors by ``name`` the cache lacks."""
    keys = [text_key(t) for t in texts]
    found = cache.embedded_keys(name, dims, keys)
    return [t for t, k in zip(texts, keys, strict=True) if k not in found]


def plan_chunks(texts: Sequence[str], chunk: int) -> list[list[str]]:
    """Texts sorted by length (longest first) and cut into chunks of ``chunk``."""
    ordered = sorted(texts, key=len, reverse=True)
    return [ordered[i : i + chunk] for i in range(0, len(ordered), chunk)]


MAX_WORKERS = 64
"""The most embedding processes: each loads its own model, so far more than the cores
only multiplies memory and start-up time."""


def prewarm(
    embedder: CachedEmbedder,
    texts: Sequence[str],
    *,
    chunk: int = DEFAULT_CHUNK,
    workers: int = 1,
    plugin: Plugin | None = None,
    progress: bool | None = None,
    on_chunk: Callable[[int], None] | None = None,
) -> Prewarmed:
    """Embed the texts the cache lacks, longest first, one cache transaction per chunk.

    Args:
        embedder: the cached embedder (its cache is the one warmed).
        texts: the texts to have in the cache (duplicates are fine).
        chunk: texts per chunk (per transaction; what an interrupt can lose).
        workers: processes to embed in, at most ``MAX_WORKERS`` (> 1 needs
            ``plugin``, to build the model in each process); no more are started
            than there are chunks to embed.
        plugin: the embedder's config (class and arguments).
        progress: a bar with an ETA on a terminal (None: only on a terminal).
        on_chunk: called with the number of texts after each chunk is stored.

    Raises:
        ConfigError: ``chunk`` < 1, ``workers`` outside 1..``MAX_WORKERS``, or
            workers without ``plugin``.
    """
    if chunk < 1:
        raise ConfigError(f"chunk must be >= 1, got {chunk}")
    if not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"workers must be in 1..{MAX_WORKERS}, got {workers}")
    if workers > 1 and plugin is None:
        raise ConfigError("workers > 1 needs the embedder's config to build one per process")
    started = time.perf_counter()
    distinct = list(dict.fromkeys(texts))
    todo = missing_texts(embedder.cache, embedder.name, embedder.dims, distinct)
    chunks = plan_chunks(todo, chunk)
    workers = max(1, min(workers, len(chunks)))  # an idle process would only load a model
    with bar(
        total=sum(len(t) for t in todo),
        progress=progress,
        desc=f"embed {len(todo):,} texts",
        unit="char",
        unit_scale=True,
        leave=False,
    ) as shown:

        def done(part: Sequence[str]) -> None:
            shown.update(sum(len(t) for t in part))
            if on_chunk is not None:
                on_chunk(len(part))

        if workers == 1:
            for part in chunks:
                embedder.embed(part)
                done(part)
        else:
            assert plugin is not None
            _in_workers(plugin, embedder.cache.path, chunks, workers, done)
    return Prewarmed(
        texts=len(distinct),
        cached=len(distinct) - len(todo),
        embedded=len(todo),
        seconds=time.perf_counter() - started,
        workers=workers,
    )


# -- worker processes -----------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _worker_init(plugin: Plugin, cache_path: str, threads: int) -> None:
    # The parent handles Ctrl-C (it terminates the pool); a worker that saw the
    # signal too would print a traceback mid-chunk.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from memlab.lab.experiment import instantiate
    from memlab.lab.schema import parameters

    extra = {"threads": threads} if "threads" in parameters(plugin.cls) else {}
    _WORKER["embedder"] = CachedEmbedder(instantiate(plugin, **extra), ModelCache(cache_path))


def _worker_embed(texts: list[str]) -> list[str]:
    _WORKER["embedder"].embed(texts)
    return texts


def _in_workers(
    plugin: Plugin,
    cache_path: Path,
    chunks: list[list[str]],
    workers: int,
    done: Callable[[Sequence[str]], None],
) -> None:
    """Chunks over ``workers`` spawned processes, each writing to the cache."""
    import multiprocessing as mp

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    threads = max(1, cores // workers)
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(workers, _worker_init, (plugin, str(cache_path), threads))
    try:
        for part in pool.imap_unordered(_worker_embed, chunks):
            done(part)
        pool.close()
    except BaseException:
        # Ctrl-C or a failed chunk: stop the others now. A chunk in flight never
        # committed its transaction, so the cache holds only whole chunks.
        pool.terminate()
        raise
    finally:
        pool.join()


__all__ = ["DEFAULT_CHUNK", "Prewarmed", "dataset_texts", "missing_texts", "prewarm"]
