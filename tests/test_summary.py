"""summary.csv: aggregation by probe group and the run folder's tables
(memlab.lab.summary)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from memlab.errors import MemlabError
from memlab.lab import fingerprint
from memlab.lab.summary import (
    SUMMARY_COLUMNS,
    load_rows,
    probe_groups,
    summarize,
    write_tables,
)
from tests.run_rows import rows


def test_summary_long_form_with_groups() -> None:
    probes, turns = rows()
    s = summarize(probes, turns, n_boot=200, seed=3)
    assert list(s.columns) == SUMMARY_COLUMNS
    fr = s[(s.metric == "fact_recall") & (s.group == "all")].set_index("strategy")
    assert fr.loc["stuff_all", "mean"] == 1.0 and fr.loc["stuff_all", "n"] == 2
    assert fr.loc["sliding_window", "mean"] < 1.0
    assert {"all", "far", "corrected"} <= set(s.group)
    assert (s[s.metric == "leaks"]["mean"] == 0).all()
    final = s[(s.metric == "final_store_records")].set_index("strategy")["mean"]
    assert final["stuff_all"] == 11
    assert s.equals(summarize(probes, turns, n_boot=200, seed=3))  # seeded


def test_category_groups_keep_unscored_probes_apart() -> None:
    probes = pd.DataFrame(
        {
            "category": ["a", "a", "b", "c", ""],
            "scored": [True, False, True, False, True],
            "far": [False] * 5,
            "corrected": [False] * 5,
            "evidence_recall": [1.0, 0.0, 0.5, 0.0, 1.0],
        }
    )
    groups = {k: list(v[v].index) for k, v in probe_groups(probes).items()}
    assert groups["all"] == [0, 2, 4]
    assert groups["category:a"] == [0] and groups["unscored:a"] == [1]
    assert groups["category:b"] == [2] and groups["unscored:c"] == [3]
    assert "category:c" not in groups and "unscored:b" not in groups
    # Abstention questions (LoCoMo's adversarial, LongMemEval's _abs) have their own groups.
    probes["abstention"] = [False, True, False, False, False]
    groups = {k: list(v[v].index) for k, v in probe_groups(probes).items()}
    assert groups["abstention:a"] == [1] and "unscored:a" not in groups
    assert groups["unscored:c"] == [3] and groups["all"] == [0, 2, 4]


def test_tables_are_written_summary_last_and_sealed(tmp_path: Path) -> None:
    probes, turns = rows()
    s = summarize(probes, turns, n_boot=20)
    fingerprint.write(tmp_path, fingerprint.fingerprint([], {"budget": 1}))
    write_tables(tmp_path, probes, turns, s)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".parquet")) == [
        "fingerprint.json", "probes.csv", "summary.csv", "turns.csv"
    ]  # fmt: skip
    fp = json.loads((tmp_path / "fingerprint.json").read_text())
    assert fp["summary_sha256"] == fingerprint.file_sha256(tmp_path / "summary.csv")
    p2, t2 = load_rows(tmp_path)
    assert len(p2) == len(probes) and len(t2) == len(turns)
    assert list(pd.read_csv(tmp_path / "summary.csv").columns) == SUMMARY_COLUMNS


def test_row_tables_memlab_did_not_write_are_clear_errors(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 were a UnicodeDecodeError, a table without the key
    columns a KeyError: internal errors (exit 3) instead of saying which file is bad."""
    probes, turns = rows()
    write_tables(tmp_path, probes, turns, summarize(probes, turns, n_boot=0))
    good = (tmp_path / "probes.csv").read_bytes()
    (tmp_path / "probes.csv").write_bytes(b"\x93\xff\x00" * 100)
    with pytest.raises(MemlabError, match=r"probes.csv is not a table memlab wrote"):
        load_rows(tmp_path)
    (tmp_path / "probes.csv").write_bytes(good)
    turns[["transcript", "strategy"]].to_csv(tmp_path / "turns.csv", index=False)
    with pytest.raises(MemlabError, match=r"turns.csv lacks the columns \['turn_index'\]"):
        load_rows(tmp_path)
