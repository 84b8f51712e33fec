"""Sweeps: reading a multirun folder (and planning one: see the end) (memlab.lab.sweep)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from memlab.errors import MemlabError
from memlab.lab.report import sweep_report
from memlab.lab.summary import SUMMARY_COLUMNS
from memlab.lab.sweep import pareto_front, sweep_table
from tests.run_rows import fake_sweep


def test_pareto_front_keeps_the_undominated_points() -> None:
    pts = pd.DataFrame(
        {
            "tokens": [100, 100, 200, 150, 300, 50, float("nan")],
            "recall": [0.5, 0.6, 0.9, 0.55, 0.9, 0.1, 1.0],
        }
    )
    front = pareto_front(pts, "tokens", "recall")
    # (100, .6) beats (100, .5) and (150, .55); (300, .9) is dominated by (200, .9).
    assert list(front) == [False, True, True, False, False, True, False]


def test_sweep_table_is_tidy_with_swept_columns(tmp_path: Path) -> None:
    jobs = {
        str(i): {"budget": b, "memory.half_life.episodic": h, "progress": "false"}
        for i, (b, h) in enumerate([("100", "12"), ("100", "72"), ("200", "12"), ("200", "72")])
    }
    sweep = fake_sweep(tmp_path, jobs, failed=1)
    table, keys, failed = sweep_table(sweep)
    assert keys == ["budget", "memory.half_life.episodic"]  # progress did not vary
    assert list(table.columns) == ["job", *keys, *SUMMARY_COLUMNS]
    assert [p.name for p in failed] == ["4"]
    assert table.groupby(["job", "strategy", "group", "metric"]).size().max() == 1
    assert set(table.budget) == {100, 200} and table.budget.dtype.kind == "i"
    lines = sweep_report(sweep, draw=True)
    assert "warning: 1 jobs have no results" in "\n".join(lines)
    charts_made = {p.name for p in (sweep / "charts").glob("*.png")}
    assert {
        "pareto_fact_recall_vs_prompt_tokens.png",
        "precision_vs_prompt_tokens.png",
    } <= charts_made
    assert "heatmap_fact_recall_budget_x_memory.half_life.episodic_memory.png" in charts_made
    pareto = pd.read_csv(sweep / "pareto.csv")
    assert pareto.on_front.any() and set(pareto.columns) >= {"job", "budget", "on_front"}
    assert pd.read_csv(sweep / "multirun_summary.csv").equals(
        pd.read_csv(sweep / "multirun_summary.csv")
    )


def test_sweep_without_results_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "0" / ".hydra").mkdir(parents=True)
    with pytest.raises(MemlabError, match="did the jobs fail"):
        sweep_table(tmp_path)
