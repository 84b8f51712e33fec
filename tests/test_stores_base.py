"""memlab.memory.stores.base helpers: dot_rows, the matrix-vector product every
ranking and detection pass runs over a scope's embeddings."""

from __future__ import annotations

import os
import signal
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.memory.stores import base
from memlab.memory.stores.base import SPARSE_SHARE, dot_rows


def column_major(rows: np.ndarray, slack: int = 7) -> np.ndarray:
    """An (n, dims) view of a (dims, n + slack) array, as ScopeIndex keeps vectors."""
    n, dims = rows.shape
    store = np.zeros((dims, n + slack), dtype=np.float32)
    store[:, :n] = rows.T
    return store[:, :n].T


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(0, 3000),
    dims=st.sampled_from([8, 64, 384]),
    share=st.floats(0.0, 1.0),
    layout=st.sampled_from(["rows", "columns"]),
    seed=st.integers(0, 2**16),
)
def test_dot_rows_equals_the_product_in_every_layout_and_density(
    n: int, dims: int, share: float, layout: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, dims)).astype(np.float32)
    vector = np.zeros(dims, dtype=np.float32)
    nz = rng.choice(dims, round(share * dims), replace=False)
    vector[nz] = rng.standard_normal(len(nz))
    matrix = rows if layout == "rows" else column_major(rows)
    got = dot_rows(matrix, vector)
    want = rows.astype(np.float64) @ vector.astype(np.float64)
    assert got.dtype == np.float32 and got.shape == (n,)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_sparse_query_reads_only_its_nonzero_dimensions() -> None:
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((5000, 384)).astype(np.float32)
    vector = np.zeros(384, dtype=np.float32)
    vector[[3, 90, 200]] = [0.5, -1.0, 2.0]
    poisoned = column_major(rows)
    poisoned.T[7, :] = np.nan  # a dimension the query does not use
    got = dot_rows(poisoned, vector)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, rows[:, [3, 90, 200]] @ vector[[3, 90, 200]], rtol=1e-5)
    # a dense query, or a row-major matrix, takes the full product (NaN spreads)
    assert np.isnan(dot_rows(rows_with_nan(rows), vector)).all()
    dense = rng.standard_normal(384).astype(np.float32)
    assert np.count_nonzero(dense) > 384 // SPARSE_SHARE
    assert np.isnan(dot_rows(poisoned, dense)).all()


def rows_with_nan(rows: np.ndarray) -> np.ndarray:
    out = rows.copy()
    out[:, 7] = np.nan
    return out


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_dot_rows_writes_into_out_and_handles_a_zero_query(layout: str) -> None:
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((40, 16)).astype(np.float32)
    matrix = rows if layout == "rows" else column_major(rows)
    out = np.full(40, 9.0, dtype=np.float32)
    assert dot_rows(matrix, np.zeros(16, dtype=np.float32), out) is out
    assert not out.any()
    q = rng.standard_normal(16).astype(np.float32)
    assert dot_rows(matrix, q, out) is out
    np.testing.assert_allclose(out, rows @ q, rtol=1e-5, atol=1e-5)
    empty = np.zeros((0, 16), dtype=np.float32)
    assert dot_rows(empty, q).shape == (0,)


@pytest.mark.parametrize("n", [base.PARALLEL_ROWS, 100_003])
def test_a_large_sparse_product_split_across_threads_equals_one_threads(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every row is computed by one block's product over the same values, so the
    # split changes no bit; the last share may be shorter than the others
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((n, 64)).astype(np.float32)
    matrix = column_major(rows)
    dims = rng.choice(64, 12, replace=False)
    vector = np.zeros(64, dtype=np.float32)
    vector[dims] = rng.standard_normal(12)
    parts: list[tuple[int, int]] = []
    real = base._sparse_part

    def spy(*args: Any) -> None:
        parts.append((args[4], args[5]))
        real(*args)

    monkeypatch.setattr(base, "_sparse_part", spy)
    monkeypatch.setattr(base, "_WORKERS", 3)
    split = dot_rows(matrix, vector)
    assert len(parts) > 1 and sorted(parts)[-1][1] == n  # shares that cover every row
    assert all(a == b for (_, a), (b, _) in zip(sorted(parts), sorted(parts)[1:], strict=False))
    monkeypatch.setattr(base, "_WORKERS", 1)
    single = dot_rows(matrix, vector)
    assert np.array_equal(split, single)
    np.testing.assert_allclose(single, rows[:, dims] @ vector[dims], rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_splits_large_products_on_threads_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the parent's pool threads are not in the child: without a fresh pool the
    # child's product would wait forever on work nobody runs
    monkeypatch.setattr(base, "_WORKERS", 2)
    rng = np.random.default_rng(4)
    rows = rng.standard_normal((300_000, 16)).astype(np.float32)
    matrix = column_major(rows)
    vector = np.zeros(16, dtype=np.float32)
    vector[[2, 9]] = [1.0, -0.5]
    want = dot_rows(matrix, vector)  # the parent's pool now exists, and was used
    assert base._POOL is not None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the product finishes and agrees
        signal.alarm(20)
        ok = np.array_equal(dot_rows(matrix, vector), want)
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1" and os.waitstatus_to_exitcode(status) == 0


def test_the_thread_count_honours_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert base._workers() == 1
    for unset in ("", "0", "two"):
        monkeypatch.setenv("OMP_NUM_THREADS", unset)
        assert 1 <= base._workers() <= 4


@pytest.mark.parametrize(
    ("now", "half_life", "match"),
    [
        (float("nan"), None, "now"),
        ("soon", None, "now"),
        (None, [72.0], "half_life must map kind names to hours"),
        (None, {"semantic": 0.0}, r"half_life\['semantic'\]"),
        (None, {"episodic": float("inf")}, r"half_life\['episodic'\]"),
    ],
)
def test_candidates_recency_hint_is_checked(now: Any, half_life: Any, match: str) -> None:
    from memlab.errors import InputError

    with pytest.raises(InputError, match=match):
        base.check_candidates_args(None, None, False, None, None, None, now, half_life)
    base.check_candidates_args(None, None, False, None, None, None, 1.0, {"semantic": 2160.0})
