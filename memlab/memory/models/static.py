"""A static embedder distilled from the shipped MiniLM, for fast weight sweeps.

Distillation (model2vec's recipe: Tulkens & van Dongen, 2024), done locally
once per weights fingerprint and cached next to the ONNX export:

1. every WordPiece token ``t`` of MiniLM's vocabulary is embedded by the MiniLM
   ONNX graph as the text ``[CLS] t [SEP]`` (mean-pooled, as MiniLM embeds any text);
2. PCA to ``dims`` components (centred, numpy SVD);
3. SIF weighting by an estimated token frequency: Zipf's law over the token's
   id rank, weight ``1e-4 / (1e-4 + p(rank))`` (model2vec's defaults; nothing tuned).

At run time a text's vector is the mean of its tokens' rows, L2-normalized:
tokenizers + numpy only, about 100x MiniLM's speed, with retrieval quality
between the hash embedder and MiniLM (see docs/embedders.md).

model2vec's own ``distill`` also works offline, but its ``distill`` extra pins
``transformers<5.4``, which cannot share an environment with
sentence-transformers 6; this recipe needs no torch at all once the ONNX graph
exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import ConfigError, EmbedderError
from memlab.memory.models.embedder import EMBEDDERS, check_texts, l2_normalize

STATIC_VERSION = 1
SIF = 1e-4


def distill(session: Any, vocab_size: int, dims: int, batch: int = 512) -> np.ndarray:
    """The ``vocab_size x dims`` float32 table (see the module docstring).

    Args:
        session: an ONNX Runtime session of MiniLM's fp32 graph.
        vocab_size: tokens to embed (ids 0 .. vocab_size - 1).
        dims: PCA components kept.
        batch: tokens per forward pass.
    """
    rows: list[np.ndarray] = []
    for start in range(0, vocab_size, batch):
        ids = np.arange(start, min(start + batch, vocab_size), dtype=np.int64)
        inp = np.stack([np.full_like(ids, 101), ids, np.full_like(ids, 102)], axis=1)
        rows.append(session.run(None, {"input_ids": inp, "attention_mask": np.ones_like(inp)})[0])
    table = np.concatenate(rows).astype(np.float64)
    centred = table - table.mean(0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    reduced = centred @ vt[:dims].T
    inv_rank = 1.0 / np.arange(2, vocab_size + 2)
    weights = SIF / (SIF + inv_rank / inv_rank.sum())
    return (reduced * weights[:, None]).astype(np.float32)


@EMBEDDERS.register("static")
class StaticEmbedder:
    """Mean of distilled MiniLM token vectors: ~100x faster than MiniLM, better
    than the hash embedder at matching meaning, for sweeps over many settings.

    The table is distilled on first use (through the ONNX export of the weights,
    itself made on first use) into ``<cache_dir>/onnx/<fingerprint>/``; later runs
    load it in well under a second. Needs the ``minilm`` extra.

    Args:
        model_path: a local sentence-transformers folder (None: the bundled MiniLM).
        dims: table width (PCA components), at most the model's 384.
        threads: ONNX Runtime threads for the distillation (None: the CPUs this
            process may use, at most 4).
        cache_dir: the folder under which exports are kept (None:
            ``default_cache_dir()``).

    Raises:
        MissingExtraError: the ``minilm`` extra is missing.
        ConfigError: a bad setting or model folder.
        EmbedderError: the cached table is damaged, or distillation failed.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        dims: int = 256,
        threads: int | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        from memlab.memory.models.cache import default_cache_dir
        from memlab.memory.models.minilm import (
            MiniLMEmbedder,
            check_threads,
            model_fingerprint,
            model_folder,
        )
        from memlab.memory.models.minilm_onnx import (
            build_cached,
            check_head,
            load_tokenizer,
            onnx_dir,
        )

        feature = "StaticEmbedder"
        if isinstance(dims, bool) or not isinstance(dims, int) or not 8 <= dims <= 384:
            raise ConfigError(f"{feature}: dims must be an integer in [8, 384], got {dims!r}")
        # Checked here, not only by the teacher: once the table is cached no teacher is made.
        check_threads(threads, feature)
        folder, label = model_folder(model_path, feature)
        check_head(folder, feature)
        base = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        fp = model_fingerprint(folder)
        self.tokenizer = load_tokenizer(folder, 100_000)  # a bag of tokens: no truncation
        dst = onnx_dir(fp, base) / f"static{dims}.s{STATIC_VERSION}.npy"
        # The teacher's fp32 export is published under the same folder's lock as the
        # table, and that lock is not reentrant: export it before taking it here.
        teacher = None if dst.is_file() else MiniLMEmbedder(folder, threads=threads, cache_dir=base)

        def make(tmp: Path) -> None:
            nonlocal teacher
            if teacher is None:  # the table was deleted since the check above
                teacher = MiniLMEmbedder(folder, threads=threads, cache_dir=base)
            table = distill(teacher._onnx.session, self.tokenizer.get_vocab_size(), dims)
            with tmp.open("wb") as fh:
                np.save(fh, table)

        path = build_cached(dst, make, {"dims": dims, "fingerprint": fp, "sif": SIF})
        try:
            self.table = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise EmbedderError(f"{feature}: cannot read {path}: {exc}; delete it") from exc
        if self.table.ndim != 2 or self.table.shape[1] != dims:
            raise EmbedderError(f"{feature}: {path} holds a table of shape {self.table.shape}")
        self.model_path = folder
        self._dims = dims
        self._name = f"static-v{STATIC_VERSION}-{label}-{fp[:12]}-{dims}"

    @property
    def name(self) -> str:
        """``static-v1-<model>-<weights fingerprint>-<dims>``."""
        return self._name

    @property
    def dims(self) -> int:
        return self._dims

    def __repr__(self) -> str:
        return f"StaticEmbedder(name={self._name!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Mean of the texts' token rows, L2-normalized (no tokens: a zero row).

        Returns:
            ``(len(texts), dims)`` float32.
        """
        items = check_texts(texts, "StaticEmbedder")
        out = np.zeros((len(items), self._dims), dtype=np.float32)
        if not items:
            return out
        encoded = self.tokenizer.encode_batch(items, add_special_tokens=False)
        ids = [np.asarray(e.ids, dtype=np.int64) for e in encoded]
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        nonempty = lengths > 0
        if not nonempty.any():
            return out
        rows = self.table[np.concatenate(ids)]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[nonempty]
        out[nonempty] = np.add.reduceat(rows, starts, axis=0)
        return l2_normalize(out)


__all__ = ["StaticEmbedder", "distill"]
