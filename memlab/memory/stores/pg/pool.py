"""The candidate pool of ``PgVectorStore`` (its ``candidates``): per-kind HNSW
searches, recency windows, the salient and recent extras, and BM25 over the
pool, each recall one statement after one count (see ``sql``). A mixin, so the
store module keeps the connection, the schema and the writes."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np

from memlab.errors import DimensionMismatch
from memlab.memory.lexical import terms as lexical_terms
from memlab.memory.records import MemoryKind, check_scope
from memlab.memory.stores.base import Candidates, check_candidates_args, check_valid_at, kind_filter
from memlab.memory.stores.pg.migrations import aug_index_name, relation_value
from memlab.memory.stores.pg.sql import (
    CAND_COLS,
    allocate,
    ann_sql,
    ann_weights,
    aug_query,
    bm25_scores,
    bm25_stats_sql,
    count_kinds_sql,
    distinct_rows,
    escape_text,
    pool_sql,
    split_windows,
    to_candidates,
    where_clause,
    windows_on,
)

TABLE_ROWS_TTL = 60.0  # seconds a table's row estimate is reused (window_from_rows)


class CandidatePool:
    """``candidates`` and its helpers for ``PgVectorStore`` (which provides the
    connection, the guard and the settings declared here)."""

    schema: str
    table: str
    pool: int
    ef_search: int | None
    salient: int
    recent: int
    window: float
    window_from_rows: int
    _dims: int | None
    _ef_current: int | None
    _table_rows: tuple[float, float] | None

    if TYPE_CHECKING:

        def _db(self) -> Any: ...

        def _guard(self, what: str) -> AbstractContextManager[None]: ...

        @property
        def qualified_name(self) -> str: ...

        def _ready(self) -> bool: ...

        def _q(self, template: str, **extra: Any) -> Any: ...

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
        """The scope's pool: the best ``pool`` records by ``w_sim * cos + w_sal * s``
        (approximate, HNSW), plus the most recent (and most salient) records.

        ``weights`` (the ranker's, e.g. ``RankWeights.as_dict()``) sets ``w_sim`` and
        ``w_sal`` from its ``similarity`` and ``salience``; without it the order is
        by cosine alone (``w_sim = 1, w_sal = 0``). The scope's ``recent`` newest
        and ``salient`` most salient records are added, since recency depends on
        the time of the query and cannot be indexed. A scope with at most ``pool``
        matching records is returned whole (exact). Without a usable query (None
        or a zero vector) or with both weights 0, the pool is the ``pool`` most
        salient plus the ``pool`` most recent records. Every returned row is
        active (``mask`` is all True), and only ``scope``'s records are returned.

        With ``text``, ``lexical`` holds each row's BM25 for it over the scope's
        active records, exactly as the exact stores compute it. The statistics
        (N, document frequencies, average length) take one pass over the scope,
        so a lexical weight costs O(scope size) per recall here; the pool itself
        is still chosen by similarity, salience and recency.

        ``valid_at`` (see ``MemoryStore.candidates``) selects the rows held at that
        time (``inf``: in force now) in SQL; a finite time searches exactly.

        With ``now``, ``half_life`` (hours by kind) and a positive
        ``weights["recency"]``, each kind's share of the pool is split between the
        whole kind and its rows made within ``window`` half-lives of ``now``
        (recency cannot be indexed, and at a million rows the best rows by
        similarity and salience alone crowd out the recent, long-lived records
        the ranker prefers). A small window is scored whole, a large one searched
        in the kind's graph (``sql.window_exact``).
        """
        check_scope(scope)
        check_candidates_args(query, None, include_archived, pool, text, weights, now, half_life)
        valid_at = check_valid_at(valid_at)
        pool = self.pool if pool is None else int(pool)
        w_sim, w_sal = ann_weights(weights)
        where, params = where_clause(scope, kinds, include_archived, valid_at=valid_at)
        with self._guard("candidates"):
            conn = self._db()
            if not self._ready():
                return Candidates.empty(0)
            assert self._dims is not None
            qvec = None
            if query is not None:
                qvec = np.asarray(query, dtype=np.float32).reshape(-1)
                if qvec.shape[0] != self._dims:
                    raise DimensionMismatch(
                        self._dims,
                        int(qvec.shape[0]),
                        f"PgVectorStore({self.qualified_name}) query",
                    )
                if not np.all(np.isfinite(qvec)) or not np.any(qvec) or w_sim + w_sal <= 0:
                    qvec = None  # no direction to search in
            cols = CAND_COLS + (", terms" if text is not None else "")
            wanted = kind_filter(kinds)
            searched = [k for k in MemoryKind if wanted is None or k in wanted]
            # Only a search of the rows in force now has windows (time travel and
            # archived rows are searched exactly, and without a query nothing is).
            searching_now = qvec is not None and valid_at is not None and math.isinf(valid_at)
            since = self._window_starts(now, half_life, weights, kinds) if searching_now else {}
            with conn.cursor(binary=True) as cur:
                # How many of each kind, counting to pool + 1 at most (index-only).
                key_where, _ = where_clause(
                    scope, kinds, include_archived, exact=False, valid_at=valid_at
                )
                row = cur.execute(
                    self._q(count_kinds_sql(key_where, searched, list(since))),
                    {**params, "limit": pool + 1, **self._window_params(since)},
                ).fetchone()
                counts, window_counts = row[: len(searched)], row[len(searched) :]
                n = sum(counts)
                if n == 0:
                    return Candidates.empty(self._dims)
                if n <= pool:
                    stmt = self._q(f"SELECT {cols} FROM {{table}} WHERE {where}")
                    rows = cur.execute(stmt, params).fetchall()
                else:
                    limits = allocate(pool, dict(zip(searched, counts, strict=True)))
                    limits, windows = split_windows(limits, since, window_counts)
                    if qvec is None:  # no search: the most salient and most recent
                        qaug, n_salient, n_recent = None, pool, pool
                    else:
                        self._set_ef_search(
                            max([*limits.values(), *(w[1] for w in windows.values())])
                        )
                        qaug, n_salient, n_recent = (
                            aug_query(qvec, w_sim, w_sal),
                            self.salient,
                            self.recent,
                        )
                    template, extra = pool_sql(
                        where, self._dims, cols, qaug, limits, n_salient, n_recent, windows
                    )
                    rows = distinct_rows(
                        cur.execute(self._q(template), {**params, **extra}).fetchall()
                    )
                lexical = self._bm25(cur, scope, text, rows) if text is not None else None
        cands = to_candidates(rows, self._dims)
        cands.lexical = lexical
        return cands

    def _window_starts(
        self,
        now: float | None,
        half_life: Mapping[str, float] | None,
        weights: Mapping[str, float] | None,
        kinds: Iterable[MemoryKind | str] | None,
    ) -> dict[MemoryKind, float]:
        """Where each kind's recency window starts (epoch seconds); empty when the
        window is off or the caller gave no time, half-lives or recency weight."""
        if (
            now is None
            or half_life is None
            or weights is None
            or float(weights.get("recency", 0.0)) <= 0
            or not self._windows_apply()
        ):
            return {}
        wanted = kind_filter(kinds)
        return {
            k: float(now) - self.window * float(half_life[k.value]) * 3600.0
            for k in MemoryKind
            if (wanted is None or k in wanted) and k.value in half_life
        }

    def _windows_apply(self) -> bool:
        """Whether recency windows are on for this table now (``window``,
        ``window_from_rows``); the table's row estimate is cached for a minute."""
        if self.window <= 0:
            return False
        if self.window_from_rows <= 0:
            return True
        clock = time.monotonic()
        if self._table_rows is None or clock - self._table_rows[1] > TABLE_ROWS_TTL:
            rows = relation_value(self._db(), self.schema, self.table, "c.reltuples")
            self._table_rows = (float(rows) if rows is not None else -1.0, clock)
        return windows_on(self._table_rows[0], self.window_from_rows)

    def _window_params(self, since: Mapping[MemoryKind, float]) -> dict[str, Any]:
        if not since:
            return {}
        names = {f"graph_{k.value}": aug_index_name(self.table, k) for k in since}
        return {"schema": self.schema, **names, **{f"since_{k.value}": t for k, t in since.items()}}

    def _bm25(self, cur: Any, scope: str, text: str, rows: Sequence[Sequence[Any]]) -> np.ndarray:
        """Okapi BM25 of each row, as memlab.memory.lexical.LexicalIndex.scores."""
        query = sorted(set(lexical_terms(text)))
        if not query or not rows:
            return np.zeros(len(rows), dtype=np.float64)
        stats = cur.execute(
            self._q(bm25_stats_sql(len(query))),
            {"scope": escape_text(scope), **{f"t{i}": t for i, t in enumerate(query)}},
        ).fetchone()
        return bm25_scores(query, stats, rows)

    def _set_ef_search(self, per_kind: int) -> None:
        ef = self.ef_search if self.ef_search is not None else min(1000, max(40, 2 * per_kind))
        if ef != self._ef_current:
            self._db().execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))
            self._ef_current = ef

    def explain_candidates(
        self,
        scope: str,
        query: np.ndarray,
        pool: int | None = None,
        weights: Mapping[str, float] | None = None,
        kind: MemoryKind | str = MemoryKind.EPISODIC,
    ) -> str:
        """EXPLAIN of one kind's nearest-neighbour search that ``candidates`` runs
        for a big scope (shows whether that kind's HNSW index or the scope b-tree
        is used)."""
        from memlab.memory.records import as_kind

        check_scope(scope)
        pool = self.pool if pool is None else pool
        where, params = where_clause(scope, None, False)
        w_sim, w_sal = ann_weights(weights)
        per_kind = -(-pool // len(MemoryKind))
        kind = as_kind(kind)
        with self._guard("explain"):
            if not self._ready():
                return ""
            assert self._dims is not None  # _ready() found the table
            self._set_ef_search(per_kind)
            stmt = self._q(f"EXPLAIN {ann_sql(where, kind, self._dims)}")
            qaug = aug_query(np.asarray(query, dtype=np.float32), w_sim, w_sal)
            args = {**params, "q": qaug, f"n_{kind.value}": per_kind}
            rows = self._db().execute(stmt, args).fetchall()
        return "\n".join(r[0] for r in rows)
