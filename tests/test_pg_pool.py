"""PgVectorStore's candidate pool (memlab.memory.stores.pg.pool), against the
session's embedded PostgreSQL server: small scopes whole, the per-kind searches,
the salient and recent extras, BM25, the iterative scan, recall against the exact
stores, and the recency windows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("psycopg", reason="memlab[pg] is not installed")

from memlab.errors import InputError
from memlab.memory import (
    HashEmbedder,
    MemoryInput,
    MemoryLayer,
    MemoryRecord,
    RankWeights,
    RecallQuery,
    SqliteStore,
)
from memlab.memory.stores.base import scope_columns
from memlab.memory.stores.pg.store import PgVectorStore
from tests.conftest import make_record, vec

DIMS = 16


# -- the candidate pool ------------------------------------------------------------
def _near(base: np.ndarray, rng: np.random.Generator, spread: float) -> np.ndarray:
    v = base + spread * rng.standard_normal(base.shape[0]).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _at_cosine(base: np.ndarray, rng: np.random.Generator, lo: float, hi: float) -> np.ndarray:
    """A unit vector whose cosine to the unit ``base`` is uniform in [lo, hi]."""
    u = rng.standard_normal(base.shape[0])
    u -= (u @ base) * base
    c = rng.uniform(lo, hi)
    return (c * base + np.sqrt(1 - c * c) * u / np.linalg.norm(u)).astype(np.float32)


def test_small_scope_is_returned_whole(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema, pool=50)
    rs = [make_record(content=f"f{i}", created_at=i) for i in range(50)]
    s.put_many(rs + [make_record("bob", content=f"b{i}") for i in range(100)])
    c = s.candidates("alice", vec(0), pool=50)
    assert c.n_active == 50 and set(c.ids) == {r.id for r in rs}
    s.close()


def test_big_scope_pool_holds_neighbours_salient_and_recent(dsn: str, schema: str) -> None:
    rng = np.random.default_rng(1)
    q = vec("query")
    s = PgVectorStore(dsn, schema=schema, salient=5, recent=5)
    rs = [
        make_record(
            content=f"f{i}",
            created_at=float(i),
            salience=float(rng.uniform(0, 0.9)),
            kind="semantic" if i % 3 == 0 else "episodic",
            embedding=_near(q, rng, 0.5),
        )
        for i in range(1500)
    ]
    rs[7].salience = 0.99  # the most salient, not necessarily near
    others = [make_record("bob", content=f"b{i}", embedding=_near(q, rng, 0.1)) for i in range(500)]
    s.put_many(rs + others)
    s.mark_archived("alice", [rs[-1].id], at=2000.0)  # newest, but archived
    s.analyze()
    c = s.candidates("alice", q, pool=100)
    ids = set(c.ids)
    assert c.mask.all() and len(c) <= 3 * 34 + 5 + 5 and len(ids) == len(c)
    assert ids <= {r.id for r in rs[:-1]}  # this scope only, nothing archived
    active = rs[:-1]
    for kind in ("episodic", "semantic"):  # each kind's ceil(100 / 3) nearest
        mine = [r for r in active if r.kind.value == kind]
        sims = np.array([r.embedding @ q for r in mine])
        exact = {mine[i].id for i in np.argsort(-sims)[:34]}
        assert len(ids & exact) >= 32, kind  # approximate nearest neighbours
    assert rs[7].id in ids
    newest = sorted(active, key=lambda r: -r.created_at)[:5]
    assert {r.id for r in newest} <= ids
    sem = s.candidates("alice", q, pool=100, kinds=["semantic"])
    assert {r.kind.value for r in s.get_many("alice", sem.ids)} == {"semantic"}
    # Without a usable query: the most salient and the most recent.
    z = s.candidates("alice", np.zeros(DIMS, dtype=np.float32), pool=100)
    assert rs[7].id in z.ids and newest[0].id in z.ids and len(z) <= 200
    s.close()


def test_bm25_of_a_pool_uses_the_whole_scope(dsn: str, schema: str) -> None:
    """Beyond the pool, lexical scores still use the scope's N, df and average
    length, not the pool's."""
    from tests.test_lexical import reference_bm25

    words = ["deploy", "region", "billing", "pager", "coffee", "gke", "eks", "nomad"]
    rs = [
        make_record(
            content=" ".join(words[(i * 5 + j) % len(words)] for j in range(1 + i % 5)),
            created_at=float(i),
        )
        for i in range(300)
    ]
    s = PgVectorStore(dsn, schema=schema, salient=5, recent=5)
    s.put_many([*rs, make_record("bob", content="deploy gke gke")])
    s.mark_archived("alice", [r.id for r in rs[:40]], at=1.0)
    query = "deploy to gke, or eks?"
    c = s.candidates("alice", vec(0), pool=50, text=query)
    assert len(c) < 260 and c.lexical is not None
    active = {r.id: r.content for r in s.list("alice")}
    ref = dict(
        zip(active, reference_bm25(dict(enumerate(active.values())), query).values(), strict=True)
    )
    for row, rid in enumerate(c.ids):
        assert c.lexical[row] == pytest.approx(ref[rid], rel=1e-6, abs=1e-9)
    assert s.candidates("alice", vec(0), pool=50).lexical is None
    s.close()


def test_iterative_scan_fills_the_pool_under_a_selective_scope(dsn: str, schema: str) -> None:
    """With the HNSW index forced, a scope holding 5% of the rows still gets a full
    pool thanks to the iterative scan; without it, ef_search rows are scanned and
    the scope filter leaves few."""
    rng = np.random.default_rng(2)
    q = vec("q")
    s = PgVectorStore(dsn, schema=schema, salient=0, recent=0, ef_search=40)
    mine = [make_record(content=f"m{i}", embedding=_near(q, rng, 0.8)) for i in range(200)]
    theirs = [
        make_record("bob", content=f"b{i}", embedding=_near(q, rng, 0.8)) for i in range(3800)
    ]
    s.put_many(mine + theirs)
    s.analyze()
    conn = s._db()
    conn.execute("SET enable_sort = off")  # ORDER BY distance must come from the index
    conn.execute("SET enable_seqscan = off")
    assert "aug_episodic" in s.explain_candidates("alice", q, pool=100)
    assert len(s.candidates("alice", q, pool=100)) == 100
    conn.execute("SET hnsw.iterative_scan = off")
    assert len(s.candidates("alice", q, pool=100)) < 50
    s.close()


def test_old_salient_fact_is_found_through_the_salient_additions(
    dsn: str, schema: str, tmp_path: Path
) -> None:
    """Many recent records are near the query; one old, vital fact is not. With a
    salience-heavy ranking the fact is the exact top hit. A cosine pool misses it.
    A graph search may miss an isolated point too (none of its neighbours is near
    the query), so the scope's most salient records are added to every pool."""
    rng = np.random.default_rng(3)
    q = vec("deploy")
    now = 400 * 86400.0
    near = [
        make_record(
            content=f"chatter {i}",
            kind=("episodic", "semantic")[i % 2],
            created_at=now - 3600.0 * i,
            salience=0.1,
            embedding=_near(q, rng, 0.3),
        )
        for i in range(400)
    ]
    fact = make_record(
        content="Always page me on PagerDuty, never email.",
        kind="semantic",
        salience=1.0,
        created_at=now - 300 * 86400.0,
        embedding=vec("pagerduty"),
    )
    weights = RankWeights(similarity=0.3, recency=0.0, salience=0.7, usage=0.0)

    class Fixed(HashEmbedder):
        def embed(self, texts: Any) -> np.ndarray:
            return np.stack([q for _ in texts])

    def top(store: Any) -> str:
        layer = MemoryLayer(store, Fixed(DIMS), weights=weights, clock=lambda: now, pool=50)
        return layer.recall(RecallQuery("alice", "how do I reach you?"), touch=False)[0].record.id

    exact = SqliteStore(tmp_path / "m.db")
    exact.put_many([*near, fact])
    assert top(exact) == fact.id
    s = PgVectorStore(dsn, schema=schema, salient=10, recent=10)
    s.put_many([*near, fact])
    assert top(s) == fact.id
    s.salient = 0
    assert fact.id not in s.candidates("alice", q, pool=50).ids  # by cosine alone
    s.close()


def test_the_search_weighs_similarity_and_salience_as_asked(dsn: str, schema: str) -> None:
    """Half the scope is near the query with low salience, half further away with
    high salience: the pool follows the weights the caller passes, per query."""
    rng = np.random.default_rng(7)
    dims = 64
    q = vec("q", dims)

    def rec(i: int, salience: float, spread: float) -> MemoryRecord:
        return make_record(
            content=f"r{i}", salience=salience, dims=dims, embedding=_near(q, rng, spread)
        )

    near = [rec(i, 0.05 + 0.1 * rng.uniform(), 0.1) for i in range(600)]
    vital = [rec(i, 0.9 + 0.1 * rng.uniform(), 1.5) for i in range(600, 1200)]
    s = PgVectorStore(dsn, schema=schema, salient=0, recent=0)
    s.put_many(near + vital)
    s.analyze()
    conn = s._db()
    conn.execute("SET enable_sort = off")  # the order must come from the HNSW index
    conn.execute("SET enable_seqscan = off")
    assert "aug_episodic" in s.explain_candidates("alice", q, pool=60)
    everyone = near + vital

    def overlap(w_sim: float, w_sal: float) -> float:
        """Share of the exact top 60 by w_sim * cos + w_sal * salience in the pool."""
        weights = {"similarity": w_sim, "salience": w_sal, "recency": 0.5}
        c = s.candidates("alice", q, pool=60, weights=weights)
        assert len(c) == 60
        score = [w_sim * float(r.embedding @ q) + w_sal * r.salience for r in everyone]
        best = {everyone[i].id for i in np.argsort(score)[::-1][:60]}
        return len(best & set(c.ids)) / 60

    for w_sim, w_sal in [(1.0, 0.0), (0.6, 0.2), (0.3, 0.3), (0.2, 0.8), (0.0, 1.0)]:
        assert overlap(w_sim, w_sal) >= 0.9, (w_sim, w_sal)
    vital_ids = {r.id for r in vital}
    assert not vital_ids & set(s.candidates("alice", q, pool=60).ids)  # cosine by default
    sal = s.candidates("alice", q, pool=60, weights={"similarity": 0.1, "salience": 0.9})
    assert set(sal.ids) <= vital_ids
    with pytest.raises(InputError, match="weights"):
        s.candidates("alice", q, pool=60, weights={"similarity": -1.0})
    s.close()


# -- parity with the exact stores -------------------------------------------------
def _texts(n: int, seed: int) -> tuple[list[str], list[str]]:
    from memlab.bench.workload import Corpus

    gen = Corpus(max(3, n // 60), seed)
    return gen.lines(n, seed), gen.queries(25, seed + 1)


def test_recall_matches_sqlite_for_small_scopes(dsn: str, schema: str, tmp_path: Path) -> None:
    texts, queries = _texts(600, 4)
    rng = np.random.default_rng(4)
    scopes = ["alice", "bob", "carol:ops", "al'ice%"]
    items = [
        MemoryInput(
            scopes[i % len(scopes)],
            t,
            kind=("episodic", "semantic", "procedural")[i % 3],
            salience=float(rng.uniform()),
            created_at=1_000_000.0 + 600.0 * i,
            id=f"r{i}",
        )
        for i, t in enumerate(texts)
    ]
    now = 1_000_000.0 + 600.0 * len(texts) + 3600.0
    emb = HashEmbedder(64)
    exact = MemoryLayer(SqliteStore(tmp_path / "m.db"), emb, clock=lambda: now)
    approx = MemoryLayer(PgVectorStore(dsn, schema=schema), emb, clock=lambda: now, pool=200)
    exact.remember_many(items)
    approx.remember_many(items)
    for round_ in range(2):  # the second round sees the first round's touches
        for scope in scopes:
            for qt in queries:
                a = exact.recall(RecallQuery(scope, qt, token_budget=400))
                b = approx.recall(RecallQuery(scope, qt, token_budget=400))
                assert [h.record.id for h in b] == [h.record.id for h in a], (round_, scope, qt)
                assert [h.score for h in b] == pytest.approx([h.score for h in a], abs=1e-6)
    approx.store.close()


def test_recall_at_10_against_exact_at_thousands(dsn: str, schema: str) -> None:
    """A 3,000-record scope (+1,500 elsewhere) goes through the HNSW pool; its top-10
    agrees with the exact ranking on at least 95% of ids. (At this size the planner
    may prefer an exact sort for a big pool, so the index is forced here.)"""
    from memlab.memory import InMemoryStore

    texts, queries = _texts(4500, 5)
    rng = np.random.default_rng(5)
    items = [
        MemoryInput(
            "alice" if i % 3 else "bob",
            t,
            salience=float(rng.uniform()),
            created_at=1_000_000.0 + 60.0 * i,
            id=f"r{i}",
        )
        for i, t in enumerate(texts)
    ]
    now = 1_000_000.0 + 60.0 * len(texts) + 3600.0
    emb = HashEmbedder(64)
    exact = MemoryLayer(InMemoryStore(), emb, clock=lambda: now)
    store = PgVectorStore(dsn, schema=schema)
    approx = MemoryLayer(store, emb, clock=lambda: now, pool=200)
    exact.remember_many(items)
    approx.remember_many(items)
    store.analyze()
    store._db().execute("SET enable_sort = off")
    store._db().execute("SET enable_seqscan = off")
    assert "aug_episodic" in store.explain_candidates("alice", emb.embed([queries[0]])[0], 200)
    hits = []
    for qt in queries:
        q = RecallQuery("alice", qt, token_budget=100_000, max_hits=10)
        a = {h.record.id for h in exact.recall(q, touch=False)}
        b = {h.record.id for h in approx.recall(q, touch=False)}
        hits.append(len(a & b) / 10)
    assert float(np.mean(hits)) >= 0.95
    store.close()


def test_scope_columns_are_the_whole_scope_beyond_the_pool(dsn: str, schema: str) -> None:

    s = PgVectorStore(dsn, schema=schema, pool=5, salient=1, recent=1)
    try:
        rs = [make_record(content=f"f{i}", created_at=float(i)) for i in range(40)]
        s.put_many([*rs, make_record("bob", content="b")])
        s.mark_archived("alice", [rs[0].id], at=100.0)
        assert len(s.candidates("alice")) < 39  # a pool, not the scope
        assert set(scope_columns(s, "alice").ids) == {r.id for r in rs[1:]}
        every = scope_columns(s, "alice", include_archived=True)
        assert set(every.ids) == {r.id for r in rs} and every.mask.all()
    finally:
        s.close()


@pytest.mark.parametrize("recent_rows", [100, 2500])  # a window scanned / searched
def test_the_recency_window_finds_recent_facts_that_old_neighbours_crowd_out(
    dsn: str, schema: str, tmp_path: Path, recent_rows: int
) -> None:
    """Old semantic records near the query (cosine 0.88-0.92) outscore, by
    similarity and salience, every recent salient one (cosine 0.45-0.55), so the
    exact best 60 by those two signals hold none of the latter (a margin of 0.025,
    not left to the graph's approximation); the ranker (recency weighed 0.3, a
    90-day half-life) prefers them. The window search of each kind's recent rows
    brings them in."""
    rng = np.random.default_rng(5)
    q = vec("invoices")
    day = 86400.0
    now = 800 * day
    old = [
        make_record(
            content=f"old {i}",
            kind="semantic",
            created_at=now - (400 + i % 300) * day,
            salience=0.3,
            embedding=_at_cosine(q, rng, 0.88, 0.92),
        )
        for i in range(5000 - recent_rows)
    ]
    recent = [
        make_record(
            content=f"recent {i}",
            kind="semantic",
            created_at=now - (i % 5) * 3600.0,  # hours old: the window holds them all
            salience=1.0 if i % 4 == 0 else 0.2,
            embedding=_at_cosine(q, rng, 0.45, 0.55),
        )
        for i in range(recent_rows)
    ]

    class Fixed(HashEmbedder):
        def embed(self, texts: Any) -> np.ndarray:
            return np.stack([q for _ in texts])

    def top(store: Any) -> list[str]:
        weights = RankWeights(similarity=0.5, recency=0.3, salience=0.2, usage=0.0)
        layer = MemoryLayer(store, Fixed(DIMS), weights=weights, clock=lambda: now, pool=60)
        return [
            h.record.id for h in layer.recall(RecallQuery("alice", "x", max_hits=10), touch=False)
        ]

    exact_store = SqliteStore(tmp_path / "m.db")
    exact_store.put_many([*old, *recent])
    exact = top(exact_store)
    assert set(exact) <= {r.id for r in recent}  # the recent facts win the ranking
    by_sim_sal = [0.5 * float(r.embedding @ q) + 0.2 * r.salience for r in [*old, *recent]]
    assert max(by_sim_sal[len(old) :]) < sorted(by_sim_sal[: len(old)])[-60]  # and lose the pool
    s = PgVectorStore(dsn, schema=schema, salient=0, recent=0)  # window 0.5 by default
    s.put_many([*old, *recent])
    assert len(set(top(s)) & set(exact)) <= 3  # 5,000 rows: below window_from_rows
    s.analyze()  # the estimate is now 5,000 rows (and the cached one dropped)
    s.window_from_rows = 5000
    assert len(set(top(s)) & set(exact)) >= 9
    s.window_from_rows = 5001
    assert len(set(top(s)) & set(exact)) <= 3
    s.window, s.window_from_rows = 0.5, 0  # always
    assert len(set(top(s)) & set(exact)) >= 9
    s.window = 0  # off: the pool is the best by similarity and salience alone
    assert len(set(top(s)) & set(exact)) <= 3
    s.close()
