"""Result files: atomic writes with the umask's mode, and writable-folder checks
(memlab.lab.files)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from memlab.errors import OutputError
from memlab.lab.files import atomic_write_text, file_mode, umask, writable_folder
from memlab.lab.transcripts import Transcript, save
from tests.conftest import FIXTURES


@pytest.fixture
def mask() -> object:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_umask_is_read_without_changing_it(mask: object) -> None:
    assert umask() == 0o022 and file_mode() == 0o644
    os.umask(0o077)
    assert umask() == 0o077 and file_mode() == 0o600


def test_atomic_writes_get_the_mode_of_a_plain_open(tmp_path: Path, mask: object) -> None:
    p = atomic_write_text(tmp_path / "sub" / "a.txt", "x")
    assert p.read_text() == "x" and stat.S_IMODE(p.stat().st_mode) == 0o644
    t = Transcript.from_dict(json.loads((FIXTURES / "handmade.json").read_text()))
    assert stat.S_IMODE(save(t, tmp_path / "t.json").stat().st_mode) == 0o644
    os.umask(0o027)
    assert stat.S_IMODE(atomic_write_text(tmp_path / "b.txt", "y").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt", "sub", "t.json"]  # no temp files


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_folder_is_an_output_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(OutputError, match="cannot write"):
            atomic_write_text(locked / "a.txt", "x")
        with pytest.raises(OutputError, match="is not writable"):
            writable_folder(locked / "run", "hydra.run.dir")
    finally:
        locked.chmod(0o700)


def test_a_file_where_a_folder_should_be(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is a file, not a folder"):
        writable_folder(tmp_path / "file" / "run", "hydra.run.dir")
    with pytest.raises(OutputError, match="cannot write"):
        atomic_write_text(tmp_path / "file" / "a.txt", "x")
    assert writable_folder(tmp_path / "new" / "run", "hydra.run.dir") == tmp_path / "new" / "run"
