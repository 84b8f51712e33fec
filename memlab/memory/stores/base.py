"""The MemoryStore contract: the protocol every backend implements, the Candidates
columns a ranker scores, the STORES registry and the argument checks stores share."""

from __future__ import annotations

import builtins
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from memlab.errors import DimensionMismatch, InputError, StoreError
from memlab.memory.checks import check_bool, check_number, check_text, check_unicode
from memlab.memory.checks import check_time as check_epoch
from memlab.memory.records import (
    KIND_CODES,
    SOURCE_CODES,
    MemoryKind,
    MemoryRecord,
    check_kinds,
    check_scope,
)
from memlab.registry import Registry

STORES: Registry[type] = Registry("store", "memlab.memory.stores", error=InputError)
"""Store backends by name (``memory``, ``jsonl``, ``sqlite``, ``pgvector``); a module in
``memlab.memory.stores`` registers its class with ``@STORES.register("name")``."""


@dataclass
class Candidates:
    """Column arrays of the records a ranker may choose from, for one scope.

    Rows where ``mask`` is False must be ignored (they are deleted, archived,
    superseded or of another kind, as the call asked). Arrays may be views into a
    store's cache: never modify them. ``invalid_at`` and ``archived_at`` hold
    ``inf`` for a record that is not superseded (as a whole) or not archived.
    """

    ids: list[str]
    embeddings: np.ndarray  # (n, dims) float32
    created_at: np.ndarray  # float64 epoch seconds
    last_accessed_at: np.ndarray  # float64
    salience: np.ndarray  # float32
    access_count: np.ndarray  # int64
    tokens: np.ndarray  # int64
    kind: np.ndarray  # int8 codes, see KIND_CODES
    source: np.ndarray  # int8 codes, see SOURCE_CODES
    mask: np.ndarray  # bool
    lexical: np.ndarray | None = None  # raw BM25 of each row for the query text, if asked
    invalid_at: np.ndarray = None  # type: ignore[assignment]  # float64; inf: in force
    archived_at: np.ndarray = None  # type: ignore[assignment]  # float64; inf: active
    # Cosine of each row to the query when the store computed it (reduced-precision
    # scans, see memlab.memory.stores.indexed.ScanPolicy); None: embeddings @ query.
    similarity: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.ids)
        if self.invalid_at is None:
            self.invalid_at = np.full(n, np.inf)
        if self.archived_at is None:
            self.archived_at = np.full(n, np.inf)

    @property
    def superseded(self) -> np.ndarray:
        """Rows of wholly superseded records (bool)."""
        return np.isfinite(self.invalid_at)

    def __len__(self) -> int:
        return len(self.ids)

    def dot(self, query: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Every row's dot product with ``query`` (``embeddings @ query``, float32;
        see ``dot_rows``)."""
        return dot_rows(self.embeddings, query, out)

    @property
    def n_active(self) -> int:
        return int(self.mask.sum())

    @classmethod
    def empty(cls, dims: int) -> Candidates:
        return cls(
            ids=[],
            embeddings=np.zeros((0, dims), dtype=np.float32),
            created_at=np.zeros(0),
            last_accessed_at=np.zeros(0),
            salience=np.zeros(0, dtype=np.float32),
            access_count=np.zeros(0, dtype=np.int64),
            tokens=np.zeros(0, dtype=np.int64),
            kind=np.zeros(0, dtype=np.int8),
            source=np.zeros(0, dtype=np.int8),
            mask=np.zeros(0, dtype=bool),
        )

    @classmethod
    def from_records(cls, records: Sequence[MemoryRecord], dims: int) -> Candidates:
        """Columns for a list of records (all rows unmasked)."""
        if not records:
            return cls.empty(dims)
        return cls(
            ids=[r.id for r in records],
            embeddings=np.stack([r.embedding for r in records]).astype(np.float32, copy=False),
            created_at=np.array([r.created_at for r in records], dtype=np.float64),
            last_accessed_at=np.array([r.last_accessed_at for r in records], dtype=np.float64),
            salience=np.array([r.salience for r in records], dtype=np.float32),
            access_count=np.array([r.access_count for r in records], dtype=np.int64),
            tokens=np.array([r.tokens for r in records], dtype=np.int64),
            kind=np.array([KIND_CODES[r.kind] for r in records], dtype=np.int8),
            source=np.array([SOURCE_CODES[r.source] for r in records], dtype=np.int8),
            mask=np.ones(len(records), dtype=bool),
            invalid_at=np.array([_inf(r.invalid_at) for r in records], dtype=np.float64),
            archived_at=np.array([_inf(r.archived_at) for r in records], dtype=np.float64),
        )


# A query with at most dims / SPARSE_SHARE nonzero components reads only those
# dimensions of a column-major matrix. Measured on 384 dims at 10k rows: 0.40 vs
# 0.48 ms dense at 80 components, 0.29 vs 0.43 at 63, 0.08 vs 0.42 at 22 (a
# hash-embedded question); at 1M rows 12 vs 50-60 ms at 22 components.
SPARSE_SHARE = 5
_BLOCK = 1 << 18  # floats of one gathered block (1 MB, within a core's L2)
# From this many rows a sparse product is split across the cores: one core's
# gather is bound by its own memory bandwidth. Measured on 2 cores, 384 dims, a
# hash-embedded question: 10k-20k rows no faster (0.2 / 0.47 ms either way), 60k
# 1.4 -> 0.8-1.0 ms, 100k 3.2 -> 1.75 ms.
PARALLEL_ROWS = 32_768


def _workers() -> int:
    """Threads for a large sparse product: the cores this process may use, at most
    4, and at most ``OMP_NUM_THREADS`` when that is set (the limit a user gives
    numpy's BLAS holds here too)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = min(4, cores or 1)
    limit = os.environ.get("OMP_NUM_THREADS", "").strip()
    if limit.isdigit() and int(limit) > 0:
        n = min(n, int(limit))
    return max(1, n)


_WORKERS = _workers()
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there, and a pool
    that believes they do would queue work nobody runs."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _pool() -> ThreadPoolExecutor:
    """The threads that share large sparse products (made on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(_WORKERS - 1, thread_name_prefix="memlab-dot")
        return _POOL


def dot_rows(matrix: np.ndarray, vector: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``matrix @ vector`` for an (n, dims) float32 matrix, into ``out`` if given.

    When the matrix is stored column-major (each dimension's values contiguous, as
    the exact stores keep them) and the vector is sparse (a hash embedder's), only
    the vector's nonzero components are read: the rows of ``matrix.T`` they select,
    in blocks that fit a core's cache, split across the cores from
    ``PARALLEL_ROWS`` rows on (numpy releases the GIL while it gathers and
    multiplies). The result equals the dense product up to float32 rounding (the
    omitted terms are exact zeros), and does not depend on the split: each row's
    product is computed by one call over the same values.

    Args:
        matrix: (n, dims) float32.
        vector: (dims,) float32.
        out: (n,) float32 to write into, or None.

    Returns:
        The (n,) float32 products (``out`` when given).
    """
    n, dims = matrix.shape
    cols = matrix.T
    if n and dims and cols.strides[1] == cols.itemsize:
        nz = np.flatnonzero(vector)
        if len(nz) * SPARSE_SHARE <= dims:
            if out is None:
                out = np.empty(n, dtype=np.float32)
            if not len(nz):
                out[...] = 0.0
                return out
            weights = vector[nz].astype(np.float32, copy=False)
            step = max(1024, _BLOCK // len(nz))
            if n < PARALLEL_ROWS or _WORKERS == 1:
                _sparse_part(cols, nz, weights, out, 0, n, step)
                return out
            # contiguous shares, each a whole number of blocks
            share = -(-n // (_WORKERS * step)) * step
            bounds = [(a, min(n, a + share)) for a in range(0, n, share)]
            pool = _pool()
            futures = [
                pool.submit(_sparse_part, cols, nz, weights, out, a, b, step) for a, b in bounds[1:]
            ]
            _sparse_part(cols, nz, weights, out, *bounds[0], step)
            for f in futures:
                f.result()
            return out
    return np.matmul(matrix, vector, out=out)


def _sparse_part(
    cols: np.ndarray, nz: np.ndarray, weights: np.ndarray, out: np.ndarray, a: int, b: int,
    step: int,
) -> None:  # fmt: skip
    """Rows ``a:b`` of the sparse product (see ``dot_rows``), a block at a time."""
    for start in range(a, b, step):
        end = min(b, start + step)
        np.matmul(weights, cols[nz, start:end], out=out[start:end])


def marked_by(records: Iterable[MemoryRecord], by: set[str]) -> builtins.list[MemoryRecord]:
    """The records with a ``Superseded`` entry made by one of ``by``, in order:
    every store's ``superseded_by`` filters what it read with this."""
    return [r for r in records if any(s.by in by for s in r.superseded)]


def _inf(value: float | None) -> float:
    return np.inf if value is None else float(value)


def scope_columns(
    store: MemoryStore,
    scope: str,
    *,
    kinds: Iterable[MemoryKind | str] | None = None,
    include_archived: bool = False,
) -> Candidates:
    """Column arrays of **every** record of ``scope`` (of ``kinds``), without copying
    records: the exact stores' cached columns, or an approximate store's pool
    sized to the whole scope (a scope with at most ``pool`` matching records is
    returned whole). Maintenance reads these to decide which few records it must
    load (``get_many``) instead of listing the scope at every turn.
    """
    # a pool no scope reaches: exact stores ignore it, an approximate one returns
    # the scope whole, and nobody counts the scope first
    return store.candidates(
        scope, kinds=kinds, include_archived=include_archived, pool=_WHOLE_SCOPE
    )


_WHOLE_SCOPE = 2**62  # fits PostgreSQL's bigint with room for the store's "pool + 1"


def valid_mask(
    created_at: np.ndarray, invalid_at: np.ndarray, archived_at: np.ndarray, t: float
) -> np.ndarray:
    """Rows held at time ``t``: made by then, and neither superseded nor archived by
    then (``candidates(valid_at=t)``; ``t = inf``: in force now)."""
    if np.isinf(t):
        return np.isinf(invalid_at) & np.isinf(archived_at)
    return (created_at <= t) & (invalid_at > t) & (archived_at > t)


@runtime_checkable
class MemoryStore(Protocol):
    """Where memory records live. Every backend passes the same contract suite.

    Scope is an exact match everywhere, and a security boundary: every method
    that takes record ids also takes the scope, and treats a record of another
    scope exactly like a missing one (``get`` returns None; ``delete``,
    ``mark_archived`` and ``touch`` ignore it and count only what they changed).
    Ids are unique across the store and bound to their scope: ``put`` of an
    existing id replaces the record (upsert) only within the same scope; an id
    that belongs to another scope is an InputError and nothing is written.
    """

    @property
    def dims(self) -> int | None:
        """Embedding dimensions of the stored records (None while empty)."""
        ...

    def put(self, record: MemoryRecord) -> None: ...

    def put_many(self, records: Sequence[MemoryRecord]) -> None:
        """Write all records atomically: either every record is stored or none.

        Raises:
            InputError: a record is invalid, or its id belongs to a record of
                another scope (ids never move between scopes).
        """
        ...

    def get(self, scope: str, record_id: str) -> MemoryRecord | None:
        """The record of ``scope`` with this id, or None (also for another scope's id)."""
        ...

    def get_many(self, scope: str, ids: Sequence[str]) -> list[MemoryRecord]:
        """The scope's records with these ids, in the given order; ids that are
        missing or belong to another scope are skipped."""
        ...

    def list(
        self,
        scope: str,
        kinds: Iterable[MemoryKind | str] | None = None,
        include_archived: bool = False,
    ) -> builtins.list[MemoryRecord]:
        """A scope's records ordered by (created_at, id)."""
        ...

    def superseded_by(self, scope: str, ids: str | Sequence[str]) -> builtins.list[MemoryRecord]:
        """The scope's records (archived too) with a ``Superseded`` entry made by one
        of these ids, ordered by (created_at, id): what forgetting those ids lifts.
        Another scope's records are never returned, whatever their entries say."""
        ...

    def delete(self, scope: str, ids: str | Sequence[str]) -> int:
        """Delete the scope's records with these ids; return how many existed."""
        ...

    def mark_archived(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        """Archive the scope's records with these ids at ``at``; return how many."""
        ...

    def touch(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        """Record a recall of the scope's records: ``access_count += 1`` and
        ``last_accessed_at = at``; return how many records changed."""
        ...

    def count(self, scope: str | None = None, *, include_archived: bool = False) -> int: ...

    def scopes(self) -> builtins.list[str]: ...

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
        """Columns of the scope's records a ranker should score.

        Exact stores return every record of the scope (``query``, ``pool`` and
        ``weights`` are hints they ignore). Approximate stores return a pool: the
        ``pool`` records with the best ``weights["similarity"] * cos(query) +
        weights["salience"] * salience`` (by cosine alone when ``weights`` is None),
        plus the most recent records, since recency depends on the time of the
        query; a scope with at most ``pool`` matching records is returned whole
        (``scope_columns`` relies on it). ``weights`` maps signal names to the ranker's weights
        (``RankWeights.as_dict()``); other keys are ignored. With ``text``,
        ``Candidates.lexical`` holds each row's BM25 score for it over the scope's
        active records (see memlab.memory.lexical). ``now`` (epoch seconds, the
        time the ranker scores recency at) and ``half_life`` (hours by kind name,
        ``HalfLives``' fields) are a recency hint: an approximate store may search
        each kind's recent records on their own (see ``PgVectorStore``); exact
        stores check and ignore them.
        """
        ...

    def size_bytes(self) -> int:
        """Bytes the store occupies on disk (0 for in-memory)."""
        ...

    def close(self) -> None: ...


def as_ids(ids: str | Iterable[str]) -> list[str]:
    """Normalize a single id or an iterable of ids to a list of strings.

    Raises:
        InputError: if ``ids`` is not a string or an iterable of strings.
    """
    if isinstance(ids, str):
        return [ids]
    if isinstance(ids, bytes | bytearray | Mapping) or not isinstance(ids, Iterable):
        raise InputError(f"ids must be a string or a list of strings, got {type(ids).__name__}")
    out = list(ids)
    for i in out:
        if not isinstance(i, str):
            raise InputError(f"record ids must be strings, got {type(i).__name__} {i!r}")
        check_unicode(i, "record id")
    return out


def check_time(at: object, what: str) -> float:
    """A finite epoch-seconds timestamp within years 1..9999 as float
    (``checks.check_time``).

    Raises:
        InputError: naming ``what`` if ``at`` is not such a number.
    """
    return float(check_epoch(at, f"{what}: the time"))


def check_candidates_args(
    query: object,
    dims: int | None,
    include_archived: object,
    pool: object,
    text: object,
    weights: object,
    now: object = None,
    half_life: object = None,
) -> None:
    """Check ``candidates``' arguments (every store, exact ones too, although they
    ignore ``query``, ``pool``, ``weights``, ``now`` and ``half_life``).

    Raises:
        InputError: naming the argument; DimensionMismatch for a query of other dims.
    """
    if query is not None:
        if not isinstance(query, np.ndarray | list | tuple):
            raise InputError(
                f"query must be a 1-D vector (numpy array), got {type(query).__name__}"
            )
        try:
            vector = np.asarray(query, dtype=np.float32)
        except (TypeError, ValueError):
            raise InputError("query must be a 1-D vector of numbers") from None
        if vector.ndim != 1:
            raise InputError(f"query must be a 1-D vector, got shape {vector.shape}")
        if dims is not None and vector.shape[0] != dims:
            raise DimensionMismatch(dims, int(vector.shape[0]), "candidates() query")
    check_bool(include_archived, "include_archived")
    check_number(pool, "pool", lo=1, integer=True, none=True)
    if text is not None:
        check_text(text, "text", empty=True)
    if weights is not None:
        if not isinstance(weights, Mapping):
            raise InputError(
                f"weights must be a mapping of signal names to weights, got {type(weights).__name__}"
            )
        for key, w in weights.items():
            check_number(w, f"weights[{key!r}]", lo=0.0)
    check_epoch(now, "now (epoch seconds)", none=True)
    if half_life is not None:
        if not isinstance(half_life, Mapping):
            raise InputError(
                "half_life must map kind names to hours, got " + type(half_life).__name__
            )
        for key, h in half_life.items():
            check_number(h, f"half_life[{key!r}] (hours)", above=0.0)


def check_valid_at(valid_at: object) -> float | None:
    """``candidates``' ``valid_at``: None, or epoch seconds (``inf``: now).

    Raises:
        InputError: anything else (NaN, a string, a bool).
    """
    if valid_at is None:
        return None
    if isinstance(valid_at, bool) or not isinstance(valid_at, int | float) or valid_at != valid_at:
        raise InputError(f"valid_at must be epoch seconds, inf or None, got {valid_at!r}")
    return float(valid_at)


def scoped_ids(scope: str, ids: str | Iterable[str]) -> list[str]:
    """Check a scope and normalize ids (see ``as_ids``) for an id-taking method."""
    check_scope(scope)
    return as_ids(ids)


def foreign_ids(records: Sequence[MemoryRecord], scope_of: Mapping[str, str]) -> None:
    """Refuse a write that would move a record to another scope.

    Args:
        records: the records to write.
        scope_of: the current scope of each of their ids that already exists.

    Raises:
        InputError: naming the first id that belongs to another scope.
    """
    for r in records:
        current = scope_of.get(r.id)
        if current is not None and current != r.scope:
            raise InputError(
                f"record id {r.id!r} already belongs to another scope; ids are unique across "
                "the store and never move between scopes: use a new id (or omit it)"
            )


def kind_filter(kinds: Iterable[MemoryKind | str] | None) -> frozenset[MemoryKind] | None:
    """The kinds to keep (None: all). Raises InputError on a bare string or an unknown kind."""
    if kinds is None:
        return None
    return frozenset(check_kinds(kinds, "kinds"))


def check_store_path(path: Path, create_dirs: bool, who: str) -> None:
    """Check that a file store's ``path`` can hold its file, creating its folder
    when ``create_dirs`` is true.

    Raises:
        StoreError: ``path`` is a folder; or its folder is missing (and
            ``create_dirs`` is false) or cannot be created. The message names the path.
    """
    if path.is_dir():
        raise StoreError(
            f"{who}: {path} is a folder; give the path of the store's file inside it, "
            f"e.g. {path / ('memory.db' if who == 'SqliteStore' else 'memory.jsonl')}"
        )
    folder = path.parent
    if folder.is_dir():
        return
    if not create_dirs:
        raise StoreError(
            f"{who}: the folder {folder} of {path} does not exist; check the path for a "
            "typo, create the folder, or pass create_dirs=True"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"{who}: cannot create the folder {folder}: {exc.strerror or exc}"
        ) from None


def check_records(records: object, where: str) -> list[MemoryRecord]:
    """``put_many``'s argument as a list of MemoryRecord (not yet validated).

    Raises:
        InputError: ``records`` is not a list of MemoryRecord (a single record,
            a dict, None ...).
    """
    if isinstance(records, MemoryRecord):
        raise InputError(f"{where}: pass a list of records to put_many, or use put(record)")
    if isinstance(records, str | bytes | Mapping) or not isinstance(records, Iterable):
        raise InputError(
            f"{where}: records must be a list of MemoryRecord, got {type(records).__name__}"
        )
    out = list(records)
    for i, r in enumerate(out):
        if not isinstance(r, MemoryRecord):
            raise InputError(f"{where}: records[{i}] is a {type(r).__name__}, not a MemoryRecord")
    return out


def check_dims(records: Sequence[MemoryRecord], dims: int | None, where: str) -> int | None:
    """Validate records and that all share the store's embedding dimensions.

    Returns:
        The dimensions after this write (the first write fixes them).
    """
    for r in records:
        if not isinstance(r, MemoryRecord):
            raise InputError(f"{where}: got a {type(r).__name__}, not a MemoryRecord")
        r.validate()
        d = int(r.embedding.shape[0])
        if dims is None:
            dims = d
        elif d != dims:
            raise DimensionMismatch(dims, d, f"{where}, record {r.id}")
    ids = [r.id for r in records]
    if len(set(ids)) != len(ids):
        raise InputError(f"{where}: the batch holds the same record id twice")
    return dims
