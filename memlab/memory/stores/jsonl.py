"""JsonlStore: an append-only JSON Lines log of operations, compacted atomically.

Every write appends one line (a batch is one line, so it lands whole or not at
all), so a write costs O(1) instead of rewriting the file. When superseded lines
pile up, the live records are written to a temporary file, fsynced and renamed
over the log. A file lock serializes writers across processes; before every
operation a store reads what other processes appended (or reloads after another
process compacted), so several processes can share one file.

The log format (sealed, chained lines and a header with a generation counter) is
described in ``memlab.memory.stores.logchain``. Damage is reported, never
repaired: a line that is altered, replayed, missing, reordered or foreign raises
StoreCorrupted with the path and line number, and the file is never modified. A
torn last line (a crash in the middle of an append) is the one exception: it is
dropped with a warning and its bytes are moved to ``<path>.torn`` before the
next write. A file that has no intact header and first line is corruption, not a
torn write: memlab creates the file whole (a temporary file linked into place).

A write changes this handle's view only after its line is in the file: a write
that fails (a full disk, an unencodable value) leaves no trace, in memory or on
disk. A compaction killed midway leaves a ``<path>.compact-<pid>`` file; the next
open removes those of dead processes under the lock.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import filelock

from memlab.errors import DimensionMismatch, StoreCorrupted, StoreError, StoreLocked
from memlab.memory.checks import check_bool, check_number, check_path
from memlab.memory.records import MemoryRecord
from memlab.memory.stores.base import (
    STORES,
    check_dims,
    check_records,
    check_store_path,
    check_time,
    foreign_ids,
    scoped_ids,
)
from memlab.memory.stores.codec import record_from_dict, record_to_dict
from memlab.memory.stores.files import (
    io_error,
    pread_all,
    remove_dead_temp_files,
    temp_files,
    write_whole,
)
from memlab.memory.stores.indexed import IndexedStore, ScanPolicy
from memlab.memory.stores.logchain import FORMAT, Chain, ChainBroken, crc_of, header, seal

__all__ = ["FORMAT", "CompactionWarning", "JsonlStore", "TornWriteWarning", "encode_line"]


#: errnos of a lock file that cannot be created or opened for want of permission
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def encode_line(op: dict[str, Any]) -> bytes:
    """A sealed line without chain fields (as format 1 wrote them); for tests and tools."""
    return seal(op)


class TornWriteWarning(UserWarning):
    """The store's last line was incomplete (a crash mid-write) and was dropped."""


class CompactionWarning(UserWarning):
    """An automatic compaction failed (e.g. a full disk); the write itself succeeded."""


def _op_ids(obj: dict[str, Any]) -> list[str]:
    """An operation's ``ids``, which memlab writes as a list of strings; anything
    else is damage (a string would be read as one id per character)."""
    ids = obj["ids"]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise TypeError("ids is not a list of strings")
    return ids


def _op_scope(obj: dict[str, Any], version: int) -> str | None:
    """An operation's ``scope``: a string, or absent in format-1 logs written before
    ids were scope-bound (None: the ids of any scope). Format 2 came after, and
    every one of its operations names its scope."""
    scope = obj.get("scope")
    if scope is None and version >= 2:
        raise ValueError("the scope is missing (every format-2 operation names it)")
    if scope is not None and (not isinstance(scope, str) or not scope):
        raise TypeError("scope is not a non-empty string")
    return scope


@STORES.register("jsonl")
class JsonlStore(IndexedStore):
    """A durable MemoryStore in one JSON Lines file.

    Args:
        path: the log file, created on first write. Its folder must exist unless
            ``create_dirs`` is true (so a mistyped path raises instead of starting
            a new, empty store).
        fsync: fsync after every append. Without it an acknowledged write survives
            a process crash (it is in the OS page cache) but not a power loss.
        compact_min_lines: never compact logs shorter than this.
        compact_ratio: compact when lines exceed this multiple of live records.
        lock_timeout: seconds to wait for another process's lock.
        create_dirs: create the folder of ``path`` (and its parents) if missing.
        scan: how a recall scans a scope's vectors: ``"float32"`` (exact, the
            default), ``"int8"`` (int8 codes scanned by ONNX Runtime, with an error
            bound that keeps the float32 ranking; needs ``memlab[int8]``) or
            ``"bits"`` (sign bits, then an exact float32 re-rank of the nearest
            rows; it pays off only when similarity dominates the score). See
            memlab.memory.stores.indexed.ScanPolicy.
        scan_rerank: rows the ``"bits"`` scan re-ranks with their float32 cosine.
        scan_min_rows: scopes with fewer rows are scanned in float32.

    A store whose folder (or file) this user cannot write opens read-only: reads
    work, since they never take the writer lock, and every write raises StoreError.

    Raises:
        InputError: a bad argument (``path`` not a path, a negative timeout, ...).
        StoreError: ``path`` is a folder, or its folder is missing and
            ``create_dirs`` is false, or the file cannot be read.
        StoreCorrupted: the file exists but is not an intact memlab log.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: bool = False,
        compact_min_lines: int = 1000,
        compact_ratio: float = 2.0,
        lock_timeout: float = 30.0,
        create_dirs: bool = False,
        scan: str = ScanPolicy.codes,
        scan_rerank: int = ScanPolicy.rerank,
        scan_min_rows: int = ScanPolicy.min_rows,
    ) -> None:
        super().__init__(scan=scan, scan_rerank=scan_rerank, scan_min_rows=scan_min_rows)
        self.path = check_path(path, "JsonlStore path")
        if self.path.is_symlink():
            # The file behind the link is the store: compaction renames a new file
            # over the path, which replaced the link itself (the linked file kept
            # the old records, and later writes never reached it), and the lock file
            # next to the link was not the one next to the file.
            self.path = Path(os.path.realpath(self.path))
        # Absolute: every call stats the path and takes the lock beside it, and a
        # relative one would name another file once the process changes its
        # working directory ("removed while open", a lock nobody else takes).
        self.path = Path(os.path.abspath(self.path))
        self.create_dirs = check_bool(create_dirs, "JsonlStore create_dirs")
        self.fsync = check_bool(fsync, "JsonlStore fsync")
        self.compact_min_lines = check_number(
            compact_min_lines, "JsonlStore compact_min_lines", lo=1, integer=True
        )
        self.compact_ratio = check_number(compact_ratio, "JsonlStore compact_ratio", lo=1.0)
        lock_timeout = check_number(lock_timeout, "JsonlStore lock_timeout", lo=0.0)
        check_store_path(self.path, self.create_dirs, "JsonlStore")
        self._lock = filelock.FileLock(str(self.path) + ".lock", timeout=lock_timeout)
        self._mutex = threading.RLock()
        # The file this handle has read, kept open: while it is open its inode
        # cannot be reused, so "the path names another inode" reliably means
        # another process replaced (compacted) the file.
        self._fd: int | None = None
        self._read_only = False  # _fd was opened read-only (the file is not writable)
        self._ident: tuple[int, int] | None = None
        self._offset = 0  # bytes of the file consumed (always at a line boundary)
        self._chain = Chain()
        self._torn_at: int | None = None  # offset of a torn tail seen under the lock
        self._closed = False
        self._compact_after = 0  # after a failed automatic compaction: retry at this many lines
        self.compactions = 0
        self.temp_files_removed = 0
        try:
            if self.path.exists() or temp_files(self.path):
                with self._locked(reading=True) as locked:
                    if locked:
                        self.temp_files_removed += remove_dead_temp_files(self.path)
                    self._read_new(locked=locked)
        except BaseException:
            self._close_fd()
            raise

    # -- reading the log ----------------------------------------------------------
    def _sync(self) -> None:
        """Catch up with appends (or a compaction) by other processes."""
        with self._mutex:
            self._check_open()
            self._read_new(locked=False)

    def _sync_locked(self) -> None:
        self._read_new(locked=True)

    def _read_new(self, *, locked: bool) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._fd is not None:
                raise StoreError(
                    f"memory store {self.path} was removed while open; reopen the store"
                ) from None
            return
        if self._fd is not None and (st.st_dev, st.st_ino) == self._ident:
            if st.st_size == self._offset:
                return
            if st.st_size < self._offset:
                raise StoreCorrupted(
                    self.path, None, f"the file shrank from {self._offset} to {st.st_size} bytes"
                )
            try:
                self._consume(self._fd, st.st_size, locked)
            except BaseException:
                # The lines before a bad one are applied and chained, but the offset
                # is still before them: read from the start next time, which reports
                # the same line again (not a "replayed" line after it).
                self._forget()
                raise
            return
        self._reload(locked)

    def _reload(self, locked: bool) -> None:
        """Read the file at ``path`` from its start: the first read, or after another
        process replaced it (a compaction)."""
        read_only = False
        try:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
            except PermissionError:
                fd = os.open(self.path, os.O_RDONLY)  # a read-only store; writes will fail
                read_only = True
        except FileNotFoundError:
            return self._read_new(locked=locked)  # replaced and gone again: start over
        except OSError as exc:
            raise io_error(self.path, "open", exc) from None
        try:
            st = os.fstat(fd)
            before = self._chain.generation if self._fd is not None else 0
            self._close_fd()
            self._reset_state()
            self._fd, self._ident = fd, (st.st_dev, st.st_ino)
            self._offset, self._chain, self._torn_at = 0, Chain(), None
            self._read_only = read_only
            if st.st_size == 0:
                raise StoreCorrupted(
                    self.path,
                    None,
                    "the file is empty (0 bytes), and memlab never writes an empty store file "
                    "(it creates the file whole, header and first line)",
                )
            self._consume(fd, st.st_size, locked)
            if self._chain.lines == 0:
                raise StoreCorrupted(
                    self.path, 1, "the file holds no complete line: the whole file is damaged"
                )
            if self._chain.version >= 2 and self._chain.lines < 2:
                raise StoreCorrupted(
                    self.path,
                    2,
                    "the log ends after its header; memlab never writes such a file "
                    "(lines are missing)",
                )
            # (a format-1 file is older than any format-2 one, whatever its generation)
            if before and (self._chain.version < 2 or self._chain.generation <= before):
                raise StoreError(
                    f"memory store {self.path} was replaced by another file (generation "
                    f"{self._chain.generation}, not newer than the generation {before} this "
                    "handle read: an older copy was restored, or the file was recreated, while "
                    "the store was open); reopen the store"
                )
        except BaseException:
            self._forget()  # the half-read state: the next call reads the file again
            raise
        return None

    def _forget(self) -> None:
        """Drop this handle's view (records, offset, chain): the next call reads the
        file again from its start."""
        self._close_fd()
        self._reset_state()
        self._offset, self._chain, self._torn_at = 0, Chain(), None

    def _consume(self, fd: int, size: int, locked: bool) -> None:
        data = pread_all(fd, size - self._offset, self._offset)
        end = data.rfind(b"\n") + 1
        complete, tail = data[:end], data[end:]
        self._apply_lines(complete)
        self._offset += len(complete)
        if complete and self._torn_at is not None:
            # The torn tail seen earlier is gone: another process moved it aside
            # and appended over it. Salvaging from the old offset now would move
            # that process's acknowledged lines to .torn and cut them off.
            self._torn_at = None
        # Without the lock an unterminated tail may be another process's append in
        # flight, so it is left for later. Under the lock nobody is mid-append: it
        # is a torn write from a crash, dropped here and its bytes kept for the user.
        # (A file with no complete line at all is damaged, not torn: see _reload.)
        if tail and locked and self._chain.lines:
            torn_at = self._offset
            if self._torn_at != torn_at:
                warnings.warn(
                    f"{self.path}: dropping a torn last line at byte {torn_at} "
                    f"({len(tail)} bytes, an interrupted write); it is moved to "
                    f"{self.path}.torn on the next write",
                    TornWriteWarning,
                    stacklevel=5,
                )
            self._torn_at = torn_at

    def _apply_lines(self, blob: bytes) -> None:
        chain = self._chain
        for raw in blob.split(b"\n")[:-1]:
            lineno = chain.lines + 1
            try:
                op = chain.read(raw)
            except ChainBroken as exc:
                raise StoreCorrupted(self.path, lineno, exc.detail) from None
            if op is None:
                continue
            try:
                self._apply_op(op)
            except StoreError:
                raise
            except Exception as exc:  # malformed op: name the line, keep the file
                raise StoreCorrupted(
                    self.path, lineno, f"bad '{op.get('op')}' entry ({type(exc).__name__}: {exc})"
                ) from None

    def _apply_op(self, obj: dict[str, Any]) -> None:
        op = obj["op"]
        if op == "put":
            records = [record_from_dict(d) for d in obj["records"]]
            self._dims = check_dims(records, self._dims, "log")
            if self._chain.version >= 2:  # ids were scope-bound before format 2
                for r in records:
                    old = self._records.get(r.id)
                    if old is not None and old.scope != r.scope:
                        raise ValueError(
                            f"record {r.id[:80]!r} moves to another scope, which memlab "
                            "never writes"
                        )
            self._apply_put(records)
        elif op == "delete":
            self._apply_delete(_op_ids(obj), _op_scope(obj, self._chain.version))
        elif op == "archive":
            at = check_time(obj["at"], "archive")
            self._apply_archive(_op_ids(obj), at, _op_scope(obj, self._chain.version))
        elif op == "touch":
            self._apply_touch(
                _op_ids(obj), check_time(obj["at"], "touch"), _op_scope(obj, self._chain.version)
            )
        elif op == "checkpoint":
            live = obj["live"]
            if type(live) is not int:
                raise TypeError(f"live is {type(live).__name__}, not an integer")
            if live != len(self._records):
                raise ValueError(
                    f"the compacted log holds {len(self._records)} records where it wrote "
                    f"{obj['live']}: lines are missing"
                )
            dims = obj.get("dims")  # absent before checkpoints carried it
            if dims is not None:
                if type(dims) is not int or dims < 1:
                    raise TypeError(f"dims is {dims!r}, not a positive integer")
                if self._dims is not None and dims != self._dims:
                    raise ValueError(f"dims is {dims}, the records' {self._dims}")
                self._dims = dims
        else:
            raise ValueError(f"unknown op {op!r}")

    # -- writing ------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"memory store {self.path} is closed")

    @contextlib.contextmanager
    def _locked(self, *, reading: bool = False) -> Iterator[bool]:
        """Hold the writer lock; yields whether it is held.

        Args:
            reading: the caller only reads. Where the lock file cannot be created
                (a folder this user cannot write, a read-only file system) it then
                goes on without the lock, as every read after opening does, and
                yields False; a write raises StoreError there.

        Raises:
            StoreLocked: another process holds the lock past ``lock_timeout``.
            StoreError: the lock file cannot be opened (and ``reading`` is false,
                or the failure is not a permission one).
        """
        check_store_path(self.path, self.create_dirs, "JsonlStore")
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise StoreLocked(
                f"memory store {self.path} is locked by another process "
                f"(lock file {self._lock.lock_file}); retry, or stop the other writer"
            ) from None
        except OSError as exc:
            if not (reading and exc.errno in _NOT_WRITABLE):
                raise self._lock_error(exc) from None
        else:
            try:
                yield True
            finally:
                self._lock.release()
            return
        yield False

    def _lock_error(self, exc: OSError) -> StoreError:
        lock = self._lock.lock_file
        if exc.errno in _NOT_WRITABLE:
            return StoreError(
                f"cannot write memory store {self.path}: its lock file {lock} cannot be "
                f"created or opened ({exc.strerror or exc}), so the folder {self.path.parent} "
                "(or the lock file) is not writable by this user; nothing was changed. Reading "
                "works without it; to write, make the folder writable, or copy the store to a "
                "writable folder"
            )
        return io_error(self.path, f"open the lock file {lock} of", exc)

    def _write(
        self, op: dict[str, Any], check: Callable[[], bool], apply: Callable[[], Any]
    ) -> Any:
        """Append ``op`` under the lock, then change this handle's view.

        ``check`` runs after catching up with other processes and before anything
        is written: it raises on a bad write, and returns False when the write
        would change nothing (no line is written then).
        """
        with self._mutex:
            self._check_open()
            with self._locked(), self._interruptible():
                self._sync_locked()
                if check():
                    self._commit(op)
                result = apply()
                self._maybe_compact()
                return result

    @contextlib.contextmanager
    def _interruptible(self) -> Iterator[None]:
        """Forget this handle's view when a write is interrupted (KeyboardInterrupt,
        SystemExit): between appending a line and recording it (its offset, its
        place in the chain, its records) the view no longer matches the file, and
        the next line would be chained after the wrong one. The file is the truth,
        so the next call reads it again. An ordinary error leaves the view right."""
        try:
            yield
        except Exception:
            raise
        except BaseException:
            self._forget()
            raise

    def _commit(self, op: dict[str, Any]) -> None:
        """Make ``op`` durable: create the file with it, or append it."""
        if self._fd is None:
            self._create(op)
            return
        self._check_writable()
        if self._chain.version < 2:
            self._rewrite()  # upgrade a format-1 log before chaining lines to it
        line = self._chain.next_line(op)
        if self._torn_at is not None:
            self._salvage_torn()
        fd = self._fd
        assert fd is not None
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes)")
            if self.fsync:
                os.fsync(fd)
        except OSError as exc:
            # Take the partial line back; if even that fails, the next write
            # under the lock finds it as a torn tail and moves it aside.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._offset)
            raise io_error(self.path, "write to", exc) from None
        self._offset += len(line)
        self._chain.advance(line)

    def _check_writable(self) -> None:
        """Refuse to append to, or replace, a file this user may not write."""
        if self._read_only:
            raise StoreError(
                f"cannot write memory store {self.path}: the file is not writable by this user "
                "(it was opened read-only); nothing was changed. Fix the file's permissions, "
                "or copy the store to a file you can write"
            )

    def _create(self, op: dict[str, Any]) -> None:
        """Create the file holding its header and ``op``, whole or not at all."""
        chain = Chain(version=2, generation=1, lines=1)
        head = header(1)
        chain.last_crc = crc_of(head)
        line = chain.next_line(op)
        chain.advance(line)
        fd = write_whole(self.path, "create", [head, line], link=True)
        self._adopt(fd, chain)

    def _rewrite(self) -> None:
        """Write the live records as a new generation of the file (compaction).

        A torn last line is moved to ``<path>.torn`` first, as before an append:
        the new file leaves it out, and the warning promised to keep its bytes.
        """
        self._check_writable()
        if self._torn_at is not None:
            self._salvage_torn()
        generation = self._chain.generation + 1
        chain = Chain(version=2, generation=generation, lines=1)
        head = header(generation)
        chain.last_crc = crc_of(head)
        lines = [head]
        for r in self._records.values():
            lines.append(chain.next_line({"op": "put", "records": [record_to_dict(r)]}))
            chain.advance(lines[-1])
        checkpoint: dict[str, Any] = {"op": "checkpoint", "live": len(self._records)}
        if self._dims is not None:
            # The dims outlive the records, as in the log this replaces: a store
            # whose records were all deleted still refuses vectors of other dims.
            checkpoint["dims"] = self._dims
        lines.append(chain.next_line(checkpoint))
        chain.advance(lines[-1])
        fd = write_whole(self.path, "compact", lines, link=False)
        self._adopt(fd, chain)

    def _adopt(self, fd: int, chain: Chain) -> None:
        st = os.fstat(fd)
        self._close_fd()
        self._fd, self._ident = fd, (st.st_dev, st.st_ino)
        self._read_only = False
        self._offset = st.st_size
        self._chain = chain

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
            self._ident = None

    def _salvage_torn(self) -> None:
        assert self._torn_at is not None and self._fd is not None
        size = os.fstat(self._fd).st_size
        tail = pread_all(self._fd, size - self._torn_at, self._torn_at)
        try:
            # The torn bytes are the user's data: no more readable than the log.
            mode = stat.S_IMODE(os.fstat(self._fd).st_mode)
            fd = os.open(str(self.path) + ".torn", os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
            with open(fd, "ab") as out:
                out.write(tail)
                out.flush()
                os.fsync(out.fileno())
            os.ftruncate(self._fd, self._torn_at)
        except OSError as exc:
            raise io_error(self.path, "move the torn last line of", exc) from None
        self._torn_at = None

    def put(self, record: MemoryRecord) -> None:
        self.put_many([record])

    def put_many(self, records: Sequence[MemoryRecord]) -> None:
        where = f"JsonlStore({self.path}).put"
        records = check_records(records, where)
        if not records:
            return
        dims = check_dims(records, None, where)  # a bad record fails before the lock
        with self._mutex:
            self._check_open()
            op = {"op": "put", "records": [record_to_dict(r) for r in records]}

            def check() -> bool:
                # Under the lock: another process may have fixed the dims or
                # written these ids.
                if self._dims is not None and dims != self._dims:
                    raise DimensionMismatch(
                        self._dims, dims or 0, f"{where}, record {records[0].id}"
                    )
                foreign_ids(records, self._scope_of(records))
                return True

            def apply() -> None:
                self._dims = dims
                self._apply_put(records)

            self._write(op, check, apply)

    # Ops carry the scope, so a replay applies them only to that scope's records
    # (logs written before ids were scope-bound have no "scope" key). An op that
    # would change nothing is not written.
    def _owns_any(self, scope: str, ids: Sequence[str]) -> Callable[[], bool]:
        return lambda: any(self._owned(scope, i) is not None for i in ids)

    def delete(self, scope: str, ids: str | Sequence[str]) -> int:
        ids = scoped_ids(scope, ids)
        if not ids:
            return 0
        op = {"op": "delete", "scope": scope, "ids": ids}
        return int(
            self._write(op, self._owns_any(scope, ids), lambda: self._apply_delete(ids, scope))
        )

    def mark_archived(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        ids = scoped_ids(scope, ids)
        at = check_time(at, "mark_archived")
        if not ids:
            return 0
        op = {"op": "archive", "scope": scope, "ids": ids, "at": at}
        return int(
            self._write(op, self._owns_any(scope, ids), lambda: self._apply_archive(ids, at, scope))
        )

    def touch(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        ids = scoped_ids(scope, ids)
        at = check_time(at, "touch")
        if not ids:
            return 0
        op = {"op": "touch", "scope": scope, "ids": ids, "at": at}
        return int(
            self._write(op, self._owns_any(scope, ids), lambda: self._apply_touch(ids, at, scope))
        )

    # -- compaction ---------------------------------------------------------------
    def _maybe_compact(self) -> None:
        live = len(self._records)
        lines = self._chain.lines
        if lines > max(
            self.compact_min_lines, self.compact_ratio * (live + 1), self._compact_after
        ):
            try:
                self._rewrite()
            except StoreError as exc:
                # The write that got here is already durable; compacting can wait.
                self._compact_after = lines + self.compact_min_lines
                warnings.warn(
                    f"{self.path}: automatic compaction failed ({exc}); the log keeps growing "
                    "until it succeeds",
                    CompactionWarning,
                    stacklevel=4,
                )
                return
            self._compact_after = 0
            self.compactions += 1

    def compact(self) -> None:
        """Rewrite the log as one put per live record (temp file, fsync, rename).

        Raises:
            StoreError: the new file cannot be written (the old one is kept).
        """
        with self._mutex:
            self._check_open()
            with self._locked(), self._interruptible():
                self._sync_locked()
                if self._fd is None:
                    return  # no file yet: nothing to compact
                self._rewrite()
                self.compactions += 1

    # -- misc ---------------------------------------------------------------------
    @property
    def log_lines(self) -> int:
        """Lines in the log (header included), live or superseded."""
        return self._chain.lines

    @property
    def generation(self) -> int:
        """The file's generation: 1 when created, one more after each compaction."""
        return self._chain.generation

    def size_bytes(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        with self._mutex:
            if self._fd is not None and self.fsync is False:
                with contextlib.suppress(OSError):
                    os.fsync(self._fd)
            self._close_fd()
            self._closed = True

    def __enter__(self) -> JsonlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
