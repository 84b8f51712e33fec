"""HashEmbedder and embedder output checks."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from memlab.errors import EmbedderError, InputError
from memlab.memory import Embedder, HashEmbedder
from memlab.memory.models.embedder import check_embeddings


def test_shape_dtype_and_unit_norm() -> None:
    e = HashEmbedder(384)
    assert isinstance(e, Embedder)
    out = e.embed(["We deploy on GKE in europe-west1.", "thanks!", ""])
    assert out.shape == (3, 384) and out.dtype == np.float32
    assert np.linalg.norm(out[0]) == pytest.approx(1.0, abs=1e-5)
    assert np.linalg.norm(out[2]) == 0.0  # nothing to hash
    assert e.name == "hash-v1-384"


def test_deterministic_across_processes() -> None:
    text = "Always page me on PagerDuty, never email."
    here = HashEmbedder().embed([text])[0]
    code = (
        "import sys, numpy as np; from memlab.memory import HashEmbedder;"
        f"sys.stdout.write(HashEmbedder().embed([{text!r}])[0].tobytes().hex())"
    )
    env_seed = {"PYTHONHASHSEED": "12345"}
    import os

    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env_seed},
    ).stdout
    assert bytes.fromhex(out) == here.tobytes()


def test_overlap_means_similarity() -> None:
    e = HashEmbedder()
    a, b, c = e.embed(
        [
            "we deploy on kubernetes in europe",
            "our deploys run on kubernetes",
            "I like flat white coffee",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.2


def test_bad_input() -> None:
    with pytest.raises(InputError):
        HashEmbedder(2)
    with pytest.raises(InputError):
        HashEmbedder().embed("a string, not a list")  # type: ignore[arg-type]


def test_check_embeddings() -> None:
    good = np.zeros((2, 4), dtype=np.float64)
    assert check_embeddings(good, 2, 4, "x").dtype == np.float32
    with pytest.raises(EmbedderError, match="1 vectors for 2 texts"):
        check_embeddings(np.zeros((1, 4)), 2, 4, "x")
    with pytest.raises(EmbedderError, match="5 dimensions, expected 4"):
        check_embeddings(np.zeros((2, 5)), 2, 4, "x")
    with pytest.raises(EmbedderError, match="NaN"):
        check_embeddings(np.full((2, 4), np.nan), 2, 4, "x")
