"""JsonlStore specifics: append-only log, torn tails, corruption, compaction, processes."""

from __future__ import annotations

import json
import multiprocessing as mp
import re
import stat
from pathlib import Path

import pytest

from memlab.errors import DimensionMismatch, MemlabError, StoreCorrupted, StoreError, StoreLocked
from memlab.memory import JsonlStore
from memlab.memory.stores.jsonl import TornWriteWarning
from memlab.memory.stores.logchain import crc_of, op_line
from tests.conftest import (
    DIMS,
    assert_full_disk_leaves_no_phantom_records,
    interrupt_once,
    make_record,
)


def append_chained(path: Path, op: dict[str, object]) -> None:
    """Append an operation line that continues the file's chain (a valid line)."""
    last = path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    seq = json.loads(last)["seq"]
    with open(path, "ab") as f:
        f.write(op_line(op, seq + 1, crc_of(last)))


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
    assert {k: header[k] for k in ("format", "generation", "seq")} == {
        "format": "memlab.jsonl/2",
        "generation": 1,
        "seq": 0,
    }
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
    append_chained(p, {"op": "put", "records": [{"id": "x"}]})
    append_chained(p, {"op": "touch", "ids": [], "at": 1})
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


def test_a_symlinked_path_writes_through_to_the_linked_file(tmp_path: Path) -> None:
    """Opened through a symbolic link, the store is the linked file: compaction
    replaced the link with a new file (the linked one kept the old records and never
    saw a later write), and the lock was not the one the file's other users take."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").mkdir()
    real, link = tmp_path / "real" / "m.jsonl", tmp_path / "link" / "m.jsonl"
    a = JsonlStore(real, compact_min_lines=5, compact_ratio=1.0)
    r = make_record(content="first")
    a.put(r)
    link.symlink_to(real)
    b = JsonlStore(link, compact_min_lines=5, compact_ratio=1.0)
    for i in range(8):
        b.touch("alice", [r.id], at=float(i))
    assert b.compactions >= 1 and link.is_symlink()
    later = make_record(content="after compaction")
    b.put(later)
    assert a.get("alice", later.id) is not None
    assert JsonlStore(real).get("alice", later.id) is not None
    assert not (tmp_path / "link" / "m.jsonl.lock").exists()
    a.close()
    b.close()


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


# -- issue 13: failed writes, compaction races, chained lines, temp files -----------
def test_a_failed_write_leaves_no_trace_in_the_writer(tmp_path: Path) -> None:
    """Defect 1: an unencodable value used to stay visible in the writing handle."""
    from memlab.errors import InputError
    from memlab.memory import HashEmbedder, MemoryLayer

    p = tmp_path / "m.jsonl"
    layer = MemoryLayer(JsonlStore(p), HashEmbedder(16))
    layer.remember("a", "x")
    before = p.read_bytes()
    with pytest.raises(InputError, match="meta"):
        layer.remember("a", "y", meta={"k": object()})
    assert layer.store.count("a") == 1
    assert p.read_bytes() == before
    layer.close()
    with JsonlStore(p) as again:
        assert again.count("a") == 1


def test_a_full_disk_leaves_no_phantom_records(tmp_path: Path) -> None:
    """Defect 1: with the file size capped, every failed write is a StoreError and
    what the writer sees is what a reopened store holds."""
    p = tmp_path / "m.jsonl"
    acked = assert_full_disk_leaves_no_phantom_records(lambda: JsonlStore(p, compact_min_lines=40))
    with JsonlStore(p) as s:
        assert s.count("alice") == acked


def test_a_handle_that_missed_compactions_reads_the_right_file(tmp_path: Path) -> None:
    """Defect 2: ext4 gives the compacted file the inode number of the file before
    the last one, so a reader that missed two compactions used to read the new
    file from a stale offset (a spurious StoreCorrupted, or a stale view)."""
    p = tmp_path / "m.jsonl"
    reader = JsonlStore(p, compact_min_lines=10**6)
    writer = JsonlStore(p, compact_min_lines=10**6)
    first = make_record(content="first")
    writer.put(first)
    for i in range(20):
        reader.count()
        for k in range(2):
            rs = [make_record(content=f"{i}-{k}-{j}") for j in range(3)]
            writer.put_many(rs)
            writer.touch("alice", [first.id], at=float(i))
            writer.delete("alice", [rs[0].id])
            writer.compact()
        assert reader.count("alice") == writer.count("alice")
        got = reader.get("alice", first.id)
        assert got is not None and got.access_count == 2 * (i + 1)
    assert writer.generation == 41 and reader.generation == 41
    reader.close()
    writer.close()


def _lines(p: Path) -> list[bytes]:
    return p.read_bytes().split(b"\n")[:-1]


def _write_lines(p: Path, lines: list[bytes]) -> bytes:
    data = b"".join(line + b"\n" for line in lines)
    p.write_bytes(data)
    return data


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        ("replay", "repeats an earlier line"),
        ("delete", "missing"),
        ("swap", "reordered|missing|repeats"),
        ("foreign", "does not follow|sequence"),
    ],
)
def test_replayed_missing_reordered_or_foreign_lines_are_corruption(
    tmp_path: Path, damage: str, match: str
) -> None:
    """Defect 6: each of these used to open silently (a replayed put reverted a record)."""
    p = tmp_path / "m.jsonl"
    with JsonlStore(p) as s:
        r = make_record(content="v1")
        s.put(r)
        s.put(r.copy(content="v2"))
        s.put(make_record(content="other"))
        s.put(make_record(content="last"))
    lines = _lines(p)
    if damage == "replay":  # the old version of r again at the end
        lines.append(lines[1])
    elif damage == "delete":
        del lines[2]
    elif damage == "swap":
        lines[2], lines[3] = lines[3], lines[2]
    else:  # a line from another store's log, with its own valid checksum
        q = tmp_path / "other.jsonl"
        with JsonlStore(q) as o:
            o.put(make_record(content="x"))
            o.put(make_record(content="y"))
        lines[2] = _lines(q)[2]
    data = _write_lines(p, lines)
    with pytest.raises(StoreCorrupted, match=match):
        JsonlStore(p)
    assert p.read_bytes() == data


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "empty"),
        (b"\x00" * 4096, "no complete line"),
        (bytes(b for b in range(1, 256) if b != 10) * 8, "no complete line"),
        (bytes(range(256)) * 8, "not valid JSON"),
    ],
)
def test_an_empty_or_wholly_damaged_file_is_corruption_not_a_torn_write(
    tmp_path: Path, content: bytes, match: str
) -> None:
    """Defect 6: a 0-byte file used to open as an empty store, and a file with no
    newline was taken for a torn tail and moved aside by the next write."""
    p = tmp_path / "m.jsonl"
    p.write_bytes(content)
    for _ in range(2):
        with pytest.raises(StoreCorrupted, match=match):
            JsonlStore(p)
    assert p.read_bytes() == content
    assert not (tmp_path / "m.jsonl.torn").exists()


def test_a_header_only_file_is_corruption(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    _fill(p, 2)
    data = _write_lines(p, _lines(p)[:1])
    with pytest.raises(StoreCorrupted, match="ends after its header"):
        JsonlStore(p)
    assert p.read_bytes() == data


def test_a_compacted_file_that_lost_lines_is_corruption(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    with JsonlStore(p) as s:
        s.put_many([make_record(content=f"f{i}") for i in range(3)])
        s.compact()
    lines = _lines(p)
    assert json.loads(lines[-1])["op"] == "checkpoint"
    # Drop the last put and re-chain the checkpoint, as a bad copy tool might not.
    del lines[3]
    ckpt = json.loads(lines[3])
    lines[3] = op_line({"op": "checkpoint", "live": ckpt["live"]}, 3, crc_of(lines[2]))[:-1]
    data = _write_lines(p, lines)
    with pytest.raises(StoreCorrupted, match="lines are missing"):
        JsonlStore(p)
    assert p.read_bytes() == data


def test_a_format_1_log_opens_and_is_upgraded_on_the_first_write(tmp_path: Path) -> None:
    from tests.conftest import FIXTURES

    p = tmp_path / "m.jsonl"
    p.write_bytes((FIXTURES / "store-format1.jsonl").read_bytes())
    with JsonlStore(p) as s:
        assert [r.id for r in s.list("alice")] == ["r0", "r1"]
        assert s.get("alice", "r1").access_count == 1  # type: ignore[union-attr]
        assert s.list("alice", include_archived=True)[2].archived_at == 11.0
        assert s.count("bob") == 1
        s.put(make_record(content="new", id="n0"))
    assert json.loads(_lines(p)[0])["format"] == "memlab.jsonl/2"
    with JsonlStore(p) as s:
        assert [r.id for r in s.list("alice")] == ["r0", "r1", "n0"]
        assert s.get("alice", "r1").access_count == 1  # type: ignore[union-attr]


def _dead_pid() -> int:
    ctx = mp.get_context("fork")
    proc = ctx.Process(target=int)
    proc.start()
    proc.join()
    assert proc.pid is not None
    return proc.pid


def test_temp_files_of_killed_compactions_are_removed_on_open(tmp_path: Path) -> None:
    """Defect 7: a compaction killed midway left its temp file forever."""
    import os

    p = tmp_path / "m.jsonl"
    _fill(p, 3)
    dead = _dead_pid()
    stale = [tmp_path / f"m.jsonl.compact-{dead}", tmp_path / f"m.jsonl.create-{dead}"]
    for f in stale:
        f.write_bytes(b"half a compaction")
    mine = tmp_path / f"m.jsonl.compact-{os.getpid()}"  # a live process: left alone
    mine.write_bytes(b"in progress")
    unrelated = tmp_path / "m.jsonl.compact-notes"
    unrelated.write_bytes(b"not ours")
    with JsonlStore(p) as s:
        assert s.count("alice") == 3
        assert s.temp_files_removed == 2
    assert not any(f.exists() for f in stale)
    assert mine.exists() and unrelated.exists()


def _compact_and_die(path: str) -> None:
    import os
    import signal

    s = JsonlStore(path)
    real = os.replace

    def killed(*args: object, **kw: object) -> None:  # die before the rename
        os.kill(os.getpid(), signal.SIGKILL)

    os.replace = killed  # type: ignore[assignment]
    try:
        s.compact()
    finally:
        os.replace = real


def test_a_compaction_killed_before_its_rename_loses_nothing(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    ids = _fill(p, 5)
    before = p.read_bytes()
    proc = mp.get_context("fork").Process(target=_compact_and_die, args=(str(p),))
    proc.start()
    proc.join(30)
    assert proc.exitcode == -9
    assert list(tmp_path.glob("m.jsonl.compact-*"))  # the killed compaction's leftover
    assert p.read_bytes() == before
    with JsonlStore(p) as s:
        assert [r.id for r in s.list("alice")] == ids
    assert not list(tmp_path.glob("m.jsonl.compact-*"))


def test_a_log_from_before_supersession_opens(tmp_path: Path) -> None:
    """tests/fixtures/store-before-supersession.jsonl: format 2, written by memlab
    before records carried ``superseded`` (an optional field since)."""
    from tests.conftest import FIXTURES, check_file_from_before_supersession

    path = tmp_path / "old.jsonl"
    path.write_bytes((FIXTURES / "store-before-supersession.jsonl").read_bytes())
    check_file_from_before_supersession(lambda: JsonlStore(path))


def test_reopening_keeps_the_scan_policy(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    store = JsonlStore(path, scan="bits", scan_rerank=100, scan_min_rows=0)
    store.put(make_record(id="a"))
    store.close()
    again = JsonlStore(path, scan="bits", scan_rerank=100, scan_min_rows=0)
    assert again.count() == 1  # the file is read
    assert (again.scan.codes, again.scan.rerank, again.scan.min_rows) == ("bits", 100, 0)
    assert again._index["alice"].words > 0  # the scope's index keeps sign bits
    again.close()


# -- a folder or file this user cannot write ----------------------------------------
class _UnwritableLock:
    """A filelock.FileLock whose lock file cannot be created, as in a read-only folder."""

    def __init__(self, lock_file: str, timeout: float = -1) -> None:
        self.lock_file = lock_file

    def acquire(self) -> None:
        import errno

        raise PermissionError(errno.EACCES, "Permission denied", self.lock_file)

    def release(self) -> None:
        raise AssertionError("never acquired")

    def __enter__(self) -> _UnwritableLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_a_folder_without_write_permission_opens_to_read_and_refuses_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening raised filelock's raw PermissionError for the lock file, even to read."""
    import filelock

    p = tmp_path / "m.jsonl"
    ids = _fill(p)
    data = p.read_bytes()
    (tmp_path / "m.jsonl.lock").unlink(missing_ok=True)
    monkeypatch.setattr(filelock, "FileLock", _UnwritableLock)
    s = JsonlStore(p)
    assert [r.id for r in s.list("alice")] == ids
    for write in (
        lambda: s.put(make_record(content="new")),
        lambda: s.touch("alice", ids[:1], at=50),
        s.compact,
    ):
        with pytest.raises(StoreError, match=r"lock file .*m\.jsonl\.lock.* not writable") as err:
            write()
        assert "make the folder writable" in str(err.value)
    assert [r.id for r in s.list("alice")] == ids  # the failed writes left no trace
    s.close()
    assert p.read_bytes() == data


def _permissions_are_enforced(folder: Path) -> bool:
    """False when this user bypasses file permissions (root with CAP_DAC_OVERRIDE)."""
    probe = folder / "probe"
    probe.mkdir()
    probe.chmod(0o555)
    try:
        (probe / "x").touch()
    except PermissionError:
        return True
    else:
        (probe / "x").unlink()
        return False
    finally:
        probe.chmod(0o755)
        probe.rmdir()


def test_a_read_only_folder_and_file_for_real(tmp_path: Path) -> None:
    if not _permissions_are_enforced(tmp_path):
        pytest.skip("this user bypasses file permissions")
    folder = tmp_path / "ro"
    folder.mkdir()
    p = folder / "m.jsonl"
    ids = _fill(p)
    (folder / "m.jsonl.lock").unlink(missing_ok=True)
    data = p.read_bytes()
    p.chmod(0o444)
    folder.chmod(0o555)
    try:
        with JsonlStore(p) as s:
            assert [r.id for r in s.list("alice")] == ids
            with pytest.raises(StoreError, match="not writable"):
                s.put(make_record(content="new"))
        folder.chmod(0o755)  # the lock file can be made, the log is still read-only
        with JsonlStore(p) as s:
            for write in (lambda: s.put(make_record(content="new")), s.compact):
                with pytest.raises(StoreError, match="opened read-only"):
                    write()
            assert [r.id for r in s.list("alice")] == ids
    finally:
        folder.chmod(0o755)
    assert p.read_bytes() == data


def test_a_compaction_moves_a_torn_last_line_aside(tmp_path: Path) -> None:
    """compact() rewrote the log without the torn bytes and never wrote ``.torn``."""
    p = tmp_path / "m.jsonl"
    ids = _fill(p, 3)
    torn = b'{"op":"put","records":[{"id":"r9","content":"half-written'
    with open(p, "ab") as f:
        f.write(torn)
    with pytest.warns(TornWriteWarning, match=r"moved to .*m\.jsonl\.torn"):
        s = JsonlStore(p)
    s.compact()
    s.close()
    assert (tmp_path / "m.jsonl.torn").read_bytes() == torn
    assert torn not in p.read_bytes()
    with JsonlStore(p) as s:
        assert [r.id for r in s.list("alice")] == ids


def test_the_format_1_upgrade_moves_a_torn_last_line_aside(tmp_path: Path) -> None:
    """The first write of a format-1 log rewrote it without the torn bytes, and no ``.torn``."""
    from tests.conftest import FIXTURES

    p = tmp_path / "m.jsonl"
    torn = b'{"op":"put","records":[{"id":"r9"'
    p.write_bytes((FIXTURES / "store-format1.jsonl").read_bytes() + torn)
    with pytest.warns(TornWriteWarning):
        s = JsonlStore(p)
    s.put(make_record(content="new", id="n0"))
    s.close()
    assert (tmp_path / "m.jsonl.torn").read_bytes() == torn
    with JsonlStore(p) as s:
        assert [r.id for r in s.list("alice")] == ["r0", "r1", "n0"]


def _put_line(path: Path, record: dict[str, object]) -> bytes:
    """Append a put of ``record`` with a valid checksum and chain; the file's bytes."""
    append_chained(path, {"op": "put", "records": [record]})
    return path.read_bytes()


def _good_record() -> dict[str, object]:
    from memlab.memory.stores.codec import record_to_dict

    return record_to_dict(make_record(content="a secret note", id="bad", provenance=("t1",)))


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("id", 123, "the id is the number 123, not a string"),
        ("tokens", 2.7, "tokens is the number 2.7, not an integer"),
        ("tokens", True, "tokens is the boolean true, not an integer"),
        ("tokens", "5", "tokens is a string, not an integer"),
        ("access_count", 1.0, "access_count is the number 1.0, not an integer"),
        ("salience", "0.5", "salience is a string, not a number"),
        ("salience", False, "salience is the boolean false, not a number"),
        ("created_at", "1780000000", "created_at is a string, not a number"),
        ("last_accessed_at", None, "last_accessed_at is null, not a number"),
        ("archived_at", "later", "archived_at is a string, not a number"),
        ("provenance", "abc", "provenance is a string, not a list of strings"),
        ("provenance", [1, 2], "provenance holds the number 1, not only strings"),
        ("meta", [["a", 1]], "meta is a list, not an object"),
        ("content", 5, "content is the number 5, not a string"),
        ("kind", ["semantic"], "kind is a list, not a string"),
        ("superseded", [{"by": 7, "at": 1.0}], "superseded entry's by is the number 7"),
        ("superseded", [{"by": "x", "at": "1"}], "superseded entry's at is a string"),
        ("superseded", [{"by": "x", "at": 1.0, "span": [0.5, 2]}], "span must be"),
    ],
)
def test_a_record_field_of_the_wrong_json_type_is_corruption_not_converted(
    tmp_path: Path, field: str, value: object, says: str
) -> None:
    """A checksum-valid line with tokens 2.7 loaded as 2, "5" as 5, provenance "abc" as
    ('a', 'b', 'c'), meta [["a", 1]] as {'a': 1}, an id 123 as '123', ..."""
    p = tmp_path / "m.jsonl"
    _fill(p, 2)
    record = _good_record()
    record[field] = value
    before = _put_line(p, record)
    with pytest.raises(StoreCorrupted, match=f"line 4: .*{re.escape(says)}") as err:
        JsonlStore(p)
    assert "a secret note" not in str(err.value)
    assert p.read_bytes() == before


def test_a_missing_record_field_is_corruption_naming_it(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    _fill(p, 2)
    record = _good_record()
    del record["tokens"]
    before = _put_line(p, record)
    with pytest.raises(
        StoreCorrupted, match="line 4: .*record 'bad': the field 'tokens' is missing"
    ):
        JsonlStore(p)
    assert p.read_bytes() == before


def test_numbers_written_without_a_fraction_are_still_numbers(tmp_path: Path) -> None:
    """JSON has one number type: a float field written as ``1000`` (not ``1000.0``), as
    an earlier writer or another tool may, reads as 1000.0; integer fields stay ints."""
    p = tmp_path / "m.jsonl"
    _fill(p, 1)
    record = _good_record()
    record.update(salience=1, created_at=1000, last_accessed_at=1001, archived_at=1002)
    record["superseded"] = [{"by": "x", "at": 1003, "span": [0, 2], "confidence": 1}]
    _put_line(p, record)
    with JsonlStore(p) as s:
        got = s.get("alice", "bad")
    assert got is not None
    assert (got.salience, got.created_at, got.last_accessed_at, got.archived_at) == (
        1.0,
        1000.0,
        1001.0,
        1002.0,
    )
    assert type(got.created_at) is float and type(got.tokens) is int
    assert got.superseded[0].at == 1003.0 and got.superseded[0].span == (0, 2)


def test_a_torn_line_another_handle_moved_aside_is_not_salvaged_twice(tmp_path: Path) -> None:
    """Both handles saw the torn tail; the second one's next write moved what the
    first had appended since (an acknowledged record) to ``.torn`` and cut it off,
    and the log no longer opened ('line sequence jumps')."""
    p = tmp_path / "m.jsonl"
    ids = _fill(p, 2)
    torn = b'{"op":"put","records":[{"id":"r9"'
    with open(p, "ab") as f:
        f.write(torn)
    with pytest.warns(TornWriteWarning):
        a = JsonlStore(p)
        b = JsonlStore(p)
    first, second = make_record(content="by b", id="b1"), make_record(content="by a", id="a1")
    b.put(first)  # moves the torn bytes aside and appends over them
    assert a.count() == 3  # a reads b's line where the torn bytes were
    a.put(second)
    a.close()
    b.close()
    assert (tmp_path / "m.jsonl.torn").read_bytes() == torn
    with JsonlStore(p) as s:
        assert sorted(r.id for r in s.list("alice")) == sorted([*ids, "b1", "a1"])


@pytest.mark.parametrize(
    ("op", "says"),
    [
        ({"op": "delete", "scope": "alice", "ids": "r0"}, "ids is not a list of strings"),
        ({"op": "delete", "scope": 7, "ids": ["r0"]}, "scope is not a non-empty string"),
        ({"op": "delete", "scope": ["alice"], "ids": ["r0"]}, "scope is not a non-empty"),
        ({"op": "archive", "scope": "alice", "ids": "r0", "at": 5.0}, "ids is not a list"),
        ({"op": "touch", "scope": "alice", "ids": ["r0", 5], "at": 5.0}, "ids is not a list"),
        ({"op": "touch", "scope": "", "ids": ["r0"], "at": 5.0}, "scope is not a non-empty"),
        ({"op": "checkpoint", "live": True}, "live is bool, not an integer"),
        ({"op": "checkpoint", "live": 1, "dims": "16"}, "dims is '16', not a positive"),
        ({"op": "checkpoint", "live": 1, "dims": 3}, "dims is 3, the records' 16"),
    ],
)
def test_an_operation_field_of_the_wrong_json_type_is_corruption(
    tmp_path: Path, op: dict[str, object], says: str
) -> None:
    """A checksum-valid delete whose ids were the string "r0" deleted the records "r"
    and "0" (here: none, so the deleted record came back), a scope 7 matched no
    record, a touch skipped the id 5, and a checkpoint's live true passed for 1: all
    loaded silently."""
    p = tmp_path / "m.jsonl"
    with JsonlStore(p) as s:
        s.put(make_record(content="fact 0", id="r0"))
    append_chained(p, op)
    before = p.read_bytes()
    with pytest.raises(StoreCorrupted, match=r"line 3: .*" + re.escape(says)):
        JsonlStore(p)
    assert p.read_bytes() == before


def test_compaction_and_the_torn_file_keep_the_logs_permissions(tmp_path: Path) -> None:
    """A log made private (chmod 600) came back 0o644 after a compaction, and the
    torn bytes (the user's text) were written to a 0o644 ``.torn`` file."""
    p = tmp_path / "m.jsonl"
    ids = _fill(p, 3)
    p.chmod(0o600)
    with open(p, "ab") as f:
        f.write(b'{"op":"put","records":[{"id":"r9","content":"a private')
    with pytest.warns(TornWriteWarning):
        s = JsonlStore(p, compact_min_lines=1, compact_ratio=1.0)
    s.delete("alice", ids[0])  # moves the torn bytes aside, then compacts
    assert s.compactions == 1
    s.close()
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "m.jsonl.torn").stat().st_mode) == 0o600


def test_a_compacted_store_whose_records_were_all_deleted_keeps_its_dims(
    tmp_path: Path,
) -> None:
    """The compacted file held no put line, so a reopened store had dims None and took
    vectors of other dims, and a handle still open on it then read its own store as
    corrupt ('bad put entry (DimensionMismatch ...)')."""
    p = tmp_path / "m.jsonl"
    old = JsonlStore(p)
    old.put(make_record(content="one", id="r0"))
    old.delete("alice", "r0")
    old.compact()
    with JsonlStore(p) as s:
        assert s.dims == old.dims == DIMS
        with pytest.raises(DimensionMismatch):
            s.put(make_record(content="wider", id="r1", dims=DIMS * 2))
        s.put(make_record(content="same", id="r2"))
    assert [r.id for r in old.list("alice")] == ["r2"]
    old.close()


def test_a_write_interrupted_after_its_line_is_appended_keeps_the_log_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt between appending a line and advancing the chain left the
    handle past the line but chained before it: its next line repeated the
    interrupted one's sequence number, and the log no longer opened ('line sequence
    2 repeats an earlier line')."""
    from memlab.memory.stores import logchain

    p = tmp_path / "m.jsonl"
    s = JsonlStore(p)
    s.put(make_record(content="one", id="r0"))
    interrupt_once(monkeypatch, logchain.Chain, "advance")
    with pytest.raises(KeyboardInterrupt):
        s.put(make_record(content="two", id="r1"))
    assert [r.id for r in s.list("alice")] == ["r0", "r1"]  # its line is in the file
    s.put(make_record(content="three", id="r2"))
    s.close()
    with JsonlStore(p) as again:
        assert [r.id for r in again.list("alice")] == ["r0", "r1", "r2"]


def test_a_handle_reports_damage_appended_after_another_writers_line_the_same_each_time(
    tmp_path: Path,
) -> None:
    """A handle that read another handle's good line and a damaged one after it in one
    catch-up applied the good line, kept its offset before it, and from its second
    call on blamed the wrong line for the wrong cause ('line 5: line sequence 2
    repeats an earlier line')."""
    p = tmp_path / "m.jsonl"
    a = JsonlStore(p)
    a.put(make_record(content="one", id="r0"))
    with JsonlStore(p) as b:
        b.put(make_record(content="two", id="r1"))
    append_chained(p, {"op": "delete", "scope": "alice", "ids": "r0"})
    for _ in range(2):
        with pytest.raises(StoreCorrupted, match="line 4: bad 'delete' entry"):
            a.count()
    a.close()


@pytest.mark.parametrize(
    ("op", "says"),
    [
        ({"op": "delete", "ids": ["r0"]}, "the scope is missing"),
        ({"op": "archive", "ids": ["r0"], "at": 5.0}, "the scope is missing"),
        ({"op": "touch", "scope": None, "ids": ["r0"], "at": 5.0}, "the scope is missing"),
        ("move", "record 'r0' moves to another scope"),
    ],
)
def test_a_format_2_line_that_crosses_scopes_is_corruption(
    tmp_path: Path, op: dict[str, object] | str, says: str
) -> None:
    """Format 2 came after ids were bound to their scope, and memlab never writes a
    scope-less operation or a put that moves an id in it; such a checksum-valid line
    was replayed as in a format-1 log: a delete without scope deleted the id in
    whatever scope held it, and a put moved alice's record to mallory."""
    from memlab.memory.stores.codec import record_to_dict

    p = tmp_path / "m.jsonl"
    with JsonlStore(p) as s:
        s.put(make_record(content="alice's note", id="r0"))
    if op == "move":
        moved = record_to_dict(make_record("mallory", "taken", id="r0"))
        op = {"op": "put", "records": [moved]}
    assert isinstance(op, dict)
    append_chained(p, op)
    before = p.read_bytes()
    with pytest.raises(StoreCorrupted, match=r"line 3: .*" + re.escape(says)):
        JsonlStore(p)
    assert p.read_bytes() == before


def test_a_format_1_copy_restored_under_an_open_handle_is_refused(tmp_path: Path) -> None:
    """A handle on a format-2 log whose file was replaced by a format-1 copy (an old
    backup restored while the store was open) silently switched to it: the records
    written since disappeared from its view. A format-2 replacement of a generation
    not newer than the handle's was already refused."""
    import shutil

    from tests.conftest import FIXTURES

    p = tmp_path / "m.jsonl"
    s = JsonlStore(p)
    s.put(make_record(content="newer", id="n0"))
    assert s.count() == 1
    shutil.copy(FIXTURES / "store-format1.jsonl", tmp_path / "old.jsonl")
    (tmp_path / "old.jsonl").replace(p)
    with pytest.raises(StoreError, match="replaced by another file"):
        s.count()
    s.close()
    with JsonlStore(p) as again:  # a new handle reads the restored copy
        assert again.get("alice", "r0") is not None


def test_a_relative_path_keeps_naming_the_store_after_a_change_of_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store opened as JsonlStore("m.jsonl") stat'ed and locked "m.jsonl" in the
    current directory at every call: after os.chdir every write raised 'memory store
    m.jsonl was removed while open', and the lock it took was a new file elsewhere."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(here)
    s = JsonlStore("m.jsonl")
    s.put(make_record(content="one", id="r0"))
    monkeypatch.chdir(elsewhere)
    s.put(make_record(content="two", id="r1"))
    assert s.count() == 2
    s.close()
    assert list(elsewhere.iterdir()) == []
    with JsonlStore(here / "m.jsonl") as again:
        assert [r.id for r in again.list("alice")] == ["r0", "r1"]
