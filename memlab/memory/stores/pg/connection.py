"""Connecting the pgvector store: where to connect, the session it needs (pgvector
>= 0.8, its types registered, iterative scans on) and errors that say what to do.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlab.errors import (
    ConfigError,
    InputError,
    MemlabError,
    StoreError,
    StoreUnavailable,
    require,
)
from memlab.memory.stores.pg.sql import register_vector

FEATURE = "the pgvector store"
ENV_DSN = "MEMLAB_PG_DSN"
EXTENSION = "vector"
MIN_PGVECTOR = (0, 8, 0)  # iterative index scans


def version_tuple(v: str) -> tuple[int, ...]:
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


class _DriverEchoFilter(logging.Filter):
    """Drops psycopg's "error ignored ..." warnings in this thread while it is inside
    ``no_driver_echo``: psycopg logs them when a pipeline or transaction cannot end
    on a lost connection, besides raising the error, which the store reports as one
    StoreUnavailable. Without a logging setup Python printed each to stderr (twice
    for a touch), next to the one-line error."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        quiet = getattr(self.local, "depth", 0) > 0
        return not (quiet and str(record.msg).startswith("error ignored"))


_ECHO = _DriverEchoFilter()
logging.getLogger("psycopg").addFilter(_ECHO)


@contextmanager
def no_driver_echo() -> Iterator[None]:
    """Within: psycopg's warnings about errors it ignores are dropped (this thread
    only; see ``_DriverEchoFilter``)."""
    local = _ECHO.local
    local.depth = getattr(local, "depth", 0) + 1
    try:
        yield
    finally:
        local.depth -= 1


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass
class Connector:
    """Opens connections to one server for one store.

    Args:
        dsn: the libpq connection string or URI.
        source: where the DSN came from, for messages ("the dsn argument", ...).
        connect_timeout: seconds to wait for the server to answer.
        max_scan_tuples: ``hnsw.max_scan_tuples`` of the session.
        embedded: the data directory when the DSN is the embedded server's.
    """

    dsn: str
    source: str
    connect_timeout: float = 10.0
    max_scan_tuples: int = 20_000
    embedded: Path | None = None
    where: str = field(init=False)

    def __post_init__(self) -> None:
        self.where = describe_dsn(self.dsn)
        self._pg = require("psycopg", feature=FEATURE, extra="pg")

    def connect(self) -> Any:
        """A new autocommit connection, its session set up for the store."""
        pg = self._pg
        try:
            conn = pg.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=max(1, math.ceil(self.connect_timeout)),
                application_name="memlab",
            )
        except pg.OperationalError as exc:
            raise self.connect_error(exc) from None
        except pg.ProgrammingError as exc:
            raise ConfigError(
                f"the PostgreSQL DSN from {self.source} is invalid: {first_line(exc)}; "
                "use a URI such as postgresql://user:password@host:5432/dbname"
            ) from None
        try:
            self.setup_session(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def connect_error(self, exc: Exception) -> StoreUnavailable:
        msg = first_line(exc)
        low = msg.lower()
        if "password" in low or "authentication" in low or ("role" in low and "exist" in low):
            what = (
                f"PostgreSQL at {self.where} refused the login ({msg}); check the user and "
                f"password in the DSN ({self.source})"
            )
        elif "database" in low and "does not exist" in low:
            what = (
                f"PostgreSQL at {self.where}: {msg}; create it (createdb) or point the DSN "
                f"({self.source}) at an existing database"
            )
        elif self.embedded is not None:
            # This process started the server (or found it running) and keeps its
            # handle, so only a new process starts it again.
            what = (
                f"the embedded PostgreSQL server in {self.embedded} is not running ({msg}); "
                "it was stopped or killed while this process used it. Run memlab again (a "
                f"new process starts it), or connect to your own server with {ENV_DSN}"
            )
        else:
            what = (
                f"cannot reach PostgreSQL at {self.where} ({msg}); start the server or fix "
                f"the host and port in the DSN ({self.source}). To use the embedded local "
                f"server instead, pass no DSN and unset {ENV_DSN}"
            )
        return StoreUnavailable(what)

    def setup_session(self, conn: Any) -> None:
        pg = self._pg
        from psycopg.types import TypeInfo

        try:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = %s", (EXTENSION,)
            ).fetchone()
            if row is None:
                self.create_extension(conn)
                row = conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = %s", (EXTENSION,)
                ).fetchone()
            version = str(row[0])
            if version_tuple(version) < MIN_PGVECTOR:
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
            register_vector(conn, info)
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
            raise self.connect_error(exc) from None
        except pg.Error as exc:
            raise StoreError(
                f"setting up the PostgreSQL session at {self.where} failed: {exc}"
            ) from None

    def create_extension(self, conn: Any) -> None:
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

    def translate(self, exc: Exception, what: str, name: str) -> MemlabError:
        """The MemlabError for a psycopg error raised while the store ``name``
        (``schema.table``) did ``what``."""
        pg = self._pg
        if isinstance(exc, pg.OperationalError):
            return StoreUnavailable(
                f"PostgreSQL at {self.where} failed during {what} ({first_line(exc)}); "
                "check that the server is up and retry"
            )
        if isinstance(exc, pg.DataError):
            return InputError(f"pgvector store {name}: {what}: {exc}")
        if isinstance(exc, pg.errors.InsufficientPrivilege):
            return StoreError(
                f"pgvector store {name}: {what}: {first_line(exc)}; grant "
                f"the database user the privileges it needs on schema {name.split('.')[0]} "
                "(USAGE, CREATE for the first use) and on the table (SELECT, INSERT, "
                "UPDATE, DELETE)"
            )
        return StoreError(f"pgvector store {name}: {what} failed: {exc}")
