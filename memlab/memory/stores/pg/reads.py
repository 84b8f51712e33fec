"""The reads of ``PgVectorStore``: ``get``, ``get_many``, ``list``, ``superseded_by``,
``count`` and ``scopes``, each one statement filtered by scope in SQL. A mixin
like ``pool.CandidatePool``, so the store module keeps the connection, the schema
and the writes."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from memlab.errors import StoreCorrupted
from memlab.memory.checks import check_bool
from memlab.memory.records import MemoryKind, MemoryRecord, check_scope
from memlab.memory.stores.base import marked_by, scoped_ids
from memlab.memory.stores.pg.sql import (
    RECORD_COLS,
    SCOPE_KEY,
    escape_text,
    row_to_record,
    unescape_text,
    where_clause,
)

__all__ = ["RecordReads"]


class RecordReads:
    """The record reads for ``PgVectorStore`` (which provides the connection, the
    guard and the statement templating declared here)."""

    if TYPE_CHECKING:

        def _db(self) -> Any: ...

        def _guard(self, what: str) -> AbstractContextManager[None]: ...

        def _ready(self) -> bool: ...

        def _q(self, template: str, **extra: Any) -> Any: ...

        @property
        def qualified_name(self) -> str: ...

    def _records(self, stmt: Any, params: Any) -> builtins.list[MemoryRecord]:
        with self._db().cursor(binary=True) as cur:
            return [self._decode(row) for row in cur.execute(stmt, params).fetchall()]

    def _decode(self, row: Sequence[Any]) -> MemoryRecord:
        """A row as a record; a damaged one is StoreCorrupted naming the table and
        the record (it was a bare TypeError or KeyError from deep in the decoding)."""
        try:
            return row_to_record(row)
        except Exception as exc:
            rid = unescape_text(row[0]) if row and isinstance(row[0], str) else None
            what = f"record {rid[:80]!r}" if rid else "a record"
            raise StoreCorrupted(
                f"PostgreSQL table {self.qualified_name}",
                None,
                f"{what} is damaged ({type(exc).__name__}: {exc})",
            ) from None

    def get(self, scope: str, record_id: str) -> MemoryRecord | None:
        (record_id,) = scoped_ids(scope, [record_id])
        with self._guard("get"):
            if not self._ready():
                return None
            got = self._records(
                self._q(f"SELECT {RECORD_COLS} FROM {{table}} WHERE scope = %s AND id = %s"),
                (escape_text(scope), escape_text(record_id)),
            )
        return got[0] if got else None

    def get_many(self, scope: str, ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        ids = scoped_ids(scope, ids)
        if not ids:
            return []
        with self._guard("get_many"):
            if not self._ready():
                return []
            found = {
                r.id: r
                for r in self._records(
                    self._q(
                        f"SELECT {RECORD_COLS} FROM {{table}} WHERE scope = %s AND id = ANY(%s)"
                    ),
                    (escape_text(scope), [escape_text(i) for i in ids]),
                )
            }
        return [found[i] for i in ids if i in found]

    def list(
        self,
        scope: str,
        kinds: Iterable[MemoryKind | str] | None = None,
        include_archived: bool = False,
    ) -> builtins.list[MemoryRecord]:
        check_scope(scope)
        check_bool(include_archived, "include_archived")
        where, params = where_clause(scope, kinds, include_archived)
        with self._guard("list"):
            if not self._ready():
                return []
            out = self._records(
                self._q(f"SELECT {RECORD_COLS} FROM {{table}} WHERE {where}"), params
            )
        # Sorted here, not in SQL: escaped ids would not sort like the originals.
        out.sort(key=lambda r: (r.created_at, r.id))
        return out

    def superseded_by(self, scope: str, ids: str | Sequence[str]) -> builtins.list[MemoryRecord]:
        by = set(scoped_ids(scope, ids))
        where, params = where_clause(scope, None, True)
        with self._guard("superseded_by"):
            if not self._ready():
                return []
            out = self._records(
                self._q(
                    f"SELECT {RECORD_COLS} FROM {{table}} "
                    f"WHERE {where} AND json_array_length(superseded) > 0"
                ),
                params,
            )
        out = marked_by(out, by)
        out.sort(key=lambda r: (r.created_at, r.id))  # escaped ids do not sort in SQL
        return out

    def count(self, scope: str | None = None, *, include_archived: bool = False) -> int:
        check_bool(include_archived, "include_archived")
        parts: builtins.list[str] = []
        params: dict[str, Any] = {}
        if scope is not None:
            check_scope(scope)
            parts.append(f"scope_key = {SCOPE_KEY} AND scope = %(scope)s")
            params["scope"] = escape_text(scope)
        if not include_archived:
            parts.append("archived_at IS NULL")
        where = (" WHERE " + " AND ".join(parts)) if parts else ""
        with self._guard("count"):
            if not self._ready():
                return 0
            return int(
                self._db()
                .execute(self._q(f"SELECT count(*) FROM {{table}}{where}"), params)
                .fetchone()[0]
            )

    def scopes(self) -> builtins.list[str]:
        with self._guard("scopes"):
            if not self._ready():
                return []
            rows = self._db().execute(self._q("SELECT DISTINCT scope FROM {table}")).fetchall()
        return sorted(unescape_text(r[0]) for r in rows)
