"""The pgvector store's schema: numbered, idempotent migrations per table.

Schema (one table per store, numbered idempotent migrations recorded in
``<table>_migrations``): ``id`` and ``scope`` are ``text COLLATE "C"`` (byte-exact
equality), the embedding is ``vector(dims)`` and is checked against ``dims`` on
open, a b-tree index on ``(scope, archived_at)`` comes first, then (migration 4,
replacing migration 2's cosine index) the three per-kind HNSW indexes on the
augmented ``halfvec(dims + 2)`` with ``halfvec_ip_ops``, a b-tree on ``(scope,
kind, created_at)`` and two partial indexes for the salient and recent parts of
the pool. Migration 5 adds ``scope_key bigint``, generated as
``hashtextextended(scope, 0)``, and moves those four b-trees onto it: a b-tree
entry holds at most ~2.7 kB, so a long scope could not be indexed by its text.
Every statement matches ``scope_key`` (to use the index) and the full ``scope``
text (so two scopes with the same hash never mix). Migration 6 adds
``superseded json`` (the record's ``Superseded`` entries) and ``invalid_at`` (when
the whole record was superseded; NULL while it is in force), which recall filters on.
Migration 7 adds a partial b-tree on ``scope_key`` of the rows whose ``superseded``
is not empty (``superseded_by``). PostgreSQL text cannot hold NUL, so ``id``, ``scope`` and
``content`` are stored with a reversible escape (NUL -> U+2400 "0", U+2400 ->
U+2400 U+2400) that leaves every other string unchanged and keeps equality exact.
``provenance`` and ``meta`` are ``json`` (which, unlike ``jsonb``, keeps ``\\u0000``
and key order).

Each store table has a ``<table>_migrations`` table recording the versions
applied. ``migrate`` brings a table to ``SCHEMA_VERSION`` in one transaction
under an advisory lock, so concurrent openers apply each migration once; on an
up-to-date table it takes no lock and runs no DDL (a read-only user may open it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memlab.errors import ConfigError, DimensionMismatch, StoreError
from memlab.memory.records import MemoryKind
from memlab.memory.stores.pg.sql import aug_sql

Compose = Callable[..., Any]
"""Fills a statement template's ``{table}``, ``{migrations}``, index names and the
given extra values with quoted identifiers (``PgVectorStore._q``)."""


def aug_index_name(table: str, kind: MemoryKind) -> str:
    """The name of a table's HNSW index of one kind (unquoted, without schema)."""
    return f"{table}_aug_{kind.value}"


def aug_index(kind: MemoryKind) -> str:
    """The statement template of one kind's HNSW index on the augmented embedding
    (migration 4; ``bulk`` rebuilds it with the same text)."""
    return (
        f"CREATE INDEX IF NOT EXISTS {{aug_{kind.value}}} ON {{table}} USING hnsw "
        "(({aug}) halfvec_ip_ops) WITH (m = {m}, ef_construction = {efc}) "
        f"WHERE archived_at IS NULL AND kind = '{kind.value}'"
    )


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
            *(aug_index(kind) for kind in MemoryKind),
            # Counts each kind of a scope (to split the pool) by an index-only scan.
            "CREATE INDEX IF NOT EXISTS {kind_idx} ON {table} (scope, kind, created_at DESC) "
            "WHERE archived_at IS NULL",
            "DROP INDEX IF EXISTS {hnsw_idx_q}",
        ],
    ),
    (
        "scope_key, a 64-bit hash of the scope, leads the scope b-trees instead of the "
        "scope text, so a scope of any length can be stored (a b-tree entry holds ~2.7 kB)",
        [
            "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS scope_key bigint "
            "GENERATED ALWAYS AS (hashtextextended(scope, 0)) STORED",
            "CREATE INDEX IF NOT EXISTS {key_scope_idx} ON {table} (scope_key, archived_at)",
            "CREATE INDEX IF NOT EXISTS {key_salient_idx} ON {table} "
            "(scope_key, salience DESC, created_at DESC) WHERE archived_at IS NULL",
            "CREATE INDEX IF NOT EXISTS {key_recent_idx} ON {table} "
            "(scope_key, created_at DESC) WHERE archived_at IS NULL",
            "CREATE INDEX IF NOT EXISTS {key_kind_idx} ON {table} "
            "(scope_key, kind, created_at DESC) WHERE archived_at IS NULL",
            "DROP INDEX IF EXISTS {scope_idx_q}",
            "DROP INDEX IF EXISTS {salient_idx_q}",
            "DROP INDEX IF EXISTS {recent_idx_q}",
            "DROP INDEX IF EXISTS {kind_idx_q}",
        ],
    ),
    (
        "supersession: superseded (json, the record's Superseded entries) and invalid_at "
        "(when a newer record superseded the whole record; NULL: in force)",
        [
            "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS superseded json NOT NULL "
            "DEFAULT '[]'::json",
            "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS invalid_at double precision",
        ],
    ),
    (
        "the rows with supersession entries, per scope: a partial b-tree on scope_key, "
        "which superseded_by (what forget lifts) reads instead of the whole scope",
        [
            "CREATE INDEX IF NOT EXISTS {marked_idx} ON {table} (scope_key) "
            "WHERE json_array_length(superseded) > 0",
        ],
    ),
    (
        "the rows in force (neither archived nor superseded) by scope, kind and time: "
        "a recall's counts, and its recency windows, by index-only scans",
        [
            "CREATE INDEX IF NOT EXISTS {live_kind_idx} ON {table} "
            "(scope_key, kind, created_at DESC) WHERE archived_at IS NULL AND invalid_at IS NULL",
        ],
    ),
]
SCHEMA_VERSION = len(MIGRATIONS)
# pgvector's HNSW indexes hold at most 4,000 half-precision dimensions.
MAX_DIMS = 4000 - 2


def table_lock(conn: Any, schema: str, table: str) -> None:
    """Take the table's advisory lock until the transaction ends: migrations and
    bulk loads of one table (``bulk``) never interleave."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"memlab:{schema}.{table}",)
    )


def object_names(schema: str, table: str, hnsw_m: int, hnsw_ef_construction: int) -> dict[str, Any]:
    """The quoted names a store's statement templates use: its table, migrations
    table and indexes (all named after the table), and the HNSW build settings."""
    from psycopg import sql

    return {
        "table": sql.Identifier(schema, table),
        "migrations": sql.Identifier(schema, f"{table}_migrations"),
        "scope_idx": sql.Identifier(f"{table}_scope_archived"),
        "hnsw_idx": sql.Identifier(f"{table}_embedding_hnsw"),
        "hnsw_idx_q": sql.Identifier(schema, f"{table}_embedding_hnsw"),
        **{f"aug_{k.value}": sql.Identifier(aug_index_name(table, k)) for k in MemoryKind},
        **{
            f"aug_{k.value}_q": sql.Identifier(schema, aug_index_name(table, k)) for k in MemoryKind
        },
        "salient_idx": sql.Identifier(f"{table}_salient"),
        "recent_idx": sql.Identifier(f"{table}_recent"),
        "kind_idx": sql.Identifier(f"{table}_kind"),
        **{
            f"{name}_idx_q": sql.Identifier(schema, f"{table}_{suffix}")
            for name, suffix in [
                ("scope", "scope_archived"),
                ("salient", "salient"),
                ("recent", "recent"),
                ("kind", "kind"),
            ]
        },
        "key_scope_idx": sql.Identifier(f"{table}_key_archived"),
        "key_salient_idx": sql.Identifier(f"{table}_key_salient"),
        "key_recent_idx": sql.Identifier(f"{table}_key_recent"),
        "key_kind_idx": sql.Identifier(f"{table}_key_kind"),
        "marked_idx": sql.Identifier(f"{table}_superseded"),
        "live_kind_idx": sql.Identifier(f"{table}_live_kind"),
        "m": sql.Literal(hnsw_m),
        "efc": sql.Literal(hnsw_ef_construction),
    }


def table_dims(conn: Any, schema: str, table: str) -> int | None:
    """The ``vector(n)`` size of the table's embedding column, None without the table."""
    row = conn.execute(
        "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'embedding' "
        "AND NOT a.attisdropped",
        (schema, table),
    ).fetchone()
    return None if row is None else int(row[0])


def relation_value(conn: Any, schema: str, name: str, expr: str = "1") -> Any:
    """``expr`` (SQL over ``pg_class c``, written by this package) for the relation
    ``name`` in ``schema``; None when there is no such relation."""
    row = conn.execute(
        f"SELECT {expr} FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s",
        (schema, name),
    ).fetchone()
    return None if row is None else row[0]


def applied_version(conn: Any, schema: str, table: str, compose: Compose) -> int:
    """The applied schema version (0 when the migrations table is absent)."""
    if relation_value(conn, schema, f"{table}_migrations") is None:
        return 0
    row = conn.execute(compose("SELECT coalesce(max(version), 0) FROM {migrations}"))
    return int(row.fetchone()[0])


def migrate(conn: Any, compose: Compose, schema: str, table: str, dims: int) -> None:
    """Bring ``schema.table`` to SCHEMA_VERSION, creating it with ``vector(dims)``.

    Raises:
        ConfigError: ``dims`` is more than pgvector's HNSW index holds.
        DimensionMismatch: the table exists with other dims.
        StoreError: the table has a newer schema than this memlab knows.
    """
    from psycopg import sql

    name = f"{schema}.{table}"
    if applied_version(conn, schema, table, compose) == SCHEMA_VERSION and (
        table_dims(conn, schema, table) == dims
    ):
        return  # up to date: no lock, no DDL
    if dims > MAX_DIMS:
        raise ConfigError(
            f"pgvector table {name}: {dims}-dimensional embeddings are more "
            f"than pgvector's HNSW index holds ({MAX_DIMS} + 2 salience components, in "
            "half precision); use an embedder with fewer dimensions, or an exact store"
        )
    with conn.transaction():
        table_lock(conn, schema, table)
        if not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(
            compose(
                "CREATE TABLE IF NOT EXISTS {migrations} (version integer PRIMARY KEY, "
                "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        )
        current = int(
            conn.execute(compose("SELECT coalesce(max(version), 0) FROM {migrations}")).fetchone()[
                0
            ]
        )
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"pgvector table {name} has schema version {current}, newer "
                f"than this memlab understands ({SCHEMA_VERSION}); upgrade memlab"
            )
        existing = table_dims(conn, schema, table)  # another process may have created it
        if existing is not None and existing != dims:
            raise DimensionMismatch(existing, dims, f"pgvector table {name} (vector({existing}))")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            description, statements = MIGRATIONS[version - 1]
            for stmt in statements:
                conn.execute(compose(stmt, dims=sql.Literal(dims), aug=sql.SQL(aug_sql(dims))))
            conn.execute(
                compose("INSERT INTO {migrations} (version, description) VALUES (%s, %s)"),
                (version, description),
            )
