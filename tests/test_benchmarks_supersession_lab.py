"""benchmarks.supersession_lab: the lab's supersession table and chart from run folders."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from benchmarks.supersession_lab import main, table


def _run(folder: Path, stale_wins: float) -> Path:
    rows = []
    for strategy in ("memory", "memory_no_supersede"):
        for group in (
            "all",
            "category:corrected",
            "category:false_correction",
            "category:fact",
            "far",
        ):
            for metric, mean in (("fact_recall", 0.9), ("stale_rate", 0.2), ("stale_wins", stale_wins),
                                 ("precision", 0.1)):  # fmt: skip
                rows.append({"strategy": strategy, "group": group, "metric": metric, "mean": mean,
                             "ci_low": mean - 0.05, "ci_high": mean + 0.05, "n": 10})  # fmt: skip
    folder.mkdir()
    pd.DataFrame(rows).to_csv(folder / "summary.csv", index=False)
    return folder


def test_table_keeps_the_probe_groups_and_metrics_of_each_run(tmp_path: Path) -> None:
    df = table([("a", _run(tmp_path / "a", 0.3)), ("b", _run(tmp_path / "b", 0.1))])
    assert set(df.group) == {"corrected", "false correction", "plain fact", "all probes"}
    assert set(df.metric) == {"fact_recall", "stale_rate", "stale_wins"}
    got = df[(df.run == "b") & (df.metric == "stale_wins")]["mean"]
    assert (got == 0.1).all() and len(got) == 8


def test_main_writes_the_csv_and_chart_and_refuses_a_bad_run(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run = _run(tmp_path / "r", 0.2)
    out = tmp_path / "out"
    assert main(["--run", f"held-out, hash={run}", "--out", str(out), "--markdown"]) == 0
    assert (out / "supersession-lab.csv").is_file() and (
        out / "supersession-lab.png"
    ).stat().st_size > 0
    printed = capsys.readouterr().out
    assert "| held-out, hash | memory | corrected | 10 | 0.90 (0.85-0.95)" in printed
    with pytest.raises(SystemExit):
        main(["--run", str(run)])
