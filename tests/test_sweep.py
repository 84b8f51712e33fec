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


def test_pareto_front_keeps_every_copy_of_a_front_point() -> None:
    # Two strategies that answer alike (memory and memory_no_floor on the shipped
    # set) give the same point: neither dominates the other, so both are on the
    # front, whatever their order; only the first was before.
    pts = pd.DataFrame({"tokens": [400, 400, 300, 500, 300], "recall": [0.9, 0.9, 0.5, 0.9, 0.4]})
    assert list(pareto_front(pts, "tokens", "recall")) == [True, True, True, False, False]
    flipped = pts.iloc[::-1]
    assert list(pareto_front(flipped, "tokens", "recall")) == [False, False, True, True, True]


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


# -- multiruns end to end (memlab run -m) -------------------------------------------------

import yaml  # noqa: E402

from memlab.lab.sweep import plan_run  # noqa: E402
from tests.conftest import memlab  # noqa: E402


def cli_main(args: list[str]) -> int:
    from memlab.cli import main

    return main(args)


from tests.transcript_gen import write_transcripts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tdir(handmade_dir: Path) -> Path:
    return handmade_dir


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_transcripts(tmp_path_factory.mktemp("gen") / "t", range(3), turns=50)


def test_two_job_multirun_and_report(tmp_path: Path, tdir: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = memlab(
        "run",
        "-m",
        "transcripts=dir",
        f"transcripts.path={tdir}",
        "budget=20,400",
        "strategies=[memory,sliding_window]",
        "progress=false",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (sweep / "0" / "summary.csv").exists() and (sweep / "1" / "summary.csv").exists()
    rep = memlab("report", str(sweep), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    combined = pd.read_csv(sweep / "multirun_summary.csv")
    assert set(combined.job) == {0, 1} and set(combined.budget) == {20, 400}
    tokens = combined[
        (combined.metric == "context_tokens")
        & (combined.group == "all")
        & (combined.strategy == "memory")
    ]
    assert tokens.set_index("budget")["mean"][20] <= 20 < tokens.set_index("budget")["mean"][400]
    assert (sweep / "charts" / "precision_vs_prompt_tokens.png").exists()


def test_four_job_joblib_multirun_and_report(tmp_path: Path, gen: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = memlab(
        "run",
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "transcripts=dir",
        f"transcripts.path={gen}",
        "budget=40,80",
        "memory.half_life.episodic=12,72",
        "strategies=[memory,sliding_window]",
        "progress=false",
        "report.charts=false",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    hydra_cfg = yaml.safe_load((sweep / "0" / ".hydra" / "hydra.yaml").read_text())["hydra"]
    assert hydra_cfg["launcher"]["_target_"].endswith("JoblibLauncher")
    assert hydra_cfg["launcher"]["n_jobs"] == 2
    for job in "0123":
        assert (sweep / job / "fingerprint.json").exists()
    # The multirun ends with the sweep report: one tidy table over all jobs.
    assert "4 jobs, swept budget, memory.half_life.episodic" in proc.stdout
    table = pd.read_csv(sweep / "multirun_summary.csv")
    assert list(table.columns[:3]) == ["job", "budget", "memory.half_life.episodic"]
    assert set(zip(table.budget, table["memory.half_life.episodic"], strict=True)) == {
        (40, 12), (40, 72), (80, 12), (80, 72)
    }  # fmt: skip
    assert not (sweep / "charts").exists()  # report.charts=false
    tokens = table[
        (table.metric == "context_tokens") & (table.group == "all") & (table.strategy == "memory")
    ]
    assert (
        tokens[tokens.budget == 40]["mean"].max() <= 40 < tokens[tokens.budget == 80]["mean"].max()
    )
    rep = memlab(
        "report",
        str(sweep),
        "--heatmap",
        "budget,memory.half_life.episodic",
        "--metric",
        "precision",
        cwd=tmp_path,
    )
    assert rep.returncode == 0, rep.stderr
    names = {p.name for p in (sweep / "charts").glob("*.png")}
    assert "pareto_fact_recall_vs_prompt_tokens.png" in names
    assert "heatmap_precision_budget_x_memory.half_life.episodic_memory.png" in names
    assert "Pareto front (fact_recall vs prompt_tokens)" in rep.stdout


def test_file_stores_in_parallel_jobs(tmp_path: Path, gen: Path) -> None:
    """+experiment=stores runs memory, jsonl and sqlite stores in parallel processes:
    each job writes its own files and all three measure the same recall."""
    sweep = tmp_path / "sweep"
    proc = memlab(
        "run",
        "-m",
        "+experiment=stores",
        "hydra.launcher.n_jobs=2",
        "transcripts=dir",
        f"transcripts.path={gen}",
        "budget=60",
        "progress=false",
        "report.charts=false",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in (sweep / "1" / "stores" / "memory").glob("*.jsonl")) == [
        "gen-000.jsonl", "gen-001.jsonl", "gen-002.jsonl"
    ]  # fmt: skip
    assert len(list((sweep / "2" / "stores" / "memory").glob("*.db"))) == 3
    table = pd.read_csv(sweep / "multirun_summary.csv")
    recall = table[(table.metric == "fact_recall") & (table.group == "all")].set_index("store")[
        "mean"
    ]
    assert recall["memory"] == recall["jsonl"] == recall["sqlite"]


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
)
def test_experiment_presets_compose_and_validate(name: str, gen: Path) -> None:
    plan = plan_run(["-m", f"+experiment={name}", "transcripts=dir", f"transcripts.path={gen}"])
    assert plan.multirun and plan.jobs_checked >= 3
    assert plan.sweep_dir is not None and plan.sweep_dir.name.endswith(name)
    text = (ROOT / "conf" / "experiment" / f"{name}.yaml").read_text()
    assert text.startswith("# @package _global_") and f"memlab run -m +experiment={name}" in text


def test_bad_sweep_value_fails_before_any_job(tmp_path: Path, gen: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    sweep = tmp_path / "sweep"
    args = ["run", "-m", "transcripts=dir", f"transcripts.path={gen}", f"hydra.sweep.dir={sweep}"]
    assert cli_main([*args, "budget=100,-5"]) == 2
    assert "config key 'budget': must be a positive integer, got -5" in capsys.readouterr().err
    assert cli_main([*args, "eviction=none,nosuch"]) == 2
    assert "config group 'eviction' has no option 'nosuch'" in capsys.readouterr().err
    assert cli_main(["run", "transcripts=dir", f"transcripts.path={gen}", "budget=1,2"]) == 2
    assert "budget=1,2 is a sweep; add -m" in capsys.readouterr().err
    assert not sweep.exists()


def test_failed_job_is_named_and_the_others_finish(tmp_path: Path, gen: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = memlab(
        "run",
        "-m",
        "transcripts=dir",
        f"transcripts.path={gen}",
        "transcripts.ids=[gen-000],[nope]",
        "strategies=[sliding_window]",
        "progress=false",
        "report.charts=false",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("memlab: error: job 1 (") and "['nope'] not found" in last
    assert "Traceback" not in proc.stderr and (sweep / "0" / "summary.csv").exists()
    assert cli_main(["report", str(sweep), "--no-charts"]) == 0


def test_sweep_folder_is_never_reused(tmp_path: Path, gen: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "sweep" / "0" / ".hydra").mkdir(parents=True)
    args = ["run", "-m", "transcripts=dir", f"transcripts.path={gen}", "budget=10,20"]
    assert cli_main([*args, f"hydra.sweep.dir={tmp_path / 'sweep'}"]) == 2
    assert "already holds a multirun" in capsys.readouterr().err


def test_submitit_local_launcher_runs_a_sweep(tmp_path: Path, gen: Path) -> None:
    """The cluster launcher's local variant: each job is a separate submitit process."""
    sweep = tmp_path / "sweep"
    proc = memlab(
        "run",
        "-m",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
        "hydra.launcher.cpus_per_task=1",
        "transcripts=dir",
        f"transcripts.path={gen}",
        "budget=40,80",
        "strategies=[memory]",
        "progress=false",
        "report.charts=false",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (sweep / ".submitit").is_dir()
    table = pd.read_csv(sweep / "multirun_summary.csv")
    assert set(table.budget) == {40, 80}
