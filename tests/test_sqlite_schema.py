"""memlab.memory.stores.sqlite_schema: migrations, columns and the row codec (the
store over them, files from older versions included: test_sqlite.py)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memlab.memory import Source
from memlab.memory.records import Superseded
from memlab.memory.stores.sqlite import SqliteStore
from memlab.memory.stores.sqlite_schema import (
    COLUMNS,
    EXPECTED_COLUMNS,
    SCHEMA_VERSION,
    apply_migrations,
    by_ids,
    record_to_row,
    row_to_record,
)
from tests.conftest import make_record


def test_migrations_from_an_empty_file_build_the_columns_the_codec_reads() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        apply_migrations(db, 0)
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        names = [row[1] for row in db.execute("PRAGMA table_info(records)")]
        assert sorted(names) == sorted(EXPECTED_COLUMNS)
        apply_migrations(db, SCHEMA_VERSION)  # nothing left to do
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        db.close()


def test_a_row_decodes_to_the_record_it_was_made_from() -> None:
    rec = make_record(
        content="we moved to Fly.io", source=Source.TOOL, meta={"speaker": "Ana", "n": [1, 2]},
        provenance=("turn-3",), access_count=4, archived_at=2000.0,
        superseded=(Superseded("r9", 1500.0, (0, 8), "explicit-old-value", 0.9, "off X"),),
    )  # fmt: skip
    back = row_to_record(record_to_row(rec), dims=len(rec.embedding))
    for f in dataclasses.fields(rec):
        if f.name != "embedding":
            assert getattr(back, f.name) == getattr(rec, f.name), f.name
    assert back.embedding.dtype == np.float32
    assert np.array_equal(back.embedding, rec.embedding)


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        (4, b"\x00\x00\x80", "float32 vector"),
        (4, b"", "float32 vector"),
        (5, "high", "salience"),
        (6, 2.5, "tokens"),
    ],
)
def test_a_damaged_value_is_a_decoding_error(column: int, value: object, match: str) -> None:
    row = list(record_to_row(make_record()))
    row[column] = value
    with pytest.raises((ValueError, TypeError), match=match):
        row_to_record(tuple(row))


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        (0, b"r1", "id is bytes, not text"),
        (1, b"alice", "scope is bytes, not text"),
        (3, b"we deploy on GKE", "content is bytes, not text"),
        (0, "x" * 257, "the id has 257 characters, more than 256"),
        (7, 1e300, "not epoch seconds within the years 1..9999"),
        (8, -1e15, "not epoch seconds within the years 1..9999"),
        (10, 1e13, "not epoch seconds within the years 1..9999"),
    ],
)
def test_a_value_no_write_could_make_is_a_decoding_error(
    column: int, value: object, match: str
) -> None:
    """A BLOB id or content (written outside memlab) was loaded as bytes: list()
    returned a record with id b'r1' and a recall of its scope was a bare TypeError
    ('cannot use a string pattern on a bytes-like object'); a created_at of 1e300 or
    a 257-character id, which validate() refuses and the JSONL store reports, loaded."""
    row = list(record_to_row(make_record()))
    row[column] = value
    with pytest.raises(ValueError, match=match):
        row_to_record(tuple(row))


def test_an_embedding_of_other_dimensions_is_a_decoding_error() -> None:
    row = record_to_row(make_record())
    with pytest.raises(ValueError, match="dimensions"):
        row_to_record(row, dims=len(row[4]) // 4 + 1)


def test_reads_and_deletes_by_id_use_the_primary_key(tmp_path: Path) -> None:
    # Without table statistics SQLite picks the scope index for "scope = ? AND id IN
    # (...)" and scans every row of the scope: a 35-id read took 0.2 s at 200k records.
    store = SqliteStore(tmp_path / "m.db")
    store.put_many([make_record(content=f"f{i}") for i in range(50)])
    store.close()
    db = sqlite3.connect(tmp_path / "m.db")
    try:
        for statement in (f"SELECT {COLUMNS} FROM records", "DELETE FROM records"):
            sql = by_ids(statement, 3)
            plan = " ".join(
                str(row[-1])
                for row in db.execute("EXPLAIN QUERY PLAN " + sql, ("alice", "a", "b", "c"))
            )
            assert "(id=?)" in plan and "scope" not in plan, (statement, plan)
    finally:
        db.close()
