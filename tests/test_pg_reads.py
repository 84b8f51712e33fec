"""PgVectorStore's reads (memlab/memory/stores/pg/reads.py), against the session's
embedded PostgreSQL server: before the table exists, the order of escaped ids,
scope filters in SQL and ``superseded_by`` (the contract suite covers the rest)."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg", reason="memlab[pg] is not installed")

from memlab.memory.records import MemoryKind, Superseded
from memlab.memory.stores.pg.store import PgVectorStore
from tests.conftest import make_record


def test_reads_before_the_first_write_are_empty(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    try:
        assert s.get("a", "x") is None
        assert s.get_many("a", ["x", "y"]) == []
        assert s.list("a") == [] and s.superseded_by("a", "x") == []
        assert s.count() == 0 and s.count("a") == 0 and s.scopes() == []
        assert s.dims is None  # no read created the table
    finally:
        s.close()


def test_list_orders_by_time_then_the_original_id_not_the_escaped_one(
    dsn: str, schema: str
) -> None:
    s = PgVectorStore(dsn, schema=schema)
    try:
        # "\x00" is stored escaped (as "\u2400" plus a marker), which sorts after "b" in
        # SQL; the original order puts it first
        ids = ["b", "\x00", "a\u2400", "a"]
        s.put_many([make_record("s", f"r{i}", id=i, created_at=5.0) for i in ids])
        s.put(make_record("s", "earlier", id="z", created_at=1.0))
        assert [r.id for r in s.list("s")] == ["z", *sorted(ids)]
        assert [r.id for r in s.get_many("s", ["a", "missing", "\x00", "a"])] == [
            "a",
            "\x00",
            "a",
        ]
    finally:
        s.close()


def test_reads_never_cross_scopes(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    try:
        s.put_many([make_record("a", "mine", id="x"), make_record("a'--", "theirs", id="y")])
        s.put(make_record("b", "b's", id="w", kind=MemoryKind.SEMANTIC))
        assert s.get("b", "x") is None and s.get("a", "y") is None
        assert s.get_many("b", ["x", "y"]) == []
        assert [r.id for r in s.list("a")] == ["x"]
        assert s.list("a", kinds=[MemoryKind.SEMANTIC]) == []
        assert [r.id for r in s.list("b", kinds=["semantic"])] == ["w"]
        assert s.count("a") == 1 and s.count("a'--") == 1 and s.count() == 3
        assert s.scopes() == ["a", "a'--", "b"]
    finally:
        s.close()


def test_count_and_list_leave_archived_records_out_unless_asked(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    try:
        s.put_many([make_record("a", "one", id="1"), make_record("a", "two", id="2")])
        assert s.mark_archived("a", ["1"], at=2000.0) == 1
        assert s.count("a") == 1 and s.count("a", include_archived=True) == 2
        assert [r.id for r in s.list("a")] == ["2"]
        assert [r.id for r in s.list("a", include_archived=True)] == ["1", "2"]
    finally:
        s.close()


def test_superseded_by_returns_only_this_scopes_records_marked_by_those_ids(
    dsn: str, schema: str
) -> None:
    s = PgVectorStore(dsn, schema=schema)
    try:
        mark = (Superseded(by="new", at=2000.0),)
        s.put_many(
            [
                make_record("a", "old", id="old", superseded=mark),
                make_record("a", "other", id="o2", superseded=(Superseded(by="n2", at=2.0e3),)),
                make_record("a", "new", id="new", created_at=2000.0),
                make_record("b", "b's old", id="bold", superseded=mark),
            ]
        )
        assert s.mark_archived("a", ["old"], at=3000.0) == 1  # archived ones count too
        assert [r.id for r in s.superseded_by("a", "new")] == ["old"]
        assert [r.id for r in s.superseded_by("a", ["new", "n2"])] == [
            "o2",
            "old",
        ]  # (created_at, id)
        assert [r.id for r in s.superseded_by("b", "new")] == ["bold"]
        assert s.superseded_by("c", "new") == []
    finally:
        s.close()


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("meta", "'[1, 2]'::json"),  # a dict() of it was a bare TypeError
        ("provenance", "'{\"t1\": 1}'::json"),  # was read as the keys, ("t1",)
        ("superseded", "'[{\"at\": 1}]'::json"),  # was a bare KeyError 'by'
        ("tokens", "-5"),  # was a record no write could make
        ("created_at", "'Infinity'"),
    ],
)
def test_a_damaged_row_is_store_corrupted_naming_the_record(
    dsn: str, schema: str, column: str, value: str
) -> None:
    import psycopg

    from memlab.errors import StoreCorrupted

    s = PgVectorStore(dsn, schema=schema)
    try:
        r = make_record("a", "we deploy on GKE", id="rec-1")
        s.put(r)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"UPDATE {schema}.memlab_records SET {column} = {value}")
        for read in (lambda: s.get("a", "rec-1"), lambda: s.list("a"),
                     lambda: s.get_many("a", ["rec-1"])):  # fmt: skip
            with pytest.raises(StoreCorrupted, match=rf"{schema}\.memlab_records.*'rec-1'"):
                read()
    finally:
        s.close()
