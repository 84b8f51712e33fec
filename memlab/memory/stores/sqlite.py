"""SqliteStore: a durable MemoryStore in one SQLite file (stdlib sqlite3, WAL).

Embeddings are float32 BLOBs; ranking scans them with numpy from a per-scope
column cache that is loaded once and kept in step with this process's writes.
Writes by other processes are noticed through ``PRAGMA data_version`` and drop
the cache. One transaction per batch; numbered migrations in ``user_version``.

Damage is reported, never repaired: opening runs ``PRAGMA quick_check`` (or
``integrity_check``) before anything is written, a file that is empty, shorter
than one page or another program's database is refused, and every row is checked as it is
loaded, so a damaged value raises StoreCorrupted naming the file and the record.
A new file is built under a temporary name and linked into place, so a crash
while creating a store never leaves an empty or half-initialized file.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import (
    DimensionMismatch,
    InputError,
    MemlabError,
    StoreCorrupted,
    StoreError,
    StoreLocked,
)
from memlab.memory.checks import check_bool, check_number, check_path
from memlab.memory.records import MemoryKind, MemoryRecord, check_scope
from memlab.memory.stores.base import (
    STORES,
    Candidates,
    check_candidates_args,
    check_dims,
    check_records,
    check_store_path,
    check_time,
    check_valid_at,
    foreign_ids,
    kind_filter,
    marked_by,
    scoped_ids,
)
from memlab.memory.stores.files import pid_alive
from memlab.memory.stores.indexed import ScanPolicy, ScopeIndex
from memlab.memory.stores.sqlite_schema import (
    COLUMNS,
    EXPECTED_COLUMNS,
    PLACEHOLDERS,
    SCHEMA_VERSION,
    apply_migrations,
    by_ids,
    record_to_row,
    row_to_record,
)

_CHUNK = 900  # stay far below SQLite's bound-parameter limit


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


INTEGRITY_CHECKS = ("quick", "full", "off")
#: SQLite's smallest page size; a database file holds at least one page
_MIN_DB_BYTES = 512


#: the records table's text columns, read as bytes to find one that is not UTF-8
_TEXT_NAMES = ("id", "scope", "kind", "content", "source", "provenance", "meta", "superseded")
_TEXT_COLUMNS = ", ".join(_TEXT_NAMES)


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _size(path: Path) -> int:
    """The size of ``path`` in bytes, 0 if it does not exist."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _sidecars(db_file: Path) -> list[Path]:
    return [db_file.with_name(db_file.name + s) for s in ("", "-wal", "-shm", "-journal")]


def enable_wal(db: sqlite3.Connection, timeout: float) -> None:
    """Switch ``db``'s file to WAL mode, waiting up to ``timeout`` s for other processes.

    Changing the journal mode needs an exclusive lock, and SQLite answers "database
    is locked" at once, without its busy handler, while another process holds a
    write lock (e.g. another process creating the same fresh file).
    """
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() in ("wal", "memory"):
            return
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(0.2, delay * 2)


@STORES.register("sqlite")
class SqliteStore:
    """A durable MemoryStore backed by SQLite.

    Args:
        path: the database file, created if absent; ``":memory:"`` (a str or a Path)
            keeps the store in memory, as sqlite3 does. Its folder must exist unless
            ``create_dirs`` is true (so a mistyped path raises instead of starting a
            new, empty store).
        timeout: seconds to wait for another process's write lock.
        create_dirs: create the folder of ``path`` (and its parents) if missing.
        scan: how a recall scans a scope's vectors: ``"float32"`` (exact, the
            default), ``"int8"`` (int8 codes scanned by ONNX Runtime, with an error
            bound that keeps the float32 ranking; needs ``memlab[int8]``) or
            ``"bits"`` (sign bits, then an exact float32 re-rank of the nearest
            rows; it pays off only when similarity dominates the score). See
            memlab.memory.stores.indexed.ScanPolicy.
        scan_rerank: rows the ``"bits"`` scan re-ranks with their float32 cosine.
        scan_min_rows: scopes with fewer rows are scanned in float32.

    Raises:
        StoreError: ``path`` is a folder, or its folder is missing and
            ``create_dirs`` is false.
        StoreCorrupted: the file is not an intact SQLite database.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        timeout: float = 30.0,
        create_dirs: bool = False,
        integrity: str = "quick",
        scan: str = ScanPolicy.codes,
        scan_rerank: int = ScanPolicy.rerank,
        scan_min_rows: int = ScanPolicy.min_rows,
    ) -> None:
        self.scan = ScanPolicy(scan, scan_rerank, scan_min_rows)
        # sqlite3 reads Path(":memory:") as ":memory:" too: before, only the str was
        # seen as one, so a Path made a stray ':memory:' file in the working folder
        # and then stored every record in memory, never in that file
        memory = isinstance(path, str | os.PathLike) and os.fspath(path) == ":memory:"
        # Absolute: the file is stat'ed at every call (and measured), and a relative
        # path would name another file once the process changes its directory.
        self.path = ":memory:" if memory else os.path.abspath(check_path(path, "SqliteStore path"))
        timeout = check_number(timeout, "SqliteStore timeout", lo=0.0)
        check_bool(create_dirs, "SqliteStore create_dirs")
        if integrity not in INTEGRITY_CHECKS:
            raise InputError(
                f"SqliteStore integrity must be one of {list(INTEGRITY_CHECKS)}, got {integrity!r}"
            )
        self.integrity = integrity
        self._mutex = threading.RLock()
        self._cache: dict[str, ScopeIndex] = {}
        self._closed = True  # until the connection is open
        self._ident: tuple[int, int] | None = None  # the file opened (device, inode)
        self.temp_files_removed = 0
        if not memory:
            file = Path(self.path)
            check_store_path(file, create_dirs, "SqliteStore")
            self._clean_temp_files(file)
            try:
                size = file.stat().st_size
            except FileNotFoundError:
                self._check_no_orphans(file)
                self._create(file, timeout)
            except OSError as exc:
                raise StoreError(f"memory store {self.path}: {exc.strerror or exc}") from None
            else:
                self._check_size(size)
        try:
            self._db = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._db_error(exc) from None
        self._closed = False
        try:
            self._check_integrity()
            self._check_schema()
            enable_wal(self._db, timeout)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
            self._check_columns()
            # records first: the dims row is committed with (or before) the first
            # record and never deleted, so once a record is seen its dims are there
            # too; read the other way round, a record another process commits in
            # between would read as a corrupt store
            stored = self._db.execute("SELECT 1 FROM records LIMIT 1").fetchone() is not None
            self._dims = self._read_dims()
            if self._dims is None and stored:
                raise StoreCorrupted(
                    self.path, None, "records are stored but their dimensions are not"
                )
            self._data_version = self._read_data_version()
            self._ident = self._file_ident()
        except BaseException as exc:
            # the error is described before closing: describing it may read the file
            error = self._db_error(exc) if isinstance(exc, sqlite3.Error) else None
            self.close()
            if error is not None:
                raise error from None
            raise

    def _check_size(self, size: int) -> None:
        """Refuse a file too short to be a SQLite database, before SQLite sees it.

        SQLite takes a 1-byte file for a new, empty database and writes a schema
        into it, so a store file cut to 1 byte would be silently reset. memlab
        creates its file whole, at least one page (512 bytes is SQLite's smallest
        page), so any shorter file is damage.
        """
        if size == 0:
            raise StoreCorrupted(
                self.path,
                None,
                "the file is empty (0 bytes), and memlab never leaves an empty store "
                "file (it creates the file whole)",
            )
        if size < _MIN_DB_BYTES:
            raise StoreCorrupted(
                self.path,
                None,
                f"the file is only {size} bytes, shorter than the smallest SQLite database "
                f"({_MIN_DB_BYTES} bytes, one page), and memlab creates its file whole",
            )

    def _check_no_orphans(self, file: Path) -> None:
        """Refuse to create ``file`` beside another database's leftovers.

        A store deleted after a crash leaves its ``-wal`` (or a rollback
        ``-journal``), holding committed transactions. SQLite replays a ``-wal``
        into whatever file next has the name, so the new, empty store would open
        holding the deleted one's records. A ``-wal`` appears only once its file
        exists, so one seen while the file is still missing is such a leftover,
        not another process's store in the making. (SQLite rebuilds a ``-shm``;
        an empty ``-wal`` holds nothing.)
        """
        names = [p.name for p in _sidecars(file)[1:] if _size(p) and not p.name.endswith("-shm")]
        if names and not file.exists():
            raise StoreCorrupted(
                self.path,
                None,
                f"the file is missing, but {' and '.join(names)}, the uncheckpointed "
                "writes of a store by that name, remained when it was deleted; SQLite "
                "would replay them into a new file and bring back that store's records. "
                "Move them aside too, or restore the file they belong to",
            )

    def _create(self, file: Path, timeout: float) -> None:
        """Build a new store under a temporary name, then link it into place (a
        process that loses a race to create the same file uses the winner's; a
        file system without hard links gets a rename)."""
        tmp = file.with_name(f"{file.name}.create-{os.getpid()}")
        try:
            for leftover in _sidecars(tmp):
                leftover.unlink(missing_ok=True)
            db = sqlite3.connect(tmp, timeout=timeout, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                apply_migrations(db, 0)
            finally:
                db.close()  # checkpoints the WAL into the file and removes it
            try:
                os.link(tmp, file)
            except FileExistsError:
                pass  # another process created it first: this one uses that file
            except OSError:
                # A file system without hard links (FAT, exFAT: EPERM): rename,
                # unless another process created the file meanwhile, as
                # files.write_whole does for the JSONL store.
                if not file.exists():
                    os.replace(tmp, file)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot create memory store {file}: {exc}") from None
        except OSError as exc:
            raise StoreError(f"cannot create memory store {file}: {exc.strerror or exc}") from None
        finally:
            for leftover in _sidecars(tmp):
                with contextlib.suppress(OSError):
                    leftover.unlink(missing_ok=True)

    def _clean_temp_files(self, file: Path) -> None:
        """Remove what a process killed while creating this store left behind."""
        try:
            names = os.listdir(file.parent)
        except OSError:
            return
        prefix = f"{file.name}.create-"
        for name in names:
            if not name.startswith(prefix):
                continue
            pid = name[len(prefix) :].split("-", 1)[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                with contextlib.suppress(OSError):
                    (file.parent / name).unlink()
                    self.temp_files_removed += 1

    def _check_integrity(self) -> None:
        if self.integrity == "off" or self.path == ":memory:":
            return
        pragma = "quick_check" if self.integrity == "quick" else "integrity_check"
        rows = self._db.execute(f"PRAGMA {pragma}(5)").fetchall()
        if [r[0] for r in rows] != ["ok"]:
            detail = "; ".join(str(r[0]) for r in rows)
            raise StoreCorrupted(self.path, None, f"SQLite {pragma} failed: {detail}")

    def _check_schema(self) -> None:
        """Refuse a newer memlab's store, another program's database, and a memlab
        one missing its tables (columns are checked after the migrations, which may
        add some). Runs before anything is written: switching to WAL changes the
        file, and a newer memlab may have renamed tables."""
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version < 0:
            raise StoreCorrupted(
                self.path,
                None,
                f"the schema version (PRAGMA user_version) is {version}; memlab writes "
                f"0 to {SCHEMA_VERSION}",
            )
        self._refuse_newer(version)
        tables = {
            row[0]
            for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if version == 0:
            if tables:
                raise StoreCorrupted(
                    self.path,
                    None,
                    f"not a memlab SQLite store (it holds other tables: {sorted(tables)[:5]})",
                )
            return
        if not {"meta", "records"} <= tables:
            raise StoreCorrupted(
                self.path, None, f"the memlab tables are missing (found {sorted(tables)[:5]})"
            )

    def _check_columns(self) -> None:
        """After the migrations: the records table has every column memlab reads."""
        cols = {row[1] for row in self._db.execute("PRAGMA table_info(records)")}
        missing = [c for c in EXPECTED_COLUMNS if c not in cols]
        if missing:
            raise StoreCorrupted(self.path, None, f"the records table lacks the columns {missing}")

    def _read_dims(self) -> int | None:
        row = self._db.execute("SELECT value FROM meta WHERE key='dims'").fetchone()
        if row is None:
            return None
        try:
            dims = int(row[0])
        except (TypeError, ValueError):
            dims = 0
        if dims < 1:
            raise StoreCorrupted(self.path, None, f"the stored dimensions are {row[0]!r}")
        return dims

    def _db_error(self, exc: sqlite3.Error) -> StoreError:
        msg = str(exc)
        if "locked" in msg or "busy" in msg:
            return StoreLocked(
                f"memory store {self.path} is locked by another process ({msg}); retry later"
            )
        if isinstance(exc, sqlite3.DatabaseError) and (
            "not a database" in msg or "malformed" in msg or "corrupt" in msg
        ):
            return StoreCorrupted(self.path, None, msg)
        if msg.startswith("Could not decode to UTF-8"):
            # sqlite3's message quotes the whole stored text, which is the user's
            # data (and may be long): name the record instead.
            return StoreCorrupted(self.path, None, self._undecodable())
        if "disk" in msg or "full" in msg or "I/O" in msg:
            return StoreError(
                f"cannot write memory store {self.path}: {msg}; nothing was changed. Is the "
                "disk (or the file size limit) full? Free some space and retry"
            )
        if "readonly" in msg or "unable to open" in msg:
            return StoreError(
                f"cannot open or write memory store {self.path}: {msg}; check the file's and "
                "its folder's permissions"
            )
        return StoreError(f"memory store {self.path}: {msg}")

    def _undecodable(self) -> str:
        """Say which record holds text that is not valid UTF-8, without quoting it.

        sqlite3 raises while fetching, before a row reaches ``_decode``, so the
        rows are read again with text as bytes. The caller holds ``_mutex``.
        """
        found = "a stored text value is not valid UTF-8"
        if self._closed:
            return found
        saved = self._db.text_factory
        self._db.text_factory = bytes
        try:
            for rowid, *values in self._db.execute(f"SELECT rowid, {_TEXT_COLUMNS} FROM records"):
                bad = [
                    name
                    for name, value in zip(_TEXT_NAMES, values, strict=True)
                    if isinstance(value, bytes) and not _is_utf8(value)
                ]
                if not bad:
                    continue
                rid = values[0]
                if isinstance(rid, bytes) and _is_utf8(rid):
                    what = f"record {rid.decode()[:80]!r}"
                else:
                    what = f"the record in row {rowid}"
                return f"{what} holds text that is not valid UTF-8 (column {', '.join(bad)})"
        except sqlite3.Error:
            pass  # the original error is the one to report
        finally:
            self._db.text_factory = saved
        return found

    def _decode(self, row: tuple[Any, ...]) -> MemoryRecord:
        try:
            return row_to_record(row, self._dims)
        except Exception as exc:
            rid = row[0] if row and isinstance(row[0], str) else None
            what = f"record {rid[:80]!r}" if rid else "a record"
            raise StoreCorrupted(
                self.path, None, f"{what} is damaged ({type(exc).__name__}: {exc})"
            ) from None

    def _refuse_newer(self, version: int) -> None:
        """Refuse a schema ``version`` newer than this memlab's."""
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"memory store {self.path} has schema version {version}, newer than this "
                f"memlab understands ({SCHEMA_VERSION}); upgrade memlab"
            )

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        self._refuse_newer(version)  # another process may have upgraded it since
        if version < SCHEMA_VERSION:
            try:
                apply_migrations(self._db, version)
            except sqlite3.OperationalError as exc:
                # A migration's own change is already there: the version was
                # reset (or damaged) below the tables'. Each migration runs in its
                # own transaction, and the failed one was rolled back.
                if "duplicate column" in str(exc) or "already exists" in str(exc):
                    raise StoreCorrupted(
                        self.path,
                        None,
                        f"the schema version (PRAGMA user_version) is {version}, but the "
                        f"tables already have a later version's changes ({exc})",
                    ) from None
                raise

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    # -- plumbing -----------------------------------------------------------------
    def _read_data_version(self) -> int:
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def _file_ident(self) -> tuple[int, int] | None:
        """The (device, inode) of the file at ``path``; None for ``:memory:`` or a
        missing file."""
        if self.path == ":memory:":
            return None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _check(self) -> None:
        """Fail if closed, or if the file was removed or replaced since it was opened;
        drop caches when another connection changed the file."""
        if self._closed:
            raise StoreError(f"memory store {self.path} is closed")
        if self._ident is not None and self._file_ident() != self._ident:
            # The connection still holds the old file: what it wrote from now on
            # would go to a file no later open sees (JsonlStore refuses the same).
            gone = not os.path.exists(self.path)
            raise StoreError(
                f"memory store {self.path} was "
                + ("removed" if gone else "replaced by another file (a copy restored?)")
                + " while open; reopen the store"
            )
        version = self._read_data_version()
        if version != self._data_version:
            self._data_version = version
            self._cache.clear()
            self._dims = self._read_dims()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._mutex:
            try:
                self._check()
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._db_error(exc) from None
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                # A failed COMMIT (a full disk) may have rolled back already; a
                # second ROLLBACK would raise and hide the real error.
                if self._db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._db_error(exc) from None
                raise

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the handle's lock across a write's commit and its cache update.

        When the update is cut short after the commit (KeyboardInterrupt,
        MemoryError), the cache would miss the write for as long as no other
        process changes the file: it is dropped, with the dims, and the next call
        reads them again. A MemlabError comes before the commit (the transaction
        was rolled back) and leaves the cache right.
        """
        with self._mutex:
            try:
                yield
            except MemlabError:
                raise
            except BaseException:
                self._cache.clear()
                self._data_version = -1  # never a real data_version: _check reloads
                raise

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._mutex:
            self._check()
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._db_error(exc) from None

    # -- writes -------------------------------------------------------------------
    @property
    def dims(self) -> int | None:
        with self._mutex:
            self._check()
            return self._dims

    def put(self, record: MemoryRecord) -> None:
        self.put_many([record])

    def put_many(self, records: Sequence[MemoryRecord]) -> None:
        where = f"SqliteStore({self.path}).put"
        records = check_records(records, where)
        if not records:
            return
        dims = check_dims(records, None, where)  # a bad record fails before the transaction
        assert dims is not None
        with self._writing():
            with self._tx() as db:
                # Read dims under the write lock: another process may have set them.
                current = self._read_dims()
                if current is not None and current != dims:
                    raise DimensionMismatch(current, dims, f"{where}, record {records[0].id}")
                if current is None:
                    db.execute("INSERT INTO meta (key, value) VALUES ('dims', ?)", (str(dims),))
                existing: dict[str, str] = {}
                ids = [r.id for r in records]
                for chunk in _chunks(ids):
                    q = f"SELECT id, scope FROM records WHERE id IN ({','.join('?' * len(chunk))})"
                    existing.update(db.execute(q, chunk).fetchall())
                foreign_ids(records, existing)  # raises inside the transaction: rolled back
                db.executemany(
                    f"INSERT OR REPLACE INTO records ({COLUMNS}) VALUES ({PLACEHOLDERS})",
                    [record_to_row(r) for r in records],
                )
            self._dims = dims
            for r in records:
                idx = self._cache.get(r.scope)
                if idx is not None:
                    idx.upsert(r)

    def delete(self, scope: str, ids: str | Sequence[str]) -> int:
        ids = scoped_ids(scope, ids)
        n = 0
        with self._writing():
            with self._tx() as db:
                for chunk in _chunks(ids):
                    cur = db.execute(
                        by_ids("DELETE FROM records", len(chunk)),
                        (scope, *chunk),
                    )
                    n += cur.rowcount
            idx = self._cache.get(scope)
            if idx is not None:
                for rid in ids:
                    idx.remove(rid)
        return n

    def mark_archived(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        ids = scoped_ids(scope, ids)
        at = check_time(at, "mark_archived")
        return self._set_at(
            "UPDATE records SET archived_at = ? WHERE scope = ? AND id = ?",
            scope, ids, at, lambda idx, rid: idx.set_archived(rid, at),
        )  # fmt: skip

    def touch(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        ids = scoped_ids(scope, ids)
        at = check_time(at, "touch")
        return self._set_at(
            "UPDATE records SET access_count = access_count + 1, last_accessed_at = ? "
            "WHERE scope = ? AND id = ?",
            scope, ids, at, lambda idx, rid: idx.touch(rid, at),
        )  # fmt: skip

    def _set_at(
        self,
        sql: str,
        scope: str,
        ids: list[str],
        at: float,
        apply: Callable[[ScopeIndex, str], None],
    ) -> int:
        """Run ``sql`` (parameters: at, scope, id) for each id, and ``apply`` the change
        to the scope's cached columns under the same lock (a thread's write between
        the commit and the cache update was lost otherwise)."""
        with self._writing():
            with self._tx() as db:
                n = db.executemany(sql, [(at, scope, i) for i in ids]).rowcount
            idx = self._cache.get(scope)
            if idx is not None:
                for rid in ids:
                    apply(idx, rid)
        return n

    # -- reads --------------------------------------------------------------------
    def get(self, scope: str, record_id: str) -> MemoryRecord | None:
        (record_id,) = scoped_ids(scope, [record_id])
        rows = self._select(
            f"SELECT {COLUMNS} FROM records WHERE scope = ? AND id = ?", (scope, record_id)
        )
        return self._decode(rows[0]) if rows else None

    def get_many(self, scope: str, ids: Sequence[str]) -> list[MemoryRecord]:
        ids = scoped_ids(scope, ids)
        found: dict[str, MemoryRecord] = {}
        for chunk in _chunks(ids):
            q = by_ids(f"SELECT {COLUMNS} FROM records", len(chunk))
            for row in self._select(q, (scope, *chunk)):
                found[row[0]] = self._decode(row)
        return [found[i] for i in ids if i in found]

    def list(
        self,
        scope: str,
        kinds: Iterable[MemoryKind | str] | None = None,
        include_archived: bool = False,
    ) -> builtins.list[MemoryRecord]:
        check_scope(scope)
        check_bool(include_archived, "include_archived")
        sql = f"SELECT {COLUMNS} FROM records WHERE scope = ?"
        params: builtins.list[Any] = [scope]
        if not include_archived:
            sql += " AND archived_at IS NULL"
        wanted = kind_filter(kinds)
        if wanted is not None:
            sql += f" AND kind IN ({','.join('?' * len(wanted))})"
            params += [k.value for k in sorted(wanted)]
        sql += " ORDER BY created_at, id"
        return [self._decode(row) for row in self._select(sql, params)]

    def superseded_by(self, scope: str, ids: str | Sequence[str]) -> builtins.list[MemoryRecord]:
        by = set(scoped_ids(scope, ids))
        rows = self._select(
            f"SELECT {COLUMNS} FROM records "
            "WHERE scope = ? AND superseded != '[]' ORDER BY created_at, id",
            (scope,),
        )
        return marked_by(map(self._decode, rows), by)

    def count(self, scope: str | None = None, *, include_archived: bool = False) -> int:
        check_bool(include_archived, "include_archived")
        where, params = [], []
        if scope is not None:
            check_scope(scope)
            where.append("scope = ?")
            params.append(scope)
        if not include_archived:
            where.append("archived_at IS NULL")
        sql = "SELECT COUNT(*) FROM records" + (" WHERE " + " AND ".join(where) if where else "")
        return int(self._select(sql, params)[0][0])

    def scopes(self) -> builtins.list[str]:
        out = [row[0] for row in self._select("SELECT DISTINCT scope FROM records ORDER BY scope")]
        for scope in out:
            if not isinstance(scope, str) or not scope:
                raise StoreCorrupted(self.path, None, f"a record has the scope {scope!r}")
        return out

    def candidates(
        self,
        scope: str,
        query: np.ndarray | None = None,
        *,
        kinds: Iterable[MemoryKind | str] | None = None,
        include_archived: bool = False,
        pool: int | None = None,
        text: str | None = None,
        weights: Mapping[str, float] | None = None,
        valid_at: float | None = None,
        now: float | None = None,
        half_life: Mapping[str, float] | None = None,
    ) -> Candidates:
        check_scope(scope)
        valid_at = check_valid_at(valid_at)
        with self._mutex:
            self._check()
            check_candidates_args(
                query, self._dims, include_archived, pool, text, weights, now, half_life
            )
            idx = self._cache.get(scope)
            if idx is None:
                idx = self._load_scope(scope)
            if idx is None:
                return Candidates.empty(self._dims or 0)
            return idx.view(
                kind_filter(kinds), include_archived, text, valid_at=valid_at, query=query
            )

    def _load_scope(self, scope: str) -> ScopeIndex | None:
        if self._dims is None:
            return None
        rows = self._select(
            f"SELECT {COLUMNS} FROM records WHERE scope = ? ORDER BY created_at, id", (scope,)
        )
        idx = ScopeIndex(self._dims, self.scan)
        for row in rows:
            idx.upsert(self._decode(row))
        self._cache[scope] = idx
        return idx

    def size_bytes(self) -> int:
        if self.path == ":memory:":
            return 0
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(self.path + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    def close(self) -> None:
        with self._mutex:
            if not self._closed:
                self._closed = True
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
