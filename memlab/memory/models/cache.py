"""A persistent cache of model outputs (embeddings, summaries and chat completions)
in one SQLite file.

Embedding a text or summarizing a list of texts with the same model always gives
the same answer, and real models are slow or cost money, so every run and every
sweep job on a machine shares one cache:

- location: ``$MEMLAB_CACHE_DIR/embeddings.sqlite`` if that variable is set, else
  ``$XDG_CACHE_HOME/memlab/embeddings.sqlite``, else
  ``~/.cache/memlab/embeddings.sqlite``; or any path given to ``ModelCache``;
- key: the model's identity (its ``name``, which includes model and dims) and the
  sha256 of the text (embeddings), of the JSON list of input texts (summaries),
  or of the canonical JSON of a chat request (completions: messages and
  parameters, ``request_key``);
- values: little-endian float32 BLOBs, summary strings, and completions as JSON
  (the text and the token usage the endpoint reported);
- SQLite in WAL mode, one transaction per batch written, so parallel processes
  read and write it safely (``INSERT OR IGNORE``: the first writer of a key wins,
  and every writer would have written the same value).

A damaged file, or an SQLite file that is not a memlab cache, raises
``CacheCorrupted`` and is never modified or replaced.

``CachedEmbedder``, ``CachedSummarizer`` and ``CachedChat``
(``memlab.memory.models.cached``) wrap any Embedder / Summarizer / chat client with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import CacheCorrupted, CacheError, InputError
from memlab.memory.stores.sqlite import enable_wal

CACHE_DIR_ENV = "MEMLAB_CACHE_DIR"
CACHE_FILE = "embeddings.sqlite"
APPLICATION_ID = 0x6D6C6162  # "mlab" in the SQLite header marks the file as ours
_CHUNK = 900  # stay far below SQLite's bound-parameter limit
_INHERITED: list[sqlite3.Connection] = []  # connections inherited across fork()

# Each entry moves the schema from version i to i + 1. Never edit a released one.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE IF NOT EXISTS models (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            dims INTEGER NOT NULL,
            UNIQUE (kind, name, dims)
        )""",
        """CREATE TABLE IF NOT EXISTS embeddings (
            model INTEGER NOT NULL,
            key BLOB NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (model, key)
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS summaries (
            model INTEGER NOT NULL,
            key BLOB NOT NULL,
            summary TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (model, key)
        ) WITHOUT ROWID""",
    ],
    [
        """CREATE TABLE IF NOT EXISTS completions (
            model INTEGER NOT NULL,
            key BLOB NOT NULL,
            response TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (model, key)
        ) WITHOUT ROWID""",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


def default_cache_dir() -> Path:
    """``$MEMLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/memlab``, else ``~/.cache/memlab``."""
    env = os.environ.get(CACHE_DIR_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    # The XDG spec says relative values are invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "memlab"


def default_cache_path() -> Path:
    """The cache file used when no path is given (see ``default_cache_dir``)."""
    return default_cache_dir() / CACHE_FILE


def text_key(text: str) -> bytes:
    """sha256 of a text's UTF-8 bytes: the embedding cache key of that text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def texts_key(texts: Sequence[str]) -> bytes:
    """sha256 of the JSON list of texts: the summary cache key of that input."""
    blob = json.dumps(list(texts), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).digest()


def request_key(request: Any) -> bytes:
    """sha256 of a JSON-able request (sorted keys, no whitespace): the completion
    cache key of a chat request (its messages and parameters)."""
    blob = json.dumps(request, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).digest()


def _tables_of(version: int) -> set[str]:
    """The tables a cache of schema ``version`` has (those its migrations create)."""
    return {
        m.group(1)
        for step in MIGRATIONS[:version]
        for statement in step
        if (m := re.match(r"\s*CREATE TABLE IF NOT EXISTS (\w+)", statement))
    }


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


def _select_keys(
    db: sqlite3.Connection, columns: str, model: int, keys: Sequence[bytes]
) -> Iterator[tuple[Any, ...]]:
    """Rows of ``embeddings`` of ``model`` whose key is one of ``keys``, a chunk of
    keys per statement (SQLite caps a statement's parameters)."""
    for chunk in _chunks(list(keys)):
        marks = ",".join("?" * len(chunk))
        yield from db.execute(
            f"SELECT {columns} FROM embeddings WHERE model = ? AND key IN ({marks})",
            (model, *chunk),
        ).fetchall()


def _completion_fault(value: dict[str, Any]) -> str | None:
    """What is wrong with a stored completion's fields (None: nothing). Absent fields
    take their defaults; present ones must have the types ``Completion`` writes."""
    text = value.get("text", "")
    if not isinstance(text, str):
        return f"a text of type {type(text).__name__}"
    for key in ("prompt_tokens", "completion_tokens"):
        count = value.get(key)
        if count is not None and (type(count) is not int or count < 0):
            return f"{key}={count!r:.40}, not a count"
    finish = value.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        return f"a finish_reason of type {type(finish).__name__}"
    if not isinstance(value.get("usage_estimated", False), bool):
        return "a usage_estimated that is not true or false"
    return None


class ModelCache:
    """The on-disk cache of embeddings and summaries (see the module docstring).

    Safe to share between threads and processes; a handle that crosses a fork or
    a pickle reconnects in the new process.

    Args:
        path: the SQLite file (created with its folder). None: ``default_cache_path()``.
        timeout: seconds to wait for another process's write lock.

    Raises:
        CacheCorrupted: the file is damaged or is not a memlab cache (left untouched).
        CacheError: the file cannot be created or opened, or has a newer schema.
    """

    def __init__(self, path: str | Path | None = None, *, timeout: float = 30.0) -> None:
        self.path = Path(path).expanduser() if path else default_cache_path()
        self.explicit = bool(path)  # the advice in errors names the setting that chose path
        self.timeout = float(timeout)
        self._lock = threading.RLock()
        self._models: dict[tuple[str, str, int], int] = {}
        self._db: sqlite3.Connection | None = None
        self._pid = 0
        self._connect()

    def __repr__(self) -> str:
        return f"ModelCache({str(self.path)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "explicit": self.explicit, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self.explicit = state.get("explicit", True)
        self.timeout = state["timeout"]
        self._lock = threading.RLock()
        self._models = {}
        self._db = None
        self._pid = 0

    # -- connection ----------------------------------------------------------------
    def _elsewhere(self) -> str:
        """How to use another cache, by the setting that chose this one's path."""
        if self.explicit:
            return (
                "give the cache another file (cache.path in the lab, the path passed to "
                "ModelCache in code)"
            )
        return f"point {CACHE_DIR_ENV} at another folder"

    def _corrupted(self, detail: str) -> CacheCorrupted:
        return CacheCorrupted(self.path, detail, elsewhere=self._elsewhere())

    def corrupted(self, detail: str) -> CacheCorrupted:
        """The error to raise for a damaged entry a caller found in this cache (its
        advice names the setting that chose the file)."""
        return self._corrupted(detail)

    def _error(self, exc: sqlite3.Error) -> CacheError:
        msg = str(exc)
        if "locked" in msg or "busy" in msg:
            return CacheError(
                f"embedding cache {self.path} stayed locked by another process for "
                f"{self.timeout:g} s ({msg}); retry, or give this run its own cache path"
            )
        if isinstance(exc, sqlite3.DatabaseError) and (
            "not a database" in msg or "malformed" in msg or "corrupt" in msg
        ):
            return self._corrupted(msg)
        if "no such table" in msg or "no such column" in msg:
            # the tables are checked on open: another program changed the file since
            return self._corrupted(f"{msg} (memlab's tables were changed)")
        if "disk" in msg or "full" in msg or "I/O" in msg:
            return CacheError(
                f"cannot write embedding cache {self.path}: {msg}; nothing was cached by "
                "this write. Is the disk (or the file size limit) full? Free some space and "
                f"retry, or {self._elsewhere()} on a disk with room"
            )
        if "readonly" in msg or "unable to open" in msg:
            return CacheError(
                f"cannot open or write embedding cache {self.path}: {msg}; check the "
                f"file's and its folder's permissions, or {self._elsewhere()}"
            )
        return CacheError(f"embedding cache {self.path}: {msg}")

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(
                f"cannot create the cache folder {self.path.parent}: {exc.strerror or exc}; "
                f"{self._elsewhere()} that is writable"
            ) from None
        if self.path.is_dir():
            raise CacheError(f"embedding cache path {self.path} is a folder, not a file")
        db: sqlite3.Connection | None = None
        try:
            db = sqlite3.connect(
                str(self.path),
                timeout=self.timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            self._check_and_migrate(db)
        except sqlite3.Error as exc:
            if db is not None:
                db.close()
            raise self._error(exc) from None
        except CacheError:
            if db is not None:
                db.close()
            raise
        self._db = db
        self._pid = os.getpid()
        self._models.clear()
        return db

    def _check_and_migrate(self, db: sqlite3.Connection) -> None:
        app_id, version = self._header(db)
        if version > SCHEMA_VERSION:
            raise CacheError(
                f"embedding cache {self.path} has schema version {version}, newer than this "
                f"memlab understands ({SCHEMA_VERSION}); upgrade memlab or use another cache path"
            )
        enable_wal(db, self.timeout)
        db.execute("PRAGMA synchronous=NORMAL")
        if version == SCHEMA_VERSION:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            app_id, version = self._header(db)  # another process may have migrated
            for step in MIGRATIONS[version:]:
                for statement in step:
                    db.execute(statement)
            if app_id != APPLICATION_ID:
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _header(self, db: sqlite3.Connection) -> tuple[int, int]:
        # The reads must see one snapshot: between separate reads another process
        # may create the cache (tables + application_id in one commit), and "no
        # application_id but tables" would then look like a foreign database.
        own = not db.in_transaction
        if own:
            db.execute("BEGIN")
        try:
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            objects = db.execute("SELECT type, name FROM sqlite_master").fetchall()
        finally:
            if own:
                db.execute("COMMIT")
        if app_id != APPLICATION_ID and (app_id != 0 or objects):
            raise self._corrupted(
                "it is an SQLite database but not a memlab cache "
                f"(application_id {app_id:#x}, {len(objects)} schema objects)"
            )
        # A migration commits its tables with its version, so a version's tables
        # are all there; CREATE TABLE IF NOT EXISTS must not quietly rebuild one.
        tables = {name for kind, name in objects if kind == "table"}
        missing = sorted(_tables_of(version) - tables)
        if app_id == APPLICATION_ID and version <= SCHEMA_VERSION and missing:
            raise self._corrupted(f"memlab's tables {missing} are missing")
        return app_id, version

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._db is None or self._pid != os.getpid():
                if self._db is not None:
                    # A connection must not be used across fork(), and closing it in
                    # the child could checkpoint the parent's WAL: keep it, unused.
                    _INHERITED.append(self._db)
                    self._db = None
                self._connect()
            assert self._db is not None
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise self._error(exc) from None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._conn() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _model_id(
        self, db: sqlite3.Connection, kind: str, name: str, dims: int, *, create: bool
    ) -> int | None:
        key = (kind, name, dims)
        found = self._models.get(key)
        if found is not None:
            return found
        if create:
            db.execute("INSERT OR IGNORE INTO models (kind, name, dims) VALUES (?, ?, ?)", key)
        row = db.execute(
            "SELECT id FROM models WHERE kind = ? AND name = ? AND dims = ?", key
        ).fetchone()
        if row is None:
            return None
        self._models[key] = int(row[0])
        return int(row[0])

    # -- embeddings ----------------------------------------------------------------
    def get_embeddings(
        self, name: str, dims: int, keys: Sequence[bytes]
    ) -> dict[bytes, np.ndarray]:
        """Cached vectors of ``keys`` (``text_key`` values) for the embedder ``name``.

        Returns:
            key -> float32 vector of ``dims``, for the keys found (read-only arrays).

        Raises:
            CacheCorrupted: the file is damaged, or a stored vector has the wrong size.
        """
        out: dict[bytes, np.ndarray] = {}
        if not keys:
            return out
        with self._conn() as db:
            model = self._model_id(db, "embedding", name, dims, create=False)
            if model is None:
                return out
            for key, blob in _select_keys(db, "key, vector", model, keys):
                if len(blob) != 4 * dims:
                    raise self._corrupted(
                        f"a cached vector of {name} has {len(blob)} bytes, expected {4 * dims}"
                    )
                out[bytes(key)] = np.frombuffer(blob, dtype="<f4")
        return out

    def embedded_keys(self, name: str, dims: int, keys: Sequence[bytes]) -> set[bytes]:
        """Which of ``keys`` have a cached vector by ``name`` (reads no vectors, so a
        whole dataset's keys can be checked in little memory)."""
        out: set[bytes] = set()
        if not keys:
            return out
        with self._conn() as db:
            model = self._model_id(db, "embedding", name, dims, create=False)
            if model is None:
                return out
            out.update(bytes(r[0]) for r in _select_keys(db, "key", model, keys))
        return out

    def put_embeddings(
        self, name: str, dims: int, items: Sequence[tuple[bytes, np.ndarray]]
    ) -> None:
        """Store ``(key, vector)`` pairs for the embedder ``name`` in one transaction."""
        if not items:
            return
        rows = []
        for key, vec in items:
            arr = np.asarray(vec, dtype="<f4")
            if arr.shape != (dims,):
                raise InputError(
                    f"cannot cache a vector of shape {arr.shape} for {name} ({dims} dims)"
                )
            rows.append((key, arr.tobytes()))
        with self._write() as db:
            model = self._model_id(db, "embedding", name, dims, create=True)
            db.executemany(
                "INSERT OR IGNORE INTO embeddings (model, key, vector) VALUES (?, ?, ?)",
                [(model, k, v) for k, v in rows],
            )

    # -- summaries -----------------------------------------------------------------
    def get_summary(self, name: str, key: bytes) -> str | None:
        """The cached summary of the input ``key`` (``texts_key``) by ``name``, or None."""
        with self._conn() as db:
            model = self._model_id(db, "summary", name, 0, create=False)
            if model is None:
                return None
            row = db.execute(
                "SELECT summary FROM summaries WHERE model = ? AND key = ?", (model, key)
            ).fetchone()
        return None if row is None else str(row[0])

    def put_summary(self, name: str, key: bytes, summary: str) -> None:
        """Store one summary (the first writer of a key wins)."""
        with self._write() as db:
            model = self._model_id(db, "summary", name, 0, create=True)
            db.execute(
                "INSERT OR IGNORE INTO summaries (model, key, summary, created_at) "
                "VALUES (?, ?, ?, ?)",
                (model, key, summary, time.time()),
            )

    # -- chat completions ----------------------------------------------------------
    def get_completion(self, name: str, key: bytes) -> dict[str, Any] | None:
        """The cached completion of the request ``key`` (``request_key``) by the chat
        model ``name``, as the dict it was stored as, or None.

        Raises:
            CacheCorrupted: the stored value is not a JSON object, or not a completion
                as ``Completion.as_dict`` writes it (a damaged entry would fail later
                as a bare ValueError or TypeError).
        """
        with self._conn() as db:
            model = self._model_id(db, "chat", name, 0, create=False)
            if model is None:
                return None
            row = db.execute(
                "SELECT response FROM completions WHERE model = ? AND key = ?", (model, key)
            ).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except (ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raise self._corrupted(f"a cached completion of {name} is not a JSON object")
        wrong = _completion_fault(value)
        if wrong is not None:
            raise self._corrupted(f"a cached completion of {name} has {wrong}")
        return value

    def put_completion(self, name: str, key: bytes, response: dict[str, Any]) -> None:
        """Store one completion (a JSON-able dict; the first writer of a key wins)."""
        text = json.dumps(response, ensure_ascii=False, sort_keys=True)
        with self._write() as db:
            model = self._model_id(db, "chat", name, 0, create=True)
            db.execute(
                "INSERT OR IGNORE INTO completions (model, key, response, created_at) "
                "VALUES (?, ?, ?, ?)",
                (model, key, text, time.time()),
            )

    # -- housekeeping --------------------------------------------------------------
    def info(self) -> dict[str, int]:
        """Entries per kind and the file's size in bytes (WAL included)."""
        with self._conn() as db:
            embeddings = db.execute("SELECT count(*) FROM embeddings").fetchone()[0]
            summaries = db.execute("SELECT count(*) FROM summaries").fetchone()[0]
            completions = db.execute("SELECT count(*) FROM completions").fetchone()[0]
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return {
            "embeddings": int(embeddings),
            "summaries": int(summaries),
            "completions": int(completions),
            "bytes": size,
        }

    def check(self) -> None:
        """Run SQLite's full integrity check (reads the whole file).

        Raises:
            CacheCorrupted: naming what SQLite found.
        """
        with self._conn() as db:
            problems = [r[0] for r in db.execute("PRAGMA integrity_check").fetchall()]
        if problems != ["ok"]:
            raise self._corrupted("; ".join(problems[:5]))

    def close(self) -> None:
        """Close this process's connection (it reopens on next use)."""
        with self._lock:
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            self._db = None


__all__ = [
    "CACHE_DIR_ENV",
    "ModelCache",
    "default_cache_dir",
    "default_cache_path",
    "request_key",
    "text_key",
    "texts_key",
]
