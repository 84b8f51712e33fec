"""The SQLite store's file format: the numbered schema migrations, the records
table's columns, and the codec between a row and a MemoryRecord (every value
checked as it is decoded, so a damaged row is reported, never loaded). The store
itself, with its transactions and column cache, is ``memlab.memory.stores.sqlite``.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from typing import Any

import numpy as np

from memlab.memory.checks import MAX_EPOCH, MAX_ID_CHARS, MIN_EPOCH
from memlab.memory.records import MemoryRecord
from memlab.memory.stores.codec import superseded_from_list, superseded_to_list

# Each entry moves the schema from version i to i + 1. Never edit a released one.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS records (
        id TEXT PRIMARY KEY,
        scope TEXT NOT NULL,
        kind TEXT NOT NULL,
        content TEXT NOT NULL,
        embedding BLOB NOT NULL,
        salience REAL NOT NULL,
        tokens INTEGER NOT NULL,
        created_at REAL NOT NULL,
        last_accessed_at REAL NOT NULL,
        access_count INTEGER NOT NULL,
        archived_at REAL,
        source TEXT NOT NULL,
        provenance TEXT NOT NULL,
        meta TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS records_scope_archived ON records (scope, archived_at);
    """,
    # 2: supersession (MemoryRecord.superseded as JSON; '[]' for the records of a
    # file written before it, which are all in force).
    """
    ALTER TABLE records ADD COLUMN superseded TEXT NOT NULL DEFAULT '[]';
    """,
    # 3: the records that carry supersession entries, per scope (superseded_by, which
    # forget lifts through, reads these instead of the whole scope).
    """
    CREATE INDEX IF NOT EXISTS records_superseded ON records (scope) WHERE superseded != '[]';
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
COLUMNS = (
    "id, scope, kind, content, embedding, salience, tokens, created_at, "
    "last_accessed_at, access_count, archived_at, source, provenance, meta, superseded"
)
#: the column names, in the order of COLUMNS
EXPECTED_COLUMNS = [c.strip() for c in COLUMNS.split(",")]
#: one bound parameter per column, for an INSERT of COLUMNS
PLACEHOLDERS = ",".join("?" * len(EXPECTED_COLUMNS))


def row_to_record(row: tuple[Any, ...], dims: int | None = None) -> MemoryRecord:
    """Decode and check one row.

    Raises:
        ValueError, TypeError, KeyError, InputError: the row is damaged (the
            caller reports it as StoreCorrupted).
    """
    for col, name in ((0, "id"), (1, "scope"), (3, "content")):
        if not isinstance(row[col], str):  # a BLOB, or a number SQLite kept as one
            raise ValueError(f"{name} is {type(row[col]).__name__}, not text")
    blob = row[4]
    if not isinstance(blob, bytes) or not blob or len(blob) % 4:
        raise ValueError(f"embedding is not a float32 vector ({type(blob).__name__})")
    if dims is not None and len(blob) != 4 * dims:
        raise ValueError(f"embedding has {len(blob) // 4} dimensions, the store {dims}")
    for col, name in ((5, "salience"), (7, "created_at"), (8, "last_accessed_at")):
        if not isinstance(row[col], int | float):
            raise ValueError(f"{name} is {type(row[col]).__name__} {row[col]!r}, not a number")
    for col, name in ((6, "tokens"), (9, "access_count")):
        if not isinstance(row[col], int):
            raise ValueError(f"{name} is {type(row[col]).__name__} {row[col]!r}, not an integer")
    if row[10] is not None and not isinstance(row[10], int | float):
        raise ValueError(f"archived_at is {row[10]!r}, not a number")
    provenance = json.loads(row[12])
    if not isinstance(provenance, list):
        raise ValueError(f"provenance is {type(provenance).__name__}, not a list")
    meta = json.loads(row[13])
    if not isinstance(meta, dict):
        raise ValueError(f"meta is {type(meta).__name__}, not an object")
    record = MemoryRecord(
        id=row[0],
        scope=row[1],
        kind=row[2],
        content=row[3],
        embedding=np.frombuffer(blob, dtype="<f4").astype(np.float32),
        salience=row[5],
        tokens=row[6],
        created_at=row[7],
        last_accessed_at=row[8],
        access_count=row[9],
        archived_at=row[10],
        source=row[11],
        provenance=tuple(provenance),
        meta=meta,
        superseded=superseded_from_list(json.loads(row[14])),
    )
    for entry in record.superseded:
        entry.check(record)
    # What validate() checks, minus what SQLite and json.loads already guarantee
    # (valid unicode, JSON-encodable meta), since every row of a scope passes here.
    if not row[0] or not row[1] or not row[3] or not row[3].strip():
        raise ValueError("an empty id, scope or content")
    if len(row[0]) > MAX_ID_CHARS:
        raise ValueError(f"the id has {len(row[0])} characters, more than {MAX_ID_CHARS}")
    if not (0.0 <= row[5] <= 1.0) or row[6] < 0 or row[9] < 0:
        raise ValueError(
            f"salience {row[5]}, tokens {row[6]} or access_count {row[9]} is out of range"
        )
    times = (row[7], row[8], 0.0 if row[10] is None else row[10])
    if not all(MIN_EPOCH <= t <= MAX_EPOCH for t in times):  # NaN fails too
        raise ValueError(f"a time is not epoch seconds within the years 1..9999: {times}")
    if not all(isinstance(p, str) for p in provenance):
        raise ValueError("provenance holds a non-string")
    if not math.isfinite(float(record.embedding.sum(dtype=np.float64))):
        raise ValueError("the embedding holds NaN or infinite values")
    return record


def record_to_row(r: MemoryRecord) -> tuple[Any, ...]:
    return (
        r.id,
        r.scope,
        r.kind.value,
        r.content,
        np.asarray(r.embedding, dtype="<f4").tobytes(),
        float(r.salience),
        int(r.tokens),
        float(r.created_at),
        float(r.last_accessed_at),
        int(r.access_count),
        None if r.archived_at is None else float(r.archived_at),
        r.source.value,
        json.dumps(list(r.provenance), ensure_ascii=False),
        json.dumps(r.meta, ensure_ascii=False),
        json.dumps(superseded_to_list(r.superseded), ensure_ascii=False),
    )


def apply_migrations(db: sqlite3.Connection, version: int) -> None:
    """Bring ``db`` from schema ``version`` to SCHEMA_VERSION, one transaction each."""
    for target in range(version + 1, SCHEMA_VERSION + 1):
        db.execute("BEGIN IMMEDIATE")
        try:
            current = db.execute("PRAGMA user_version").fetchone()[0]
            if current < target:  # another process may have migrated meanwhile
                for stmt in MIGRATIONS[target - 1].split(";"):
                    if stmt.strip():
                        db.execute(stmt)
                db.execute(f"PRAGMA user_version = {target}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise


def by_ids(statement: str, n: int) -> str:
    """``statement`` restricted to one scope's rows with ``n`` given ids (parameters:
    the scope, then the ids). ``+scope`` keeps SQLite on the primary key: without
    table statistics its planner picks the scope index for ``scope = ?`` and scans
    every row of the scope (a 35-id read took 0.2 s at 200k records)."""
    return f"{statement} WHERE +scope = ? AND id IN ({','.join('?' * n)})"
