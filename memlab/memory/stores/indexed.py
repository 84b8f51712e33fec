"""The column index the exact stores share.

``ScopeIndex`` keeps one scope's records as growable numpy columns (plus a BM25
index of their text), so a recall ranks them without rebuilding a matrix.
``IndexedStore`` holds every record in process memory with one ScopeIndex per
scope: InMemoryStore is this class, JsonlStore adds a durable log underneath,
and SqliteStore caches each scope it recalls from in a ScopeIndex.

A ScopeIndex scans every row's float32 vector for a recall (exact). With
``ScanPolicy(codes="bits")`` it also keeps one sign bit per dimension of every
vector, column-major (48 bytes a row at 384 dims), scans those instead (XOR and
popcount, a tenth of the float32 scan's memory traffic), and re-ranks the rows
nearest by Hamming distance with their exact float32 cosine (see ``ScanPolicy``).
With ``codes="int8"`` it scans int8 codes in ONNX Runtime under an error bound
(``memlab.memory.stores.int8_scan``).
"""

from __future__ import annotations

import builtins
import mmap
from collections.abc import Iterable, Mapping, Sequence, ValuesView
from dataclasses import dataclass

import numpy as np

from memlab.errors import InputError
from memlab.memory.checks import check_bool, check_number
from memlab.memory.lexical import LexicalIndex
from memlab.memory.records import (
    KIND_CODES,
    SOURCE_CODES,
    MemoryKind,
    MemoryRecord,
    check_scope,
    kinds_mask,
)
from memlab.memory.stores.base import (
    Candidates,
    check_candidates_args,
    check_valid_at,
    kind_filter,
    marked_by,
    scoped_ids,
    valid_mask,
)
from memlab.memory.stores.int8_scan import Int8Scan, check_int8_extra

SCAN_CODES = ("float32", "bits", "int8")
# New vectors of a column-major index wait in a row-major block of this many rows
# and are written into the columns together (one write per dimension, not one
# scattered write per dimension and record).
_STAGE = 256
# A column-major matrix at least this large is mapped with small pages (see
# _column_major); smaller ones are ordinary numpy arrays.
_MAP_BYTES = 1 << 22


def _column_major(dims: int, cap: int, dtype: type) -> np.ndarray:
    """A zeroed (dims, cap) array whose unused tail of every row stays unbacked.

    Each dimension's row has a spare tail past the last record. numpy backs an
    array of 4 MB or more with transparent huge pages, and a 2 MB page that holds
    the end of one row and the start of the next is resident whole, so the spare
    capacity would cost memory (+47 MB at 100k 384-dim rows). An anonymous mapping
    with small pages is touched only where rows are written; its matrix-vector
    product measured as fast (59 vs 63 ms at 1M rows).
    """
    size = dims * cap * np.dtype(dtype).itemsize
    if not size or size < _MAP_BYTES:
        return np.zeros((dims, cap), dtype=dtype)
    buf = mmap.mmap(-1, size)
    if hasattr(buf, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
        buf.madvise(mmap.MADV_NOHUGEPAGE)  # where the kernel uses huge pages always
    return np.frombuffer(buf, dtype=dtype).reshape(dims, cap)


@dataclass(frozen=True)
class ScanPolicy:
    """How a store's column index finds each record's similarity to a query.

    ``codes="float32"`` (the default) computes the exact cosine of every row: one
    matrix-vector product over 4 x dims bytes a row (stored column-major), which
    sets the recall floor of a large scope (50-60 ms at a million 384-dim rows;
    a sparse query, such as a hash embedder's, reads only its nonzero dimensions).
    ``codes="int8"`` keeps the float32 vectors row-major and, in blocks of 65,536
    rows and more, their int8 codes packed for ONNX Runtime's int8 kernels (a
    quarter of the memory traffic, and VNNI / AMX where the CPU has them). Each
    sealed row gets an upper bound on its cosine (the estimate plus a
    Cauchy-Schwarz bound on the rounding error), the rows past the last block and
    rows rewritten since their block was built their exact cosine, and the ranker
    re-scores rows exactly until its head is exact, so the ranking is the float32
    scan's (``memlab.memory.stores.int8_scan``; needs the ``int8`` extra).
    ``codes="bits"`` keeps, next to the float32 column, the sign of each vector
    component as one bit, and scans those: the Hamming distance of every row to
    the query's signs. The ``rerank`` nearest rows (more on ties) then get their
    exact float32 cosine; every other row gets the best exact cosine among the
    re-ranked rows at the cut-off distance, a bound on its similarity (cosine falls
    with the Hamming distance), and the ranker re-scores rows exactly until its
    head is exact (``memlab.memory.rank``). Under the default hybrid weights that
    bound lets many rows reach the head, so the scan measured no faster than
    float32 at 200k-1M records; it pays off when similarity dominates the score.
    The ranking is exact when the bound holds;
    ``memlab bench store`` reports the recall@10 against the float32 scan.
    Scopes of fewer than ``min_rows`` rows are always scanned in float32 (it is
    fast there, and exact). The bit column costs dims / 8 bytes a row on top of
    the float32 column. float16 columns were measured and rejected: numpy has no
    fast kernel for them (a 1M-row scan took 3.3 s), nor for int8 (0.3-0.5 s),
    which is why the int8 scan runs in ONNX Runtime.

    Args:
        codes: ``"float32"``, ``"int8"`` or ``"bits"``.
        rerank: rows the bit scan re-ranks with their exact float32 cosine (>= 1).
        min_rows: scopes smaller than this use the float32 scan (>= 0).
    """

    codes: str = "float32"
    rerank: int = 16384
    min_rows: int = 20_000

    def __post_init__(self) -> None:
        if not isinstance(self.codes, str) or self.codes not in SCAN_CODES:
            raise InputError(f"scan must be one of {list(SCAN_CODES)}, got {self.codes!r}")
        check_number(self.rerank, "scan_rerank", lo=1, integer=True)
        check_number(self.min_rows, "scan_min_rows", lo=0, integer=True)
        if self.codes == "int8":  # a missing extra fails here, not at the first recall
            check_int8_extra()


class ScopeIndex:
    """Growable column arrays for one scope, so a recall never rebuilds a matrix.

    Rows are appended (capacity doubles); deletes leave a dead row that is
    compacted away once dead rows are a quarter of the index.
    """

    def __init__(self, dims: int, scan: ScanPolicy | None = None) -> None:
        self.dims = dims
        self.scan = scan or ScanPolicy()
        # (words, cap) uint64 sign bits, column-major so the scan reads each word
        # of every row as one contiguous array.
        self.words = (dims + 63) // 64 if self.scan.codes == "bits" else 0
        # The float32 scan keeps vectors column-major, (dims, cap): its matrix-vector
        # product ran 1.4x faster so at 100k-1M rows, and a sparse query reads only
        # its nonzero dimensions (stores.base.dot_rows). The bit and int8 scans
        # re-rank scattered rows exactly, which a row-major (cap, dims) matrix
        # gathers at a tenth of the cost.
        self.by_row = self.words > 0 or self.scan.codes == "int8"
        self.int8 = Int8Scan(dims) if self.scan.codes == "int8" else None
        self.ids: list[str] = []
        self.row: dict[str, int] = {}
        self.n = 0
        self.dead = 0
        self.contents: list[str] = []
        self.lexical = LexicalIndex()
        self._staged: dict[int, int] = {}  # row -> its slot in self._stage
        self._stage = np.empty((0, dims), dtype=np.float32)
        self._alloc(16)

    def _alloc(self, cap: int) -> None:
        def grow(old: np.ndarray | None, shape: tuple[int, ...], dtype: type) -> np.ndarray:
            new: np.ndarray = np.zeros(shape, dtype=dtype)
            if old is not None and self.n:
                new[: self.n] = old[: self.n]
            return new

        def grow_columns(old: np.ndarray | None, rows: int, dtype: type) -> np.ndarray:
            new = _column_major(rows, cap, dtype)
            if old is not None and self.n:
                new[:, : self.n] = old[:, : self.n]
            return new

        d = self.dims
        self.cap = cap
        get = self.__dict__.get
        if self.by_row:
            self.emb = grow(get("emb"), (cap, d), np.float32)
        else:
            self.emb = grow_columns(get("emb"), d, np.float32)
            if len(self._stage) < min(_STAGE, cap):  # a small scope's stage stays small
                self._flush()
                self._stage = np.empty((min(_STAGE, cap), d), dtype=np.float32)
        self.created = grow(get("created"), (cap,), np.float64)
        self.accessed = grow(get("accessed"), (cap,), np.float64)
        self.salience = grow(get("salience"), (cap,), np.float32)
        self.access = grow(get("access"), (cap,), np.int64)
        self.tokens = grow(get("tokens"), (cap,), np.int64)
        self.kind = grow(get("kind"), (cap,), np.int8)
        self.source = grow(get("source"), (cap,), np.int8)
        self.archived_at = grow(get("archived_at"), (cap,), np.float64)  # inf: active
        self.invalid_at = grow(get("invalid_at"), (cap,), np.float64)  # inf: in force
        self.alive = grow(get("alive"), (cap,), np.bool_)
        self.bits = grow_columns(get("bits"), self.words, np.uint64)

    def _signs(self, vector: np.ndarray) -> np.ndarray:
        """The sign bits of one vector as ``words`` uint64 words."""
        packed = np.zeros(self.words * 8, dtype=np.uint8)
        bits = np.packbits(np.asarray(vector) > 0)
        packed[: bits.size] = bits
        return packed.view(np.uint64)

    def __len__(self) -> int:
        return len(self.row)

    def upsert(self, r: MemoryRecord) -> None:
        i = self.row.get(r.id)
        if i is None:
            if self.n == self.cap:
                self._alloc(self.cap * 2)
            i = self.n
            self.n += 1
            self.ids.append(r.id)
            self.contents.append("")
            self.row[r.id] = i
        if self.by_row:
            int8 = self.int8  # a sealed row's new vector makes its int8 code stale
            if (
                int8 is not None
                and i < int8.sealed
                and not np.array_equal(self.emb[i], r.embedding)
            ):
                int8.wrote(i)
            self.emb[i] = r.embedding
        else:
            slot = self._staged.get(i)
            if slot is None:
                if len(self._staged) == len(self._stage):
                    self._flush()
                slot = self._staged[i] = len(self._staged)
            self._stage[slot] = r.embedding
        if self.words:
            self.bits[:, i] = self._signs(r.embedding)
        self.created[i] = r.created_at
        self.accessed[i] = r.last_accessed_at
        self.salience[i] = r.salience
        self.access[i] = r.access_count
        self.tokens[i] = r.tokens
        self.kind[i] = KIND_CODES[r.kind]
        self.source[i] = SOURCE_CODES[r.source]
        self.archived_at[i] = np.inf if r.archived_at is None else r.archived_at
        invalid = r.invalid_at
        self.invalid_at[i] = np.inf if invalid is None else invalid
        self.alive[i] = True
        active = r.archived_at is None
        if self.contents[i] != r.content:  # upserts that keep the text skip re-indexing
            self.contents[i] = r.content
            self.lexical.set_text(i, r.content, active)
        else:
            self.lexical.set_active(i, active)

    def _flush(self) -> None:
        """Write the staged vectors into their columns."""
        if not self._staged:
            return
        rows = np.fromiter(self._staged, dtype=np.intp, count=len(self._staged))
        block = self._stage[: len(rows)].T
        if bool((np.diff(rows) == 1).all()):  # appended rows: one slice
            self.emb[:, rows[0] : rows[0] + len(rows)] = block
        else:
            self.emb[:, rows] = block
        self._staged.clear()

    def remove(self, record_id: str) -> None:
        i = self.row.pop(record_id, None)
        if i is None:
            return
        self.alive[i] = False
        self.lexical.set_active(i, False)
        self.dead += 1
        if self.dead > 64 and self.dead * 4 > self.n:
            self._compact()

    def set_archived(self, record_id: str, at: float | None) -> None:
        i = self.row.get(record_id)
        if i is not None:
            self.archived_at[i] = np.inf if at is None else at
            self.lexical.set_active(i, at is None)

    def touch(self, record_id: str, at: float) -> None:
        i = self.row.get(record_id)
        if i is not None:
            self.access[i] += 1
            self.accessed[i] = at

    def _compact(self) -> None:
        self._flush()
        keep = np.flatnonzero(self.alive[: self.n])
        by_row = [
            "created", "accessed", "salience", "access", "tokens",
            "kind", "source", "archived_at", "invalid_at", "alive",
        ]  # fmt: skip
        by_column = ["bits"] if self.words else []
        (by_row if self.by_row else by_column).append("emb")
        for name in by_row:
            arr = getattr(self, name)
            arr[: len(keep)] = arr[keep]
            arr[len(keep) : self.n] = 0
        for name in by_column:
            arr = getattr(self, name)
            arr[:, : len(keep)] = arr[:, keep]
            arr[:, len(keep) : self.n] = 0
        self.ids = [self.ids[i] for i in keep]
        self.contents = [self.contents[i] for i in keep]
        self.lexical.renumber(keep)
        self.row = {rid: j for j, rid in enumerate(self.ids)}
        self.n = len(keep)
        self.dead = 0
        if self.int8 is not None:
            self.int8.reset()

    def similarity(self, query: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
        """Each row's cosine to ``query`` from the bit scan plus an exact float32
        re-rank, or an upper bound on it from the int8 scan (see ScanPolicy); None
        when the float32 scan applies."""
        n = self.n
        if n < self.scan.min_rows:
            return None
        if self.int8 is not None:
            return self.int8.bounds(self.emb, n, query)
        if not self.words:
            return None
        q = np.asarray(query, dtype=np.float32)
        signs = self._signs(q)
        dist = np.bitwise_count(self.bits[0, :n] ^ signs[0]).astype(np.uint16)
        for w in range(1, self.words):
            dist += np.bitwise_count(self.bits[w, :n] ^ signs[w])
        live = dist[mask]
        if live.size == 0:
            return np.zeros(n, dtype=np.float32)
        # The rerank nearest live rows: the smallest distance whose cumulative count
        # reaches rerank (a histogram over dims + 1 values, no sort of n rows).
        cum = np.cumsum(np.bincount(live, minlength=self.dims + 1))
        cut = int(np.searchsorted(cum, min(self.scan.rerank, live.size)))
        rows = np.flatnonzero(mask & (dist <= cut))
        exact = self.emb[rows] @ q
        # Rows farther than the cut get the best cosine seen at the cut: similarity
        # falls with the distance, so that is (almost always) a bound for them.
        sim = np.full(n, exact[dist[rows] == cut].max(), dtype=np.float32)
        sim[rows] = exact
        return sim

    def view(
        self,
        kinds: frozenset[MemoryKind] | None,
        include_archived: bool,
        text: str | None = None,
        valid_at: float | None = None,
        query: np.ndarray | None = None,
    ) -> Candidates:
        self._flush()
        n = self.n
        mask = self.alive[:n].copy()
        if valid_at is not None:
            mask &= valid_mask(
                self.created[:n], self.invalid_at[:n], self.archived_at[:n], valid_at
            )
        elif not include_archived:
            mask &= np.isinf(self.archived_at[:n])
        if kinds is not None and len(kinds) < len(KIND_CODES):
            mask &= kinds_mask(self.kind[:n], kinds)
        return Candidates(
            ids=self.ids,
            embeddings=self.emb[:n] if self.by_row else self.emb[:, :n].T,
            created_at=self.created[:n],
            last_accessed_at=self.accessed[:n],
            salience=self.salience[:n],
            access_count=self.access[:n],
            tokens=self.tokens[:n],
            kind=self.kind[:n],
            source=self.source[:n],
            mask=mask,
            lexical=self.lexical.scores(text, n) if text is not None else None,
            invalid_at=self.invalid_at[:n],
            archived_at=self.archived_at[:n],
            similarity=self.similarity(query, mask) if query is not None else None,
        )


class IndexedStore:
    """A store whose records all live in process memory, with per-scope indexes.

    InMemoryStore is this class; JsonlStore adds a durable log underneath.
    Subclasses call the ``_apply_*`` methods to change state.

    Args:
        scan: how a recall scans a scope's vectors: ``"float32"`` (exact) or
            ``"bits"`` (sign bits, then an exact re-rank); see ScanPolicy.
        scan_rerank: rows the ``"bits"`` scan re-ranks in float32.
        scan_min_rows: scopes smaller than this are scanned in float32.
    """

    def __init__(
        self,
        *,
        scan: str = ScanPolicy.codes,
        scan_rerank: int = ScanPolicy.rerank,
        scan_min_rows: int = ScanPolicy.min_rows,
    ) -> None:
        self.scan = ScanPolicy(scan, scan_rerank, scan_min_rows)
        self._reset_state()

    def _reset_state(self) -> None:
        """Forget every record (a subclass reading its file again); the scan policy stays."""
        self._records: dict[str, MemoryRecord] = {}
        self._by_scope: dict[str, dict[str, MemoryRecord]] = {}
        # per scope, the records that carry Superseded entries (superseded_by reads these)
        self._marked: dict[str, dict[str, MemoryRecord]] = {}
        self._index: dict[str, ScopeIndex] = {}
        self._dims: int | None = None

    # -- state changes (no I/O) -------------------------------------------------
    def _apply_put(self, records: Sequence[MemoryRecord]) -> None:
        for r in records:
            old = self._records.get(r.id)
            if old is not None and old.scope != r.scope:
                self._drop(old)
            stored = r.copy()
            self._records[r.id] = stored
            self._by_scope.setdefault(r.scope, {})[r.id] = stored
            if stored.superseded:
                self._marked.setdefault(r.scope, {})[r.id] = stored
            elif (marked := self._marked.get(r.scope)) is not None:
                marked.pop(r.id, None)
            if self._dims is None:
                self._dims = int(r.embedding.shape[0])
            idx = self._index.get(r.scope)
            if idx is None:
                idx = self._index[r.scope] = ScopeIndex(self._dims, self.scan)
            idx.upsert(stored)

    def _drop(self, r: MemoryRecord) -> None:
        del self._records[r.id]
        scope_map = self._by_scope[r.scope]
        del scope_map[r.id]
        self._index[r.scope].remove(r.id)
        marked = self._marked.get(r.scope)
        if marked is not None:
            marked.pop(r.id, None)
            if not marked:
                del self._marked[r.scope]
        if not scope_map:
            del self._by_scope[r.scope]
            del self._index[r.scope]

    def _owned(self, scope: str | None, rid: str) -> MemoryRecord | None:
        """The record with this id if it belongs to ``scope`` (None: any scope,
        for replaying logs written before ids were scope-bound)."""
        r = self._records.get(rid)
        if r is None or (scope is not None and r.scope != scope):
            return None
        return r

    def _scope_of(self, records: Sequence[MemoryRecord]) -> dict[str, str]:
        return {r.id: old.scope for r in records if (old := self._records.get(r.id)) is not None}

    def _apply_delete(self, ids: Sequence[str], scope: str | None = None) -> int:
        n = 0
        for rid in ids:
            r = self._owned(scope, rid)
            if r is not None:
                self._drop(r)
                n += 1
        return n

    def _apply_archive(self, ids: Sequence[str], at: float | None, scope: str | None = None) -> int:
        n = 0
        for rid in ids:
            r = self._owned(scope, rid)
            if r is not None:
                r.archived_at = at
                self._index[r.scope].set_archived(rid, at)
                n += 1
        return n

    def _apply_touch(self, ids: Sequence[str], at: float, scope: str | None = None) -> int:
        n = 0
        for rid in ids:
            r = self._owned(scope, rid)
            if r is not None:
                r.access_count += 1
                r.last_accessed_at = at
                self._index[r.scope].touch(rid, at)
                n += 1
        return n

    # -- reads ------------------------------------------------------------------
    @property
    def dims(self) -> int | None:
        return self._dims

    def _sync(self) -> None:
        """Hook for stores that must catch up with other processes before a read."""

    def get(self, scope: str, record_id: str) -> MemoryRecord | None:
        (record_id,) = scoped_ids(scope, [record_id])
        self._sync()
        r = self._owned(scope, record_id)
        return r.copy() if r is not None else None

    def get_many(self, scope: str, ids: Sequence[str]) -> list[MemoryRecord]:
        ids = scoped_ids(scope, ids)
        self._sync()
        return [r.copy() for r in (self._owned(scope, i) for i in ids) if r is not None]

    def list(
        self,
        scope: str,
        kinds: Iterable[MemoryKind | str] | None = None,
        include_archived: bool = False,
    ) -> builtins.list[MemoryRecord]:
        check_scope(scope)
        check_bool(include_archived, "include_archived")
        self._sync()
        wanted = kind_filter(kinds)
        out = [
            r.copy()
            for r in self._by_scope.get(scope, {}).values()
            if (include_archived or r.archived_at is None) and (wanted is None or r.kind in wanted)
        ]
        out.sort(key=lambda r: (r.created_at, r.id))
        return out

    def superseded_by(self, scope: str, ids: str | Sequence[str]) -> builtins.list[MemoryRecord]:
        by = set(scoped_ids(scope, ids))
        self._sync()
        out = [r.copy() for r in marked_by(self._marked.get(scope, {}).values(), by)]
        out.sort(key=lambda r: (r.created_at, r.id))
        return out

    def count(self, scope: str | None = None, *, include_archived: bool = False) -> int:
        check_bool(include_archived, "include_archived")
        self._sync()
        if scope is None:
            pool: ValuesView[MemoryRecord] = self._records.values()
        else:
            check_scope(scope)
            pool = self._by_scope.get(scope, {}).values()
        if include_archived:
            return len(pool)
        return sum(1 for r in pool if r.archived_at is None)

    def scopes(self) -> builtins.list[str]:
        self._sync()
        return sorted(self._by_scope)

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
        check_candidates_args(
            query, self._dims, include_archived, pool, text, weights, now, half_life
        )
        valid_at = check_valid_at(valid_at)
        self._sync()
        idx = self._index.get(scope)
        if idx is None:
            return Candidates.empty(self._dims or 0)
        return idx.view(kind_filter(kinds), include_archived, text, valid_at=valid_at, query=query)
