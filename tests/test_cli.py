"""The memlab command line."""

from __future__ import annotations

import subprocess
import sys

from memlab.cli import main


def test_demo_runs_and_explains(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "remembered 12 memories for 2 users" in out
    assert "PagerDuty" in out and "weights:" in out


def test_unknown_command_exits_nonzero(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["frobnicate"]) == 2
    assert "unknown command" in capsys.readouterr().err


def test_console_script_prints_errors_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memlab.cli", "frobnicate"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


# -- memlab run / report ------------------------------------------------------------
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tests.conftest import FIXTURES, memlab  # noqa: E402


@pytest.fixture
def tdir(tmp_path: Path) -> Path:
    d = tmp_path / "transcripts"
    d.mkdir()
    shutil.copy(FIXTURES / "handmade.json", d)
    return d


def test_run_writes_tables_and_charts(tmp_path: Path, tdir: Path) -> None:
    out = tmp_path / "run"
    proc = memlab(
        "run",
        "transcripts=dir",
        f"transcripts.path={tdir}",
        f"hydra.run.dir={out}",
        "progress=false",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ["summary.csv", "probes.csv", "turns.csv", "config.yaml"]:
        assert (out / name).exists(), name
    assert {p.name for p in (out / "charts").glob("*.png")} >= {
        "recall_precision.png",
        "prompt_tokens.png",
        "store_growth.png",
        "stale_rate.png",
    }
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns) == [
        "strategy",
        "group",
        "metric",
        "mean",
        "ci_low",
        "ci_high",
        "n",
    ]
    assert set(summary.strategy) >= {
        "stuff_all",
        "sliding_window",
        "memory",
        "memory_similarity_only",
        "memory_no_summarize",
        "memory_no_floor",
        "memory_oracle_salience",
    }
    assert (summary[summary.metric == "leaks"]["mean"] == 0).all()
    assert "results:" in proc.stdout and str(out) in proc.stdout
    # report rebuilds the same summary from the rows
    (out / "summary.csv").unlink()
    rep = memlab("report", str(out), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert pd.read_csv(out / "summary.csv").equals(summary)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("memory.weights.recency=-1", "config key 'memory.weights.recency': must be a number >= 0"),
        ("budget=0", "config key 'budget': must be a positive integer"),
        ("memory.wieghts.recency=1", "config key 'memory.wieghts.recency': it does not exist"),
        ("store=nosuch", "config group 'store' has no option 'nosuch'"),
        ("strategies.memory.memory.weights.usage=-2", "strategies.memory.memory.weights.usage"),
    ],
)
def test_bad_config_is_one_line_error(
    tmp_path: Path, tdir: Path, override: str, message: str
) -> None:
    proc = memlab(
        "run",
        "transcripts=dir",
        f"transcripts.path={tdir}",
        override,
        f"hydra.run.dir={tmp_path / 'x'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_bad_transcripts_path_is_an_error(tmp_path: Path) -> None:
    proc = memlab(
        "run",
        "transcripts=dir",
        f"transcripts.path={tmp_path / 'nope'}",
        f"hydra.run.dir={tmp_path / 'x'}",
        cwd=tmp_path,
    )
    assert (
        proc.returncode == 2 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    )


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


def test_report_on_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    proc = memlab("report", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "no memlab run" in proc.stderr


# --- memlab synth -------------------------------------------------------------


def test_synth_writes_n_transcripts_from_consecutive_seeds(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from memlab.lab.synth import generate
    from memlab.lab.transcripts import dumps, load_dir

    out = tmp_path / "more"
    assert main(["synth", "--n", "3", "--seed", "5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert str(out) in printed and "3 written" in printed
    names = sorted(p.name for p in out.iterdir())
    assert names == ["support-0005.json", "support-0006.json", "support-0007.json"]
    for seed in (5, 6, 7):
        text = (out / f"support-{seed:04d}.json").read_text(encoding="utf-8")
        assert text == dumps(generate(seed))
    assert [t.id for t in load_dir(out)] == ["support-0005", "support-0006", "support-0007"]
    # running it again changes nothing
    assert main(["synth", "--n", "3", "--seed", "5", "--out", str(out)]) == 0
    assert "3 unchanged" in capsys.readouterr().out


def test_synth_refuses_to_overwrite_different_files_without_force(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "t"
    assert main(["synth", "--n", "2", "--seed", "1", "--out", str(out)]) == 0
    mine = out / "support-0002.json"
    mine.write_text('{"mine": true}\n', encoding="utf-8")
    capsys.readouterr()
    assert main(["synth", "--n", "3", "--seed", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "support-0002.json" in err and "--force" in err and "Traceback" not in err
    assert mine.read_text(encoding="utf-8") == '{"mine": true}\n'
    assert not (out / "support-0003.json").exists()
    assert main(["synth", "--n", "3", "--seed", "1", "--out", str(out), "--force"]) == 0
    assert "1 written, 1 replaced, 1 unchanged" in capsys.readouterr().out
    assert mine.read_text(encoding="utf-8") != '{"mine": true}\n'


def test_synth_bad_arguments_are_clean_errors(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    a_file = tmp_path / "file.json"
    a_file.write_text("{}", encoding="utf-8")
    cases = [
        (["--n", "0", "--out", str(tmp_path / "x")], "--n must be a positive integer"),
        (["--n", "ten", "--out", str(tmp_path / "x")], "invalid int value: 'ten'"),
        (["--seed", "-3", "--out", str(tmp_path / "x")], "--seed must be a non-negative"),
        (["--n", "2"], "required: --out"),
        (["--out", str(tmp_path / "x"), "--bogus"], "unrecognized arguments: --bogus"),
        (["--out", str(a_file)], "is not a folder"),
    ]
    for args, message in cases:
        assert main(["synth", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("memlab: error:") and message in err, (args, err)
        assert "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_synth_help_exits_zero(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["synth", "--help"]) == 0
    assert "--force" in capsys.readouterr().out


def test_synth_console_errors_have_no_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [sys.executable, "-m", "memlab.cli", "synth", "--n", "-1", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--n must be a positive integer" in proc.stderr


LATENCY = {"recall_ms", "write_ms", "maintain_ms"}


def test_run_against_an_openai_compatible_server_matches_in_process(tmp_path: Path) -> None:
    """embedder=openai + summarizer=openai against a real local HTTP server give the
    same results as the in-process hash embedder + extractive summarizer."""
    import os

    from tests.fake_openai import FakeOpenAI

    common = [
        "transcripts.limit=3",
        "strategies=[memory,memory_no_summarize]",
        "progress=false",
        "report.charts=false",
    ]
    local = memlab("run", *common, f"hydra.run.dir={tmp_path / 'local'}", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    with FakeOpenAI(api_key="sk-test-123") as server:
        url = server.base_url
        env = {**os.environ, "FAKE_OPENAI_KEY": "sk-test-123"}
        proc = subprocess.run(
            [
                sys.executable, "-m", "memlab.cli", "run", *common,
                "embedder=openai", f"embedder.base_url={server.base_url}", "embedder.model=hash",
                "embedder.dims=384", "embedder.api_key_env=FAKE_OPENAI_KEY",
                "summarizer=openai", f"summarizer.base_url={server.base_url}", "summarizer.model=extractive",
                "summarizer.api_key_env=FAKE_OPENAI_KEY", f"cache.path={tmp_path / 'cache.sqlite'}",
                f"hydra.run.dir={tmp_path / 'remote'}",
            ],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert server.calls("embeddings") and server.calls("chat/completions")
    assert "embedding cache:" in proc.stdout and "summary cache:" in proc.stdout
    a = pd.read_csv(tmp_path / "local" / "summary.csv")
    b = pd.read_csv(tmp_path / "remote" / "summary.csv")
    a, b = (x[~x.metric.isin(LATENCY)].reset_index(drop=True) for x in (a, b))
    pd.testing.assert_frame_equal(a, b)
    assert "sk-test-123" not in (tmp_path / "remote" / "config.yaml").read_text()
    # A second run is served from the cache: the (stopped) server is not needed any more.
    again = subprocess.run(
        [
            sys.executable, "-m", "memlab.cli", "run", *common, "embedder=openai",
            f"embedder.base_url={url}", "embedder.model=hash", "embedder.dims=384",
            "embedder.api_key_env=FAKE_OPENAI_KEY", "embedder.max_retries=0", "summarizer=openai",
            f"summarizer.base_url={url}", "summarizer.model=extractive",
            "summarizer.api_key_env=FAKE_OPENAI_KEY", "summarizer.max_retries=0",
            f"cache.path={tmp_path / 'cache.sqlite'}", f"hydra.run.dir={tmp_path / 'again'}",
        ],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "0 misses" in again.stdout


# -- sweeps: parallel jobs, presets, launchers ------------------------------------------
import yaml  # noqa: E402

from memlab.cli import _compose, plan_run, run_experiment_from_config  # noqa: E402
from memlab.errors import ConfigError  # noqa: E402
from tests.transcript_gen import write_transcripts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_transcripts(tmp_path_factory.mktemp("gen") / "t", range(3), turns=50)


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
    assert main([*args, "budget=100,-5"]) == 2
    assert "config key 'budget': must be a positive integer, got -5" in capsys.readouterr().err
    assert main([*args, "eviction=none,nosuch"]) == 2
    assert "config group 'eviction' has no option 'nosuch'" in capsys.readouterr().err
    assert main(["run", "transcripts=dir", f"transcripts.path={gen}", "budget=1,2"]) == 2
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
    assert main(["report", str(sweep), "--no-charts"]) == 0


def test_sweep_folder_is_never_reused(tmp_path: Path, gen: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "sweep" / "0" / ".hydra").mkdir(parents=True)
    args = ["run", "-m", "transcripts=dir", f"transcripts.path={gen}", "budget=10,20"]
    assert main([*args, f"hydra.sweep.dir={tmp_path / 'sweep'}"]) == 2
    assert "already holds a multirun" in capsys.readouterr().err


def test_store_paths_are_fresh_per_replay(tmp_path: Path, gen: Path) -> None:
    with pytest.raises(ConfigError, match=r"lacks \{run_dir\}"):
        plan_run(["store=sqlite", f"store.path='{tmp_path}/{{strategy}}/{{transcript}}.db'"])
    with pytest.raises(ConfigError, match="cannot parse the overrides"):
        plan_run(["store=sqlite", "store.path={run_dir}/x.db"])
    args = ["store=jsonl", "strategies=[memory]", "transcripts=dir", f"transcripts.path={gen}"]
    cfg = plan_run([*args, "progress=false", "report.charts=false"]).cfg
    run_experiment_from_config(cfg, tmp_path / "run", quiet=True)
    with pytest.raises(ConfigError, match="already exists; a replay needs a fresh store"):
        run_experiment_from_config(cfg, tmp_path / "run", quiet=True)


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


def test_slurm_launcher_config(tmp_path: Path) -> None:
    cfg = _compose(
        ["hydra/launcher=slurm", "hydra.launcher.partition=cpu", f"hydra.sweep.dir={tmp_path}"],
        "config",
        with_hydra=True,
    )
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher") and launcher.partition == "cpu"
    assert (
        launcher.timeout_min == 60 and launcher.cpus_per_task == 2 and launcher.gpus_per_node == 0
    )
    assert launcher.submitit_folder == f"{tmp_path}/.submitit/%j"


@pytest.mark.slow
def test_parallel_jobs_share_the_embedding_cache(tmp_path: Path, gen: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Two jobs in two worker processes fill one model cache; a later run is served
    from it entirely."""
    cache = tmp_path / "cache.sqlite"
    common = [
        "embedder=minilm",
        f"cache.path={cache}",
        "transcripts=dir",
        f"transcripts.path={gen}",
        "transcripts.limit=1",
        "strategies=[memory]",
        "progress=false",
        "report.charts=false",
    ]
    sweep = tmp_path / "sweep"
    first = memlab(
        "run", "-m", *common, "budget=40,80", "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.count("embedding cache:") == 2 and cache.exists()
    assert not list(sweep.glob("*/*.sqlite"))  # the cache is not a per-job file
    run_experiment_from_config(plan_run([*common, "budget=60"]).cfg, tmp_path / "again")
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "embedding cache:" in ln]
    assert len(lines) == 1 and " 0 misses" in lines[0], lines


def test_run_on_pgvector_matches_sqlite_and_drops_its_tables(tmp_path: Path, pg_server) -> None:  # type: ignore[no-untyped-def]
    """`memlab run store=pgvector` gives the same summary as store=sqlite (latency and
    bytes aside) and leaves no replay table behind."""
    import os

    import psycopg

    dsn = pg_server.dsn()
    common = [
        "transcripts.limit=2",
        "strategies=[memory,memory_no_summarize]",
        "progress=false",
        "report.charts=false",
    ]
    sq = memlab("run", *common, "store=sqlite", f"hydra.run.dir={tmp_path / 'sq'}", cwd=tmp_path)
    assert sq.returncode == 0, sq.stderr
    env = {**os.environ, "MEMLAB_PG_DSN": dsn}
    pg = subprocess.run(
        [sys.executable, "-m", "memlab.cli", "run", *common, "store=pgvector", f"hydra.run.dir={tmp_path / 'pg'}"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert pg.returncode == 0, pg.stderr
    skip = {"recall_ms", "write_ms", "maintain_ms", "final_store_bytes"}
    a, b = (pd.read_csv(tmp_path / d / "summary.csv") for d in ("sq", "pg"))
    a, b = (x[~x.metric.isin(skip)].reset_index(drop=True) for x in (a, b))
    pd.testing.assert_frame_equal(a, b)
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname LIKE 'memlab\\_%' AND tablename LIKE 'memory%'"
        ).fetchone()[0]
    assert left == 0
