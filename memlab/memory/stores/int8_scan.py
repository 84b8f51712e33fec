"""The int8 scan of a scope's vectors (``ScanPolicy(codes="int8")``), with an error bound.

A scope's rows are cut into sealed blocks (``BLOCK`` rows, merged by fours as the
scope grows, up to ``MAX_BLOCK``). Each block's vectors
are quantized once, per row: ``code = round(x / s)`` with ``s = max|x| / 127``, and
handed to an ONNX Runtime ``MatMulInteger`` session as a constant, which packs them
for its int8 kernels (VNNI / AMX where the CPU has them). A recall quantizes the
query the same way and computes, for every sealed row, an upper bound on its cosine:

    cos(x, q) <= s_x s_q (code_x . code_q) + |x| |r_q| + |r_x| |q~|

where ``q~ = s_q code_q`` is the quantized query, ``r_q = q - q~`` and ``r_x`` the
row's rounding residual (Cauchy-Schwarz on ``x.q - x~.q~ = x.r_q + r_x.q~``), plus
a float32 slack (``SLACK``). Rows past the last sealed block, and sealed rows whose vector
changed after their block was built, get their exact float32 cosine. The ranker
then re-scores rows exactly, best bound first, until its head is exact
(``memlab.memory.rank._exact_head``), so the ranking is the float32 scan's.

The query's codes reach the product as uint8 with a zero point. ONNX Runtime's
int8 kernels for CPUs without VNNI (AVX2 ``vpmaddubsw``) add pairs of uint8 x int8
products in int16 with saturation, so a uint8 above 127 can make a wrong dot
product and a bound that does not hold. A probe (``query_range``) runs the kernel
once per process on the worst case; where it saturates, queries are quantized to
``[-63, 63]`` (zero point 64, uint8 at most 127, pairs at most 32,258) instead of
``[-127, 127]`` (zero point 128): exact on every kernel, with a query rounding
error about twice as large.

Blocks are built when a recall first needs them (a scope that is only written
never pays), and dropped when the index compacts (rows move). Needs the
``int8`` extra (onnxruntime, onnx).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from memlab.errors import MissingExtraError, StoreError, require

# Rows of the smallest sealed block; the unsealed tail, scanned in float32, stays
# below it. Blocks grow by fours up to MAX_BLOCK: each is one ONNX Runtime run, and
# runs cost about 0.3 ms each on top of the product (64k-row blocks scanned 1M x 384
# rows in 19-23 ms, 262k-row blocks in 17 ms, one 1M-row block in 16 ms).
BLOCK = 65536
MAX_BLOCK = 16 * BLOCK
# Added to every bound: float32 rounding of the estimate, of the residual norms and
# of the float32 cosine the bound must not fall below (a sum of 384 products: at
# most 384 x 2^-24 x sum |x_i q_i| <= 2.3e-5 even summed naively). It costs
# nothing measurable next to the rounding-error term (about 0.014).
SLACK = 1e-4
FEATURE = 'the int8 scan (scan="int8")'


def check_int8_extra() -> None:
    """Raise MissingExtraError unless onnxruntime and onnx import."""
    for module in ("onnxruntime", "onnx"):
        require(module, feature=FEATURE, extra="int8")


def quantize(
    rows: np.ndarray, *, columns: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row symmetric int8 codes of float32 ``rows``.

    Args:
        rows: float32 (n, dims).
        columns: return the codes transposed, (dims, n) C-contiguous, as the int8
            product takes them (written a chunk at a time, cheaper than a transpose
            of the whole block after).

    Returns:
        (codes, scale, residual): ``codes`` int8 (n, dims), or (dims, n) with
        ``columns``, with ``rows ~ scale[:, None] * codes``; ``residual`` the L2
        norm of each row's rounding error (an all-zero row gets scale 1 and
        residual 0).
    """
    codes, scale, residual, _ = _quantize(rows, columns)
    return codes, scale, residual


def _quantize(rows: np.ndarray, columns: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``quantize``, and the largest row norm (0.0 for no rows)."""
    x = np.asarray(rows, dtype=np.float32)
    n = len(x)
    peak_norm = 0.0
    codes = np.empty(x.shape[::-1] if columns else x.shape, dtype=np.int8)
    scale = np.empty(n, dtype=np.float32)
    residual = np.empty(n, dtype=np.float32)
    # _CHUNK rows at a time: the temporaries stay in cache (2-3x faster on a block)
    for lo in range(0, n, _CHUNK):
        part = x[lo : lo + _CHUNK]
        peak = np.abs(part).max(axis=1) if x.shape[1] else np.zeros(len(part), np.float32)
        s = np.where(peak > 0, peak / np.float32(127.0), np.float32(1.0)).astype(np.float32)
        c = np.rint(part / s[:, None]).clip(-127, 127)
        if columns:
            codes[:, lo : lo + _CHUNK] = c.T
        else:
            codes[lo : lo + _CHUNK] = c
        scale[lo : lo + _CHUNK] = s
        residual[lo : lo + _CHUNK] = np.linalg.norm(part - s[:, None] * c, axis=1)
        if len(part):
            # per chunk: a norm over a whole block makes a temporary of its size (400
            # MB for 262,144 rows), which took 14 s of a 21 s first recall at 1M
            peak_norm = max(peak_norm, float(np.linalg.norm(part, axis=1).max()))
    return codes, scale, residual, peak_norm


_CHUNK = 2048


def _external(name: str, array: np.ndarray, tp: Any) -> Any:
    """An initializer whose data ONNX Runtime takes from memory at session creation
    (``add_external_initializers``), not from the serialized model."""
    tensor = tp()
    tensor.name = name
    tensor.data_type = {np.dtype(np.int8): tp.INT8, np.dtype(np.float32): tp.FLOAT}[array.dtype]
    tensor.dims.extend(array.shape)
    tensor.data_location = tp.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", f"{name}.bin"  # never read: the data is given
    return tensor


def _session(
    codes_t: np.ndarray,
    scale: np.ndarray,
    residual: np.ndarray,
    threads: int,
    limit: int = 127,
) -> tuple[Any, tuple[Any, ...]]:
    """An ONNX Runtime session computing each row's bound (see the module) in one run.

    Inputs (``_feed``): ``q`` (the query's codes in ``[-limit, limit]`` + ``limit + 1``
    as uint8, zero point ``limit + 1``), ``s_q`` (its
    scale), ``q_norm`` (``|q~|``) and ``margin`` (``max |x| |r_q|`` plus the slack).
    Output: ``s_q scale (codes . code_q) + residual q_norm + margin`` per row, with
    ``codes_t`` (int8, dims x rows, packed by the session for its int8 kernels),
    ``scale`` and ``residual`` constants. The constants are handed over in memory
    rather than serialized into the model: a block's session is built in about a
    sixth of the time, without two extra copies of its codes.

    Returns:
        (session, values): ``values`` hold the constants' memory, which the session
        reads and the caller must keep alive as long as the session.
    """
    ort = require("onnxruntime", feature=FEATURE, extra="int8")
    onnx = require("onnx", feature=FEATURE, extra="int8")
    helper, numpy_helper, tp = onnx.helper, onnx.numpy_helper, onnx.TensorProto
    dims, rows = codes_t.shape
    nodes = [
        helper.make_node("MatMulInteger", ["q", "codes", "zero"], ["dots"]),
        helper.make_node("Cast", ["dots"], ["dots_f"], to=tp.FLOAT),
        helper.make_node("Mul", ["dots_f", "scale"], ["est_row"]),
        helper.make_node("Mul", ["est_row", "s_q"], ["est"]),
        helper.make_node("Mul", ["residual", "q_norm"], ["err_row"]),
        helper.make_node("Add", ["err_row", "margin"], ["err"]),
        helper.make_node("Add", ["est", "err"], ["bound"]),
    ]
    constants = {
        "codes": np.ascontiguousarray(codes_t),
        "scale": np.ascontiguousarray(scale, dtype=np.float32).reshape(1, rows),
        "residual": np.ascontiguousarray(residual, dtype=np.float32).reshape(1, rows),
    }
    scalar = [1]
    graph = helper.make_graph(
        nodes,
        "int8_scan",
        [
            helper.make_tensor_value_info("q", tp.UINT8, [1, dims]),
            helper.make_tensor_value_info("s_q", tp.FLOAT, scalar),
            helper.make_tensor_value_info("q_norm", tp.FLOAT, scalar),
            helper.make_tensor_value_info("margin", tp.FLOAT, scalar),
        ],
        [helper.make_tensor_value_info("bound", tp.FLOAT, [1, rows])],
        initializer=[
            numpy_helper.from_array(np.array(limit + 1, dtype=np.uint8), "zero"),
            *(_external(name, value, tp) for name, value in constants.items()),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # every onnxruntime the extra allows reads it
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    # Spin-waiting threads made a 19 ms scan take 130 ms on the 2-core machine.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    values = [ort.OrtValue.ortvalue_from_numpy(v) for v in constants.values()]
    so.add_external_initializers(list(constants), values)
    session = ort.InferenceSession(
        model.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    return session, (*constants.values(), *values)


def _feed(code_q: np.ndarray, limit: int, s_q: float, q_norm: float) -> dict[str, np.ndarray]:
    """A ``_session``'s inputs for a query's codes in ``[-limit, limit]``; ``margin``
    is zero, set for each block before its run."""
    return {
        "q": (code_q + (limit + 1)).astype(np.uint8).reshape(1, -1),
        "s_q": np.array([s_q], dtype=np.float32),
        "q_norm": np.array([q_norm], dtype=np.float32),
        "margin": np.zeros(1, dtype=np.float32),
    }


def _kernel_exact(limit: int, threads: int) -> bool:
    """Whether the int8 product is exact for query codes in ``[-limit, limit]``: one
    run of a probe block on the cases a saturating kernel gets wrong (every product
    at its largest, of either sign, and random codes)."""
    dims, rows = 384, 64
    codes_t = np.random.default_rng(0).integers(-127, 128, size=(dims, rows), dtype=np.int8)
    codes_t[:, 0], codes_t[:, 1] = 127, -127
    ones = np.ones(rows, dtype=np.float32)
    session, _keep = _session(codes_t, ones, np.zeros(rows, np.float32), threads, limit)
    exact = codes_t.astype(np.int64)
    for fill in (limit, -limit):
        code_q = np.full(dims, fill, dtype=np.int64)
        code_q[::5] = -fill  # mixed signs too
        got = session.run(None, _feed(code_q, limit, 1.0, 0.0))[0][0]
        if not np.array_equal(got, (code_q @ exact).astype(np.float32)):
            return False
    return True


@functools.cache
def query_range(threads: int = 1) -> int:
    """The largest query code this process's int8 kernel multiplies exactly: 127,
    or 63 where it adds uint8 x int8 pairs with int16 saturation (see the module).

    Raises:
        StoreError: the kernel is wrong even for 7-bit queries.
    """
    for limit in (127, 63):
        if _kernel_exact(limit, threads):
            return limit
    raise StoreError(
        "this onnxruntime's int8 product is not exact even for 7-bit queries; "
        "use scan='float32' or another onnxruntime version"
    )


@dataclass
class _Block:
    """Rows ``[lo, hi)`` of the index as one ONNX Runtime session."""

    lo: int
    hi: int
    session: Any
    norm: float  # the block's largest row norm
    keep: tuple[Any, ...] = ()  # the memory the session's constants live in


class Int8Scan:
    """Sealed int8 blocks of one scope's row-major float32 vectors (see the module)."""

    def __init__(self, dims: int, threads: int | None = None) -> None:
        from memlab.memory.models.minilm_onnx import default_threads

        check_int8_extra()
        self.dims = dims
        self.threads = threads or default_threads()
        self.limit = query_range(self.threads)  # query codes in [-limit, limit]
        self.reset()

    def reset(self) -> None:
        """Drop every block (the rows moved); they are built again when needed."""
        self.blocks: list[_Block] = []
        self.changed: set[int] = set()

    @property
    def sealed(self) -> int:
        """Rows covered by sealed blocks (a prefix of the index)."""
        return self.blocks[-1].hi if self.blocks else 0

    def wrote(self, row: int) -> None:
        """Row ``row``'s vector was (re)written: a sealed row's code is now stale."""
        if row < self.sealed:
            self.changed.add(row)

    def _seal(self, emb: np.ndarray, n: int) -> None:
        """Rebuild each block of which a sixteenth of the rows have changed, then
        seal the unsealed rows into blocks of ``BLOCK`` x 4^j rows (the largest
        that fit, never larger than the block before), and merge the last four
        blocks while they have one size below ``MAX_BLOCK``: fewer, larger runs,
        each row packed about once per factor of four the scope grows."""
        if self.changed:
            starts = np.array([b.lo for b in self.blocks])
            which = np.searchsorted(starts, np.fromiter(self.changed, dtype=np.intp), "right") - 1
            for k, count in zip(*np.unique(which, return_counts=True), strict=True):
                b = self.blocks[int(k)]
                if 16 * int(count) >= b.hi - b.lo:
                    self.blocks[int(k)] = self._build(emb, b.lo, b.hi)
                    self.changed.difference_update(range(b.lo, b.hi))
        while n - self.sealed >= BLOCK:
            cap = self.blocks[-1].hi - self.blocks[-1].lo if self.blocks else MAX_BLOCK
            size = BLOCK
            while 4 * size <= min(cap, n - self.sealed):
                size *= 4
            self.blocks.append(self._build(emb, self.sealed, self.sealed + size))
            while len(self.blocks) >= 4:
                last = self.blocks[-4:]
                size = last[0].hi - last[0].lo
                if 4 * size > MAX_BLOCK or any(b.hi - b.lo != size for b in last):
                    break
                self.blocks[-4:] = [self._build(emb, last[0].lo, last[-1].hi)]
                self.changed.difference_update(range(last[0].lo, last[-1].hi))  # fresh codes

    def _build(self, emb: np.ndarray, lo: int, hi: int) -> _Block:
        rows = emb[lo:hi]
        codes_t, scale, residual, norm = _quantize(rows, columns=True)
        try:
            session, keep = _session(codes_t, scale, residual, self.threads, self.limit)
        except MissingExtraError:
            raise
        except Exception as exc:  # an onnxruntime without MatMulInteger, out of memory
            raise StoreError(
                f"the int8 scan could not build a block of {hi - lo} rows "
                f"({type(exc).__name__}: {exc}); use scan='float32' or upgrade onnxruntime"
            ) from exc
        return _Block(lo, hi, session, norm, keep)

    def bounds(self, emb: np.ndarray, n: int, query: np.ndarray) -> np.ndarray:
        """An upper bound on the cosine of each of the first ``n`` rows of ``emb``
        (row-major float32) to ``query``; exact for unsealed and changed rows."""
        self._seal(emb, n)
        q = np.asarray(query, dtype=np.float32)
        sealed = self.sealed
        out = np.empty(n, dtype=np.float32)
        if sealed:
            peak = float(np.abs(q).max()) if q.size else 0.0
            s_q = np.float32(peak / self.limit if peak > 0 else 1.0)
            code_q = np.rint(q / s_q).clip(-self.limit, self.limit).astype(np.float32)
            q_tilde = s_q * code_q
            r_q = float(np.linalg.norm(q - q_tilde))
            feed = _feed(code_q, self.limit, float(s_q), float(np.linalg.norm(q_tilde)))
            for b in self.blocks:
                feed["margin"][0] = b.norm * r_q + SLACK
                out[b.lo : b.hi] = b.session.run(None, feed)[0][0]
            if self.changed:
                rows = np.fromiter(self.changed, dtype=np.intp, count=len(self.changed))
                out[rows] = emb[rows] @ q
        if sealed < n:
            out[sealed:] = emb[sealed:n] @ q
        return out
