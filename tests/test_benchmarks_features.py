"""benchmarks.features: a set is replayed each time unless --reuse is given."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from benchmarks import features

SHIPPED = Path(__file__).resolve().parents[1] / "transcripts" / "synthetic"


def test_a_set_is_replayed_unless_reuse(tmp_path: Path) -> None:
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(SHIPPED / "support-0001.json", folder)
    out = tmp_path / "out"
    args = ["--dir", f"one={folder}", "--out", str(out)]
    assert features.main(args) == 0
    run = out / "runs" / "one"
    table = pd.read_csv(out / "summary.csv")
    assert set(table.set) == {"one"} and "memory_reflect" in set(table.strategy)
    marker = run / "older-run"
    marker.write_text("a run of older code")
    assert features.main([*args, "--reuse"]) == 0
    assert marker.exists()  # read, not replayed
    assert features.main(args) == 0
    assert not marker.exists()  # replayed from scratch
    assert pd.read_csv(out / "summary.csv").equals(table)
