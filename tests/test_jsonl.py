"""JsonlStore specifics: append-only log, torn tails, corruption, compaction, processes."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pytest

from memlab.errors import MemlabError, StoreCorrupted, StoreError, StoreLocked
from memlab.memory import JsonlStore
from memlab.memory.stores.jsonl import TornWriteWarning, encode_line
from tests.conftest import make_record


def _fill(path: Path, n: int = 5) -> list[str]:
    with JsonlStore(path) as s:
        rs = [make_record(content=f"fact {i}", created_at=i) for i in range(n)]
        for r in rs:
            s.put(r)
        return [r.id for r in rs]


def test_a_write_appends_one_line(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    s = JsonlStore(p)
    s.put(make_record(content="one"))
    size1, lines1 = p.stat().st_size, p.read_bytes().count(b"\n")
    s.put(make_record(content="two"))
    s.put_many([make_record(content="three"), make_record(content="four")])
    assert p.read_bytes().count(b"\n") == lines1 + 2  # a batch is one line
    assert p.read_bytes()[:size1] == p.read_bytes()[:size1]
    header = json.loads(p.read_bytes().split(b"\n")[0])
    assert header == {"format": "memlab.jsonl/1"}
    s.close()


def test_torn_last_line_is_dropped_with_a_warning_and_file_untouched(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    ids = _fill(p)
    data = p.read_bytes()
    torn = data[:-25]  # cut the last put in the middle
    p.write_bytes(torn)
    with pytest.warns(TornWriteWarning, match="torn last line"):
        s = JsonlStore(p)
    assert p.read_bytes() == torn  # opening never modifies the file
    assert [r.id for r in s.list("alice")] == ids[:-1]
    # The next write moves the torn bytes aside and appends after the last good line.
    extra = make_record(content="after crash", created_at=100)
    s.put(extra)
    s.close()
    assert (tmp_path / "m.jsonl.torn").exists()
    assert [r.id for r in JsonlStore(p).list("alice")] == [*ids[:-1], extra.id]


def test_corruption_in_the_middle_raises_and_leaves_bytes(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    _fill(p)
    lines = p.read_bytes().split(b"\n")
    lines[2] = lines[2][:40] + b"#garbage#" + lines[2][49:]
    damaged = b"\n".join(lines)
    p.write_bytes(damaged)
    with pytest.raises(StoreCorrupted) as err:
        JsonlStore(p)
    assert "line 3" in str(err.value) and str(p) in str(err.value)
    assert p.read_bytes() == damaged


def test_valid_json_with_a_bad_record_is_corruption(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    _fill(p, 2)
    with open(p, "ab") as f:
        f.write(encode_line({"op": "put", "records": [{"id": "x"}]}))
        f.write(encode_line({"op": "touch", "ids": [], "at": 1}))
    before = p.read_bytes()
    with pytest.raises(StoreCorrupted, match="line 4"):
        JsonlStore(p)
    assert p.read_bytes() == before


def test_damage_inside_a_string_is_caught_by_the_checksum(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    _fill(p)
    data = p.read_bytes()
    damaged = data.replace(b"fact 2", b"fact 9", 1)
    p.write_bytes(damaged)
    with pytest.raises(StoreCorrupted, match="line 4.*checksum"):
        JsonlStore(p)
    assert p.read_bytes() == damaged


def test_not_a_memlab_file(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    p.write_text('{"hello": "world"}\n')
    with pytest.raises(StoreCorrupted, match="not a memlab JSONL store"):
        JsonlStore(p)
    assert p.read_text() == '{"hello": "world"}\n'


def test_compaction_is_atomic_and_keeps_state(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    s = JsonlStore(p, compact_min_lines=50, compact_ratio=2.0)
    r = make_record(content="hot")
    s.put(r)
    for i in range(200):
        s.touch("alice", [r.id], at=float(i))
    assert s.compactions >= 1
    assert s.log_lines < 60
    assert not list(tmp_path.glob("*.compact-*"))
    got = s.get("alice", r.id)
    assert got is not None and got.access_count == 200 and got.last_accessed_at == 199.0
    s.close()
    again = JsonlStore(p).get("alice", r.id)
    assert again is not None and again.access_count == 200


def test_second_handle_sees_writes_and_compaction(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    a = JsonlStore(p, compact_min_lines=20)
    b = JsonlStore(p, compact_min_lines=20)
    r = make_record(content="shared")
    a.put(r)
    assert b.get("alice", r.id) is not None
    for i in range(60):
        b.touch("alice", [r.id], at=float(i))
    assert b.compactions >= 1
    got = a.get("alice", r.id)  # a must notice the file was replaced
    assert got is not None and got.access_count == 60
    a.put(make_record(content="after compaction"))
    assert b.count("alice") == 2


def _writer(path: str, worker: int, n: int) -> None:
    s = JsonlStore(path, compact_min_lines=100)
    for i in range(n):
        s.put(make_record(f"w{worker}", content=f"worker {worker} fact {i}", created_at=i))
        if i % 10 == 0:
            s.touch("alice", [], at=0)
    s.close()


def test_two_processes_writing_lose_nothing(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(p), w, 150)) for w in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    s = JsonlStore(p)
    assert s.count("w0") == 150 and s.count("w1") == 150
    assert sorted(r.content for r in s.list("w0")) == sorted(
        f"worker 0 fact {i}" for i in range(150)
    )


def test_killed_writer_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """A process killed at a random point: everything it reported written is there."""
    p = tmp_path / "m.jsonl"
    ack = tmp_path / "ack"
    ctx = mp.get_context("spawn")
    proc = ctx.Process(target=_acking_writer, args=(str(p), str(ack)))
    proc.start()
    import time

    deadline = time.time() + 30
    while time.time() < deadline and (not ack.exists() or ack.read_text().count("\n") < 200):
        time.sleep(0.01)
    proc.kill()
    proc.join()
    acked = ack.read_text().split()
    s = JsonlStore(p)
    stored = {r.id for r in s.list("alice", include_archived=True)}
    assert set(acked) <= stored


def _acking_writer(path: str, ack: str) -> None:
    s = JsonlStore(path, compact_min_lines=50)
    with open(ack, "a") as f:
        for i in range(100_000):
            r = make_record(content=f"fact {i}", created_at=i)
            s.put(r)
            f.write(r.id + "\n")
            f.flush()
            if i % 7 == 0:
                s.touch("alice", [r.id], at=i)


def test_lock_timeout_is_a_clear_error(tmp_path: Path) -> None:
    import filelock

    p = tmp_path / "m.jsonl"
    other = filelock.FileLock(str(p) + ".lock", thread_local=False)
    s = JsonlStore(p, lock_timeout=0.2)
    other.acquire()
    try:
        with pytest.raises(StoreLocked, match="locked by another process"):
            s.put(make_record())
    finally:
        other.release()
    s.put(make_record())


def test_a_folder_is_not_a_store_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=f"{tmp_path} is a folder") as err:
        JsonlStore(tmp_path)
    assert isinstance(err.value, MemlabError)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_an_error_unless_asked_to_create_it(tmp_path: Path) -> None:
    typo = tmp_path / "stroes" / "memory.jsonl"
    with pytest.raises(StoreError, match="does not exist.*create_dirs=True"):
        JsonlStore(typo)
    assert not typo.parent.exists()  # nothing created
    with JsonlStore(typo, create_dirs=True) as s:
        s.put(make_record())
    assert typo.is_file()
    with JsonlStore(typo) as s:  # the folder exists now
        assert s.count("alice") == 1
