"""JsonlStore: an append-only JSON Lines log of operations, compacted atomically.

Every write appends one line (a batch is one line, so it lands whole or not at
all), so a write costs O(1) instead of rewriting the file. When superseded lines
pile up, the live records are written to a temporary file, fsynced and renamed
over the log. A file lock serializes writers across processes; before every
operation a store reads what other processes appended (or reloads after another
process compacted), so several processes can share one file.

Every operation line ends with a CRC-32 of its bytes (``"crc"``, the last key),
so damage inside a string value is detected too. A torn last line (a crash in
the middle of an append) is dropped with a warning; the bytes are moved to ``<path>.torn`` before the next write. Damage
anywhere else raises StoreCorrupted with the path and line number, and the file
is never modified.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import filelock

from memlab.errors import StoreCorrupted, StoreError, StoreLocked
from memlab.memory.records import MemoryRecord
from memlab.memory.stores.base import (
    STORES,
    check_dims,
    check_store_path,
    check_time,
    foreign_ids,
    scoped_ids,
)
from memlab.memory.stores.codec import record_from_dict, record_to_dict
from memlab.memory.stores.indexed import IndexedStore

FORMAT = "memlab.jsonl/1"
_CRC_KEY = b',"crc":"'


def encode_line(op: dict[str, Any]) -> bytes:
    """One log line: compact JSON whose last key is the CRC-32 of what precedes it."""
    body = json.dumps(op, ensure_ascii=False, separators=(",", ":")).encode()
    head = body[:-1]
    return head + _CRC_KEY + b"%08x" % zlib.crc32(head) + b'"}\n'


def check_line(raw: bytes) -> bool:
    """True if a line's CRC matches its bytes."""
    cut = raw.rfind(_CRC_KEY)
    if cut < 0 or len(raw) != cut + len(_CRC_KEY) + 10:
        return False
    return raw[cut + len(_CRC_KEY) : cut + len(_CRC_KEY) + 8] == b"%08x" % zlib.crc32(raw[:cut])


class TornWriteWarning(UserWarning):
    """The store's last line was incomplete (a crash mid-write) and was dropped."""


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

    Raises:
        StoreError: ``path`` is a folder, or its folder is missing and
            ``create_dirs`` is false.
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
    ) -> None:
        super().__init__()
        self.path = Path(path)
        self.create_dirs = create_dirs
        check_store_path(self.path, create_dirs, "JsonlStore")
        self.fsync = fsync
        self.compact_min_lines = compact_min_lines
        self.compact_ratio = compact_ratio
        self._lock = filelock.FileLock(str(self.path) + ".lock", timeout=lock_timeout)
        self._mutex = threading.RLock()
        self._inode: int | None = None
        self._offset = 0  # bytes of the file consumed (always at a line boundary)
        self._lines = 0  # complete lines consumed, header included
        self._torn_at: int | None = None  # offset of a torn tail seen under the lock
        self._fd: int | None = None
        self._closed = False
        self.compactions = 0
        if self.path.exists():
            with self._locked():
                self._sync_locked()

    # -- reading the log ----------------------------------------------------------
    def _reset(self) -> None:
        IndexedStore.__init__(self)
        self._offset = 0
        self._lines = 0
        self._torn_at = None

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
            if self._inode is not None:
                raise StoreError(
                    f"memory store {self.path} was removed while open; reopen the store"
                ) from None
            return
        if self._inode is not None and st.st_ino != self._inode:
            self._close_fd()
            self._reset()
        elif st.st_size == self._offset:
            self._inode = st.st_ino
            return
        elif st.st_size < self._offset:
            raise StoreCorrupted(
                self.path, None, f"the file shrank from {self._offset} to {st.st_size} bytes"
            )
        self._inode = st.st_ino
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        complete, tail = data[:end], data[end:]
        # Without the lock an unterminated tail may be another process's append in
        # flight, so it is left for later. Under the lock nobody is mid-append: it
        # is a torn write from a crash, dropped here and its bytes kept for the user.
        if tail and locked:
            if self._torn_at != self._offset + end:
                warnings.warn(
                    f"{self.path}: dropping a torn last line at byte {self._offset + end} "
                    f"({len(tail)} bytes, an interrupted write); it is moved to "
                    f"{self.path}.torn on the next write",
                    TornWriteWarning,
                    stacklevel=4,
                )
            self._torn_at = self._offset + end
        self._apply_lines(complete)
        self._offset += len(complete)

    def _apply_lines(self, blob: bytes) -> None:
        for raw in blob.split(b"\n")[:-1]:
            self._lines += 1
            lineno = self._lines
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise StoreCorrupted(self.path, lineno, f"not valid JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise StoreCorrupted(self.path, lineno, "a line is not a JSON object")
            if lineno > 1 and not check_line(raw):
                raise StoreCorrupted(self.path, lineno, "checksum mismatch (the line was altered)")
            if lineno == 1:
                if obj.get("format") != FORMAT:
                    raise StoreCorrupted(
                        self.path, 1, f"not a memlab JSONL store (no '{FORMAT}' header)"
                    )
                continue
            try:
                self._apply_op(obj)
            except StoreError:
                raise
            except Exception as exc:  # malformed op: name the line, keep the file
                raise StoreCorrupted(
                    self.path, lineno, f"bad '{obj.get('op')}' entry ({type(exc).__name__}: {exc})"
                ) from None

    def _apply_op(self, obj: dict[str, Any]) -> None:
        op = obj["op"]
        if op == "put":
            records = [record_from_dict(d) for d in obj["records"]]
            self._dims = check_dims(records, self._dims, "log")
            self._apply_put(records)
        elif op == "delete":
            self._apply_delete(obj["ids"], obj.get("scope"))
        elif op == "archive":
            self._apply_archive(obj["ids"], obj["at"], obj.get("scope"))
        elif op == "touch":
            self._apply_touch(obj["ids"], float(obj["at"]), obj.get("scope"))
        else:
            raise ValueError(f"unknown op {op!r}")

    # -- writing ------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"memory store {self.path} is closed")

    def _locked(self) -> filelock.BaseFileLock:
        check_store_path(self.path, self.create_dirs, "JsonlStore")
        return self._lock

    def _append(self, op: dict[str, Any]) -> None:
        line = encode_line(op)
        if self._torn_at is not None:
            self._salvage_torn()
        fd = self._open_fd()
        if self._offset == 0:
            header = (json.dumps({"format": FORMAT}) + "\n").encode()
            os.write(fd, header)
            self._offset += len(header)
            self._lines += 1
        written = os.write(fd, line)
        if written != len(line):
            raise StoreError(
                f"short write to {self.path} ({written} of {len(line)} bytes); is the disk full?"
            )
        if self.fsync:
            os.fsync(fd)
        self._offset += len(line)
        self._lines += 1

    def _open_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._inode = os.fstat(self._fd).st_ino
        return self._fd

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _salvage_torn(self) -> None:
        assert self._torn_at is not None
        with open(self.path, "rb") as f:
            f.seek(self._torn_at)
            tail = f.read()
        with open(str(self.path) + ".torn", "ab") as out:
            out.write(tail)
            out.flush()
            os.fsync(out.fileno())
        os.truncate(self.path, self._torn_at)
        self._torn_at = None

    def _write(self, op: dict[str, Any], apply: Any) -> Any:
        with self._mutex:
            self._check_open()
            try:
                with self._locked():
                    self._sync_locked()
                    result = apply()
                    self._append(op)
                    self._maybe_compact()
                    return result
            except filelock.Timeout:
                raise StoreLocked(
                    f"memory store {self.path} is locked by another process "
                    f"(lock file {self._lock.lock_file}); retry, or stop the other writer"
                ) from None

    def put(self, record: MemoryRecord) -> None:
        self.put_many([record])

    def put_many(self, records: Sequence[MemoryRecord]) -> None:
        records = list(records)
        if not records:
            return
        with self._mutex:
            self._check_open()
            self._sync()
            check_dims(records, self._dims, f"JsonlStore({self.path}).put")
            foreign_ids(records, self._scope_of(records))
            op = {"op": "put", "records": [record_to_dict(r) for r in records]}

            def apply() -> None:
                # Re-check under the lock: another process may have fixed the dims
                # or written these ids.
                self._dims = check_dims(records, self._dims, f"JsonlStore({self.path}).put")
                foreign_ids(records, self._scope_of(records))
                self._apply_put(records)

            self._write(op, apply)

    # Ops carry the scope, so a replay applies them only to that scope's records
    # (logs written before ids were scope-bound have no "scope" key).
    def delete(self, scope: str, ids: str | Sequence[str]) -> int:
        ids = scoped_ids(scope, ids)
        if not ids:
            return 0
        op = {"op": "delete", "scope": scope, "ids": ids}
        return int(self._write(op, lambda: self._apply_delete(ids, scope)))

    def mark_archived(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        ids = scoped_ids(scope, ids)
        at = check_time(at, "mark_archived")
        if not ids:
            return 0
        op = {"op": "archive", "scope": scope, "ids": ids, "at": at}
        return int(self._write(op, lambda: self._apply_archive(ids, at, scope)))

    def touch(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        ids = scoped_ids(scope, ids)
        at = check_time(at, "touch")
        if not ids:
            return 0
        op = {"op": "touch", "scope": scope, "ids": ids, "at": at}
        return int(self._write(op, lambda: self._apply_touch(ids, at, scope)))

    # -- compaction ---------------------------------------------------------------
    def _maybe_compact(self) -> None:
        live = len(self._records)
        if self._lines > max(self.compact_min_lines, self.compact_ratio * (live + 1)):
            self.compact()

    def compact(self) -> None:
        """Rewrite the log as one put per live record (temp file, fsync, rename)."""
        with self._mutex, self._locked():
            self._sync_locked()
            tmp = self.path.with_name(f"{self.path.name}.compact-{os.getpid()}")
            lines = 1
            try:
                with open(tmp, "wb") as f:
                    f.write((json.dumps({"format": FORMAT}) + "\n").encode())
                    for r in self._records.values():
                        f.write(encode_line({"op": "put", "records": [record_to_dict(r)]}))
                        lines += 1
                    f.flush()
                    os.fsync(f.fileno())
                    size = f.tell()
                os.replace(tmp, self.path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            self._close_fd()
            self._inode = os.stat(self.path).st_ino
            self._offset = size
            self._lines = lines
            self._torn_at = None
            self.compactions += 1

    # -- misc ---------------------------------------------------------------------
    @property
    def log_lines(self) -> int:
        """Lines in the log (header included), live or superseded."""
        return self._lines

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
