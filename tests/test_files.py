"""The file stores' shared mechanics (memlab/memory/stores/files.py): whole-file
writes, leftovers of killed writers, positional reads and the error they raise."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memlab.errors import StoreError
from memlab.memory.stores.files import (
    io_error,
    pid_alive,
    pread_all,
    remove_dead_temp_files,
    temp_files,
    write_whole,
)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_write_whole_creates_and_returns_an_appendable_fd(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    fd = write_whole(path, "create", [b"a\n", b"b\n"], link=True)
    try:
        os.write(fd, b"c\n")
    finally:
        os.close(fd)
    assert path.read_bytes() == b"a\nb\nc\n"
    assert temp_files(path) == []


def test_write_whole_with_link_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"someone else's\n")
    with pytest.raises(StoreError, match="created by another program"):
        write_whole(path, "create", [b"mine\n"], link=True)
    assert path.read_bytes() == b"someone else's\n"
    assert temp_files(path) == []


def test_write_whole_without_link_replaces(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"old\n")
    os.close(write_whole(path, "compact", [b"new\n"], link=False))
    assert path.read_bytes() == b"new\n"


@pytest.mark.parametrize("mode", [0o600, 0o660, 0o640])
def test_write_whole_without_link_keeps_the_files_permissions(tmp_path: Path, mode: int) -> None:
    """The replacement was created 0o644 (less the umask): a private store became
    readable by everyone, and a group-shared one lost its group's write access."""
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"old\n")
    path.chmod(mode)
    os.close(write_whole(path, "compact", [b"new\n"], link=False))
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_a_failed_write_raises_a_store_error_and_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "m.jsonl"
    with pytest.raises(StoreError, match=r"cannot create memory store .*retry"):
        write_whole(path, "create", [b"x\n"], link=True)
    assert not path.parent.exists()


def test_temp_files_match_only_the_names_write_whole_uses(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    for name in ("m.jsonl.compact-12", "m.jsonl.create-7", "m.jsonl.compact-x",
                 "m.jsonl.torn", "other.jsonl.compact-5", "m.jsonl.compact-3.bak"):  # fmt: skip
        (tmp_path / name).write_bytes(b"")
    found = sorted((p.name, pid) for p, pid in temp_files(path))
    assert found == [("m.jsonl.compact-12", 12), ("m.jsonl.create-7", 7)]


def test_only_dead_writers_files_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    dead = tmp_path / f"m.jsonl.compact-{_dead_pid()}"
    live = tmp_path / f"m.jsonl.create-{os.getpid()}"
    dead.write_bytes(b"")
    live.write_bytes(b"")
    assert remove_dead_temp_files(path) == 1
    assert not dead.exists() and live.exists()
    assert remove_dead_temp_files(path) == 0


def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(0) and not pid_alive(-1)
    assert not pid_alive(_dead_pid())


def test_pread_all_reads_up_to_the_end(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert pread_all(fd, 4, 3) == b"3456"
        assert pread_all(fd, 100, 8) == b"89"
        assert pread_all(fd, 5, 10) == b""
    finally:
        os.close(fd)


def test_io_error_names_the_file_and_a_full_disk() -> None:
    full = io_error(Path("/x/m.jsonl"), "write to", OSError(errno.ENOSPC, "No space left"))
    assert isinstance(full, StoreError)
    assert "/x/m.jsonl" in str(full) and "disk or the file size limit is full" in str(full)
    denied = io_error(Path("/x/m.jsonl"), "write to", OSError(errno.EACCES, "Permission denied"))
    assert "full" not in str(denied) and "permissions" in str(denied)
