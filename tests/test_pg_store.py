"""PgVectorStore specifics, against the session's embedded PostgreSQL server:
text escaping, atomic writes, touch as a HOT update, and the table's size (the
candidate pool: test_pg_pool.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("psycopg", reason="memlab[pg] is not installed")

from memlab.errors import ConfigError, InputError
from memlab.memory.stores.pg.store import PgVectorStore
from tests.conftest import admin, make_record, vec

DIMS = 16


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
        got = s.get(r.scope, r.id)
        assert got is not None and got.same_as(r)
        assert s.scopes() == ["sc\x00ope\u2400"]
        assert [x.id for x in s.list("sc\x00ope\u2400")] == [r.id]
        assert s.list("sc\x00ope") == [] and s.list("sc\u24000ope\u2400") == []
        assert s.touch(r.scope, [r.id, r.id], at=5.0) == 2
        assert s.get(r.scope, r.id).access_count == 2  # type: ignore[union-attr]
        assert s.mark_archived(r.scope, [r.id], at=6.0) == 1
        assert s.delete(r.scope, [r.id]) == 1
    finally:
        s.close()


def test_big_put_many_is_atomic(dsn: str, schema: str) -> None:
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
        s.touch("alice", [rs[i].id for i in hits], at=float(call))
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


def test_hnsw_scan_and_timeout_settings_out_of_range_are_config_errors(
    dsn: str, schema: str
) -> None:
    """pgvector's limits are checked before anything is written: the server refused
    m=101 only when it built a new table's index (a two-line InputError, and never
    on an existing table), ignored max_scan_tuples=2**40 (kept 20000), and a NaN,
    infinite or string connect_timeout was a bare ValueError/OverflowError/TypeError."""
    bad: list[dict[str, object]] = [
        {"hnsw_m": 101},
        {"hnsw_m": 1},
        {"hnsw_ef_construction": 1001},
        {"hnsw_m": 16, "hnsw_ef_construction": 20},  # pgvector wants >= 2 m
        {"max_scan_tuples": 2**40},
        {"max_scan_tuples": 0},
        {"ef_search": True},
        {"connect_timeout": float("nan")},
        {"connect_timeout": float("inf")},
        {"connect_timeout": 0},
        {"connect_timeout": -1},
        {"connect_timeout": "5"},
        {"connect_timeout": True},
    ]
    for kw in bad:
        with pytest.raises(ConfigError) as err:
            PgVectorStore(dsn, schema=schema, dims=DIMS, **kw)  # type: ignore[arg-type]
        message = str(err.value)
        assert "\n" not in message and next(iter(kw)) in message, kw
    with admin(dsn) as conn:  # nothing was created
        assert (
            conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
            is None
        )
    with PgVectorStore(
        dsn, schema=schema, dims=DIMS, hnsw_m=100, hnsw_ef_construction=1000,
        max_scan_tuples=2**31 - 1, connect_timeout=0.5,
    ) as s:  # fmt: skip
        s.put(make_record())
        assert s._db().execute("SHOW hnsw.max_scan_tuples").fetchone()[0] == str(2**31 - 1)
