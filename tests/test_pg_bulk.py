"""PgVectorStore.bulk_load and its helpers (``stores.pg.bulk``), against the
session's embedded PostgreSQL: the indexes come back as migration 4 made them,
with the table's own HNSW options, the pool is the one ``put_many`` gives, and a
failed load leaves rows and indexes as they were."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("psycopg", reason="memlab[pg] is not installed")

from memlab.errors import ConfigError, InputError
from memlab.memory import MemoryKind
from memlab.memory.stores.pg import bulk
from memlab.memory.stores.pg.store import PgVectorStore
from tests.conftest import make_record, vec

DIMS = 16


def _indexes(store: PgVectorStore) -> dict[str, str]:
    rows = (
        store._db()
        .execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
            (store.schema, store.table),
        )
        .fetchall()
    )
    return {str(name): str(definition) for name, definition in rows}


def _records(n: int, scope: str = "alice", seed: int = 0) -> list[Any]:
    rng = np.random.default_rng(seed)
    kinds = list(MemoryKind)
    return [
        make_record(
            scope,
            f"fact {seed}-{i}",
            id=f"{scope}-{seed}-{i}",
            kind=kinds[i % 3],
            salience=float(rng.uniform()),
            created_at=1000.0 + i,
            embedding=vec(seed * 100_000 + i),
        )
        for i in range(n)
    ]


def test_parse_memory_and_check_settings() -> None:
    assert bulk.parse_memory("512MB") == 512 << 20
    assert bulk.parse_memory(" 2 GB ") == 2 << 30
    assert bulk.parse_memory("64kB") == 64 << 10
    for bad in ("2gb", "2", "1.5GB", "-1MB", "GB", ""):
        with pytest.raises(ConfigError, match="maintenance_work_mem"):
            bulk.parse_memory(bad)
    assert bulk.check_settings(None, None) == bulk.BuildSettings()
    assert bulk.check_settings("1GB", 0) == bulk.BuildSettings(1 << 30, 0)
    with pytest.raises(ConfigError, match="between 1MB"):
        bulk.check_settings("512kB", None)
    for workers in (-1, 65, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="workers"):
            bulk.check_settings(None, workers)  # type: ignore[arg-type]


def test_graph_bytes_grows_with_rows_dims_and_m() -> None:
    base = bulk.graph_bytes(1000, 384, 16)
    assert base == 1000 * (2 * 386 + 40 * 16 + 136)
    assert bulk.graph_bytes(2000, 384, 16) == 2 * base
    assert bulk.graph_bytes(1000, 768, 16) > base < bulk.graph_bytes(1000, 384, 32)
    assert bulk.graph_bytes(0, 384, 16) == 0


def test_bulk_load_gives_the_indexes_and_pool_of_put_many(dsn: str, schema: str) -> None:
    slow = PgVectorStore(dsn, schema=schema, table="slow", pool=40, salient=0, recent=0)
    fast = PgVectorStore(dsn, schema=schema, table="fast", pool=40, salient=0, recent=0)
    try:
        head, rest = _records(300), _records(900, seed=1)
        others = _records(400, "bob", seed=2)
        slow.put_many([*head, *rest, *others])
        fast.put_many(head)  # a table that already has rows and indexes
        before = _indexes(fast)
        used = fast.bulk_load([*rest, *others], progress=False)
        after = _indexes(fast)
        assert after == before and len([n for n in after if "_aug_" in n]) == 3
        assert _indexes(slow) == {
            k.replace("fast", "slow"): v.replace("fast", "slow") for k, v in after.items()
        }
        assert fast.count() == slow.count() == 1600
        assert used["indexes"] == {k.value: (16, 64) for k in MemoryKind}
        server = fast._db().execute("SELECT pg_size_bytes(current_setting('maintenance_work_mem'))")
        assert used["maintenance_work_mem"] >= int(server.fetchone()[0])
        for store in (slow, fast):
            store._db().execute("SET enable_sort = off")
            store._db().execute("SET enable_seqscan = off")
        assert "aug_episodic" in fast.explain_candidates("alice", vec(7), 40)
        for q in range(5):
            a = slow.candidates(
                "alice", vec(10_000 + q), weights={"similarity": 1.0, "salience": 0.5}
            )
            b = fast.candidates(
                "alice", vec(10_000 + q), weights={"similarity": 1.0, "salience": 0.5}
            )
            assert len(a.ids) == 40
            # One graph is built row by row and the other at once: the approximate
            # pools agree on almost every id (exactly, at this size, in practice).
            assert len(set(a.ids) & set(b.ids)) >= 38
    finally:
        slow.close()
        fast.close()


def test_bulk_load_keeps_the_tables_hnsw_options(dsn: str, schema: str) -> None:
    made = PgVectorStore(dsn, schema=schema, hnsw_m=8, hnsw_ef_construction=24)
    made.put_many(_records(30))
    made.close()
    reopened = PgVectorStore(dsn, schema=schema)  # the defaults, 16 and 64
    try:
        used = reopened.bulk_load(_records(60, seed=1), workers=0, progress=False)
        assert used["indexes"] == {k.value: (8, 24) for k in MemoryKind}
        assert all(
            "m='8'" in d and "ef_construction='24'" in d
            for n, d in _indexes(reopened).items()
            if "_aug_" in n
        )
    finally:
        reopened.close()


def test_bulk_load_creates_the_table_on_a_first_write(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    try:
        assert s.bulk_load([], progress=False) == {}
        s.bulk_load(_records(50), maintenance_work_mem="64MB", progress=False)
        assert s.count() == 50 and len([n for n in _indexes(s) if "_aug_" in n]) == 3
        assert s.get("alice", "alice-0-7") is not None
    finally:
        s.close()


def test_a_failed_bulk_load_leaves_rows_and_indexes_as_they_were(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    try:
        s.put_many([*_records(40), make_record("bob", "bob's", id="taken", embedding=vec(1))])
        before, count = _indexes(s), s.count()
        thief = make_record("alice", "mine now", id="taken", embedding=vec(2))
        with pytest.raises(InputError, match="another scope"):
            s.bulk_load([*_records(500, seed=1), thief], progress=False)
        too_big = _records(20, seed=2)
        too_big[-1] = too_big[-1].copy(tokens=2**31)  # fits Python, not the int4 column
        with pytest.raises(InputError, match="out of range"):
            s.bulk_load(too_big, progress=False)
        with pytest.raises(ConfigError):
            s.bulk_load(_records(5, seed=3), maintenance_work_mem="lots")
        with pytest.raises(InputError):
            s.bulk_load([make_record(embedding=vec(1, 8), dims=8)])
        assert _indexes(s) == before and s.count() == count
        assert s.get("bob", "taken").content == "bob's"  # type: ignore[union-attr]
        assert s.get("alice", "taken") is None
    finally:
        s.close()


class _Shown:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.seen.append(text)


def test_the_watcher_reports_a_running_index_build(dsn: str, schema: str) -> None:
    import threading

    s = PgVectorStore(dsn, schema=schema)
    try:
        s.bulk_load(_records(20_000), progress=False)
        conn = s._db()
        pid = conn.info.backend_pid
        shown = _Shown()
        watcher = bulk._Watcher(s._connector.connect, pid, shown, interval=0.02)
        build = threading.Thread(
            target=conn.execute,
            args=(
                f'CREATE INDEX slow ON "{schema}".memlab_records USING hnsw '
                "(embedding vector_l2_ops) WITH (m = 32, ef_construction = 200)",
            ),
        )
        build.start()
        build.join()
        watcher.stop()
        assert watcher._conn.closed
        assert any(t.startswith("building index") and t.endswith("%") for t in shown.seen), (
            shown.seen
        )
    finally:
        s.close()
