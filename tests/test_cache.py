"""ModelCache: location, keys, sharing between processes, forks and pickles, corrupt
files."""

from __future__ import annotations

import hashlib
import multiprocessing
import pickle
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from memlab.errors import CacheCorrupted, CacheError, InputError, MemlabError
from memlab.memory import (
    CachedEmbedder,
    HashEmbedder,
    ModelCache,
    default_cache_path,
)
from memlab.memory.models.cache import default_cache_dir, request_key, text_key, texts_key
from tests.test_cached import DIMS, Counting


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- location ------------------------------------------------------------------------
def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MEMLAB_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_path() == tmp_path / "home" / ".cache" / "memlab" / "embeddings.sqlite"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "memlab"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "memlab"
    monkeypatch.setenv("MEMLAB_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_path() == tmp_path / "mine" / "embeddings.sqlite"
    cache = ModelCache()
    assert cache.path == tmp_path / "mine" / "embeddings.sqlite" and cache.path.exists()
    assert repr(cache) == f"ModelCache({str(cache.path)!r})"


def test_unusable_locations(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(CacheError, match="cannot create the cache folder"):
        ModelCache(blocker / "sub" / "cache.sqlite")
    with pytest.raises(CacheError, match="is a folder"):
        ModelCache(tmp_path)


def test_keys() -> None:
    assert text_key("a") == hashlib.sha256(b"a").digest()
    assert texts_key(["a", "b"]) != texts_key(["b", "a"]) != texts_key(["ab"])
    assert len(text_key("\udc80 lone surrogate")) == 32


def test_embedded_keys_reads_only_keys(tmp_path: Path) -> None:
    from memlab.memory import ModelCache

    cache = ModelCache(tmp_path / "c.sqlite")
    keys = [text_key(f"t{i}") for i in range(2000)]  # more than one SQL chunk
    assert cache.embedded_keys("m", 4, keys) == set()  # no such model yet
    cache.put_embeddings("m", 4, [(k, np.ones(4, dtype=np.float32)) for k in keys[::3]])
    assert cache.embedded_keys("m", 4, keys) == set(keys[::3])
    assert cache.embedded_keys("m", 8, keys) == set()  # another dims is another model
    assert cache.embedded_keys("m", 4, []) == set()


# -- processes -----------------------------------------------------------------------
WORKER = textwrap.dedent(
    """
    import sys
    from memlab.memory import CachedEmbedder, HashEmbedder, ModelCache
    path, start, stop, batch = sys.argv[1], *map(int, sys.argv[2:5])
    emb = CachedEmbedder(HashEmbedder(16), ModelCache(path))
    texts = [f"text number {i} about cluster {i % 7}" for i in range(start, stop)]
    for i in range(0, len(texts), batch):
        emb.embed(texts[i : i + batch])
    print(emb.hits, emb.misses)
    """
)


def run_worker(path: Path, start: int, stop: int, batch: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(path), str(start), str(stop), str(batch)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_second_process_reuses_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    out, err = run_worker(path, 0, 300, 100).communicate(timeout=120)
    assert out.split() == ["0", "300"], err
    out, err = run_worker(path, 0, 300, 100).communicate(timeout=120)
    assert out.split() == ["300", "0"], err


def test_parallel_processes_share_it_safely(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    # overlapping ranges written in many small transactions at the same time
    procs = [run_worker(path, 0, 1500, 20), run_worker(path, 500, 2000, 20)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        hits, misses = map(int, out.split())
        assert hits + misses == 1500
    cache = ModelCache(path)
    assert cache.info()["embeddings"] == 2000
    texts = [f"text number {i} about cluster {i % 7}" for i in range(2000)]
    got = cache.get_embeddings(HashEmbedder(16).name, 16, [text_key(t) for t in texts])
    assert len(got) == 2000
    expected = HashEmbedder(16).embed(texts)
    assert all(np.array_equal(got[text_key(t)], expected[i]) for i, t in enumerate(texts))
    cache.check()


@pytest.mark.slow
def test_processes_creating_one_cache_at_once(tmp_path: Path) -> None:
    """Sweep jobs that start together all open a fresh cache file; none may see the
    half-created file as a foreign database (the header is read in one snapshot)."""
    code = "import sys\nfrom memlab.memory.models.cache import ModelCache\nModelCache(sys.argv[1]).info()\n"
    for round_ in range(4):
        path = tmp_path / f"fresh-{round_}.sqlite"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(path)], stderr=subprocess.PIPE, text=True
            )
            for _ in range(8)
        ]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err


def _child_embeds(emb: CachedEmbedder, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    emb.embed(["from the child"])
    queue.put((emb.hits, emb.misses))


def test_survives_fork_and_pickle(tmp_path: Path) -> None:
    emb = CachedEmbedder(Counting(), ModelCache(tmp_path / "c.sqlite"))
    emb.embed(["from the parent"])
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_embeds, args=(emb, queue))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and queue.get(timeout=5) == (0, 2)  # counters inherited
    emb.embed(["from the child", "from the parent"])
    assert emb.hits == 2  # the child's write is visible here
    clone = pickle.loads(pickle.dumps(emb.cache))
    assert clone.info()["embeddings"] == 2


# -- damage --------------------------------------------------------------------------
def test_a_file_that_is_not_a_database_is_reported_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    path.write_bytes(b"this is not sqlite at all\n" * 300)
    before = digest(path)
    with pytest.raises(CacheCorrupted, match="not a database.*was not modified") as info:
        ModelCache(path)
    assert isinstance(info.value, MemlabError) and str(path) in str(info.value)
    assert digest(path) == before


def test_another_sqlite_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (x TEXT)")
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(CacheCorrupted, match="not a memlab cache"):
        ModelCache(path)
    assert digest(path) == before


def test_damaged_pages_are_reported_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    texts = [f"text {i}" for i in range(3000)]
    emb = CachedEmbedder(HashEmbedder(64), ModelCache(path))
    emb.embed(texts)
    emb.cache.close()
    size = path.stat().st_size
    assert size > 200_000
    with path.open("r+b") as f:  # scribble over pages in the middle of the file
        f.seek(size // 2)
        f.write(b"\xab" * 16384)
    before = digest(path)
    reopened = CachedEmbedder(HashEmbedder(64), ModelCache(path))
    with pytest.raises(CacheCorrupted, match="malformed"):
        reopened.embed(texts)
    with pytest.raises(CacheCorrupted):
        reopened.cache.check()
    reopened.cache.close()
    assert digest(path) == before


def test_a_vector_of_the_wrong_size_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    emb = CachedEmbedder(HashEmbedder(DIMS), ModelCache(path))
    emb.embed(["a"])
    db = sqlite3.connect(path)
    db.execute("UPDATE embeddings SET vector = zeroblob(12)")
    db.commit()
    db.close()
    with pytest.raises(CacheCorrupted, match="has 12 bytes, expected 64"):
        CachedEmbedder(HashEmbedder(DIMS), ModelCache(path)).embed(["a"])


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    ModelCache(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(CacheError, match="schema version 99, newer"):
        ModelCache(path)


@pytest.mark.parametrize("table", ["embeddings", "models", "completions"])
def test_a_cache_missing_its_tables_is_corrupted_and_kept(tmp_path: Path, table: str) -> None:
    """A cache without its embeddings table gave "CacheError: ... no such table:
    embeddings" with no advice."""
    path = tmp_path / "c.sqlite"
    cache = ModelCache(path)
    cache.put_embeddings("m", 4, [(text_key("a"), np.ones(4))])
    cache.close()
    db = sqlite3.connect(path)
    db.execute(f"DROP TABLE {table}")
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(CacheCorrupted, match=rf"tables \['{table}'\] are missing.*not modified"):
        ModelCache(path).get_embeddings("m", 4, [text_key("a")])
    assert digest(path) == before


@pytest.mark.parametrize(
    "stored, match",
    [
        ('{"text": "x", "prompt_tokens": "many"}', "prompt_tokens='many', not a count"),
        ('{"text": "x", "completion_tokens": [1]}', r"completion_tokens=\[1\], not a count"),
        ('{"text": "x", "prompt_tokens": 1e400}', "prompt_tokens=inf, not a count"),
        ('{"text": 5}', "a text of type int"),
        ("[" * 100_000, "not a JSON object"),
    ],
)
def test_a_damaged_cached_completion_is_corrupted_and_kept(
    tmp_path: Path, stored: str, match: str
) -> None:
    # CachedChat made a Completion of it: a bare ValueError (int("many")),
    # TypeError, OverflowError or RecursionError on every rerun.
    path = tmp_path / "c.sqlite"
    cache = ModelCache(path)
    key = request_key({"messages": []})
    cache.put_completion("chat", key, {"text": "hi", "prompt_tokens": 3})
    assert cache.get_completion("chat", key) == {"text": "hi", "prompt_tokens": 3}
    db = sqlite3.connect(path)
    db.execute("UPDATE completions SET response = ?", (stored,))
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(CacheCorrupted, match=match):
        cache.get_completion("chat", key)
    assert digest(path) == before


def test_a_table_dropped_while_the_cache_is_open_is_corrupted(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = ModelCache(path)
    cache.put_embeddings("m", 4, [(text_key("a"), np.ones(4))])
    db = sqlite3.connect(path)
    db.execute("DROP TABLE embeddings")
    db.commit()
    db.close()
    with pytest.raises(CacheCorrupted, match="no such table: embeddings"):
        cache.get_embeddings("m", 4, [text_key("a")])


def _fill_until_full(path: Path, conn: object) -> None:
    import resource
    import signal

    cache = ModelCache(path)
    cache.put_embeddings("m", 64, [(text_key("seed"), np.ones(64))])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
    rng = np.random.default_rng(0)
    try:
        for attempt in range(4):
            items = [(text_key(f"{attempt}-{i}"), rng.standard_normal(64)) for i in range(5000)]
            cache.put_embeddings("m", 64, items)
        conn.send("no error")  # type: ignore[attr-defined]
    except MemlabError as exc:
        conn.send(f"{type(exc).__name__}: {exc}")  # type: ignore[attr-defined]


def test_a_full_disk_says_so(tmp_path: Path) -> None:
    """A full disk (here the file size limit) gave just "disk I/O error"."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_fill_until_full, args=(tmp_path / "c.sqlite", child))
    proc.start()
    said = parent.recv()
    proc.join(60)
    assert said.startswith("CacheError: cannot write embedding cache")
    assert "Is the disk (or the file size limit) full? Free some space" in said
    assert "cache.path" in said  # the path was given: that is the setting to change


def test_the_advice_names_the_setting_that_chose_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CacheCorrupted said to point MEMLAB_CACHE_DIR elsewhere even for a path given
    explicitly, which that variable does not move."""
    bad = b"this is not sqlite at all\n" * 300
    given = tmp_path / "given.sqlite"
    given.write_bytes(bad)
    with pytest.raises(CacheCorrupted) as err:
        ModelCache(given)
    assert f"delete {given} or move it aside" in str(err.value)
    assert "MEMLAB_CACHE_DIR" not in str(err.value)
    assert "cache.path" in str(err.value) and "ModelCache" in str(err.value)
    monkeypatch.setenv("MEMLAB_CACHE_DIR", str(tmp_path / "dir"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "embeddings.sqlite").write_bytes(bad)
    with pytest.raises(CacheCorrupted, match="point MEMLAB_CACHE_DIR at another folder"):
        ModelCache()
    clone = pickle.loads(pickle.dumps(ModelCache(tmp_path / "ok.sqlite")))
    assert clone.explicit


def test_put_checks_shapes(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "c.sqlite")
    with pytest.raises(InputError, match="shape"):
        cache.put_embeddings("m", 4, [(text_key("a"), np.zeros(5))])
    assert cache.get_embeddings("never-seen", 4, [text_key("a")]) == {}
    assert cache.get_summary("never-seen", texts_key(["a"])) is None


def test_a_fresh_cache_waits_for_another_process_lock_to_switch_to_wal(tmp_path: Path) -> None:
    """SQLite refuses a journal-mode change at once (no busy handler) while another
    connection holds a write lock; opening must wait for it like any other write."""
    path = tmp_path / "fresh.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # a writer's lock, as when another job creates it
    release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    release.start()
    try:
        cache = ModelCache(path, timeout=10)
        assert cache.info()["embeddings"] == 0
    finally:
        release.join()
        other.close()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
