"""The terminal and Markdown tables, a multirun's report, rebuilding run folders
(memlab.lab.report)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from memlab.errors import MemlabError
from memlab.lab.report import markdown_table, rebuild, summary_table, sweep_report
from memlab.lab.summary import summarize, write_tables
from tests.run_rows import fake_sweep, rows


def test_summary_table_shows_the_registry_table_metrics() -> None:
    probes, turns = rows()
    table = summary_table(summarize(probes, turns, n_boot=0))
    assert list(table.index) == ["stuff_all", "sliding_window", "memory"]
    assert list(table.columns[:3]) == ["fact_recall", "fact_recall_far", "precision"]
    assert "token_precision" not in table.columns  # not a table metric


def test_rebuild_a_run_folder(tmp_path: Path) -> None:
    probes, turns = rows()
    write_tables(tmp_path, probes, turns, summarize(probes, turns, n_boot=50))
    (tmp_path / "summary.csv").unlink()
    out = rebuild(tmp_path, n_boot=50)
    assert (tmp_path / "summary.csv").exists() and "fact_recall" in out[0]
    assert (tmp_path / "charts" / "recall_precision.png").exists()


def test_rebuild_resamples_as_the_run_did(tmp_path: Path) -> None:
    """memlab report rebuilt every run with 1000 resamples and seed 0: a run made
    with report.bootstrap=200 and seed=7 got other intervals, silently, and was
    resealed with them."""
    from memlab.lab.sweep import run_resampling

    probes, turns = rows()
    write_tables(tmp_path, probes, turns, summarize(probes, turns, n_boot=200, seed=7))
    (tmp_path / "config.yaml").write_text("seed: 7\nreport:\n  bootstrap: 200\n")
    written = (tmp_path / "summary.csv").read_bytes()
    rebuild(tmp_path, draw=False)
    assert (tmp_path / "summary.csv").read_bytes() == written
    rebuild(tmp_path, n_boot=1000, seed=0, draw=False)  # what it used to do
    assert (tmp_path / "summary.csv").read_bytes() != written
    assert run_resampling(tmp_path, 50, None) == (50, 7)
    assert run_resampling(tmp_path / "nowhere", None, None) == (1000, 0)
    (tmp_path / "config.yaml").write_text("seed: -3\nreport:\n  bootstrap: many\n")
    assert run_resampling(tmp_path, None, None) == (1000, 0)


def test_rebuild_refuses_a_run_that_did_not_finish(tmp_path: Path) -> None:
    """A rerun into a run folder that failed wrote its config and an unsealed
    fingerprint over the earlier run's rows: rebuilding would seal those rows as
    the new config's result, which the gate would then accept."""
    from memlab.lab import fingerprint

    probes, turns = rows()
    fingerprint.write(tmp_path, {"format": fingerprint.FORMAT, "config": {"budget": 400}})
    write_tables(tmp_path, probes, turns, summarize(probes, turns, n_boot=0))
    assert "summary_sha256" in fingerprint.load(tmp_path)
    fingerprint.write(tmp_path, {"format": fingerprint.FORMAT, "config": {"budget": 200}})
    before = (tmp_path / "summary.csv").read_bytes()
    with pytest.raises(MemlabError, match="holds no finished run.*re-run it"):
        rebuild(tmp_path, n_boot=0, draw=False)
    assert (tmp_path / "summary.csv").read_bytes() == before
    assert "summary_sha256" not in fingerprint.load(tmp_path)


def test_markdown_table() -> None:
    table = pd.DataFrame({"set": ["a|b", "c"], "value": [0.12345, float("nan")], "n": [3, 4]})
    assert markdown_table(table) == (
        "| set | value | n |\n|---|---|---|\n| a\\|b | 0.123 | 3 |\n| c | - | 4 |\n"
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
