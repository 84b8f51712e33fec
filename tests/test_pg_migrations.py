"""memlab.memory.stores.pg.migrations: numbered idempotent migrations, dims checks, names,
against the session's embedded PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="memlab[pg] is not installed")

from memlab.errors import (
    ConfigError,
    DimensionMismatch,
    StoreError,
)
from memlab.memory.stores.pg.migrations import SCHEMA_VERSION
from memlab.memory.stores.pg.store import PgVectorStore
from tests.conftest import DIMS, admin, make_record, pg_schema, vec, with_params


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
        # The scope b-trees lead with scope_key, a hash of the scope (migration 5),
        # so a scope of any length fits in an index entry.
        assert "(scope_key, archived_at)" in indexes["mem_key_archived"]
        assert "btree" in indexes["mem_key_archived"]
        assert "(scope_key, kind, created_at DESC)" in indexes["mem_key_kind"]
        assert not {"mem_scope_archived", "mem_salient", "mem_recent", "mem_kind"} & set(indexes)
        # One HNSW index per kind, on [embedding, salience, sqrt(1 - salience^2)]
        # (halfvec, inner product), over active rows; the cosine index is gone.
        for kind in ("episodic", "semantic", "procedural"):
            aug = indexes[f"mem_aug_{kind}"]
            assert "USING hnsw" in aug and "halfvec_ip_ops" in aug
            assert f"halfvec({DIMS + 2})" in aug
            assert f"WHERE ((archived_at IS NULL) AND (kind = '{kind}'::text))" in aug
        assert "mem_embedding_hnsw" not in indexes
        # The rows with supersession entries, per scope (migration 7, superseded_by).
        assert "(scope_key) WHERE (json_array_length(superseded) > 0)" in indexes["mem_superseded"]
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
        conn.execute(f'DELETE FROM "{schema}".mem_migrations WHERE version >= 4')
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
    for window in (-0.5, float("nan"), True, "0.5"):
        with pytest.raises(ConfigError, match="window must be a number of half-lives"):
            PgVectorStore(dsn, window=window)  # type: ignore[arg-type]
    for rows in (-1, 2.5, True):
        with pytest.raises(ConfigError, match="window_from_rows must be an integer >= 0"):
            PgVectorStore(dsn, window_from_rows=rows)  # type: ignore[arg-type]


def test_a_version_4_table_gets_scope_key_and_then_takes_long_scopes(dsn: str, schema: str) -> None:
    """Defect 8: scopes over ~2.7 kB failed with a misleading StoreUnavailable."""
    s = PgVectorStore(dsn, schema=schema, table="mem", dims=DIMS)
    kept = make_record("alice", content="kept")
    s.put(kept)
    s.close()
    with admin(dsn) as conn:  # back to what memlab wrote before migration 5
        for name in ("key_archived", "key_salient", "key_recent", "key_kind"):
            conn.execute(f'DROP INDEX "{schema}".mem_{name}')
        conn.execute(f'ALTER TABLE "{schema}".mem DROP COLUMN scope_key')
        conn.execute(f'ALTER TABLE "{schema}".mem DROP COLUMN superseded, DROP COLUMN invalid_at')
        conn.execute(f'CREATE INDEX mem_scope_archived ON "{schema}".mem (scope, archived_at)')
        conn.execute(f'DELETE FROM "{schema}".mem_migrations WHERE version >= 5')
    long_scope = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(3000))
    with PgVectorStore(dsn, schema=schema, table="mem") as s:
        assert s.schema_version == SCHEMA_VERSION
        got = s.get("alice", kept.id)
        assert got is not None and got.same_as(kept)
        mine = make_record(long_scope, content="a long scope")
        s.put(mine)
        assert [r.id for r in s.list(long_scope)] == [mine.id]
        assert s.list(long_scope[:-1] + "x") == [] and s.count(long_scope) == 1
        assert s.candidates(long_scope, vec(0)).ids == [mine.id]


def test_a_version_5_table_gets_the_supersession_columns(dsn: str, schema: str) -> None:
    """A table memlab wrote before migration 6 (no superseded, no invalid_at) opens
    with its rows in force and then keeps supersessions."""
    from memlab.memory import Superseded

    s = PgVectorStore(dsn, schema=schema, table="mem", dims=DIMS)
    old = make_record("alice", content="standup is at 9:00", created_at=1.0)
    new = make_record("alice", content="standup moved to 9:30", created_at=2.0)
    s.put_many([old, new])
    s.close()
    with admin(dsn) as conn:
        conn.execute(f'ALTER TABLE "{schema}".mem DROP COLUMN superseded, DROP COLUMN invalid_at')
        conn.execute(f'DELETE FROM "{schema}".mem_migrations WHERE version >= 6')
    with PgVectorStore(dsn, schema=schema, table="mem") as s:
        assert s.schema_version == SCHEMA_VERSION == 8
        got = s.get("alice", old.id)
        assert got is not None and got.same_as(old) and got.invalid_at is None
        assert len(s.candidates("alice", vec(0), valid_at=float("inf"))) == 2
        s.put(old.copy(superseded=(Superseded(by=new.id, at=2.0),)))
    with PgVectorStore(dsn, schema=schema, table="mem") as s:
        got = s.get("alice", old.id)
        assert got is not None and got.superseded_by == new.id
        assert s.candidates("alice", vec(0), valid_at=float("inf")).ids == [new.id]
        assert set(s.candidates("alice", vec(0), valid_at=1.5).ids) == {old.id}


def test_superseded_by_uses_the_partial_index_of_marked_rows(dsn: str, schema: str) -> None:
    from memlab.memory import Superseded

    with PgVectorStore(dsn, schema=schema, table="mem", dims=DIMS) as s:
        plain = [make_record(content=f"f{i}", created_at=float(i + 1)) for i in range(40)]
        marked = plain[2].copy(superseded=(Superseded(by=plain[7].id, at=8.0, span=(0, 1)),))
        s.put_many([*plain[:2], marked, *plain[3:]])
        assert [r.id for r in s.superseded_by("alice", [plain[7].id])] == [marked.id]
    with admin(dsn) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        conn.execute("SET enable_seqscan = off")  # a 40-row table would be scanned anyway
        plan = " ".join(
            row[0]
            for row in conn.execute(
                "EXPLAIN SELECT id FROM mem WHERE scope_key = hashtextextended('alice', 0) "
                "AND scope = 'alice' AND json_array_length(superseded) > 0"
            )
        )
        assert "mem_superseded" in plan, plan
