"""Tuning: the split, the search space, the constrained objective, the paired gain
and the preset decision (controlled data), and short seeded `memlab tune` runs
(no gain, a real gain, resuming from the storage, the Pareto front)."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from memlab.errors import ConfigError
from memlab.lab.tune import (
    decide,
    gain_table,
    objective,
    paired_gain,
    preset_yaml,
    search_space,
    split_ids,
    trial_values,
)
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


def test_trial_values_rescale_weights_and_preset_nests_keys() -> None:
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
    values = trial_values(params, config_weights)
    assert values["memory.weights.similarity"] == 0.45 and values["memory.weights.usage"] == 0.1
    assert sum(v for k, v in values.items() if k.startswith("memory.weights.")) == pytest.approx(
        1.0
    )
    assert values["memory.half_life.episodic"] == 123.5 and values["budget"] == 640
    assert trial_values(params, None)["memory.weights.similarity"] == 0.9  # no config: as sampled
    zeros = {"memory.weights.similarity": 0.0}
    assert trial_values(zeros, {"similarity": 0.0})["memory.weights.similarity"] == 0.0
    text = preset_yaml(values, groups={"eviction"}, header="tuned\nby a test")
    assert text.startswith("# @package _global_\n# tuned\n# by a test\n")
    data = yaml.safe_load(text)
    assert data["defaults"] == [{"override /eviction": "aggressive"}]
    assert data["memory"]["weights"]["recency"] == 0.15
    assert data["budget"] == 640


def test_search_space_from_config_and_command_line() -> None:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    params = {
        "memory.weights.similarity": "interval(0, 1)",
        "memory.weights.usage": "interval(0, 1)",
    }
    space = search_space(
        [
            "memory.weights.usage=0.05",  # fixes a key of tune.params
            "budget=int(interval(200,800))",
            "memory.half_life.episodic=tag(log, interval(1.0, 100.0))",
            "eviction=choice(default,ttl)",
            "memory.summarize.keep_recent=range(2,12,2)",
            "transcripts=dir",
        ],
        params,
    )
    assert list(space.params) == [
        "memory.weights.similarity",
        "budget",
        "memory.half_life.episodic",
        "eviction",
        "memory.summarize.keep_recent",
    ]
    assert space.fixed == ["memory.weights.usage=0.05", "transcripts=dir"]
    assert space.params["memory.weights.similarity"] == FloatDistribution(0.0, 1.0)
    assert space.params["budget"] == IntDistribution(200, 800)
    assert space.params["memory.half_life.episodic"].log
    assert space.params["eviction"] == CategoricalDistribution(["default", "ttl"])
    assert space.params["memory.summarize.keep_recent"] == IntDistribution(2, 10, step=2)
    assert space.contains("budget", 400) and not space.contains("budget", 900)
    with pytest.raises(ConfigError, match="is empty"):
        search_space(["budget=int(interval(800,200))"], {})
    with pytest.raises(ConfigError, match="not a search range"):
        search_space([], {"budget": "400"})
    with pytest.raises(ConfigError, match="search space is empty"):
        search_space(["memory.weights.usage=0.1"], {"memory.weights.usage": "interval(0,1)"})
    with pytest.raises(ConfigError, match="cannot parse"):
        search_space(["budget=interval(0,"], {})


# -- the paired gain and the preset decision, on controlled data -----------------------
def _probes(
    values: list[float], tokens: float = 100.0, metric: str = "fact_recall"
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "transcript": [f"t{i // 5}" for i in range(len(values))],
            "probe": [f"p{i}" for i in range(len(values))],
            "strategy": "memory",
            "scored": True,
            "far": False,
            "corrected": False,
            "category": "",
            metric: values,
            "prompt_tokens": tokens,
        }
    )


def _gain(default: list[float], tuned: list[float], set_name: str = "held-apart", **kw):  # type: ignore[no-untyped-def]
    return paired_gain(
        _probes(default),
        _probes(tuned, **kw),
        set_name=set_name,
        metric="fact_recall",
        direction=1,
        strategy="memory",
        group="all",
        n_boot=2000,
        seed=0,
    )


def test_paired_gain_is_the_bootstrap_of_per_probe_differences() -> None:
    base = [1.0, 0.0] * 20
    better = [1.0, 1.0] * 20  # every other probe gained a fact
    g = _gain(base, better)
    assert g.gain == pytest.approx(0.5) and g.probes == 40 and g.transcripts == 8
    assert 0 < g.ci_low < 0.5 < g.ci_high and g.beats
    # The same means with one probe changed: an interval that straddles 0.
    one = list(base)
    one[1] = 1.0
    assert not _gain(base, one).beats
    # Lower is better: a drop in stale_rate is a positive gain.
    s = paired_gain(
        _probes(better, metric="stale_rate"),
        _probes(base, metric="stale_rate"),
        set_name="tuning",
        metric="stale_rate",
        direction=-1,
        strategy="memory",
        group="all",
    )
    assert s.gain == pytest.approx(0.5) and s.beats


def test_the_gains_chart_says_how_a_lower_is_better_gain_is_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib.pyplot as plt

    from memlab.lab.tune.report import gains_chart

    base = [0.0, 1.0] * 20
    drop = [0.0, 0.0] * 20  # the tuned config halves stale_rate: a gain of +0.5
    g = paired_gain(
        _probes(base, metric="stale_rate"),
        _probes(drop, metric="stale_rate"),
        set_name="held-apart",
        metric="stale_rate",
        direction=-1,
        strategy="memory",
        group="all",
    )
    assert g.gain == pytest.approx(0.5) and g.tuned < g.default
    labels: list[str] = []
    close = plt.close
    monkeypatch.setattr(
        plt, "close", lambda fig: (labels.append(fig.axes[0].get_ylabel()), close(fig))
    )
    gains_chart({"held-apart": g}, tmp_path / "g.png", "stale_rate of memory")
    assert labels == ["gain in stale_rate (default - tuned, lower is better)"]


def test_decision_writes_a_preset_only_beyond_noise() -> None:
    base = [1.0, 0.0] * 20
    clear = {"tuning": _gain(base, [1.0] * 40, "tuning"), "held-apart": _gain(base, [1.0] * 40)}
    yes = decide(clear)
    assert yes.beats and yes.write and "excludes 0" in yes.line
    # The case: a gain on the tuning set, exactly nothing held apart.
    noise = {
        "tuning": _gain(base, [1.0, 0.0] * 19 + [1.0, 1.0], "tuning"),
        "held-apart": _gain(base, base),
    }
    no = decide(noise)
    assert not no.beats and not no.write and no.line.startswith("no configuration beat the default")
    assert "does not exclude 0" in no.line
    forced = decide(noise, force=True)
    assert forced.write and not forced.beats
    # Beyond noise but over the prompt-token limit on the held-apart set: no preset.
    costly = {"tuning": clear["tuning"], "held-apart": _gain(base, [1.0] * 40, tokens=900.0)}
    assert not decide(costly, max_prompt_tokens=500).write
    assert not decide(clear, same_as_default=True).write
    assert list(gain_table(clear)["set"]) == ["tuning", "held-apart"]


# -- memlab tune end to end ------------------------------------------------------------
@pytest.fixture(scope="module")
def transcripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_transcripts(tmp_path_factory.mktemp("tune") / "t", range(6), turns=50)


def _tune(tdir: Path, out: Path, *extra: str, budget: int = 40) -> subprocess.CompletedProcess[str]:
    args = [
        "transcripts=dir",
        f"transcripts.path={tdir}",
        f"budget={budget}",
        "tune.holdout_ids=[gen-004,gen-005]",
        "progress=false",
        f"tune.out={out}",
        *extra,
    ]
    return memlab("tune", *args, cwd=out.parent, timeout=600)


def test_no_gain_no_preset_and_force_writes_it(transcripts: Path, tmp_path: Path) -> None:
    # usage is the only searched weight; on fresh replays it hardly matters.
    common = ["tune.n_trials=2", "tune.params={}", "memory.weights.usage=interval(0,0.01)"]
    proc = _tune(transcripts, tmp_path / "a", *common)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "a"
    assert "no configuration beat the default beyond noise" in proc.stdout, proc.stdout
    assert not (out / "conf").exists()
    report = pd.read_csv(out / "tune_report.csv").set_index("set")
    assert report.loc["held-apart", "ci_low"] <= 0 <= report.loc["held-apart", "ci_high"]
    md = (out / "tune_report.md").read_text()
    for needle in (
        "maximize fact_recall",
        "trials: 2",
        "seed 0",
        "held apart (2): gen-004, gen-005",
    ):
        assert needle in md, md
    assert md.count("memory.weights.similarity:") == 1  # one set of weights
    # --force writes the preset anyway and says so.
    forced = _tune(transcripts, tmp_path / "b", *common, "--force")
    assert forced.returncode == 0, forced.stderr[-3000:]
    preset = tmp_path / "b" / "conf" / "experiment" / "tuned.yaml"
    assert "written with --force" in preset.read_text()


def test_a_real_gain_writes_a_preset_that_runs(transcripts: Path, tmp_path: Path) -> None:
    # The default here is a budget too small for most facts (a plain value on the
    # command line is the default config); the search may choose a larger one.
    out = tmp_path / "good"
    proc = _tune(
        transcripts,
        out,
        "tune.n_trials=4",
        "tune.params={}",
        "tune.pruner=none",
        "budget=choice(15,400)",
        budget=15,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout
    assert "the tuned config beat the default" in proc.stdout, proc.stdout
    report = pd.read_csv(out / "tune_report.csv").set_index("set")
    assert report.loc["held-apart", "ci_low"] > 0
    preset = out / "conf" / "experiment" / "tuned.yaml"
    assert yaml.safe_load(preset.read_text())["budget"] == 400
    used = tmp_path / "use"
    run = memlab(
        "run",
        "+experiment=tuned",
        f"hydra.searchpath=[file://{out / 'conf'}]",
        "transcripts=dir",
        f"transcripts.path={transcripts}",
        "strategies=[memory]",
        "progress=false",
        "report.charts=false",
        f"hydra.run.dir={used}",
        cwd=tmp_path,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert yaml.safe_load((used / "config.yaml").read_text())["budget"] == 400


def test_the_study_resumes_from_its_storage(transcripts: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    first = _tune(transcripts, out, "tune.n_trials=2")
    assert first.returncode == 0, first.stderr[-3000:]
    trial0 = (out / "trials" / "0" / "trial.json").read_text()
    stamp = (out / "trials" / "0" / "trial.json").stat().st_mtime_ns
    again = _tune(transcripts, out, "tune.n_trials=3")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming: 2 trials already done" in again.stdout
    trials = pd.read_csv(out / "trials.csv")
    assert list(trials["trial"]) == [0, 1, 2] and trials["default"].tolist() == [True, False, False]
    # Trial 0 was not run again; only trial 2 is new.
    assert (out / "trials" / "0" / "trial.json").stat().st_mtime_ns == stamp
    assert (out / "trials" / "0" / "trial.json").read_text() == trial0
    assert len((out / "tune.log").read_text().splitlines()) == 3
    # The same folder with other settings is refused, and nothing changes.
    other = _tune(transcripts, out, "tune.n_trials=4", "tune.metric=precision")
    assert other.returncode == 2 and "tuned with other settings" in other.stderr
    assert "tune.metric" not in other.stderr or "tune" in other.stderr
    assert len(pd.read_csv(out / "trials.csv")) == 3
    # The held-apart transcripts were never replayed by a trial.
    for t in trials["trial"]:
        probes = pd.read_csv(out / "trials" / str(t) / "probes.csv")
        assert not {"gen-004", "gen-005"} & set(probes.transcript)


def test_multi_objective_reports_the_pareto_front(transcripts: Path, tmp_path: Path) -> None:
    out = tmp_path / "mo"
    proc = _tune(
        transcripts,
        out,
        "tune.n_trials=4",
        "tune.multi_objective=true",
        "tune.params={}",
        "budget=int(interval(20,200))",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    front = pd.read_csv(out / "pareto.csv")
    assert not front.empty and front["chosen"].sum() == 1
    assert {"held_value", "held_prompt_tokens", "held_gain_ci_low"} <= set(front.columns)
    assert (out / "pareto.png").stat().st_size > 0
    assert "Pareto front" in (out / "tune_report.md").read_text()


def test_bad_tune_config_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from memlab.cli import main

    tdir = write_transcripts(tmp_path / "t", range(2), turns=30)
    for override, message in [
        ("tune.metric=context_items", "config key 'tune.metric'"),
        ("tune.strategy=stuff_all", "config key 'tune.strategy'"),
        ("tune.holdout_ids=[nope]", "config key 'tune.holdout_ids'"),
        ("tune.holdout_fraction=1.5", "config key 'tune.holdout_fraction'"),
        ("tune.pruner=hyper", "config key 'tune.pruner'"),
        ("tune.workers=0", "config key 'tune.workers'"),
        ("memory.weigths.recency=interval(0,1)", "search key 'memory.weigths.recency'"),
        ("budget=int(interval(9,1))", "search range of 'budget'"),
        ("hydra.sweep.dir=x", "memlab tune runs no Hydra sweep"),
    ]:
        args = ["transcripts=dir", f"transcripts.path={tdir}", override]
        assert main(["tune", *args, f"tune.out={tmp_path / 's'}"]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s").exists()  # nothing ran


def test_a_storage_that_cannot_be_opened_leaves_no_tune_folder(
    transcripts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, tune.out was created, and left empty, before the storage failed."""
    from memlab.cli import main

    out = tmp_path / "tune"
    storage = f"sqlite:///{tmp_path / 'missing' / 'study.db'}"
    args = ["tune", "transcripts=dir", f"transcripts.path={transcripts}",
            f"tune.out={out}", f"tune.storage={storage}", "progress=false"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config key 'tune.storage': cannot open" in err, err
    assert not out.exists()
