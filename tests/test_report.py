"""summary.csv, charts, and rebuilding from run and multirun folders."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from memlab.lab.replay import ReplaySettings, run_experiment
from memlab.lab.report import (
    SUMMARY_COLUMNS,
    charts,
    rebuild,
    summarize,
    summary_table,
    write_tables,
)
from memlab.lab.strategies import MemoryStrategy, SlidingWindow, StuffAll
from memlab.lab.transcripts import load
from memlab.memory import HashEmbedder, InMemoryStore
from tests.conftest import FIXTURES


def rows() -> tuple[pd.DataFrame, pd.DataFrame]:
    t = load(FIXTURES / "handmade.json")
    factories = {
        "stuff_all": lambda _: StuffAll(),
        "sliding_window": lambda _: SlidingWindow(window_turns=2),
        "memory": lambda _: MemoryStrategy("memory", InMemoryStore(), HashEmbedder()),
    }
    return run_experiment([t], factories, ReplaySettings(far_turns=1), progress=False)


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
    table = summary_table(s)
    assert list(table.index) == ["stuff_all", "sliding_window", "memory"]
    assert "fact_recall_far" in table.columns


def test_charts_and_rebuild(tmp_path: Path) -> None:
    probes, turns = rows()
    s = summarize(probes, turns, n_boot=50)
    files = charts(probes, turns, s, tmp_path / "charts")
    names = {f.name for f in files}
    assert {
        "recall_precision.png",
        "prompt_tokens.png",
        "store_growth.png",
        "stale_rate.png",
    } <= names
    for f in files:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    write_tables(tmp_path, probes, turns, s)
    (tmp_path / "summary.csv").unlink()
    out = rebuild(tmp_path, n_boot=50)
    assert (tmp_path / "summary.csv").exists() and "fact_recall" in out[0]


def test_category_groups_keep_unscored_probes_apart() -> None:
    from memlab.lab.report import probe_groups

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


def test_category_charts(tmp_path: Path) -> None:
    t = load(FIXTURES / "handmade.json")
    probes, turns = run_experiment(
        [t], {"stuff_all": lambda _: StuffAll()}, ReplaySettings(), progress=False
    )
    probes["category"] = ["x", "y"]
    probes["scored"] = [True, False]
    s = summarize(probes, turns, n_boot=0)
    names = {f.name for f in charts(probes, turns, s, tmp_path)}
    assert {"evidence_recall_by_category.png", "answer_in_context_by_category.png"} <= names
