"""The dataset registry and load_source (memlab.lab.datasets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlab.errors import ConfigError, TranscriptError
from memlab.lab.datasets import DATASETS, Dataset, load_source
from memlab.lab.transcripts import Transcript
from tests.conftest import FIXTURES


def raw() -> dict[str, Any]:
    return json.loads((FIXTURES / "handmade.json").read_text())


def test_every_built_in_dataset_registers_itself() -> None:
    assert {"synthetic", "dir", "locomo", "longmemeval"} <= set(DATASETS.names())
    assert DATASETS.get("synthetic").reads is None
    assert DATASETS.get("dir").reads == "folder"
    assert DATASETS.get("locomo").reads == DATASETS.get("longmemeval").reads == "file"
    assert len(load_source("synthetic")) == 20


def test_load_source_filters(tmp_path: Path) -> None:
    d = raw()
    for i in range(3):
        d["id"] = f"t-{i}"
        (tmp_path / f"{i}.json").write_text(json.dumps(d))
    assert [t.id for t in load_source("dir", str(tmp_path), limit=2)] == ["t-0", "t-1"]
    assert [t.id for t in load_source("dir", str(tmp_path), ids=["t-2", "t-0"])] == ["t-2", "t-0"]
    with pytest.raises(TranscriptError, match=r"not found in dir .*it has e.g."):
        load_source("dir", str(tmp_path), ids=["zzz"])
    with pytest.raises(TranscriptError, match="needs a path"):
        load_source("dir", None)
    with pytest.raises(TranscriptError, match="does not exist"):
        load_source("dir", str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="unknown dataset 'nope'; choose one of: dir, "):
        load_source("nope", str(tmp_path))


def test_a_new_dataset_is_one_registration(tmp_path: Path) -> None:
    """A loader registered under a new name is a `transcripts.name` at once; it gets
    limit, ids and progress, and load_source still checks and orders the ids."""
    calls: list[dict[str, Any]] = []

    def loader(
        path: str | None, *, limit: int | None = None, ids: Any = None, progress: Any = None
    ) -> list[Transcript]:
        calls.append({"path": path, "limit": limit, "ids": ids, "progress": progress})
        return [Transcript.from_dict(raw())]

    DATASETS.register("toy_set", Dataset(loader, reads=None, description="a test set"))
    try:
        got = load_source("toy_set", None, limit=3, ids=[raw()["id"]], progress=False)
        assert [x.id for x in got] == [raw()["id"]]
        assert calls == [{"path": None, "limit": 3, "ids": [raw()["id"]], "progress": False}]
        with pytest.raises(TranscriptError, match=r"\['other'\] not found in toy_set"):
            load_source("toy_set", ids=["other"])
    finally:
        DATASETS.unregister("toy_set")


def test_load_source_refuses_a_selection_of_nothing_or_of_one_id_twice(tmp_path: Path) -> None:
    """An empty transcripts.ids or a benchmark file with no usable item replayed
    nothing and wrote an empty summary.csv (exit 0); an id named twice replayed its
    transcript twice, counting each probe twice."""
    (tmp_path / "a.json").write_text(json.dumps(raw()))
    tid = raw()["id"]
    with pytest.raises(TranscriptError, match="transcripts.ids is empty"):
        load_source("dir", str(tmp_path), ids=[])
    with pytest.raises(TranscriptError, match=rf"names \['{tid}'\] more than once"):
        load_source("dir", str(tmp_path), ids=[tid, tid])
    empty = tmp_path.parent / f"{tmp_path.name}-empty.json"
    empty.write_text("[]")
    with pytest.raises(TranscriptError, match=r"locomo \(.*empty.json\) holds no transcripts"):
        load_source("locomo", str(empty))
    assert [t.id for t in load_source("dir", str(tmp_path), ids=[tid])] == [tid]
