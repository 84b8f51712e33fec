"""The ONNX Runtime backend of ``MiniLMEmbedder``: export, cache and run.

- **Export**, once per weights fingerprint, on first use: the local
  sentence-transformers folder's BERT + mean pooling + L2 normalization is traced
  into one ONNX graph (TorchScript exporter, opset 17, dynamic batch and sequence
  axes) and fused by ONNX Runtime's transformer optimizer (EmbedLayerNorm,
  Attention, SkipLayerNorm, BiasGelu: 64 nodes instead of ~500). It reads only
  the local folder and contacts no network; it needs torch, transformers and onnx
  (the ``minilm`` extra). ``int8`` is ONNX Runtime's dynamic quantization of the
  fused fp32 graph (per-channel int8 weights of MatMul and Attention; the first
  three layers' FFN output projections stay fp32).
- **Cache**: ``<cache_dir>/onnx/<fingerprint[:16]>/<variant>.e<EXPORT_VERSION>.onnx``
  with a ``.json`` sidecar (sha256, size, tool versions, export time). Written to a
  temporary file in the same folder and renamed under a file lock, so concurrent
  processes (sweep jobs, cluster jobs on a shared disk) neither tear the file nor
  export twice. A graph whose checksum does not match its sidecar is reported,
  never silently replaced.
- **Run time** needs only onnxruntime, tokenizers and numpy: the folder's fast
  tokenizer (truncation at ``max_seq_length``, no padding, as
  sentence-transformers sets it), texts sorted by token count and cut into
  batches of at most ``batch_size`` texts and ``max_tokens`` padded tokens, each
  padded to its own longest text (padding-aware batching).

fp32 gives sentence-transformers' vectors (cosine >= 0.9999 on the parity
sample); int8 (recipe ``int8r2``) is 1.8x faster than fp32 on a 2-core EPYC and
close (mean cosine 0.995, worst text 0.978 on the parity sample), and runs each
text in a pass of its own, so a text's vector never depends on the other texts
embedded with it (the activation scale is per pass).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import ConfigError, EmbedderError, MemlabError, require

EXPORT_VERSION = 1  # bump when the graph or its post-processing changes
OPSET = 17
VARIANTS = ("fp32", "int8")
#: The tag of each variant's recipe, in its file and embedder names: a new int8
#: recipe gives other vectors, so caches of the old one are never read for it.
#: ``int8r2``: the FFN output projections of the first ``INT8_FP32_LAYERS`` layers
#: stay fp32, and every text runs in a pass of its own.
RECIPES = {"fp32": "fp32", "int8": "int8r2"}
#: int8r2 keeps these first layers' FFN output projection in fp32: their inputs
#: (GELU outputs) hold the largest outliers (max/median of the channel maxima
#: 7-13 against 2-5 for the attention inputs), and a per-tensor activation scale
#: spends most of its 8 bits on them. Chosen on LongMemEval_S dev6 texts: with
#: none, two, three and all six layers kept, the worst per-text cosine to
#: PyTorch there was 0.974, 0.983, 0.985 and 0.989, at 1.00, 0.89-0.91, 0.87-0.89
#: and 0.72-0.78 of full int8's speed; three is the fewest that reached 0.985.
INT8_FP32_LAYERS = 3
_FFN_OUT = re.compile(r"/layer\.(\d+)/output/dense/MatMul$")
_EXPECTED_MODULES = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]


def onnx_dir(fingerprint: str, cache_dir: Path) -> Path:
    """The folder holding the exports of one set of weights."""
    return cache_dir / "onnx" / fingerprint[:16]


def onnx_path(fingerprint: str, variant: str, cache_dir: Path) -> Path:
    """Where ``variant``'s graph of the weights with ``fingerprint`` lives."""
    return (
        onnx_dir(fingerprint, cache_dir) / f"{RECIPES.get(variant, variant)}.e{EXPORT_VERSION}.onnx"
    )


def check_head(folder: Path, feature: str) -> None:
    """The graph hard-codes mean pooling + Normalize: refuse any other head.

    Raises:
        ConfigError: the folder's modules or pooling are not those.
    """
    try:
        types = [m.get("type", "") for m in json.loads((folder / "modules.json").read_text())]
        pooling = folder / "1_Pooling" / "config.json"
        cfg = json.loads(pooling.read_text()) if pooling.is_file() else {}
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"{feature}: cannot read the model description in {folder}: {exc}"
        ) from None
    modes = sorted(k for k, v in cfg.items() if k.startswith("pooling_mode") and v)
    if types != _EXPECTED_MODULES or modes != ["pooling_mode_mean_tokens"]:
        raise ConfigError(
            f"{feature}: the onnx backend exports Transformer + mean Pooling + Normalize only; "
            f"the model in {folder} has modules {types} and pooling {modes}; "
            "use backend=torch for it"
        )


def read_max_seq_length(folder: Path) -> int:
    """``max_seq_length`` of ``sentence_bert_config.json`` (512 when absent)."""
    cfg = folder / "sentence_bert_config.json"
    with contextlib.suppress(OSError, ValueError):
        value = json.loads(cfg.read_text()).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            return value
    return 512


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No warnings, log lines or progress bars from torch/transformers/onnx while
    exporting (a run's output has its own progress)."""
    prev = logging.root.manager.disable
    bar = None
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as tf_logging

        bar = tf_logging.is_progress_bar_enabled()
        tf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(prev)
            if bar:
                tf_logging.enable_progress_bar()


def _export_fp32(folder: Path, dst: Path) -> None:
    """Trace BERT + mean pooling + L2 normalization, then fuse for ORT's CPU kernels."""
    torch = require("torch", feature="exporting MiniLM to ONNX", extra="minilm")
    transformers = require("transformers", feature="exporting MiniLM to ONNX", extra="minilm")
    require("onnx", feature="exporting MiniLM to ONNX", extra="minilm")
    from onnxruntime.transformers.optimizer import optimize_model

    with _quiet():
        config = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)
        # Eager attention lets transformers build the 2-D mask ORT's fusion recognizes.
        bert = transformers.AutoModel.from_pretrained(
            str(folder), local_files_only=True, attn_implementation="eager"
        ).eval()

    module: Any = torch.nn.Module

    class MeanPooled(module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            # token_type_ids are all 0 for one text: fold them into the graph.
            tokens = self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            summed = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(summed, p=2.0, dim=1)

    # 2 x 5 with one padded row, so the mask path is traced.
    ids = torch.tensor([[101, 7592, 2088, 102, 0], [101, 2204, 2088, 2003, 102]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    raw = dst.with_name(dst.name + ".raw")
    try:
        with torch.no_grad(), _quiet():
            torch.onnx.export(
                MeanPooled(bert),
                (ids, mask),
                str(raw),
                dynamo=False,
                opset_version=OPSET,
                input_names=["input_ids", "attention_mask"],
                output_names=["sentence_embedding"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "sequence"},
                    "attention_mask": {0: "batch", 1: "sequence"},
                    "sentence_embedding": {0: "batch"},
                },
                do_constant_folding=True,
            )
            fused = optimize_model(
                str(raw),
                model_type="bert",
                num_heads=config.num_attention_heads,
                hidden_size=config.hidden_size,
                opt_level=0,  # fusions only; ORT applies its own level at load time
            )
            fused.save_model_to_file(str(dst))
    finally:
        raw.unlink(missing_ok=True)


def int8_excluded(node_names: Sequence[str]) -> list[str]:
    """The nodes int8r2 keeps in fp32: the FFN output projections
    (``.../layer.N/output/dense/MatMul``) of layers ``N < INT8_FP32_LAYERS``."""
    out = []
    for name in node_names:
        m = _FFN_OUT.search(name)
        if m is not None and "attention" not in name and int(m.group(1)) < INT8_FP32_LAYERS:
            out.append(name)
    return out


def _export_int8(fp32: Path, dst: Path) -> None:
    """Dynamic int8 quantization of the fused fp32 graph: per-channel weights of
    MatMul and Attention, except the first layers' FFN output projections
    (``int8_excluded``), which stay fp32."""
    onnx = require("onnx", feature="quantizing MiniLM to int8", extra="minilm")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    names = [n.name for n in onnx.load(str(fp32), load_external_data=False).graph.node]
    with _quiet():
        quantize_dynamic(
            str(fp32),
            str(dst),
            op_types_to_quantize=["MatMul", "Attention"],
            nodes_to_exclude=int8_excluded(names),
            per_channel=True,
            weight_type=QuantType.QInt8,
            # ONNX shape inference does not type the fused contrib ops' outputs.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder/.lock`` (filelock: POSIX and Windows)."""
    from filelock import FileLock

    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".lock")):
        yield


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _tool_versions() -> dict[str, str]:
    out = {}
    for mod in ("torch", "transformers", "onnx", "onnxruntime"):
        with contextlib.suppress(Exception):
            out[mod] = str(__import__(mod).__version__)
    return out


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def publish(tmp: Path, dst: Path, meta: dict[str, Any]) -> None:
    """Write ``dst``'s sidecar, then move ``tmp`` to ``dst`` (both atomically).

    mkstemp makes 0600 files; a cache shared by several users or cluster jobs
    needs the usual umask mode.
    """
    meta = {**meta, "sha256": _sha256(tmp), "bytes": tmp.stat().st_size}
    side = dst.with_suffix(".json")
    fd, side_tmp = tempfile.mkstemp(dir=dst.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as fh:
        json.dump(meta, fh, indent=1)
    os.chmod(side_tmp, _umask_mode())
    os.chmod(tmp, _umask_mode())
    os.replace(side_tmp, side)
    os.replace(tmp, dst)


_VERIFIED: set[tuple[str, int, int]] = set()


def verify(path: Path) -> None:
    """Check a cached file against its sidecar's sha256 (once per file state).

    Raises:
        EmbedderError: the file does not match (a partial copy, a disk error).
    """
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key in _VERIFIED:
        return
    side = path.with_suffix(".json")
    try:
        meta = json.loads(side.read_text())
        ok = meta["bytes"] == st.st_size and meta["sha256"] == _sha256(path)
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise EmbedderError(
            f"the cached model file {path} does not match its checksum in {side.name} "
            f"(a partial copy or a disk error); delete the folder {path.parent} and it is "
            "made again on next use"
        )
    _VERIFIED.add(key)


def build_cached(dst: Path, make: Any, meta: dict[str, Any]) -> Path:
    """``dst`` if it exists (checked against its sidecar), else made by
    ``make(tmp_path)`` under the folder's lock and published atomically."""
    if dst.is_file():
        verify(dst)
        return dst
    with _locked(dst.parent):
        if dst.is_file():  # another process made it while we waited
            verify(dst)
            return dst
        fd, name = tempfile.mkstemp(dir=dst.parent, prefix=".tmp-", suffix=dst.suffix)
        os.close(fd)
        tmp = Path(name)
        t0 = time.perf_counter()
        try:
            make(tmp)
            publish(tmp, dst, {**meta, "seconds": round(time.perf_counter() - t0, 2)})
        finally:
            tmp.unlink(missing_ok=True)
            for stray in dst.parent.glob(tmp.name + "*"):
                stray.unlink(missing_ok=True)
    return dst


def ensure_exported(folder: Path, fingerprint: str, variant: str, cache_dir: Path) -> Path:
    """The path of ``variant``'s graph for the weights in ``folder``, exported
    (fp32 first, for int8) if it is not cached yet.

    Raises:
        ConfigError: an unknown variant.
        MissingExtraError: the export needs torch, transformers or onnx.
        EmbedderError: a cached file is corrupt, or the export failed.
    """
    if variant not in VARIANTS:
        raise ConfigError(
            f"MiniLMEmbedder: variant must be one of {list(VARIANTS)}, got {variant!r}"
        )
    dst = onnx_path(fingerprint, variant, cache_dir)
    if dst.is_file():
        verify(dst)
        return dst
    src = ensure_exported(folder, fingerprint, "fp32", cache_dir) if variant == "int8" else None
    meta = {
        "variant": variant,
        "recipe": RECIPES[variant],
        "fingerprint": fingerprint,
        "export_version": EXPORT_VERSION,
        "opset": OPSET,
        "source": str(folder),
        "tools": _tool_versions(),
    }

    def make(tmp: Path) -> None:
        try:
            if src is None:
                _export_fp32(folder, tmp)
            else:
                _export_int8(src, tmp)
        except MemlabError:
            raise
        except Exception as exc:  # torch/onnx raise many kinds
            raise EmbedderError(
                f"MiniLMEmbedder: exporting {folder} to ONNX ({variant}) failed: "
                f"{type(exc).__name__}: {exc}; use backend=torch meanwhile"
            ) from exc

    return build_cached(dst, make, meta)


# -- run time ----------------------------------------------------------------------
def default_threads() -> int:
    """CPUs this process may use (affinity-aware), at most 4: a small BERT gains
    little from more intra-op threads, and a shared machine loses a lot to
    oversubscription."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 4))


def make_session(path: Path, threads: int | None) -> Any:
    """An ONNX Runtime CPU session: ``threads`` intra-op threads (None:
    ``default_threads()``), no spin-waiting (polite on a shared machine; it bought
    nothing measurable), sequential execution (the graph is one chain)."""
    ort = require("onnxruntime", feature="MiniLMEmbedder(backend=onnx)", extra="minilm")
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads or default_threads()
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise EmbedderError(
            f"MiniLMEmbedder: ONNX Runtime cannot load {path}: {type(exc).__name__}: {exc}; "
            f"delete the folder {path.parent} to export it again"
        ) from exc


def load_tokenizer(folder: Path, max_seq_length: int) -> Any:
    """The folder's fast tokenizer as sentence-transformers uses it: truncation at
    ``max_seq_length`` tokens, no padding (MiniLM's tokenizer.json itself says
    truncation 128 and fixed padding to 128; sentence-transformers overrides both)."""
    tokenizers = require("tokenizers", feature="MiniLMEmbedder(backend=onnx)", extra="minilm")
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise ConfigError(
            f"MiniLMEmbedder: {folder} has no tokenizer.json (a fast tokenizer); "
            "the onnx backend needs one, use backend=torch for this model"
        )
    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.enable_truncation(max_length=max_seq_length)
    tok.no_padding()
    return tok


def plan_batches(lengths: np.ndarray, batch_size: int, max_tokens: int | None) -> list[np.ndarray]:
    """Index groups to run together: sorted by token count (longest first, so a
    memory problem shows at once), at most ``batch_size`` texts and at most
    ``max_tokens`` padded tokens per group (None: no token cap)."""
    n = len(lengths)
    order = np.argsort(-lengths, kind="stable")
    out: list[np.ndarray] = []
    i = 0
    while i < n:
        take = batch_size
        if max_tokens:
            take = max(1, min(batch_size, max_tokens // max(int(lengths[order[i]]), 1)))
        out.append(order[i : i + take])
        i += take
    return out


class OnnxMiniLM:
    """Run an exported graph on texts (``MiniLMEmbedder``'s onnx backend).

    Args:
        folder: the sentence-transformers folder (tokenizer, weights).
        fingerprint: the weights' fingerprint (keys the export).
        variant: ``fp32`` or ``int8`` (which runs one text per pass, whatever
            ``batch_size`` says, ``threads`` passes at a time: see ``RECIPES``).
        batch_size: texts per forward pass, at most.
        max_tokens: padded tokens per forward pass, at most (None: no cap).
        threads: ONNX Runtime intra-op threads (None: ``default_threads()``).
        max_seq_length: truncation (None: the folder's ``sentence_bert_config.json``).
        cache_dir: the memlab cache folder the exports live in.
    """

    def __init__(
        self,
        folder: Path,
        fingerprint: str,
        variant: str,
        *,
        batch_size: int,
        max_tokens: int | None,
        threads: int | None,
        max_seq_length: int | None,
        cache_dir: Path,
    ) -> None:
        feature = "MiniLMEmbedder(backend=onnx)"
        require("onnxruntime", feature=feature, extra="minilm")
        check_head(folder, "MiniLMEmbedder")
        # int8's activation scale is computed per pass, over every token in it: in a
        # batch a text's vector would depend on its neighbours, and a cache keyed
        # by text would hold whichever it got first. So int8 runs one text per
        # pass, the passes side by side on ``workers`` threads of one session with
        # one ONNX Runtime thread each: on 2 cores, 30-token chat lines ran 749
        # texts/s that way against 469 one after another on two ORT threads (and
        # 481 for fp32 in batches of 32).
        self.batch_size = 1 if variant == "int8" else batch_size
        self.workers = (threads or default_threads()) if variant == "int8" else 1
        self.max_tokens = max_tokens
        self.max_seq_length = max_seq_length or read_max_seq_length(folder)
        self.tokenizer = load_tokenizer(folder, self.max_seq_length)
        self.path = ensure_exported(folder, fingerprint, variant, cache_dir)
        self.session = make_session(self.path, 1 if variant == "int8" else threads)
        shape = self.session.get_outputs()[0].shape
        self.dims = int(shape[1]) if len(shape) == 2 and isinstance(shape[1], int) else 0
        if self.dims < 1:
            raise EmbedderError(f"{feature}: the graph {self.path} has no fixed output size")

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=True)]

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        if not texts:
            return out
        ids = self.token_ids(texts)
        if self.batch_size == 1:
            return self._embed_one_by_one(ids, out)
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        for group in plan_batches(lengths, self.batch_size, self.max_tokens):
            width = int(lengths[group].max())
            batch = np.zeros((len(group), width), dtype=np.int64)
            for row, idx in enumerate(group):
                batch[row, : lengths[idx]] = ids[idx]
            mask = (np.arange(width)[None, :] < lengths[group][:, None]).astype(np.int64)
            out[group] = self.session.run(None, {"input_ids": batch, "attention_mask": mask})[0]
        return out

    def _embed_one_by_one(self, ids: list[list[int]], out: np.ndarray) -> np.ndarray:
        """Each text in a pass of its own (no padding), on ``workers`` threads (ONNX
        Runtime releases the GIL while it runs; the pool lives for one call, so a
        forked worker process never inherits one)."""

        def one(i: int) -> None:
            x = np.asarray([ids[i]], dtype=np.int64)
            feed = {"input_ids": x, "attention_mask": np.ones_like(x)}
            out[i] = self.session.run(None, feed)[0][0]

        if self.workers == 1 or len(ids) == 1:
            for i in range(len(ids)):
                one(i)
            return out
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(self.workers, len(ids))) as pool:
            for _ in pool.map(one, range(len(ids))):
                pass  # re-raises the first failure
        return out


__all__ = [
    "EXPORT_VERSION",
    "INT8_FP32_LAYERS",
    "RECIPES",
    "VARIANTS",
    "OnnxMiniLM",
    "default_threads",
    "ensure_exported",
    "int8_excluded",
    "onnx_path",
    "plan_batches",
]
