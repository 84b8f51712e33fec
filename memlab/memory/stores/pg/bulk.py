"""Bulk import into a pgvector table: drop the HNSW indexes, write, build them once.

Inserting a row into an HNSW graph costs a search of the graph, so batched
``put_many`` into a large table runs at a few hundred rows a second on two cores;
writing without the indexes runs at about 20,000 rows a second, and one index
build over the finished table (pgvector's in-memory build, when the graph fits in
``maintenance_work_mem``) is minutes at a million rows. ``PgVectorStore.bulk_load``
does the three steps in one transaction, with the helpers here.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memlab.errors import ConfigError
from memlab.memory.records import MemoryKind
from memlab.memory.stores.pg.migrations import aug_index, aug_index_name
from memlab.memory.stores.pg.sql import aug_sql

_MEMORY = re.compile(r"^\s*(\d+)\s*(kB|MB|GB|TB)\s*$")
_UNIT = {"kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
# PostgreSQL's own limit on maintenance_work_mem is 2 TB; more than this is a typo
# on any machine memlab runs on, and an estimate is never allowed past it.
MAX_DEFAULT_BYTES = 8 << 30
MIN_BYTES = 1 << 20  # PostgreSQL's floor for maintenance_work_mem


@dataclass(frozen=True)
class BuildSettings:
    """What the index build may use; None keeps the server's setting."""

    maintenance_work_mem: int | None = None  # bytes
    workers: int | None = None


def parse_memory(value: str, what: str = "maintenance_work_mem") -> int:
    """Bytes in a PostgreSQL memory setting such as ``"512MB"`` or ``"2GB"``.

    Raises:
        ConfigError: not a whole number followed by kB, MB, GB or TB.
    """
    match = _MEMORY.match(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(
            f"{what} must be a whole number with a unit (kB, MB, GB, TB), such as "
            f"'2GB', got {value!r}"
        )
    return int(match.group(1)) * _UNIT[match.group(2)]


def check_settings(maintenance_work_mem: str | None, workers: int | None) -> BuildSettings:
    """Validate ``bulk_load``'s build settings before anything is written.

    Raises:
        ConfigError: a malformed memory size, one below 1 MB or above 2 TB, or
            ``workers`` not an integer in 0..64.
    """
    mem = None
    if maintenance_work_mem is not None:
        mem = parse_memory(maintenance_work_mem)
        if not MIN_BYTES <= mem <= (2 << 40):
            raise ConfigError(
                f"maintenance_work_mem must be between 1MB and 2TB, got {maintenance_work_mem!r}"
            )
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or not 0 <= workers <= 64
    ):
        raise ConfigError(f"workers must be an integer in 0..64 or None, got {workers!r}")
    return BuildSettings(mem, workers)


def graph_bytes(rows: int, dims: int, m: int) -> int:
    """An estimate of pgvector's in-memory HNSW graph for ``rows`` rows.

    Per element: the half-precision vector (``2 * (dims + 2)`` bytes), the
    neighbour lists (about ``2 m`` at layer 0 plus the upper layers' share, each
    entry a pointer and a distance: ``40 m``) and the element's header (136), the
    figure pgvector's build reached in memory on this project's 1M benchmark.
    """
    return rows * (2 * (dims + 2) + 40 * m + 136)


def index_options(conn: Any, schema: str, table: str) -> dict[MemoryKind, tuple[int, int]]:
    """Each existing per-kind HNSW index's ``(m, ef_construction)``, read from the
    catalog so a rebuild keeps what the table was created with (or altered to)."""
    by_name = {aug_index_name(table, kind): kind for kind in MemoryKind}
    rows = conn.execute(
        "SELECT c.relname, c.reloptions FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = ANY(%s)",
        (schema, list(by_name)),
    ).fetchall()
    found: dict[MemoryKind, tuple[int, int]] = {}
    for name, reloptions in rows:
        opts = dict(o.split("=", 1) for o in (reloptions or []))
        kind = by_name[name]
        # migration 4 always writes both options; the fallbacks are pgvector's defaults
        found[kind] = (int(opts.get("m", 16)), int(opts.get("ef_construction", 64)))
    return found


def drop_indexes(conn: Any, compose: Callable[..., Any]) -> None:
    """Drop the per-kind HNSW indexes (inside the caller's transaction)."""
    for kind in MemoryKind:
        conn.execute(compose(f"DROP INDEX IF EXISTS {{aug_{kind.value}_q}}"))


def _server_bytes(conn: Any) -> int:
    row = conn.execute("SELECT pg_size_bytes(current_setting('maintenance_work_mem'))").fetchone()
    return int(row[0])


def _largest_kind(conn: Any, compose: Callable[..., Any]) -> int:
    row = conn.execute(
        compose(
            "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM {table} "
            "WHERE archived_at IS NULL GROUP BY kind) AS counts"
        )
    ).fetchone()
    return int(row[0])


def build_indexes(
    conn: Any,
    compose: Callable[..., Any],
    dims: int,
    options: Mapping[MemoryKind, tuple[int, int]],
    settings: BuildSettings,
    *,
    defaults: tuple[int, int],
    progress: bool | None = None,
    connect: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Build the per-kind HNSW indexes, inside the caller's transaction.

    Args:
        conn: the connection whose transaction holds the load.
        compose: the store's SQL composer (``PgVectorStore._q``).
        dims: the table's embedding dimensions.
        options: each kind's ``(m, ef_construction)`` before the load; a kind
            missing here takes ``defaults``.
        settings: memory and workers for the build (``check_settings``).
        defaults: the store's ``(hnsw_m, hnsw_ef_construction)``.
        progress: a bar on a terminal (None), always off (False).
        connect: opens a second connection that reports the build's progress
            (``pg_stat_progress_create_index``); None: no per-row progress.

    Returns:
        What the build used: ``maintenance_work_mem`` in bytes, ``workers``
        (None: the server's), and each kind's ``(m, ef_construction)``.
    """
    from psycopg import sql

    from memlab.progress import bar

    mem = settings.maintenance_work_mem
    if mem is None:
        m_max = max([defaults[0], *(m for m, _ in options.values())])
        estimate = graph_bytes(_largest_kind(conn, compose), dims, m_max)
        mem = max(_server_bytes(conn), min(estimate, MAX_DEFAULT_BYTES))
    conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (f"{mem // 1024}kB",))
    if settings.workers is not None:
        conn.execute(
            "SELECT set_config('max_parallel_maintenance_workers', %s, true)",
            (str(settings.workers),),
        )
    used = {kind: options.get(kind, defaults) for kind in MemoryKind}
    pid = conn.info.backend_pid
    with bar(
        total=len(used), desc="build HNSW", unit="index", leave=False, progress=progress
    ) as shown:
        watcher = (
            _Watcher(connect, pid, shown) if connect is not None and not shown.disable else None
        )
        try:
            for kind, (m, efc) in used.items():
                shown.set_postfix_str(kind.value)
                conn.execute(
                    compose(
                        aug_index(kind),
                        aug=sql.SQL(aug_sql(dims)),
                        m=sql.Literal(m),
                        efc=sql.Literal(efc),
                    )
                )
                shown.update(1)
        finally:
            if watcher is not None:
                watcher.stop()
    return {
        "maintenance_work_mem": mem,
        "workers": settings.workers,
        "indexes": {k.value: v for k, v in used.items()},
    }


class _Watcher:
    """Shows the running CREATE INDEX's phase and share of the table read, polled
    every ``interval`` seconds from a second connection (the build's own is busy)."""

    def __init__(
        self, connect: Callable[[], Any], pid: int, shown: Any, interval: float = 1.0
    ) -> None:
        self._conn = connect()
        self._pid = pid
        self._shown = shown
        self._interval = interval
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memlab-index-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._done.wait(self._interval):
                row = self._conn.execute(
                    "SELECT phase, blocks_done, blocks_total, tuples_done FROM "
                    "pg_stat_progress_create_index WHERE pid = %s",
                    (self._pid,),
                ).fetchone()
                if row is None:
                    continue
                # pgvector reports the table's blocks read while it loads rows
                # into the graph (tuples_total stays 0)
                phase, done, total, rows = row
                share = f"{100 * done / total:.0f}%" if total else f"{rows:,} rows"
                self._shown.set_postfix_str(f"{phase}: {share}", refresh=True)
        except Exception:  # progress is cosmetic: the build goes on without it
            return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        self._conn.close()
