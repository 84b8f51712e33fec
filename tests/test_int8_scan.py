"""The int8 scan (memlab.memory.stores.int8_scan): its bound, and stores that use it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import memlab.memory.stores.int8_scan as int8_scan
from memlab.errors import MissingExtraError, StoreError
from memlab.memory.rank import RankWeights
from memlab.memory.stores.indexed import ScanPolicy, ScopeIndex
from memlab.memory.stores.int8_scan import Int8Scan, quantize
from tests.conftest import make_record
from tests.test_indexed import clustered, scan_pair, top_ids

pytest.importorskip("onnxruntime", reason="the int8 extra (onnxruntime) is not installed")
pytest.importorskip("onnx", reason="the int8 extra (onnx) is not installed")

DIMS = 96


@pytest.fixture(params=["detected", 63])
def small_blocks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Blocks of 64 rows, so a few hundred records seal several, and an exact head
    of 10 rows, so a bound that fails shows in the top 10; with the query range
    this machine's kernel gets, and with the 7-bit range whatever the kernel."""
    import memlab.memory.rank as rank

    if request.param == 63:
        monkeypatch.setattr(int8_scan, "query_range", lambda threads=1: 63)
    monkeypatch.setattr(int8_scan, "BLOCK", 64)
    monkeypatch.setattr(int8_scan, "MAX_BLOCK", 1024)
    monkeypatch.setattr(rank, "EXACT_HEAD", 10)
    return 64


def test_quantize_reconstructs_rows_within_the_residual() -> None:
    x = clustered(50, DIMS, seed=1)
    x[3] = 0.0  # an all-zero row
    codes, scale, residual = quantize(x)
    assert codes.dtype == np.int8 and np.abs(codes.astype(int)).max() <= 127
    err = np.linalg.norm(x - scale[:, None] * codes, axis=1)
    np.testing.assert_allclose(err, residual, rtol=1e-5, atol=1e-7)
    assert scale[3] == 1.0 and residual[3] == 0.0 and not codes[3].any()
    # every non-zero row uses its full range: its largest component maps to +-127
    assert (np.abs(codes[np.arange(50) != 3]).max(axis=1) == 127).all()


def test_quantize_writes_columns_in_chunks_as_the_transpose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(int8_scan, "_CHUNK", 16)  # several chunks and a short last one
    x = clustered(70, DIMS, seed=11)
    codes, scale, residual = quantize(x)
    codes_t, scale_t, residual_t, norm = int8_scan._quantize(x, columns=True)
    assert codes_t.shape == (DIMS, 70) and codes_t.flags.c_contiguous
    np.testing.assert_array_equal(codes_t, codes.T)
    np.testing.assert_array_equal(scale_t, scale)
    np.testing.assert_array_equal(residual_t, residual)
    assert norm == float(np.linalg.norm(x, axis=1).max())
    assert int8_scan._quantize(x[:0], columns=True)[3] == 0.0


class _SaturatingSession:
    """The product of a kernel without VNNI (AVX2 ``vpmaddubsw``): uint8 x int8
    products added in pairs, each pair saturated to int16, then summed."""

    def __init__(self, codes_t: np.ndarray, limit: int) -> None:
        self.codes, self.zero = codes_t.astype(np.int64), limit + 1

    def run(self, _outputs: object, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        a = feed["q"][0].astype(np.int64)
        pairs = (a[:, None] * self.codes).reshape(-1, 2, self.codes.shape[1]).sum(axis=1)
        raw = np.clip(pairs, -32768, 32767).sum(axis=0) - self.zero * self.codes.sum(axis=0)
        return [raw.astype(np.float32)[None]]


def test_the_probe_finds_a_saturating_kernel_and_falls_back_to_7_bit_queries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def saturating(codes_t, scale, residual, threads, limit=127):  # type: ignore[no-untyped-def]
        return _SaturatingSession(codes_t, limit), ()

    monkeypatch.setattr(int8_scan, "_session", saturating)
    assert not int8_scan._kernel_exact(127, 1)  # 255 x 127 twice overflows int16
    assert int8_scan._kernel_exact(63, 1)  # 127 x 127 twice does not
    int8_scan.query_range.cache_clear()
    try:
        assert int8_scan.query_range(1) == 63
    finally:
        int8_scan.query_range.cache_clear()


def test_the_probe_rejects_a_kernel_wrong_even_for_7_bit_queries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Wrong(_SaturatingSession):
        def run(self, _outputs: object, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
            return [super().run(_outputs, feed)[0] + 1]

    monkeypatch.setattr(
        int8_scan, "_session", lambda codes_t, *a, **k: (Wrong(codes_t, a[-1] if a else 127), ())
    )
    int8_scan.query_range.cache_clear()
    try:
        with pytest.raises(StoreError, match="not exact even for 7-bit queries"):
            int8_scan.query_range(1)
    finally:
        int8_scan.query_range.cache_clear()


def test_this_machines_kernel_is_exact_over_the_range_the_probe_chose() -> None:
    limit = int8_scan.query_range(1)
    assert limit in (127, 63)
    assert int8_scan._kernel_exact(limit, 1) and int8_scan._kernel_exact(63, 1)


def test_bounds_hold_for_sealed_rows_and_are_exact_elsewhere(small_blocks: int) -> None:
    x = clustered(300, DIMS, seed=2)
    scan = Int8Scan(DIMS, threads=1)
    queries = clustered(20, DIMS, seed=3)
    queries[0] *= 0.0  # a zero query bounds nothing away
    for q in queries:
        ub = scan.bounds(x, 300, q)
        true = x @ q
        sealed = scan.sealed
        assert sealed == 256  # four full blocks; 44 rows in the float32 tail
        assert (ub[:sealed] >= true[:sealed]).all()
        np.testing.assert_array_equal(ub[sealed:], true[sealed:])
        # a bound, and a tight one: the slack is about the rounding error, not 1
        assert float((ub[:sealed] - true[:sealed]).max()) < 0.1


def test_a_rewritten_row_gets_its_exact_cosine_until_its_block_is_rebuilt(
    small_blocks: int,
) -> None:
    x = clustered(200, DIMS, seed=4)
    scan = Int8Scan(DIMS, threads=1)
    q = clustered(1, DIMS, seed=5)[0]
    scan.bounds(x, 200, q)
    first = scan.blocks[0]
    x[5] = -x[5]  # a sealed row's vector changes
    scan.wrote(5)
    ub = scan.bounds(x, 200, q)
    assert ub[5] == pytest.approx(float(x[5] @ q), abs=1e-6)
    assert scan.blocks[0] is first  # one stale row: kept, its row read exactly
    for row in range(6, 10):  # a sixteenth of the block has changed: rebuilt
        x[row] = -x[row]
        scan.wrote(row)
    ub = scan.bounds(x, 200, q)
    assert scan.blocks[0] is not first and not scan.changed
    assert (ub[:128] >= x[:128] @ q).all()
    scan.wrote(195)  # beyond the 192 sealed rows: nothing to track
    assert not scan.changed


def test_blocks_merge_by_fours_as_the_scope_grows(small_blocks: int) -> None:
    x = clustered(2200, DIMS, seed=6)
    q = clustered(1, DIMS, seed=9)[0]
    scan = Int8Scan(DIMS, threads=1)
    seen = set()
    for n in range(0, 2200, 40):  # a recall every 40 writes
        ub = scan.bounds(x, n, q)
        sizes = [b.hi - b.lo for b in scan.blocks]
        seen.update(sizes)
        assert sizes == sorted(sizes, reverse=True)  # non-increasing
        assert all(sizes.count(z) < 4 for z in (64, 256))  # four of a size were merged
        assert [b.lo for b in scan.blocks] == np.cumsum([0, *sizes])[:-1].tolist()
        assert n - scan.sealed < 64  # only a short tail is left in float32
        assert (ub >= x[:n] @ q).all()
    assert seen == {64, 256, 1024}
    # a rewritten row inside blocks about to merge: the merged codes are fresh
    grown = Int8Scan(DIMS, threads=1)
    grown.bounds(x, 192, q)  # three blocks of 64
    x[70] = q  # row 70 becomes the query's nearest
    grown.wrote(70)
    ub = grown.bounds(x, 256, q)  # the fourth block: the four merge into one of 256
    assert [b.hi - b.lo for b in grown.blocks] == [256] and not grown.changed
    assert (ub >= x[:256] @ q).all() and ub[70] >= float(q @ q)
    first = Int8Scan(DIMS, threads=1)  # a scope seen first at 2,199 rows: the largest blocks
    first.bounds(x, 2199, q)
    assert [b.hi - b.lo for b in first.blocks] == [1024, 1024, 64, 64]


def int8_pair(n: int) -> tuple[object, object, np.ndarray]:
    return scan_pair(n, rerank=1, dims=DIMS, scan="int8")


WEIGHTS = (RankWeights(), RankWeights(similarity=1, recency=0, salience=0, usage=0))


def test_int8_store_ranks_like_the_float32_scan(small_blocks: int) -> None:
    exact, int8, queries = int8_pair(1000)
    for weights in WEIGHTS:
        for q in queries:
            assert top_ids(int8, q, weights) == top_ids(exact, q, weights)
    idx = int8._index["alice"]  # type: ignore[attr-defined]
    assert idx.int8.sealed == 960 and idx.by_row


def test_int8_store_follows_updates_deletes_and_compaction(small_blocks: int) -> None:
    exact, int8, queries = int8_pair(800)
    top_ids(int8, queries[0], RankWeights())  # seal the blocks
    idx = int8._index["alice"]  # type: ignore[attr-defined]
    assert idx.int8.sealed == 768
    # new vectors for sealed records: each becomes some query's nearest row
    moved = [r for r in exact.list("alice") if int(r.id[1:]) % 40 == 3]  # type: ignore[attr-defined]
    for k, r in enumerate(moved):
        r.embedding = queries[k % len(queries)].copy()
    exact.put_many(moved)  # type: ignore[attr-defined]
    int8.put_many(moved)  # type: ignore[attr-defined]
    # an upsert that keeps the vector marks nothing
    same = exact.get("alice", "r00001")  # type: ignore[attr-defined]
    same.salience = 0.99
    exact.put(same)  # type: ignore[attr-defined]
    int8.put(same)  # type: ignore[attr-defined]
    assert "r00001" not in {idx.ids[i] for i in idx.int8.changed}
    for weights in WEIGHTS:
        for q in queries:
            assert top_ids(int8, q, weights) == top_ids(exact, q, weights)
    gone = [f"r{i:05d}" for i in range(0, 800, 2)]  # half: compacts, rows move
    assert exact.delete("alice", gone) == int8.delete("alice", gone) == 400  # type: ignore[attr-defined]
    assert len(idx) == 400 and idx.n < 800 and idx.int8.sealed == 0  # compacted: blocks dropped
    for q in queries:
        assert top_ids(int8, q, RankWeights()) == top_ids(exact, q, RankWeights())
    assert idx.int8.sealed == idx.n // 64 * 64 > 0  # and built again


def test_file_stores_take_the_int8_scan(small_blocks: int, tmp_path: Path) -> None:
    from memlab.memory import JsonlStore, SqliteStore

    exact, _, queries = int8_pair(300)
    recs = exact.list("alice")  # type: ignore[attr-defined]
    with SqliteStore(tmp_path / "i.db", scan="int8", scan_min_rows=0) as db:
        db.put_many(recs)
        for q in queries[:5]:
            assert top_ids(db, q, RankWeights()) == top_ids(exact, q, RankWeights())
    log = JsonlStore(tmp_path / "i.jsonl", scan="int8", scan_min_rows=0)
    log.put_many(recs)
    for q in queries[:5]:
        assert top_ids(log, q, RankWeights()) == top_ids(exact, q, RankWeights())
    log.close()


def test_small_scopes_and_min_rows_use_the_float32_path(small_blocks: int) -> None:
    idx = ScopeIndex(DIMS, ScanPolicy(codes="int8"))  # min_rows 20000
    for i, v in enumerate(clustered(100, DIMS, seed=8)):
        idx.upsert(make_record(id=f"x{i}", embedding=v, dims=DIMS))
    assert idx.view(None, False, query=np.ones(DIMS, np.float32)).similarity is None
    assert idx.int8 is not None and idx.int8.sealed == 0


def test_the_int8_scan_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from memlab.memory import InMemoryStore

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    with pytest.raises(MissingExtraError, match=r"memlab\[int8\]"):
        InMemoryStore(scan="int8")
    InMemoryStore(scan="bits")  # the other scans need nothing
