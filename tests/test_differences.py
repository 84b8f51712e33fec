"""Differences that are real (memlab.lab.differences): paired bootstrap intervals on
constructed data with a known difference, the minimum detectable difference by
hand, comparing two runs, and the report and compare commands."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memlab.cli import main
from memlab.errors import MemlabError
from memlab.lab import differences as diff
from memlab.lab import experiment
from memlab.lab.sweep import plan_run
from tests.transcript_gen import write_transcripts

N = 400


def constructed(seed: int = 3) -> pd.DataFrame:
    """Probes of four strategies on the same N questions in two categories:
    ``better`` turns 30% of memory's misses into hits (true difference +0.15),
    ``same`` equals memory on every probe, ``other`` is as good as memory on
    average but errs on other questions, and ``stale`` is worse on a
    lower-is-better metric."""
    rng = np.random.default_rng(seed)
    ref = (rng.random(N) < 0.5).astype(float)
    better = np.maximum(ref, rng.random(N) < 0.3)
    other = (rng.random(N) < 0.5).astype(float)
    stale_ref = (rng.random(N) < 0.2).astype(float)
    rows = []
    for name, recall, stale in (
        ("memory", ref, stale_ref),
        ("better", better, stale_ref),
        ("same", ref, stale_ref),
        ("other", other, np.maximum(stale_ref, rng.random(N) < 0.25)),
    ):
        for i in range(N):
            rows.append(
                dict(strategy=name, transcript=f"t{i % 7}", probe=f"q{i}",
                     category="a" if i % 2 else "b", scored=True, far=False, corrected=False,
                     evidence_recall=recall[i], stale_wins=stale[i])
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_a_known_difference_is_shown_and_none_where_there_is_none() -> None:
    probes = constructed()
    table = diff.differences(probes, metrics=["evidence_recall", "stale_wins"], n_boot=2000)
    row = table.set_index(["group", "metric", "strategy"])
    b = row.loc[("all", "evidence_recall", "better")]
    assert b.reference == "memory" and b.n == N
    assert b.shown and b.verdict == "better" and b.ci_low > 0
    assert b.ci_low < 0.15 < b.ci_high  # the true difference
    assert b["diff"] == pytest.approx(b["mean"] - b.reference_mean)
    same = row.loc[("all", "evidence_recall", "same")]
    assert (same["diff"], same.ci_low, same.ci_high, same.shown) == (0.0, 0.0, 0.0, False)
    assert same.verdict == "no difference shown"
    other = row.loc[("all", "evidence_recall", "other")]
    assert not other.shown and other.ci_low < 0 < other.ci_high
    # Lower is better for stale_wins: a higher value is "worse".
    worse = row.loc[("all", "stale_wins", "other")]
    assert worse.shown and worse.verdict == "worse" and worse["diff"] > 0
    # Per category, the same pairs on half the probes.
    assert row.loc[("category:a", "evidence_recall", "better")].n == N // 2
    # Seeded: the same intervals again.
    again = diff.differences(probes, metrics=["evidence_recall", "stale_wins"], n_boot=2000)
    pd.testing.assert_frame_equal(table, again)


def test_pairs_use_only_probes_both_strategies_scored() -> None:
    probes = constructed()
    probes.loc[(probes.strategy == "better") & (probes.probe == "q0"), "evidence_recall"] = math.nan
    table = diff.differences(probes, metrics=["evidence_recall"], groups=["all"], n_boot=200)
    assert table.set_index("strategy").loc["better"].n == N - 1
    assert set(table.group) == {"all"}


def test_minimum_detectable_difference_by_hand() -> None:
    probes = constructed()
    mdd = diff.minimum_detectable(probes, metrics=["evidence_recall"]).set_index("group")
    # Pooled within-strategy variance over the four strategies, n = N.
    values = [probes[probes.strategy == s].evidence_recall for s in dict.fromkeys(probes.strategy)]
    pooled = sum(v.var(ddof=1) * (len(v) - 1) for v in values) / sum(len(v) - 1 for v in values)
    expected = (1.959963984540054 + 0.8416212335729143) * math.sqrt(2 * pooled / N)
    assert mdd.loc["all", "mdd"] == pytest.approx(expected)
    assert mdd.loc["all", "n"] == N and mdd.loc["category:a", "n"] == N // 2
    assert mdd.loc["category:a", "mdd"] > mdd.loc["all", "mdd"]  # fewer probes: less power
    assert diff.z(0.975) == pytest.approx(1.959963984540054)


def test_reference_and_metric_choices() -> None:
    probes = constructed()
    assert diff.reference_of(probes, None) == "memory"
    assert diff.reference_of(probes[probes.strategy != "memory"], None) == "better"
    with pytest.raises(MemlabError, match="--reference 'nope' is not in this run"):
        diff.reference_of(probes, "nope")
    assert diff.pick_metrics(probes) == ["evidence_recall", "stale_wins"]
    with pytest.raises(MemlabError, match=r"\['fact_recall'\] are not in this run"):
        diff.pick_metrics(probes, ["fact_recall"])
    # Columns that are not metrics: a text one failed with an internal ValueError.
    for column in ("category", "distance"):
        probes[column] = probes.get(column, 3)
        with pytest.raises(MemlabError, match=rf"\['{column}'\] are columns .* not per-probe"):
            diff.differences(probes, metrics=[column])
    row = {"diff": 0.05, "ci_low": 0.01, "ci_high": 0.09, "shown": True}
    assert diff.interval(row) == "+0.050 [+0.010, +0.090]*"


def test_compare_runs_pairs_the_same_probes() -> None:
    probes = constructed()
    a = probes[probes.strategy.isin(["memory", "other"])]
    b = probes[probes.strategy.isin(["better", "other"])].replace(
        {"strategy": {"better": "memory"}}
    )
    table = diff.compare_runs(a, b, metrics=["evidence_recall"], n_boot=500)
    row = table.set_index(["group", "strategy"])
    assert row.loc[("all", "B:memory")].reference == "A:memory"
    assert row.loc[("all", "B:memory")].shown and row.loc[("all", "B:other")]["diff"] == 0.0
    pairs = diff.compare_runs(a, b, strategies=[("other", "memory")], metrics=["evidence_recall"])
    assert set(pairs.strategy) == {"B:memory"} and set(pairs.reference) == {"A:other"}
    with pytest.raises(MemlabError, match="share no strategy"):
        diff.compare_runs(a, b.replace({"strategy": {"memory": "x", "other": "y"}}))
    with pytest.raises(MemlabError, match="did not answer the same probes"):
        diff.compare_runs(a, b[b.probe != "q3"])
    with pytest.raises(MemlabError, match="strategy pair nope:memory"):
        diff.compare_runs(a, b, strategies=[("nope", "memory")])


# -- the commands ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("diff")
    tdir = write_transcripts(root / "t", range(3), turns=60)

    def one(name: str, *extra: str) -> Path:
        cfg = plan_run(
            ["transcripts=dir", f"transcripts.path={tdir}", "progress=false",
             "report.charts=false", "report.bootstrap=100",
             "strategies=[memory,memory_similarity_only,sliding_window]", *extra]
        ).cfg  # fmt: skip
        experiment.run(cfg, root / name)
        return root / name

    return one("a"), one("b", "budget=120"), tdir


def test_report_shows_differences_against_the_reference(
    runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run_a, _, _ = runs
    assert main(["report", str(run_a), "--bootstrap", "200"]) == 0
    out = capsys.readouterr().out
    assert "Differences against memory" in out and "Minimum detectable difference" in out
    table = pd.read_csv(run_a / "differences.csv")
    assert set(table.reference) == {"memory"} and "sliding_window" in set(table.strategy)
    assert set(table.metric) >= {"fact_recall", "stale_wins"}
    # sliding_window keeps none of the far facts memory keeps: a difference that is real.
    far = table[(table.group == "far") & (table.metric == "fact_recall")].set_index("strategy")
    assert far.loc["sliding_window"].shown and far.loc["sliding_window"].verdict == "worse"
    assert (run_a / "mdd.csv").exists() and (
        run_a / "charts" / "difference_fact_recall.png"
    ).exists()
    md = (run_a / "report.md").read_text()
    assert md.startswith("# How far to trust this run") and "## Differences against `memory`" in md
    args = ["report", str(run_a), "--no-charts", "--reference", "sliding_window",
            "--differences", "fact_recall"]  # fmt: skip
    assert main(args) == 0
    table = pd.read_csv(run_a / "differences.csv")
    assert set(table.reference) == {"sliding_window"} and set(table.metric) == {"fact_recall"}
    assert main(["report", str(run_a), "--reference", "nope"]) == 2
    assert "--reference 'nope' is not in this run" in capsys.readouterr().err


def test_compare_command(
    runs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_a, run_b, tdir = runs
    assert (
        main(["compare", str(run_a), str(run_b), "--bootstrap", "200", "--out", str(tmp_path)]) == 0
    )
    out = capsys.readouterr().out
    assert "Run B against run A" in out and "config key budget: 400 in A, 120 in B" in out
    table = pd.read_csv(tmp_path / "compare.csv")
    assert set(table.strategy) == {"B:memory", "B:memory_similarity_only", "B:sliding_window"}
    sw = table[(table.strategy == "B:sliding_window") & (table.group == "all")]
    assert (sw["diff"] == 0).all()  # the window ignores the budget
    assert (tmp_path / "compare.md").read_text().startswith("# memlab compare")
    assert main(["compare", str(run_a), str(run_b), "--strategies", "memory"]) == 2
    assert "A_NAME:B_NAME" in capsys.readouterr().err
    assert main(["compare", str(run_a), str(tmp_path / "nope")]) == 2
    # Another dataset (same transcripts, another file): refused.
    import json
    import shutil

    other = tmp_path / "t2"
    shutil.copytree(tdir, other)
    first = sorted(other.glob("*.json"))[0]
    first.write_text(json.dumps(json.loads(first.read_text()), indent=3))
    cfg = plan_run(["transcripts=dir", f"transcripts.path={other}", "progress=false",
                    "report.charts=false", "report.bootstrap=0"]).cfg  # fmt: skip
    experiment.run(cfg, tmp_path / "c")
    capsys.readouterr()
    assert main(["compare", str(run_a), str(tmp_path / "c")]) == 2
    assert "read different datasets" in capsys.readouterr().err


def test_compare_and_report_refuse_rows_cut_short(
    runs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder whose probes.csv lost rows (a copy cut short) still has its sealed
    summary: compare paired the rows that were left, and report rebuilt and resealed
    a summary from them, without a sign."""
    import shutil

    run_a, run_b, _ = runs
    cut = tmp_path / "cut"
    shutil.copytree(run_b, cut)
    lines = (cut / "probes.csv").read_text().splitlines(keepends=True)
    (cut / "probes.csv").write_text("".join(lines[: len(lines) // 2]))
    before = (cut / "summary.csv").read_bytes()
    for args in (["compare", str(run_a), str(cut), "--out", str(tmp_path / "o")],
                 ["report", str(cut), "--no-charts"]):  # fmt: skip
        assert main([*args, "--bootstrap", "50"]) == 2
        err = capsys.readouterr().err
        assert "probes.csv is not the one its run wrote" in err and err.count("\n") == 1, err
    assert (cut / "summary.csv").read_bytes() == before


def test_compare_names_a_missing_probes_csv_as_missing(
    runs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder that keeps only its summary (as the gate's baseline does, make
    baseline) is "missing probes.csv", not a damaged one, although its seal names it."""
    import shutil

    run_a, run_b, _ = runs
    summary_only = tmp_path / "baseline"
    shutil.copytree(run_b, summary_only)
    (summary_only / "probes.csv").unlink()
    (summary_only / "probes.parquet").unlink(missing_ok=True)
    assert main(["compare", str(run_a), str(summary_only), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "missing probes.csv" in err and "not the one its run wrote" not in err, err
