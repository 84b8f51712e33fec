"""SqliteStore specifics: migrations, corruption, other processes, cache invalidation."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from memlab.errors import MemlabError, StoreCorrupted, StoreError
from memlab.memory import SqliteStore
from memlab.memory.stores.sqlite import SCHEMA_VERSION
from tests.conftest import make_record, vec


def test_schema_version_and_index(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "m.db")
    assert s.schema_version == SCHEMA_VERSION
    s.close()
    db = sqlite3.connect(tmp_path / "m.db")
    idx = db.execute("PRAGMA index_list(records)").fetchall()
    names = {row[1] for row in idx}
    assert "records_scope_archived" in names
    cols = [row[2] for row in db.execute("PRAGMA index_info(records_scope_archived)")]
    assert cols == ["scope", "archived_at"]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # Reopening runs no migration twice.
    SqliteStore(tmp_path / "m.db").close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "m.db").close()
    db = sqlite3.connect(tmp_path / "m.db")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer than this memlab"):
        SqliteStore(tmp_path / "m.db")


def test_corrupted_file_is_reported_not_replaced(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    p.write_bytes(b"this is not a database at all" * 100)
    before = p.read_bytes()
    with pytest.raises(StoreCorrupted, match="not a database"):
        SqliteStore(p)
    assert p.read_bytes() == before


def test_other_connection_writes_invalidate_cache(tmp_path: Path) -> None:
    a = SqliteStore(tmp_path / "m.db")
    b = SqliteStore(tmp_path / "m.db")
    r = make_record(content="first")
    a.put(r)
    assert b.candidates("alice", vec(0)).n_active == 1  # b caches the scope
    r2 = make_record(content="second")
    a.put(r2)
    a.touch("alice", [r.id], at=5.0)
    c = b.candidates("alice", vec(0))
    assert c.n_active == 2
    assert c.access_count[c.ids.index(r.id)] == 1
    a.delete("alice", [r.id])
    c = b.candidates("alice", vec(0))
    assert [c.ids[i] for i in np.flatnonzero(c.mask)] == [r2.id]


def _writer(path: str, worker: int, n: int) -> None:
    s = SqliteStore(path)
    for i in range(n):
        s.put(make_record(f"w{worker}", content=f"worker {worker} fact {i}", created_at=i))
    s.close()


def test_two_processes_writing_lose_nothing(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    SqliteStore(p).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(p), w, 150)) for w in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    s = SqliteStore(p)
    assert s.count("w0") == 150 and s.count("w1") == 150


def test_lexical_signal_sees_other_connections_writes(tmp_path: Path) -> None:
    a = SqliteStore(tmp_path / "m.db")
    b = SqliteStore(tmp_path / "m.db")
    a.put(make_record(content="we deploy on gke"))
    first = b.candidates("alice", vec(0), text="gke")
    assert first.lexical is not None and first.lexical.max() > 0
    a.put(make_record(content="gke gke gke everywhere"))
    second = b.candidates("alice", vec(0), text="gke")
    assert second.n_active == 2 and second.lexical is not None
    best = second.ids[int(np.argmax(second.lexical))]
    assert b.get("alice", best).content == "gke gke gke everywhere"  # type: ignore[union-attr]


def test_opening_a_fresh_file_waits_for_another_writer(tmp_path: Path) -> None:
    """Two processes creating one store at once: SQLite refuses the switch to WAL at
    once (no busy handler) while the other holds a write lock; opening must wait."""
    path = tmp_path / "fresh.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    release.start()
    try:
        store = SqliteStore(path, timeout=10)
        store.put(make_record("s", "a fact"))
        assert store.count("s") == 1
        store.close()
    finally:
        release.join()
        other.close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_folder_is_not_a_store_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=f"{tmp_path} is a folder") as err:
        SqliteStore(tmp_path)
    assert isinstance(err.value, MemlabError)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_an_error_unless_asked_to_create_it(tmp_path: Path) -> None:
    typo = tmp_path / "stroes" / "memory.db"
    with pytest.raises(StoreError, match="does not exist.*create_dirs=True"):
        SqliteStore(typo)
    assert not typo.parent.exists()  # nothing created
    with SqliteStore(typo, create_dirs=True) as s:
        s.put(make_record())
    with SqliteStore(typo) as s:
        assert s.count("alice") == 1
    with SqliteStore(":memory:") as s:  # no folder involved
        assert s.count() == 0
