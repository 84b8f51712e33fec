"""Pre-warming the embedding cache (memlab.lab.embed, ``memlab embed``): longest
first in chunks, one transaction per chunk, resumable after Ctrl-C, workers."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import default_sigint, memlab, on_a_terminal

from memlab.errors import ConfigError
from memlab.lab.embed import MAX_WORKERS, dataset_texts, plan_chunks, prewarm
from memlab.lab.transcripts import load_dir
from memlab.memory import CachedEmbedder, HashEmbedder, ModelCache
from memlab.memory.models.cache import text_key

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC = ROOT / "transcripts" / "synthetic"


class Interrupting:
    """HashEmbedder that records its batches and raises KeyboardInterrupt (a
    Ctrl-C) on call number ``stop_at``."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.inner = HashEmbedder(32)
        self.stop_at = stop_at
        self.batches: list[list[str]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dims(self) -> int:
        return self.inner.dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        if self.stop_at is not None and len(self.batches) == self.stop_at:
            raise KeyboardInterrupt
        return self.inner.embed(texts)


def _texts() -> list[str]:
    return dataset_texts(load_dir(SYNTHETIC)[:3])


def _stored(cache: ModelCache, name: str, dims: int, texts: Sequence[str]) -> set[str]:
    found = cache.get_embeddings(name, dims, [text_key(t) for t in texts])
    return {t for t in texts if text_key(t) in found}


def test_dataset_texts_are_distinct_turns_in_order() -> None:
    transcripts = load_dir(SYNTHETIC)[:2]
    texts = dataset_texts(transcripts + transcripts)
    turns = [turn.text for t in transcripts for turn in t.turns]
    assert texts == list(dict.fromkeys(turns))


def test_chunks_go_longest_first() -> None:
    chunks = plan_chunks(["bb", "a", "dddd", "ccc", "eeeee"], 2)
    assert chunks == [["eeeee", "dddd"], ["ccc", "bb"], ["a"]]
    assert plan_chunks([], 4) == []


def test_prewarm_embeds_only_what_is_missing(tmp_path: Path) -> None:
    texts = _texts()
    emb = Interrupting()
    cached = CachedEmbedder(emb, ModelCache(tmp_path / "c.sqlite"))
    cached.embed(texts[:10])  # already there
    emb.batches.clear()
    done = prewarm(cached, texts + texts[:5], chunk=16, progress=False)
    assert (done.texts, done.cached, done.embedded) == (len(texts), 10, len(texts) - 10)
    assert sum(len(b) for b in emb.batches) == len(texts) - 10
    assert all(len(b) <= 16 for b in emb.batches)
    lengths = [len(t) for b in emb.batches for t in b]
    assert lengths == sorted(lengths, reverse=True)
    assert _stored(cached.cache, emb.name, emb.dims, texts) == set(texts)
    again = prewarm(cached, texts, chunk=16, progress=False)
    assert (again.cached, again.embedded) == (len(texts), 0)
    with pytest.raises(ConfigError, match="chunk"):
        prewarm(cached, texts, chunk=0)
    with pytest.raises(ConfigError, match="workers > 1 needs"):
        prewarm(cached, texts, workers=2)
    with pytest.raises(ConfigError, match=f"workers must be in 1..{MAX_WORKERS}, got 100000"):
        prewarm(cached, texts, workers=100_000)
    # no process is started for nothing: here every text is cached, no chunk is left
    idle: Any = object()  # a plugin no worker is built from
    assert prewarm(cached, texts, workers=8, plugin=idle, progress=False).workers == 1


def test_memlab_embed_refuses_too_many_workers(capsys: pytest.CaptureFixture[str]) -> None:
    from memlab.cli import main

    assert main(["embed", "--workers", "100000"]) == 2
    err = capsys.readouterr().err
    assert f"--workers must be at most {MAX_WORKERS}" in err and err.count("\n") == 1


def test_an_interrupted_prewarm_keeps_whole_chunks_and_resumes(tmp_path: Path) -> None:
    texts = _texts()
    path = tmp_path / "c.sqlite"
    emb = Interrupting(stop_at=4)
    cached = CachedEmbedder(emb, ModelCache(path))
    with pytest.raises(KeyboardInterrupt):
        prewarm(cached, texts, chunk=20, progress=False)
    kept = _stored(ModelCache(path), emb.name, emb.dims, texts)
    assert kept == {t for b in emb.batches[:3] for t in b}  # 3 whole chunks, not the 4th
    resumed = Interrupting()
    done = prewarm(CachedEmbedder(resumed, ModelCache(path)), texts, chunk=20, progress=False)
    assert done.cached == 60 and done.embedded == len(texts) - 60
    assert not {t for b in resumed.batches for t in b} & kept  # nothing embedded twice
    fresh = ModelCache(path).get_embeddings(emb.name, emb.dims, [text_key(t) for t in texts])
    want = HashEmbedder(32).embed(texts)
    got = np.stack([fresh[text_key(t)] for t in texts])
    assert np.array_equal(got, want)


def _count(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            return int(conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_memlab_embed_resumes_after_ctrl_c(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A real Ctrl-C (SIGINT) in the middle of `memlab embed` with MiniLM: exit
    130, one line, the finished chunks kept; the same command then finishes the
    rest, and a run with the same overrides starts warm (no misses)."""
    pytest.importorskip("onnxruntime", reason="needs the minilm extra")
    exports = Path(request.config.cache.mkdir("memlab-onnx"))
    db = tmp_path / "cache.sqlite"
    args = [
        "transcripts.limit=6",
        "embedder=minilm",
        f"embedder.cache_dir={exports}",
        f"cache.path={db}",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlab.cli", "embed", *args, "--chunk", "16", "--no-progress"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 600
    while _count(db) < 32 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()  # still working: interrupt it
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert (
        len(lines) == 1 and "interrupted" in lines[0] and "run the same command again" in lines[0]
    )
    kept = _count(db)
    total = len(dataset_texts(load_dir(SYNTHETIC)[:6]))
    assert 32 <= kept < total
    done = memlab("embed", *args, "--chunk", "16", "--no-progress", cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr
    assert f"{kept:,} were cached, {total - kept:,} embedded" in done.stdout
    assert _count(db) == total
    run = memlab(
        "run", *args, "strategies=[memory]", "report.charts=false", "progress=false",
        f"hydra.run.dir={tmp_path / 'run'}", cwd=ROOT, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    # Every turn came from the cache; what the run still embeds are texts no
    # dataset holds: summaries the memory strategy writes and rewritten queries.
    import re

    hits, misses = map(int, re.search(r"(\d+) hits, (\d+) misses", run.stdout).groups())  # type: ignore[union-attr]
    assert hits >= total and misses < 0.1 * hits


def test_memlab_embed_with_workers_and_progress(tmp_path: Path) -> None:
    db = tmp_path / "cache.sqlite"
    code, shown = on_a_terminal(
        "embed", "transcripts.limit=2", "embedder=openai", "embedder.base_url=http://127.0.0.1:9",
        f"cache.path={db}", "--workers", "0", cwd=ROOT,
    )  # fmt: skip
    assert code == 2 and "--workers must be >= 1" in shown
    # workers build their own embedder from the config (here: hash, in 2 processes)
    from memlab.cli import embed as embed_command

    assert embed_command(["--help"]) == 0
    code, shown = on_a_terminal(
        "embed", "transcripts.limit=3", "embedder=hash", f"cache.path={db}",
        "--workers", "2", "--chunk", "25", cwd=ROOT,
    )  # fmt: skip
    assert code == 0, shown
    texts = dataset_texts(load_dir(SYNTHETIC)[:3])
    assert f"{len(texts):,} distinct texts" in shown and "2 workers" in shown
    assert "embed " in shown and "char" in shown  # the bar (on a terminal)
    name = HashEmbedder(384).name
    got = ModelCache(db).get_embeddings(name, 384, [text_key(t) for t in texts])
    assert np.array_equal(
        np.stack([got[text_key(t)] for t in texts]), HashEmbedder(384).embed(texts)
    )


@pytest.mark.slow
def test_embedding_pass_then_submitit_sweep_share_one_cache_dir(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """docs/sweeps.md's recipe, locally: `memlab embed` fills the cache folder
    (MEMLAB_CACHE_DIR: exports and vectors), then a sweep on the submitit
    launcher (its local executor: each job a separate process) finds both: no
    job exports the model again, and every turn comes from the cache."""
    import os
    import re
    import shutil

    pytest.importorskip("onnxruntime", reason="needs the minilm extra")
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="needs the cluster extra")
    shared = tmp_path / "shared-cache"
    shutil.copytree(Path(request.config.cache.mkdir("memlab-onnx")) / "onnx", shared / "onnx")
    exports = {p: p.stat().st_mtime_ns for p in (shared / "onnx").rglob("*.onnx")}
    env = {**os.environ, "MEMLAB_CACHE_DIR": str(shared)}
    select = ["transcripts.limit=2", "embedder=minilm", "embedder.threads=1"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memlab.cli", *args], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip

    embedded = cli("embed", *select, "--no-progress")
    assert embedded.returncode == 0, embedded.stderr
    total = len(dataset_texts(load_dir(SYNTHETIC)[:2]))
    assert f"0 were cached, {total:,} embedded" in embedded.stdout
    sweep = tmp_path / "sweep"
    run = cli(
        "run", "-m", *select, "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=15",
        "hydra.launcher.cpus_per_task=1", "budget=40,80", "strategies=[memory]",
        "progress=false", "report.charts=false", f"hydra.sweep.dir={sweep}",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    logs = [p.read_text() for p in (sweep / ".submitit").rglob("*_log.out")]
    stats = [re.search(r"embedding cache: (\d+) hits, (\d+) misses", text) for text in logs]
    assert len(stats) == 2 and all(stats), logs
    for found in stats:
        hits, misses = int(found.group(1)), int(found.group(2))  # type: ignore[union-attr]
        assert hits >= total and misses < 0.1 * hits
    assert {p: p.stat().st_mtime_ns for p in (shared / "onnx").rglob("*.onnx")} == exports
    assert (shared / "embeddings.sqlite").is_file()
