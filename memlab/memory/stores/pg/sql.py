"""The SQL of the pgvector store: text escaping, the augmented index expression
and its query vector, the statements a recall runs (the per-kind nearest-neighbour
searches, the pool, BM25 statistics) and the conversions between rows and records.

Everything here is plain text and arithmetic: no connection, no state. Statement
templates hold ``{table}`` and other names that ``PgVectorStore`` fills with
quoted ``psycopg.sql`` identifiers; values are always bound parameters.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from memlab.errors import InputError
from memlab.memory.lexical import LexicalIndex
from memlab.memory.lexical import terms as lexical_terms
from memlab.memory.records import (
    KIND_CODES,
    SOURCE_CODES,
    MemoryKind,
    MemoryRecord,
    Source,
)
from memlab.memory.stores.base import Candidates, kind_filter
from memlab.memory.stores.codec import superseded_from_list, superseded_to_list

# Names are always quoted (psycopg.sql.Identifier); this only keeps them readable
# and short enough for the derived index names (PostgreSQL's limit is 63 bytes).
IDENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,39}$")
BATCH = 5000  # rows per INSERT statement; larger batches are pipelined in one transaction


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


# -- the augmented index -----------------------------------------------------------
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


RECORD_COLS = (
    "id, scope, kind, content, embedding, salience, tokens, created_at, "
    "last_accessed_at, access_count, archived_at, source, provenance, meta, superseded"
)
CAND_COLS = (
    "id, embedding, created_at, last_accessed_at, salience, access_count, tokens, kind, "
    "source, archived_at, invalid_at"
)
ARCHIVED_AT_COL = 9
BM25 = LexicalIndex()  # its k1 and b, so both BM25 implementations agree
KIND_CODE = {k.value: c for k, c in KIND_CODES.items()}
SOURCE_CODE = {s.value: c for s, c in SOURCE_CODES.items()}


UPSERT = (
    f"INSERT INTO {{table}} AS t ({RECORD_COLS}, invalid_at, terms, n_terms) "
    f"SELECT {RECORD_COLS}, invalid_at, string_to_array(u.terms, ' '), u.n_terms FROM unnest("
    "%(id)b::text[], %(scope)b::text[], %(kind)b::text[], %(content)b::text[], "
    "%(embedding)b::vector[], %(salience)b::float8[], %(tokens)b::int4[], "
    "%(created_at)b::float8[], %(last_accessed_at)b::float8[], %(access_count)b::int8[], "
    "%(archived_at)b::float8[], %(source)b::text[], %(provenance)b::text[]::json[], "
    "%(meta)b::text[]::json[], %(superseded)b::text[]::json[], %(invalid_at)b::float8[], "
    "%(terms)b::text[], %(n_terms)b::int4[]) "
    f"AS u({RECORD_COLS}, invalid_at, terms, n_terms) "
    "ON CONFLICT (id) DO UPDATE SET scope = EXCLUDED.scope, kind = EXCLUDED.kind, "
    "content = EXCLUDED.content, embedding = EXCLUDED.embedding, "
    "salience = EXCLUDED.salience, tokens = EXCLUDED.tokens, "
    "created_at = EXCLUDED.created_at, last_accessed_at = EXCLUDED.last_accessed_at, "
    "access_count = EXCLUDED.access_count, archived_at = EXCLUDED.archived_at, "
    "source = EXCLUDED.source, provenance = EXCLUDED.provenance, meta = EXCLUDED.meta, "
    "superseded = EXCLUDED.superseded, invalid_at = EXCLUDED.invalid_at, "
    "terms = EXCLUDED.terms, n_terms = EXCLUDED.n_terms "
    # An id never moves between scopes: such a row is skipped (put_many raises).
    "WHERE t.scope = EXCLUDED.scope RETURNING id"
)


# -- the statements of a recall ----------------------------------------------------
SCOPE_KEY = 'hashtextextended(%(scope)s::text COLLATE "C", 0)'
"""The indexed ``scope_key`` of the bound ``%(scope)s`` (see migration 5)."""


def where_clause(
    scope: str,
    kinds: Iterable[MemoryKind | str] | None,
    include_archived: bool,
    *,
    exact: bool = True,
    valid_at: float | None = None,
) -> tuple[str, dict[str, Any]]:
    """The WHERE condition selecting a scope's rows (active only unless
    ``include_archived``; of ``kinds`` when given; held at ``valid_at`` when given,
    see ``Candidates``: ``inf`` is now) and its parameters.

    The condition matches the indexed ``scope_key`` and the full scope text. With
    ``exact=False`` it matches only the key (for counting, an index-only scan:
    a hash collision can only change how the pool is split, never which rows a
    recall returns, which always compare the full text)."""
    parts = [f"scope_key = {SCOPE_KEY}"]
    if exact:
        parts.append("scope = %(scope)s")
    params: dict[str, Any] = {"scope": escape_text(scope)}
    if valid_at is not None and math.isinf(valid_at):
        parts.append("archived_at IS NULL AND invalid_at IS NULL")
    elif valid_at is not None:
        # Time travel: archived rows are not in the partial HNSW indexes, so such a
        # search is exact (a scan of the scope), as befits a rare audit query.
        parts.append(
            "created_at <= %(valid_at)s AND (invalid_at IS NULL OR invalid_at > %(valid_at)s) "
            "AND (archived_at IS NULL OR archived_at > %(valid_at)s)"
        )
        params["valid_at"] = float(valid_at)
    elif not include_archived:
        parts.append("archived_at IS NULL")
    wanted = kind_filter(kinds)
    if wanted is not None and len(wanted) < len(MemoryKind):
        parts.append("kind = ANY(%(kinds)s)")
        params["kinds"] = sorted(k.value for k in wanted)
    return " AND ".join(parts), params


WINDOW_COUNT = 20_000
"""Window rows counted at most (a window this big is searched in the graph)."""


def count_kinds_sql(
    where: str, kinds: Sequence[MemoryKind], windowed: Sequence[MemoryKind] = ()
) -> str:
    """How many active rows of each kind match ``where``, counting to
    ``%(limit)s`` at most (an index-only scan each): one column per kind. Then,
    for each kind in ``windowed``, three more: its rows made since
    ``%(since_<kind>)s`` (counting to ``WINDOW_COUNT``), whether it has older ones
    (0 or 1), and the rows of its HNSW index ``%(graph_<kind>)s`` in schema
    ``%(schema)s`` (``pg_class.reltuples``; -1 when never counted)."""
    cols = [
        f"(SELECT count(*) FROM (SELECT 1 FROM {{table}} WHERE {where} "
        f"AND kind = '{k.value}' LIMIT %(limit)s) AS s)"
        for k in kinds
    ]
    for k in windowed:
        for cond, limit in ((">=", WINDOW_COUNT), ("<", 1)):
            cols.append(
                f"(SELECT count(*) FROM (SELECT 1 FROM {{table}} WHERE {where} "
                f"AND kind = '{k.value}' AND created_at {cond} %(since_{k.value})s "
                f"LIMIT {limit}) AS s)"
            )
        cols.append(
            "(SELECT coalesce(max(c.reltuples), -1) FROM pg_class c JOIN pg_namespace n "
            f"ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s "
            f"AND c.relname = %(graph_{k.value})s)"
        )
    return "SELECT " + ", ".join(cols)


def ann_sql(where: str, kind: MemoryKind, dims: int, cols: str = "id") -> str:
    """The kind's rows nearest by the augmented inner product (``<#>`` is its
    negative), from that kind's partial HNSW index; ``LIMIT %(n_<kind>)s``."""
    # The kind is a literal, not a parameter, so the planner can prove the
    # partial index's predicate.
    return (
        f"SELECT {cols} FROM {{table}} WHERE {where} AND kind = '{kind.value}' "
        f"ORDER BY {aug_sql(dims)} <#> %(q)s::halfvec({dims + 2}) "
        f"LIMIT %(n_{kind.value})s"
    )


def window_sql(where: str, kind: MemoryKind, dims: int, cols: str, exact: bool) -> str:
    """The kind's rows made since ``%(since_<kind>)s`` with the best
    ``w_sim * cos + w_sal * s``; ``LIMIT %(w_<kind>)s``.

    ``exact``: every row of the window is scored with its float32 embedding
    (``%(qv)s`` is ``w_sim * q``), read by the ``(scope_key, kind, created_at)``
    b-tree and sorted: for a window small enough that a filtered graph search
    would visit more rows than it holds (see ``window_exact``). Otherwise the
    kind's HNSW index with the filter (the iterative scan skips older rows)."""
    if exact:
        order = f"(embedding <#> %(qv)s::vector({dims})) - %(w_sal)s * salience"
    else:
        order = f"{aug_sql(dims)} <#> %(q)s::halfvec({dims + 2})"
    return (
        f"SELECT {cols} FROM {{table}} WHERE {where} AND kind = '{kind.value}' "
        f"AND created_at >= %(since_{kind.value})s ORDER BY {order} "
        f"LIMIT %(w_{kind.value})s"
    )


GRAPH_VISIT_ROWS = 30
"""How many rows an exact window scan scores in the time a filtered HNSW search
visits one row (1M rows, 384 dims, this project's 2-core VM: a scan 0.6-0.75 us a
row, the iterative graph search ~25 us per row it passes)."""


def window_exact(rows: int, limit: int, graph_rows: float) -> bool:
    """Whether a window of ``rows`` rows is cheaper to score whole than to search
    in its kind's graph of ``graph_rows`` rows (every scope's; ``<= 0``: unknown)
    for ``limit`` rows. A filtered search passes about ``limit * graph_rows /
    rows`` rows of the graph, so the scan wins while ``rows^2 <
    GRAPH_VISIT_ROWS * limit * graph_rows``."""
    if rows <= limit:
        return True
    if graph_rows <= 0:
        graph_rows = float(rows)  # never analyzed: assume the window is the graph
    return rows * rows < GRAPH_VISIT_ROWS * limit * graph_rows


WINDOW = 0.5  # PgVectorStore's default recency window, in half-lives
WINDOW_FROM_ROWS = 500_000  # and the table size from which it applies


def windows_on(table_rows: float, from_rows: int) -> bool:
    """Whether recency windows apply to a table of ``table_rows`` rows
    (``pg_class.reltuples``: negative when never analyzed, taken as empty) with
    the threshold ``from_rows`` (0: always)."""
    return from_rows <= 0 or table_rows >= from_rows


def split_windows(
    limits: Mapping[MemoryKind, int],
    since: Mapping[MemoryKind, float],
    counts: Sequence[float],
) -> tuple[dict[MemoryKind, int], dict[MemoryKind, tuple[float, int, bool]]]:
    """Give half of each windowed kind's share of the pool (``limits``) to its
    recency window: ``(limits, windows)`` for ``pool_sql``. ``since`` is each
    kind's window start and ``counts`` the three window columns of
    ``count_kinds_sql`` per kind, in ``since``'s order. A kind keeps its whole
    share when its window is empty, holds all its rows (a young scope: the
    kind's own search already covers it) or the share is a single row."""
    out = dict(limits)
    windows: dict[MemoryKind, tuple[float, int, bool]] = {}
    for i, (kind, start) in enumerate(since.items()):
        in_window, older, graph = counts[3 * i : 3 * i + 3]
        share = out.get(kind, 0)
        if in_window == 0 or older == 0 or share < 2:
            continue
        rows = share // 2
        out[kind] = share - rows
        exact = in_window < WINDOW_COUNT and window_exact(int(in_window), rows, float(graph))
        windows[kind] = (start, rows, exact)
    return out, windows


def pool_sql(
    where: str,
    dims: int,
    cols: str,
    qaug: np.ndarray | None,
    limits: Mapping[MemoryKind, int],
    n_salient: int,
    n_recent: int,
    windows: Mapping[MemoryKind, tuple[float, int, bool]] | None = None,
) -> tuple[str, dict[str, Any]]:
    """One statement for the whole pool and its parameters: a UNION ALL of the
    per-kind searches (``limits``; none without a query vector ``qaug``), the
    per-kind window searches (``windows``: kind -> (since, rows, exact), see
    ``window_sql``) and the ``n_salient`` most salient and ``n_recent`` most recent
    rows, each returning its rows (the caller drops duplicates), so no row is
    looked up twice."""
    parts = []
    params: dict[str, Any] = {}
    if qaug is not None:
        for kind, limit in limits.items():
            if limit > 0:
                parts.append(f"({ann_sql(where, kind, dims, cols)})")
                params[f"n_{kind.value}"] = limit
        for kind, (since, rows, exact) in (windows or {}).items():
            if rows > 0:
                parts.append(f"({window_sql(where, kind, dims, cols, exact)})")
                params[f"since_{kind.value}"] = since
                params[f"w_{kind.value}"] = rows
                if exact:
                    params["qv"] = qaug[:dims].astype(np.float32)
                    params["w_sal"] = float(qaug[dims])
        params["q"] = qaug
    if n_salient:
        parts.append(
            f"(SELECT {cols} FROM {{table}} WHERE {where} "
            "ORDER BY salience DESC, created_at DESC LIMIT %(n_salient)s)"
        )
        params["n_salient"] = n_salient
    if n_recent:
        parts.append(
            f"(SELECT {cols} FROM {{table}} WHERE {where} "
            "ORDER BY created_at DESC LIMIT %(n_recent)s)"
        )
        params["n_recent"] = n_recent
    return " UNION ALL ".join(parts), params


def bm25_stats_sql(n_terms: int) -> str:
    """The scope's active row count, total terms, and the document frequency of each
    of ``n_terms`` query terms (``%(t0)s``, ``%(t1)s``, ...)."""
    df_sql = ", ".join(f"count(*) FILTER (WHERE %(t{i})s = ANY(terms))" for i in range(n_terms))
    return (
        f"SELECT count(*), coalesce(sum(n_terms), 0), {df_sql} FROM {{table}} "
        f"WHERE scope_key = {SCOPE_KEY} AND scope = %(scope)s AND archived_at IS NULL"
    )


def bm25_scores(
    query: Sequence[str], stats: Sequence[Any], rows: Sequence[Sequence[Any]]
) -> np.ndarray:
    """Okapi BM25 of each row (its ``terms`` last), as
    ``memlab.memory.lexical.LexicalIndex.scores``, from ``bm25_stats_sql``'s row."""
    out = np.zeros(len(rows), dtype=np.float64)
    n_active, total = int(stats[0]), float(stats[1])
    if n_active == 0:
        return out
    avg = total / n_active if total > 0 else 1.0
    k1, b = BM25.k1, BM25.b
    counts = [Counter(r[-1]) for r in rows]
    length = np.array([sum(c.values()) for c in counts], dtype=np.float64)
    active = np.array([r[ARCHIVED_AT_COL] is None for r in rows])
    for term, df in zip(query, stats[2:], strict=True):
        if not df:
            continue
        idf = math.log(1.0 + (n_active - df + 0.5) / (df + 0.5))
        tf = np.array([c.get(term, 0) for c in counts], dtype=np.float64)
        norm = k1 * (1.0 - b + b * length / avg)
        out += np.where(tf > 0, idf * tf * (k1 + 1.0) / (tf + norm), 0.0)
    return np.where(active, out, 0.0)


# -- rows and records ----------------------------------------------------------------
def record_columns(records: Sequence[MemoryRecord]) -> dict[str, Any]:
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
        "superseded": [
            json.dumps(superseded_to_list(r.superseded), ensure_ascii=False) for r in records
        ],
        "invalid_at": [r.invalid_at for r in records],
        # BM25 index terms, space-joined (terms are \\w+ words: no spaces, no NUL).
        "terms": [" ".join(t) for t in terms],
        "n_terms": [len(t) for t in terms],
    }


def row_to_record(row: Sequence[Any]) -> MemoryRecord:
    """Decode and check one row (``RECORD_COLS``).

    The table's types and CHECK constraints hold the columns' types, kinds and
    sources; what they cannot hold (a json column of the wrong shape, a NaN or an
    out-of-range number written by hand) is checked here, as SQLite rows are
    (``sqlite_schema.row_to_record``).

    Raises:
        ValueError, TypeError, KeyError, InputError: the row is damaged (the
            caller reports it as StoreCorrupted).
    """
    provenance, meta = row[12], row[13]
    if not isinstance(provenance, list) or not all(isinstance(p, str) for p in provenance):
        raise ValueError(f"provenance is {json.dumps(provenance)[:60]}, not a list of strings")
    if not isinstance(meta, dict):
        raise ValueError(f"meta is a JSON {type(meta).__name__}, not an object")
    record = MemoryRecord(
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
        provenance=tuple(provenance),
        meta=meta,
        superseded=superseded_from_list(row[14]),
    )
    for entry in record.superseded:
        entry.check(record)
    if not record.content.strip():
        raise ValueError("the content is empty")
    if not (0.0 <= record.salience <= 1.0) or record.tokens < 0 or record.access_count < 0:
        raise ValueError(
            f"salience {record.salience}, tokens {record.tokens} or access_count "
            f"{record.access_count} is out of range"
        )
    times = (record.created_at, record.last_accessed_at, record.archived_at or 0.0)
    if not all(math.isfinite(t) for t in times):
        raise ValueError(f"a time is not finite: {times}")
    return record


def distinct_rows(rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """Rows with a new id (column 0), in order."""
    seen: set[str] = set()
    out = []
    for row in rows:
        if row[0] not in seen:
            seen.add(row[0])
            out.append(row)
    return out


def to_candidates(rows: Sequence[Sequence[Any]], dims: int) -> Candidates:
    if not rows:
        return Candidates.empty(dims)
    cols = list(zip(*rows, strict=True))
    ids, emb, created, accessed, sal, access, tokens, kind, source = cols[:9]
    archived, invalid = cols[9], cols[10]
    n = len(rows)
    return Candidates(
        ids=[unescape_text(i) for i in ids],
        embeddings=np.stack(emb).astype(np.float32, copy=False),
        created_at=np.fromiter(created, dtype=np.float64, count=n),
        last_accessed_at=np.fromiter(accessed, dtype=np.float64, count=n),
        salience=np.fromiter(sal, dtype=np.float64, count=n).astype(np.float32),
        access_count=np.fromiter(access, dtype=np.int64, count=n),
        tokens=np.fromiter(tokens, dtype=np.int64, count=n),
        kind=np.fromiter((KIND_CODE[k] for k in kind), dtype=np.int8, count=n),
        source=np.fromiter((SOURCE_CODE[s] for s in source), dtype=np.int8, count=n),
        mask=np.ones(n, dtype=bool),
        invalid_at=np.array([np.inf if t is None else t for t in invalid], dtype=np.float64),
        archived_at=np.array([np.inf if t is None else t for t in archived], dtype=np.float64),
    )


def register_vector(conn: Any, info: Any) -> None:
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
