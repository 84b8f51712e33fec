"""SqliteStore specifics: migrations, corruption, other processes, cache invalidation."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import re
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from memlab.errors import MemlabError, StoreCorrupted, StoreError
from memlab.memory import SqliteStore
from memlab.memory.stores.sqlite_schema import SCHEMA_VERSION
from tests.conftest import interrupt_once, make_record, vec


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


@pytest.mark.parametrize("renamed", [False, True])
def test_a_newer_schema_is_refused_before_the_file_is_touched(
    tmp_path: Path, renamed: bool
) -> None:
    """Opening switched a newer store out of its journal mode into WAL (a write) before
    refusing it, and one whose newer schema renamed a table was reported as corrupt
    ('the memlab tables are missing') instead of asking for a newer memlab."""
    p = tmp_path / "m.db"
    SqliteStore(p).close()
    with contextlib.closing(sqlite3.connect(p)) as db:
        db.execute("PRAGMA journal_mode=DELETE")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        if renamed:
            db.execute("ALTER TABLE records RENAME TO records_v2")
    before = p.read_bytes()
    with pytest.raises(StoreError, match="newer than this memlab") as err:
        SqliteStore(p)
    assert not isinstance(err.value, StoreCorrupted)
    assert p.read_bytes() == before


@pytest.mark.parametrize(
    ("version", "says"),
    [
        (-5, "the schema version (PRAGMA user_version) is -5; memlab writes 0 to"),
        (-(2**31), "is -2147483648; memlab writes 0 to"),
        (1, "is 1, but the tables already have a later version's changes (duplicate column"),
    ],
)
def test_a_damaged_schema_version_is_corruption(tmp_path: Path, version: int, says: str) -> None:
    """A negative user_version (a flipped sign bit) was a bare IndexError from the
    migrations, and one reset to 1 below the tables' 3 a StoreError quoting SQLite
    ('duplicate column name: superseded')."""
    p = tmp_path / "m.db"
    with SqliteStore(p) as s:
        s.put(make_record(content="one"))
    with contextlib.closing(sqlite3.connect(p)) as db:
        db.execute(f"PRAGMA user_version = {version}")
    before = p.read_bytes()
    with pytest.raises(StoreCorrupted, match=re.escape(says)):
        SqliteStore(p)
    assert p.read_bytes() == before


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


def test_opening_waits_for_another_writer_to_switch_to_wal(tmp_path: Path) -> None:
    """SQLite refuses the switch to WAL at once (no busy handler) while another
    connection holds a write lock; opening must wait."""
    path = tmp_path / "fresh.sqlite"
    SqliteStore(path).close()
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode=DELETE")
    raw.close()
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


def test_a_path_of_memory_is_an_in_memory_store_as_the_str_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before, Path(":memory:") created a file ':memory:' in the working folder and
    # then kept every record in memory (sqlite3 reads the Path as ":memory:")
    monkeypatch.chdir(tmp_path)
    with SqliteStore(Path(":memory:")) as s:
        s.put(make_record())
        assert s.count("alice") == 1 and s.size_bytes() == 0
    assert list(tmp_path.iterdir()) == []
    with SqliteStore(Path(":memory:")) as s:
        assert s.count() == 0  # nothing was kept


# -- issue 13: raw errors, damage, empty files, creation, small ones ---------------
def test_a_full_disk_is_a_store_error_and_leaves_no_phantom_records(tmp_path: Path) -> None:
    """Defect 5: a full disk surfaced as sqlite3.OperationalError ('cannot rollback -
    no transaction is active', hiding 'disk I/O error')."""
    from tests.conftest import assert_full_disk_leaves_no_phantom_records

    p = tmp_path / "m.db"
    SqliteStore(p).close()
    acked = assert_full_disk_leaves_no_phantom_records(lambda: SqliteStore(p), limit=60_000)
    with SqliteStore(p) as s:
        assert s.count("alice") == acked


def _damaged(tmp_path: Path, sql: str) -> tuple[Path, bytes]:
    p = tmp_path / "m.db"
    with SqliteStore(p) as s:
        s.put(make_record(content="fine", id="ok"))
        s.put(make_record(content="to be damaged", id="bad", provenance=("t1",)))
    raw = sqlite3.connect(p, isolation_level=None)
    raw.execute(sql)
    raw.close()
    return p, p.read_bytes()


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE records SET kind = 'dream' WHERE id = 'bad'",
        "UPDATE records SET source = 'oracle' WHERE id = 'bad'",
        "UPDATE records SET provenance = '[\"t1\"' WHERE id = 'bad'",
        "UPDATE records SET provenance = '{\"a\": 1}' WHERE id = 'bad'",
        "UPDATE records SET meta = 'not json' WHERE id = 'bad'",
        "UPDATE records SET meta = '[1, 2]' WHERE id = 'bad'",
        "UPDATE records SET embedding = x'000000' WHERE id = 'bad'",
        "UPDATE records SET embedding = x'0000803f' WHERE id = 'bad'",
        "UPDATE records SET embedding = 'text' WHERE id = 'bad'",
        "UPDATE records SET salience = 'high' WHERE id = 'bad'",
        "UPDATE records SET salience = 7.5 WHERE id = 'bad'",
        "UPDATE records SET tokens = -3 WHERE id = 'bad'",
        "UPDATE records SET content = '' WHERE id = 'bad'",
        "UPDATE records SET created_at = 'yesterday' WHERE id = 'bad'",
        "UPDATE records SET archived_at = 'later' WHERE id = 'bad'",
        # values no memlab write makes: were loaded (content as bytes, then a bare
        # TypeError in recall; a time past the year 9999)
        "UPDATE records SET content = CAST(content AS BLOB) WHERE id = 'bad'",
        "UPDATE records SET created_at = 1e300 WHERE id = 'bad'",
    ],
)
def test_a_damaged_row_is_store_corrupted_naming_the_record(tmp_path: Path, sql: str) -> None:
    """Defect 5: a damaged row raised a raw ValueError or JSONDecodeError."""
    p, before = _damaged(tmp_path, sql)
    with SqliteStore(p) as s:
        assert s.get("alice", "ok") is not None
        for read in (
            lambda: s.get("alice", "bad"),
            lambda: s.list("alice", include_archived=True),
            lambda: s.get_many("alice", ["ok", "bad"]),
            lambda: s.candidates("alice", vec(0)),
        ):
            with pytest.raises(StoreCorrupted, match=r"record 'bad' is damaged") as err:
                read()
            assert str(p) in str(err.value)
    assert p.read_bytes() == before


@pytest.mark.parametrize("column", ["content", "meta", "scope", "kind", "provenance"])
def test_text_that_is_not_utf8_is_store_corrupted_naming_the_record(
    tmp_path: Path, column: str
) -> None:
    """A flipped byte in a TEXT value gave a plain StoreError quoting the stored text."""
    p, before = _damaged(
        tmp_path,
        f"UPDATE records SET {column} = CAST(x'66ff6f' || CAST({column} AS BLOB) AS TEXT) "
        "WHERE id = 'bad'",
    )
    s = SqliteStore(p)
    reads = [
        lambda: s.list("alice", include_archived=True),
        lambda: s.get_many("alice", ["ok", "bad"]),
        lambda: s.candidates("alice", vec(0)),
    ]
    if column == "scope":  # the record left scope alice
        reads = [s.scopes]
    for read in reads:
        with pytest.raises(
            StoreCorrupted,
            match=rf"record 'bad' holds text that is not valid UTF-8 \(column {column}\)",
        ) as err:
            read()
        assert str(p) in str(err.value)
        assert "to be damaged" not in str(err.value)
    s.close()
    assert p.read_bytes() == before


def test_an_id_that_is_not_utf8_is_store_corrupted_naming_the_row(tmp_path: Path) -> None:
    p, before = _damaged(
        tmp_path, "UPDATE records SET id = CAST(x'66ff6f' AS TEXT) WHERE id = 'bad'"
    )
    with (
        SqliteStore(p) as s,
        pytest.raises(StoreCorrupted, match=r"the record in row 2 .* \(column id\)"),
    ):
        s.list("alice")
    assert p.read_bytes() == before


def test_damaged_dimensions_are_store_corrupted(tmp_path: Path) -> None:
    p, before = _damaged(tmp_path, "UPDATE meta SET value = 'many' WHERE key = 'dims'")
    with pytest.raises(StoreCorrupted, match="dimensions"):
        SqliteStore(p)
    assert p.read_bytes() == before


def test_an_empty_file_is_corruption_not_a_new_store(tmp_path: Path) -> None:
    """Defect 6: a 0-byte file was opened and a schema written into it silently."""
    p = tmp_path / "m.db"
    p.write_bytes(b"")
    with pytest.raises(StoreCorrupted, match="empty"):
        SqliteStore(p)
    assert p.read_bytes() == b""


@pytest.mark.parametrize("blob", [b"x", b"\0", b"S", b"SQLite format 3\0", b"\0" * 511])
def test_a_file_shorter_than_one_page_is_corruption_not_a_new_store(
    tmp_path: Path, blob: bytes
) -> None:
    """A store file cut to 1 byte opened as an empty store and was rewritten whole."""
    p = tmp_path / "m.db"
    p.write_bytes(blob)
    with pytest.raises(StoreCorrupted, match=rf"only {len(blob)} bytes"):
        SqliteStore(p)
    assert p.read_bytes() == blob
    assert not (tmp_path / "m.db-wal").exists()


def test_quick_check_on_open_finds_damaged_pages(tmp_path: Path) -> None:
    """Defect 6: damage inside the b-tree was not noticed on open."""
    p = tmp_path / "m.db"
    with SqliteStore(p) as s:
        s.put_many([make_record(content=f"fact {i} " + "x" * 300) for i in range(300)])
    data = bytearray(p.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    data[3 * page + 8 : 3 * page + 16] = b"\xff" * 8  # a b-tree page's cell pointers
    p.write_bytes(bytes(data))
    with pytest.raises(StoreCorrupted):
        s = SqliteStore(p)
        for scope in s.scopes():
            s.list(scope, include_archived=True)
    assert p.read_bytes() == bytes(data)


def test_another_programs_database_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    raw = sqlite3.connect(p)
    raw.execute("CREATE TABLE invoices (id INTEGER)")
    raw.commit()
    raw.close()
    before = p.read_bytes()
    with pytest.raises(StoreCorrupted, match="not a memlab SQLite store"):
        SqliteStore(p)
    assert p.read_bytes() == before


@pytest.mark.parametrize("bad", [None, 3, b"m.db", "", "  "])
def test_a_bad_path_is_an_input_error_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: object
) -> None:
    """Defect 10: SqliteStore(None) created a database named ./None."""
    from memlab.errors import InputError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="path"):
        SqliteStore(bad)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_creation_killed_midway_leaves_no_file(tmp_path: Path) -> None:
    import os

    p = tmp_path / "m.db"
    ctx = mp.get_context("fork")
    dead = ctx.Process(target=int)
    dead.start()
    dead.join()
    leftovers = [tmp_path / f"m.db.create-{dead.pid}", tmp_path / f"m.db.create-{dead.pid}-wal"]
    for f in leftovers:
        f.write_bytes(b"half")
    live = tmp_path / f"m.db.create-{os.getpid()}-x"
    live.write_bytes(b"someone else")
    with SqliteStore(p) as s:
        s.put(make_record())
        assert s.temp_files_removed == 2
    assert not any(f.exists() for f in leftovers) and live.exists()


def _open_and_write(path: str, worker: int) -> None:
    with SqliteStore(path) as s:
        s.put(make_record(f"w{worker}"))


def test_processes_creating_one_store_at_once_share_it(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_open_and_write, args=(str(p), w)) for w in range(6)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    with SqliteStore(p) as s:
        assert s.count() == 6
    assert sorted(f.name for f in tmp_path.iterdir() if "create" in f.name) == []


def test_a_first_record_committed_while_the_store_opens_is_no_corruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process commits the first record (and with it the dims) between the
    opening checks: the opener must not read that as a store whose records have no
    dims. The commit is made to land right after the dims are read."""
    p = tmp_path / "m.db"
    SqliteStore(p).close()  # the file exists, with no records
    read_dims = SqliteStore._read_dims
    armed = [True]

    def commit_in_between(self: SqliteStore) -> int | None:
        dims = read_dims(self)
        if armed[0]:
            armed[0] = False
            with SqliteStore(p) as other:
                other.put(make_record(id="r0", content="first"))
        return dims

    monkeypatch.setattr(SqliteStore, "_read_dims", commit_in_between)
    with SqliteStore(p) as s:  # raised StoreCorrupted when records were read last
        assert s.count() == 1 and not armed[0]


def test_a_file_from_before_supersession_opens_and_migrates(tmp_path: Path) -> None:
    """tests/fixtures/store-before-supersession.sqlite: schema 1, written by memlab
    before migration 2 (the superseded column)."""
    import shutil

    from tests.conftest import FIXTURES, check_file_from_before_supersession

    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "store-before-supersession.sqlite", path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    check_file_from_before_supersession(lambda: SqliteStore(path))
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
        names = {row[1] for row in db.execute("PRAGMA index_list(records)")}
        assert "records_superseded" in names  # migration 3 on a file that had no index


def test_a_damaged_superseded_column_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    s = SqliteStore(path)
    s.put(make_record(id="r0", content="fact"))
    s.close()
    with sqlite3.connect(path) as db:
        db.execute("""UPDATE records SET superseded = '[{"by": "r0", "at": 1e9}]'""")
    s = SqliteStore(path)
    try:
        with pytest.raises(StoreCorrupted, match="supersede itself"):
            s.list("alice")
    finally:
        s.close()


def test_superseded_by_reads_the_partial_index_of_marked_records(tmp_path: Path) -> None:
    from memlab.memory import Superseded

    store = SqliteStore(tmp_path / "m.db")
    plain = [make_record(content=f"f{i}", created_at=float(i + 1)) for i in range(50)]
    marked = plain[3].copy(superseded=(Superseded(by=plain[9].id, at=10.0, span=(0, 1)),))
    store.put_many([*plain[:3], marked, *plain[4:]])
    assert [r.id for r in store.superseded_by("alice", [plain[9].id])] == [marked.id]
    store.close()
    db = sqlite3.connect(tmp_path / "m.db")
    try:
        plan = " ".join(
            str(row[-1])
            for row in db.execute(
                "EXPLAIN QUERY PLAN SELECT id FROM records "  # superseded_by's condition
                "WHERE scope = ? AND superseded != '[]' ORDER BY created_at, id",
                ("alice",),
            )
        )
        assert "records_superseded" in plan, plan
        (n,) = db.execute(
            "SELECT count(*) FROM records INDEXED BY records_superseded "
            "WHERE scope = 'alice' AND superseded != '[]'"
        ).fetchone()
        assert n == 1  # the index holds the marked record only
    finally:
        db.close()


def test_a_delete_by_another_thread_right_after_a_commit_leaves_no_phantom_in_recall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """put_many updated the column cache after releasing the handle's lock: a thread
    that deleted the record in between (database and cache) was followed by the
    writer's stale upsert, so candidates() kept returning a record get() no longer
    found, until another process wrote to the file."""
    from memlab.memory.stores import indexed

    with SqliteStore(tmp_path / "m.db") as s:
        s.put(make_record(content="kept", id="r0"))
        s.candidates("alice")  # the scope is cached
        real = indexed.ScopeIndex.upsert
        committed, deleted = threading.Event(), threading.Event()

        def upsert(self: indexed.ScopeIndex, r: object) -> None:
            if threading.current_thread().name == "writer":
                committed.set()
                deleted.wait(0.5)  # the deleter runs here unless the lock keeps it out
            real(self, r)  # type: ignore[arg-type]

        monkeypatch.setattr(indexed.ScopeIndex, "upsert", upsert)
        writer = threading.Thread(
            target=lambda: s.put(make_record(content="gone", id="r1")), name="writer"
        )
        writer.start()
        assert committed.wait(5)
        deleter = threading.Thread(target=lambda: (s.delete("alice", "r1"), deleted.set()))
        deleter.start()
        writer.join()
        deleter.join()
        c = s.candidates("alice")
        assert s.get("alice", "r1") is None
        assert [i for i, m in zip(c.ids, c.mask, strict=True) if m] == ["r0"]


def test_a_cache_update_interrupted_after_the_commit_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt between a put's commit and its cache upsert left the scope's
    cached columns without the record: count() and get() found it, candidates()
    (recall) never did, until another process wrote to the file."""
    from memlab.memory.stores import indexed

    with SqliteStore(tmp_path / "m.db") as s:
        s.put(make_record(content="one", id="r0"))
        s.candidates("alice")  # the scope is cached
        interrupt_once(monkeypatch, indexed.ScopeIndex, "upsert")
        with pytest.raises(KeyboardInterrupt):
            s.put(make_record(content="two", id="r1"))
        assert s.count("alice") == 2  # committed
        c = s.candidates("alice")
        assert sorted(i for i, m in zip(c.ids, c.mask, strict=True) if m) == ["r0", "r1"]


def test_a_store_is_created_on_a_file_system_without_hard_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.link fails with EPERM on FAT and exFAT; creating a store there raised
    'cannot create memory store m.db: Operation not permitted', though a JsonlStore
    in the same folder is created (files.write_whole renames instead)."""
    import errno
    import os

    def no_link(src: object, dst: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    with SqliteStore(tmp_path / "m.db") as s:
        s.put(make_record(content="one", id="r0"))
    with SqliteStore(tmp_path / "m.db") as s:
        assert [r.id for r in s.list("alice")] == ["r0"]
    assert not [p for p in tmp_path.iterdir() if ".create-" in p.name]


def _killed_writer(path: str) -> None:
    import os
    import signal

    s = SqliteStore(path)
    for i in range(5):
        s.put(make_record("old", f"a note of the deleted store {i}", id=f"old{i}"))
    os.kill(os.getpid(), signal.SIGKILL)  # before any checkpoint: the writes are in -wal


def test_a_deleted_store_s_write_ahead_log_is_not_replayed_into_a_new_one(
    tmp_path: Path,
) -> None:
    """A store removed after a crash (rm m.db, its -wal and -shm left) came back: the
    new, empty store SQLite opened under that name replayed the old -wal and held the
    deleted store's five records."""
    p = tmp_path / "m.db"
    proc = mp.get_context("fork").Process(target=_killed_writer, args=(str(p),))
    proc.start()
    proc.join()
    assert (tmp_path / "m.db-wal").stat().st_size > 0
    p.unlink()
    with pytest.raises(StoreCorrupted, match=r"m\.db-wal, the uncheckpointed writes"):
        SqliteStore(p)
    assert not p.exists()
    (tmp_path / "m.db-wal").unlink()  # moved aside, as the message says
    with SqliteStore(p) as s:
        assert s.count() == 0 and s.scopes() == []


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_store_file_removed_or_replaced_while_open_is_refused(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection kept the old file open: after rm m.db (or a backup copied over
    it) a put was acknowledged into a file no later open sees, so it was lost, and
    reads kept showing the old file. JsonlStore already refused both."""
    import shutil

    p = tmp_path / "m.db"
    monkeypatch.chdir(tmp_path)
    s = SqliteStore("m.db")  # a relative path: a change of directory is no removal
    s.put(make_record(content="one", id="r0"))
    monkeypatch.chdir(tmp_path.parent)
    assert s.count() == 1
    if how == "removed":
        p.unlink()
    else:
        with SqliteStore(tmp_path / "copy.db") as other:
            other.put(make_record(content="the copy", id="c0"))
        shutil.copy(tmp_path / "copy.db", tmp_path / "tmp.db")
        (tmp_path / "tmp.db").replace(p)
    with pytest.raises(StoreError, match=f"m.db was {how}.* while open; reopen the store"):
        s.put(make_record(content="two", id="r1"))
    with pytest.raises(StoreError, match="while open"):
        s.count()
    s.close()
