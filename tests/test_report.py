"""summary.csv, charts, and rebuilding from run and multirun folders."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

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


# -- sweep folders ------------------------------------------------------------------
from memlab.errors import MemlabError  # noqa: E402
from memlab.lab.report import pareto_front, sweep_report, sweep_table  # noqa: E402


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


def fake_sweep(root: Path, jobs: dict[str, dict[str, str]], *, failed: int = 0) -> Path:
    """A multirun folder as Hydra lays it out, with run rows from the handmade fixture."""
    probes, turns = rows()
    for num, overrides in jobs.items():
        job = root / num
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(
            "".join(f"- {k}={v}\n" for k, v in overrides.items())
        )
        p = probes.copy()
        if "budget" in overrides:  # make the jobs differ
            p["prompt_tokens"] = p["prompt_tokens"] + float(overrides["budget"])
        write_tables(job, p, turns, summarize(p, turns, n_boot=20))
    for k in range(failed):
        (root / f"{len(jobs) + k}" / ".hydra").mkdir(parents=True)
    (root / "multirun.yaml").write_text(
        "hydra:\n  sweeper:\n    params:\n      memory.half_life.episodic: 12,72\n"
        "  overrides:\n    task:\n    - budget=100,200\n    - progress=false\n"
    )
    return root


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


def test_sweep_report_heatmap_options(tmp_path: Path) -> None:
    jobs = {
        str(i): {"budget": b, "memory.half_life.episodic": h, "store": s}
        for i, (b, h, s) in enumerate(
            [("100", "12", "memory"), ("200", "72", "jsonl"), ("200", "12", "sqlite")]
        )
    }
    sweep = fake_sweep(tmp_path, jobs)
    sweep_report(
        sweep,
        heatmap=("budget", "store"),
        metric="precision",
        strategy="sliding_window",
        draw=True,
    )
    assert (sweep / "charts" / "heatmap_precision_budget_x_store_sliding_window.png").exists()
    with pytest.raises(MemlabError, match="was not swept here"):
        sweep_report(sweep, heatmap=("budget", "nope"), draw=False)
    with pytest.raises(MemlabError, match="--metric 'nope'"):
        sweep_report(sweep, metric="nope", draw=False)
    with pytest.raises(MemlabError, match="--strategy 'nope'"):
        sweep_report(sweep, strategy="nope", draw=False)


def test_sweep_without_results_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "0" / ".hydra").mkdir(parents=True)
    with pytest.raises(MemlabError, match="did the jobs fail"):
        sweep_table(tmp_path)
