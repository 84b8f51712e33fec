"""Tuning: the split, the constrained objective, the preset, and a short seeded `memlab tune`."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from memlab.errors import ConfigError
from memlab.lab.tune import best_overrides, gain_table, objective, preset_yaml, split_ids
from tests.conftest import memlab
from tests.transcript_gen import write_transcripts

IDS = [f"t{i:02d}" for i in range(10)]


def test_split_is_seeded_disjoint_and_order_free() -> None:
    tune, hold = split_ids(IDS, holdout_fraction=0.3, seed=1)
    assert len(hold) == 3 and len(tune) == 7 and not set(tune) & set(hold)
    assert set(tune) | set(hold) == set(IDS)
    assert split_ids(list(reversed(IDS)), holdout_fraction=0.3, seed=1)[1] == list(reversed(hold))
    assert split_ids(IDS, holdout_fraction=0.3, seed=2)[1] != hold
    # Tiny sets still keep one transcript on each side.
    assert split_ids(["a", "b"], holdout_fraction=0.01) in ((["a"], ["b"]), (["b"], ["a"]))


def test_explicit_ids() -> None:
    assert split_ids(IDS, holdout_ids=["t03"]) == ([i for i in IDS if i != "t03"], ["t03"])
    assert split_ids(IDS, tuning_ids=["t01", "t02"]) == (
        ["t01", "t02"],
        [i for i in IDS if i not in ("t01", "t02")],
    )
    assert split_ids(IDS, tuning_ids=["t01"], holdout_ids=["t09"]) == (["t01"], ["t09"])
    with pytest.raises(ConfigError, match="share"):
        split_ids(IDS, tuning_ids=["t01", "t02"], holdout_ids=["t02"])
    with pytest.raises(ConfigError, match="not among the transcripts"):
        split_ids(IDS, holdout_ids=["zz"])
    with pytest.raises(ConfigError, match="at least 2 transcripts"):
        split_ids(["only"])
    with pytest.raises(ConfigError, match="held-apart set is empty"):
        split_ids(IDS, tuning_ids=IDS)


def test_objective_penalizes_infeasible_trials() -> None:
    assert objective(0.8, 500, direction=1, max_prompt_tokens=None) == 0.8
    assert objective(0.8, 500, direction=1, max_prompt_tokens=600) == 0.8
    over = objective(0.9, 660, direction=1, max_prompt_tokens=600)
    assert math.isclose(over, 0.9 - 1.1) and over < objective(
        0.0, 600, direction=1, max_prompt_tokens=600
    )
    assert objective(0.2, 10, direction=-1, max_prompt_tokens=None) == -0.2
    assert objective(float("nan"), 10, direction=1, max_prompt_tokens=None) == -math.inf


def test_best_overrides_normalizes_weights_and_preset_nests_keys() -> None:
    params = {
        "memory.weights.similarity": 0.9,
        "memory.weights.recency": 0.3,
        "memory.weights.salience": 0.6,
        "memory.half_life.episodic": 123.456789,
        "budget": 640,
        "eviction": "aggressive",
    }
    # usage is not tuned: it keeps its config value and is rescaled with the rest.
    config_weights = {"similarity": 0.6, "recency": 0.15, "salience": 0.2, "usage": 0.2}
    values = best_overrides(params, config_weights)
    assert values["memory.weights.similarity"] == 0.45 and values["memory.weights.usage"] == 0.1
    assert sum(v for k, v in values.items() if k.startswith("memory.weights.")) == pytest.approx(
        1.0
    )
    assert values["memory.half_life.episodic"] == 123.5 and values["budget"] == 640
    assert best_overrides(params)["memory.weights.similarity"] == 0.9  # no config: as tuned
    text = preset_yaml(values, groups={"eviction"}, header="tuned\nby a test")
    assert text.startswith("# @package _global_\n# tuned\n# by a test\n")
    data = yaml.safe_load(text)
    assert data["defaults"] == [{"override /eviction": "aggressive"}]
    assert data["memory"]["weights"]["recency"] == 0.15
    assert data["budget"] == 640


def test_gain_table() -> None:
    rows = [
        dict(
            set=s,
            config=c,
            transcripts=n,
            value=v,
            ci_low=v - 0.1,
            ci_high=v + 0.1,
            prompt_tokens=100.0,
        )
        for s, n, c, v in [
            ("tuning", 7, "default", 0.5),
            ("tuning", 7, "tuned", 0.6),
            ("held-apart", 3, "default", 0.4),
            ("held-apart", 3, "tuned", 0.5),
        ]
    ]
    t = gain_table(rows, "fact_recall").set_index("set")
    assert t.loc["tuning", "gain"] == pytest.approx(0.1)
    assert t.loc["held-apart", "gain_relative"] == pytest.approx(0.25)


# -- memlab tune end to end ------------------------------------------------------------
@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two short seeded tuning runs on the same transcripts: one in memory, one with
    an SQLite study (optuna's database storage)."""
    root = tmp_path_factory.mktemp("tune")
    tdir = write_transcripts(root / "t", range(5), turns=50)
    common = [
        "transcripts=dir",
        f"transcripts.path={tdir}",
        "budget=40",
        "tune.n_trials=4",
        "tune.holdout_ids=[gen-004]",
        "tune.max_prompt_tokens=200",
        "progress=false",
    ]
    a, b = root / "a", root / "b"
    for sweep, extra in ((a, []), (b, [f"hydra.sweeper.storage=sqlite:///{root}/study.db"])):
        proc = memlab("tune", *common, *extra, f"hydra.sweep.dir={sweep}", cwd=root, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "default vs tuned" in proc.stdout, proc.stdout
    return root, a, b


def test_tuning_is_seeded_and_reports_both_sets(tuned: tuple[Path, Path, Path]) -> None:
    _root, a, b = tuned
    best_a = yaml.safe_load((a / "optimization_results.yaml").read_text())
    best_b = yaml.safe_load((b / "optimization_results.yaml").read_text())
    assert best_a["best_params"] == best_b["best_params"]
    assert best_a["best_value"] == best_b["best_value"]
    trials = sorted(p.name for p in a.iterdir() if p.is_dir() and p.name.isdigit())
    assert trials == ["0", "1", "2", "3"]
    # Trial 0 is the default config (warm start), so tuning never loses on the tuning set.
    first = yaml.safe_load((a / "0" / ".hydra" / "overrides.yaml").read_text())
    assert "memory.weights.similarity=0.6" in first and "memory.half_life.episodic=72.0" in first
    report = pd.read_csv(a / "tune_report.csv").set_index("set")
    assert list(report.index) == ["tuning", "held-apart"]
    assert report.loc["tuning", "transcripts"] == 4 and report.loc["held-apart", "transcripts"] == 1
    assert report.loc["tuning", "gain"] >= -1e-9
    # The held-apart transcript was never replayed by a trial.
    for t in trials:
        probes = pd.read_csv(a / t / "probes.csv")
        assert "gen-004" not in set(probes.transcript)
    assert set(pd.read_csv(a / "eval" / "tuned_held-apart" / "probes.csv").transcript) == {
        "gen-004"
    }
    assert (
        "tuning set" in (a / "tune_report.md").read_text()
        or "Tuned on" in (a / "tune_report.md").read_text()
    )
    assert (a / "multirun_summary.csv").exists()


def test_the_preset_runs_as_an_experiment(tuned: tuple[Path, Path, Path]) -> None:
    root, a, _ = tuned
    preset = a / "conf" / "experiment" / "tuned.yaml"
    text = preset.read_text()
    assert text.startswith("# @package _global_")
    values = yaml.safe_load(text)["memory"]
    out = root / "use"
    proc = memlab(
        "run",
        "+experiment=tuned",
        f"hydra.searchpath=[file://{a / 'conf'}]",
        "transcripts=dir",
        f"transcripts.path={root / 't'}",
        "strategies=[memory]",
        "progress=false",
        "report.charts=false",
        f"hydra.run.dir={out}",
        cwd=root,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    used = yaml.safe_load((out / "config.yaml").read_text())["memory"]
    assert used["weights"] == pytest.approx(values["weights"])
    assert used["half_life"]["episodic"] == pytest.approx(values["half_life"]["episodic"])


def test_bad_tune_config_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from memlab.cli import main

    tdir = write_transcripts(tmp_path / "t", range(2), turns=30)
    for override, message in [
        ("tune.metric=context_items", "config key 'tune.metric'"),
        ("tune.strategy=stuff_all", "config key 'tune.strategy'"),
        ("tune.holdout_ids=[nope]", "config key 'tune.holdout_ids'"),
        ("tune.holdout_fraction=1.5", "config key 'tune.holdout_fraction'"),
    ]:
        args = ["transcripts=dir", f"transcripts.path={tdir}", override]
        assert main(["tune", *args, f"hydra.sweep.dir={tmp_path / 's'}"]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s").exists()  # nothing ran
