"""memlab.memory.stores.indexed: ScopeIndex columns stay equal to the records they
index through upserts, archives, touches, deletes and compactions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.memory import MemoryKind
from memlab.memory.lexical import LexicalIndex
from memlab.memory.records import KIND_CODES, SOURCE_CODES, MemoryRecord
from memlab.memory.stores.indexed import ScopeIndex
from tests.conftest import DIMS, make_record

WORDS = ["gke", "europe", "billing", "pager", "coffee", "invoice", "deploy", "oncall"]


def expected_view(records: dict[str, MemoryRecord], include_archived: bool) -> dict[str, tuple]:
    return {
        r.id: (r.created_at, r.last_accessed_at, r.access_count, KIND_CODES[r.kind])
        for r in records.values()
        if include_archived or r.archived_at is None
    }


def actual_view(idx: ScopeIndex, include_archived: bool) -> dict[str, tuple]:
    v = idx.view(None, include_archived)
    return {
        v.ids[i]: (
            float(v.created_at[i]),
            float(v.last_accessed_at[i]),
            int(v.access_count[i]),
            int(v.kind[i]),
        )
        for i in np.flatnonzero(v.mask)
    }


def test_upsert_grows_and_replaces_in_place() -> None:
    idx = ScopeIndex(DIMS)
    recs = [make_record(id=f"r{i}", created_at=float(i)) for i in range(40)]
    for r in recs:
        idx.upsert(r)
    assert len(idx) == 40 and idx.cap >= 40
    changed = recs[3].copy(salience=0.9, content="now about billing")
    idx.upsert(changed)
    assert len(idx) == 40 and idx.n == 40  # same row, no new one
    row = idx.row["r3"]
    assert idx.salience[row] == np.float32(0.9)
    assert np.array_equal(idx.view(None, True).embeddings[row], changed.embedding)
    assert idx.lexical.scores("billing", idx.n)[row] > 0


def test_view_masks_archived_kinds_and_dead_rows() -> None:
    idx = ScopeIndex(DIMS)
    idx.upsert(make_record(id="e", kind=MemoryKind.EPISODIC))
    idx.upsert(make_record(id="s", kind=MemoryKind.SEMANTIC))
    idx.upsert(make_record(id="gone"))
    idx.set_archived("e", True)
    idx.remove("gone")
    idx.remove("never-there")  # ignored
    active = idx.view(None, include_archived=False)
    assert [active.ids[i] for i in np.flatnonzero(active.mask)] == ["s"]
    every = idx.view(None, include_archived=True)
    assert sorted(every.ids[i] for i in np.flatnonzero(every.mask)) == ["e", "s"]
    semantic = idx.view(frozenset({MemoryKind.EPISODIC}), include_archived=True)
    assert [semantic.ids[i] for i in np.flatnonzero(semantic.mask)] == ["e"]
    assert int(every.source[every.ids.index("s")]) == SOURCE_CODES[make_record().source]
    assert every.lexical is None and idx.view(None, False, text="gke").lexical is not None


def test_compaction_keeps_rows_aligned_with_ids_and_bm25() -> None:
    idx = ScopeIndex(DIMS)
    recs = [
        make_record(id=f"r{i:03d}", content=f"note {WORDS[i % len(WORDS)]}", created_at=float(i))
        for i in range(300)
    ]
    for r in recs:
        idx.upsert(r)
    for r in recs[:200]:
        idx.remove(r.id)
    assert idx.n < 300 and idx.dead <= 64  # compacted at least once
    assert len(idx) == 100 and len(idx.ids) == idx.n
    view = idx.view(None, include_archived=False)
    live = {view.ids[i] for i in np.flatnonzero(view.mask)}
    assert live == {r.id for r in recs[200:]}
    for i in np.flatnonzero(view.mask):
        rid = view.ids[i]
        assert np.array_equal(view.embeddings[i], recs[int(rid[1:])].embedding)
    # BM25 over the survivors equals a fresh index of them.
    fresh = LexicalIndex()
    for i in range(idx.n):
        fresh.set_text(i, idx.contents[i], bool(view.mask[i]))
    for word in WORDS:
        assert np.allclose(idx.lexical.scores(word, idx.n), fresh.scores(word, idx.n))


ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "archive", "unarchive", "touch", "remove"]),
        st.integers(0, 29),
        st.sampled_from(WORDS),
    ),
    max_size=400,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_columns_equal_the_records_after_any_operations(
    steps: list[tuple[str, int, str]],
) -> None:
    idx = ScopeIndex(DIMS)
    records: dict[str, MemoryRecord] = {}
    clock = 0.0
    for op, k, word in steps:
        rid = f"r{k}"
        clock += 1.0
        if op == "put":
            r = make_record(id=rid, content=f"about {word}", created_at=clock)
            records[rid] = r
            idx.upsert(r)
        elif rid not in records:
            continue
        elif op == "remove":
            del records[rid]
            idx.remove(rid)
        elif op in ("archive", "unarchive"):
            records[rid].archived_at = clock if op == "archive" else None
            idx.set_archived(rid, clock if op == "archive" else None)
        else:
            records[rid].access_count += 1
            records[rid].last_accessed_at = clock
            idx.touch(rid, clock)
    assert len(idx) == len(records)
    for include_archived in (False, True):
        assert actual_view(idx, include_archived) == expected_view(records, include_archived)
    view = idx.view(None, True)
    for i in np.flatnonzero(view.mask):  # the column-major vectors follow their rows
        np.testing.assert_array_equal(view.embeddings[i], records[view.ids[i]].embedding)
    active = [r for r in records.values() if r.archived_at is None]
    for word in WORDS[:3]:
        view = idx.view(None, False, text=word)
        assert view.lexical is not None
        hit = {view.ids[i] for i in np.flatnonzero(view.mask & (view.lexical > 0))}
        assert hit == {r.id for r in active if word in r.content}


def test_float32_scan_keeps_vectors_column_major_and_the_bit_scan_row_major() -> None:
    from memlab.memory.stores.indexed import ScanPolicy

    recs = [make_record(id=f"r{i}", content=f"about {WORDS[i % 8]}") for i in range(40)]
    for scan, by_column in ((ScanPolicy(), True), (ScanPolicy(codes="bits"), False)):
        idx = ScopeIndex(DIMS, scan)
        for r in recs:
            idx.upsert(r)
        emb = idx.view(None, False).embeddings
        assert emb.shape == (40, DIMS)
        # dot_rows reads a sparse query's dimensions only when each is contiguous
        assert (emb.T.strides[1] == emb.itemsize) is by_column
        np.testing.assert_array_equal(emb, np.stack([r.embedding for r in recs]))


def test_staged_vectors_reach_their_columns_through_appends_replacements_and_removes() -> None:
    from memlab.memory.stores import indexed

    rng = np.random.default_rng(3)
    idx = ScopeIndex(DIMS)
    want: dict[str, np.ndarray] = {}
    for step in range(3 * indexed._STAGE + 7):  # several full stages, then a partial one
        rid = f"r{step}"
        if step % 5 == 4:  # replace an earlier row: staged or already written
            rid = f"r{int(rng.integers(step))}"
        if step % 11 == 10 and want:
            gone = sorted(want)[int(rng.integers(len(want)))]
            idx.remove(gone)
            del want[gone]
            continue
        vec = rng.standard_normal(DIMS).astype(np.float32)
        idx.upsert(make_record(id=rid, embedding=vec))
        want[rid] = vec
        if step % 97 == 0:  # a view mid-way flushes a partial stage
            idx.view(None, True)
    view = idx.view(None, True)
    got = {view.ids[i]: view.embeddings[i] for i in np.flatnonzero(view.mask)}
    assert got.keys() == want.keys()
    for rid, vec in want.items():
        np.testing.assert_array_equal(got[rid], vec)


def test_large_column_major_matrices_are_mapped_and_grow_with_their_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mmap

    from memlab.memory.stores import indexed
    from memlab.memory.stores.indexed import ScanPolicy

    def mapped(a: np.ndarray) -> bool:
        while isinstance(a.base, np.ndarray):
            a = a.base
        return isinstance(a.base, memoryview) and isinstance(a.base.obj, mmap.mmap)

    monkeypatch.setattr(indexed, "_MAP_BYTES", 0)  # every matrix takes the mapped path
    big = indexed._column_major(3, 5, np.float32)
    assert mapped(big) and big.flags.writeable
    assert not mapped(np.zeros((3, 5)))
    assert big.shape == (3, 5) and not big.any()
    recs = [make_record(id=f"r{i}", content=f"about {WORDS[i % 8]}") for i in range(100)]
    for scan in (ScanPolicy(), ScanPolicy(codes="bits", min_rows=0)):
        idx = ScopeIndex(DIMS, scan)
        for r in recs:  # grows 16 -> 128 rows through three remaps
            idx.upsert(r)
        np.testing.assert_array_equal(
            idx.view(None, False).embeddings, np.stack([r.embedding for r in recs])
        )
        if scan.codes == "bits":
            assert mapped(idx.bits)
            np.testing.assert_array_equal(idx.bits[:, 99], idx._signs(recs[99].embedding))
        else:
            assert mapped(idx.emb)


# -- the sign-bit scan (ScanPolicy(codes="bits")) ------------------------------------
def clustered(n: int, dims: int, seed: int) -> np.ndarray:
    """Unit vectors around 40 topic centres sharing a common direction, like
    sentence embeddings (whose signs are far from random)."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal(dims)
    centres = rng.standard_normal((40, dims)) + 1.5 * common
    x = centres[rng.integers(0, 40, n)] + 0.8 * rng.standard_normal((n, dims))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def scan_pair(
    n: int, rerank: int, dims: int = 96, scan: str = "bits"
) -> tuple[object, object, np.ndarray]:
    """(a float32 store, a store with ``scan``, 30 queries) over the same n records."""
    from memlab.memory import InMemoryStore

    vecs = clustered(n + 30, dims, seed=7)
    rng = np.random.default_rng(3)
    recs = [
        make_record(
            id=f"r{i:05d}",
            embedding=vecs[i],
            created_at=float(rng.uniform(0, 1e7)),
            salience=float(rng.uniform(0, 1)),
            dims=dims,
        )
        for i in range(n)
    ]
    exact = InMemoryStore()
    bits = InMemoryStore(scan=scan, scan_rerank=rerank, scan_min_rows=0)
    exact.put_many(recs)
    bits.put_many(recs)
    return exact, bits, vecs[n:]


def top_ids(store: object, query: np.ndarray, weights: object, k: int = 10) -> list[str]:
    from memlab.memory import HashEmbedder, MemoryLayer, RecallQuery
    from memlab.memory.rank import HybridRanker

    layer = MemoryLayer(
        store,  # type: ignore[arg-type]
        HashEmbedder(len(query)),
        ranker=HybridRanker(weights),  # type: ignore[arg-type]
        clock=lambda: 1e7,
    )
    layer.embed_query = lambda text: query  # type: ignore[method-assign]
    res = layer.recall(RecallQuery("alice", "q", token_budget=10**6, max_hits=k), touch=False)
    return [h.record.id for h in res]


def test_bits_scan_ranks_like_the_float32_scan() -> None:
    from memlab.memory.rank import RankWeights

    exact, bits, queries = scan_pair(3000, rerank=200)
    for weights in (RankWeights(), RankWeights(similarity=1, recency=0, salience=0, usage=0)):
        for q in queries:
            assert top_ids(bits, q, weights) == top_ids(exact, q, weights)


def test_bits_scan_similarity_is_exact_for_reranked_rows_and_a_floor_elsewhere() -> None:
    _, bits, queries = scan_pair(2000, rerank=100)
    idx = bits._index["alice"]  # type: ignore[attr-defined]
    q = queries[0]
    view = idx.view(None, False, query=q)
    true = idx.emb[: idx.n] @ q
    assert view.similarity is not None
    exact = np.isclose(view.similarity, true, atol=1e-6)
    assert 100 <= exact.sum() < 2000  # the re-ranked rows (more on ties)
    best = np.argsort(-true)[:10]
    assert exact[best].all()  # the true top rows were re-ranked
    others = view.similarity[~exact]
    assert np.all(others == others[0])  # one bound for every other row
    # Below min_rows, and without a query, the float32 path applies.
    assert idx.view(None, False).similarity is None
    small = ScopeIndex(DIMS)
    small.upsert(make_record(id="x"))
    assert small.view(None, False, query=np.ones(DIMS, np.float32)).similarity is None


def test_bits_follow_deletes_and_compaction() -> None:
    from memlab.memory.rank import RankWeights

    exact, bits, queries = scan_pair(1200, rerank=64)
    gone = [f"r{i:05d}" for i in range(0, 1200, 2)]  # half: compacts the index
    assert exact.delete("alice", gone) == bits.delete("alice", gone) == 600  # type: ignore[attr-defined]
    idx = bits._index["alice"]  # type: ignore[attr-defined]
    assert len(idx) == 600 and idx.n < 1200 and idx.bits.shape[0] == 2  # compacted
    for q in queries[:10]:
        assert top_ids(bits, q, RankWeights()) == top_ids(exact, q, RankWeights())


def test_sqlite_bits_scan_ranks_like_float32(tmp_path: object) -> None:
    from pathlib import Path

    from memlab.memory import SqliteStore
    from memlab.memory.rank import RankWeights

    exact, _, queries = scan_pair(800, rerank=50)
    recs = exact.list("alice")  # type: ignore[attr-defined]
    with SqliteStore(
        Path(str(tmp_path)) / "b.db", scan="bits", scan_rerank=50, scan_min_rows=0
    ) as db:
        db.put_many(recs)
        for q in queries[:10]:
            assert top_ids(db, q, RankWeights()) == top_ids(exact, q, RankWeights())


def test_scan_policy_rejects_bad_values() -> None:
    import pytest

    from memlab.errors import InputError
    from memlab.memory import InMemoryStore, JsonlStore, SqliteStore
    from memlab.memory.stores.indexed import ScanPolicy

    for bad in ({"codes": "float16"}, {"codes": 8}, {"rerank": 0}, {"min_rows": -1}):
        with pytest.raises(InputError):
            ScanPolicy(**bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="scan must be one of"):
        InMemoryStore(scan="int4")
    with pytest.raises(InputError, match="scan_rerank"):
        JsonlStore("/nonexistent/x.jsonl", scan="bits", scan_rerank=0)
    with pytest.raises(InputError, match="scan must be one of"):
        SqliteStore(":memory:", scan="half")


def test_bits_scan_ranks_layered_scopes_like_the_float32_scan() -> None:
    from memlab.memory import HashEmbedder, InMemoryStore, MemoryLayer, RecallQuery
    from memlab.memory.rank import RankWeights

    vecs = clustered(2030, 96, seed=11)
    rng = np.random.default_rng(5)
    recs = [
        make_record(
            id=f"r{i:05d}",
            scope="alice:s1" if i % 3 == 0 else "alice",
            embedding=vecs[i],
            created_at=float(rng.uniform(0, 1e7)),
            salience=float(rng.uniform(0, 1)),
            dims=96,
        )
        for i in range(2000)
    ]
    exact = InMemoryStore()
    bits = InMemoryStore(scan="bits", scan_rerank=64, scan_min_rows=0)
    exact.put_many(recs)
    bits.put_many(recs)

    def top(store: object, q: np.ndarray) -> list[str]:
        layer = MemoryLayer(store, HashEmbedder(96), clock=lambda: 1e7)  # type: ignore[arg-type]
        layer.embed_query = lambda text: q  # type: ignore[method-assign]
        query = RecallQuery(["alice:s1", "alice"], "q", token_budget=10**6, max_hits=10)
        return [h.record.id for h in layer.recall(query, touch=False)]

    assert RankWeights().similarity > 0
    for q in vecs[2000:]:
        assert top(bits, q) == top(exact, q)
