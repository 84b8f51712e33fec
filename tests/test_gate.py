"""The regression gate: tolerance rules, verdicts, errors, and `memlab gate` end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from memlab.cli import main
from memlab.errors import MemlabError
from memlab.lab import experiment
from memlab.lab.gate import (
    GateRules,
    Margin,
    compare,
    direction,
    load_rules,
    parse_margin,
    to_markdown,
)
from memlab.lab.summary import write_summary
from memlab.lab.sweep import plan_run
from tests.transcript_gen import write_transcripts

ROOT = Path(__file__).resolve().parents[1]


def summary(rows: list[tuple[str, str, str, float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(strategy=s, group=g, metric=m, mean=v, ci_low=lo, ci_high=hi, n=10)
            for s, g, m, v, lo, hi in rows
        ]
    )


BASE = summary(
    [
        ("memory", "all", "fact_recall", 0.80, 0.70, 0.88),
        ("memory", "all", "prompt_tokens", 700.0, 680.0, 730.0),
        ("memory", "all", "leaks", 0.0, 0.0, 0.0),
        ("memory", "all", "recall_ms", 1.0, 0.9, 1.1),
        ("memory", "all", "untrusted_items", 0.5, 0.4, 0.6),
        ("memory", "far", "fact_recall", 0.60, 0.40, 0.80),
    ]
)


def with_values(**changes: float) -> pd.DataFrame:
    run = BASE.copy()
    for key, value in changes.items():
        group, metric = key.split("__")
        run.loc[(run.group == group) & (run.metric == metric), "mean"] = value
    return run


def status(result, group: str, metric: str) -> str:  # type: ignore[no-untyped-def]
    t = result.table
    return str(t[(t.group == group) & (t.metric == metric)]["status"].iloc[0])


def test_directions_come_from_the_metric_registry() -> None:
    assert direction("fact_recall") == 1 and direction("prompt_tokens") == -1
    assert direction("untrusted_items") == 0 and direction("write_ms") == -1
    assert direction("final_store_bytes") == 0 and direction("no_such_metric") == 0


def test_identical_run_passes_and_nothing_moves() -> None:
    result = compare(BASE, BASE.copy(), GateRules())
    assert result.passed and result.moved.empty and not result.missing
    assert "recall_ms" in result.excluded and "recall_ms" not in set(result.table.metric)


def test_tolerance_is_the_wrong_side_half_width_plus_margins() -> None:
    rules = GateRules(margin=Margin(abs=0.0, rel=0.0))
    # fact_recall 0.80, ci_low 0.70: a drop of 0.10 is within, 0.11 is not.
    assert compare(BASE, with_values(all__fact_recall=0.70), rules).passed
    failed = compare(BASE, with_values(all__fact_recall=0.69), rules)
    assert not failed.passed and status(failed, "all", "fact_recall") == "REGRESSED"
    row = failed.table[(failed.table.group == "all") & (failed.table.metric == "fact_recall")]
    assert math.isclose(float(row.tolerance.iloc[0]), 0.10)
    # prompt_tokens: lower is better, wrong side is ci_high - mean = 30 (+ 1% of 700 = 7).
    assert compare(BASE, with_values(all__prompt_tokens=737.0), GateRules()).passed
    worse = compare(BASE, with_values(all__prompt_tokens=738.0), GateRules())
    assert status(worse, "all", "prompt_tokens") == "REGRESSED"
    # Moving the right way is never a failure, however far.
    better = compare(BASE, with_values(all__prompt_tokens=100.0, all__fact_recall=1.0), rules)
    assert better.passed and status(better, "all", "prompt_tokens") == "better"


def test_a_single_leak_fails() -> None:
    result = compare(BASE, with_values(all__leaks=0.01), GateRules())
    assert not result.passed and status(result, "all", "leaks") == "REGRESSED"


def test_per_metric_margin_and_direction_zero() -> None:
    rules = GateRules(per_metric={"prompt_tokens": Margin(rel=0.2)})
    assert compare(BASE, with_values(all__prompt_tokens=800.0), rules).passed
    moved = compare(BASE, with_values(all__untrusted_items=5.0), GateRules())
    assert moved.passed and status(moved, "all", "untrusted_items") == "changed"


def test_latency_is_excluded_unless_asked() -> None:
    slow = with_values(all__recall_ms=50.0)
    assert compare(BASE, slow, GateRules()).passed
    assert not compare(BASE, slow, GateRules(include_latency=True)).passed


def test_missing_metric_is_an_error_not_a_pass() -> None:
    run = BASE[~((BASE.group == "far") & (BASE.metric == "fact_recall"))]
    result = compare(BASE, run, GateRules())
    assert not result.passed and result.missing == ["memory / far / fact_recall"]
    nan = with_values(all__fact_recall=float("nan"))
    assert compare(BASE, nan, GateRules()).missing == ["memory / all / fact_recall"]


def test_groups_and_strategies_filters() -> None:
    run = with_values(far__fact_recall=0.1)
    assert not compare(BASE, run, GateRules()).passed
    assert compare(BASE, run, GateRules(groups=["all"])).passed
    with pytest.raises(MemlabError, match="not in the baseline"):
        compare(BASE, run, GateRules(strategies=["nope"]))


def test_a_misspelt_group_or_nothing_to_gate_is_an_error_not_a_pass() -> None:
    run = with_values(far__fact_recall=0.1)
    with pytest.raises(MemlabError, match=r"groups \['fra'\] are not in the baseline"):
        compare(BASE, run, GateRules(groups=["all", "fra"]))
    everything = tuple(BASE["metric"])
    with pytest.raises(MemlabError, match="no metric of the baseline to compare"):
        compare(BASE, run, GateRules(exclude=everything))
    with pytest.raises(MemlabError, match="no metric of the baseline to compare"):
        compare(BASE.iloc[:0], run, GateRules())


def test_a_misspelt_excluded_or_margined_metric_is_an_error() -> None:
    # Before, exclude=["fact_recal"] gated fact_recall anyway and a margin for
    # "prompt_token" left prompt_tokens at the default margin, both silently.
    run = with_values(far__fact_recall=0.1)
    with pytest.raises(MemlabError, match=r"exclude names metrics \['fact_recal'\]"):
        compare(BASE, run, GateRules(exclude=["fact_recal"]))
    with pytest.raises(MemlabError, match=r"metrics names metrics \['prompt_token'\]"):
        compare(BASE, run, GateRules(per_metric={"prompt_token": Margin(rel=0.5)}))
    assert compare(BASE, run, GateRules(exclude=["fact_recall"])).passed


def test_markdown_lists_regressions_first() -> None:
    result = compare(BASE, with_values(all__fact_recall=0.2, all__prompt_tokens=600.0), GateRules())
    md = to_markdown(result, baseline="b.csv", run="r")
    assert md.startswith("## memlab gate") and "**FAIL: 1 of" in md
    lines = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert "fact_recall" in lines[1] and "REGRESSED" in lines[1] and "better" in lines[2]


def test_margin_specs_and_rules_file(tmp_path: Path) -> None:
    assert parse_margin("prompt_tokens:rel=0.05") == ("prompt_tokens", Margin(rel=0.05))
    assert parse_margin("leaks:abs=0,rel=0") == ("leaks", Margin())
    for bad in ("prompt_tokens", "x:rel=abc", "x:foo=1", ":abs=1", "x:abs=-1"):
        with pytest.raises(MemlabError):
            parse_margin(bad)
    f = tmp_path / "rules.yaml"
    f.write_text(
        "margin: {abs: 0.01, rel: 0}\nmetrics: {prompt_tokens: {rel: 0.1}}\n"
        "exclude: [untrusted_items]\ngroups: [all]\n"
    )
    kw = load_rules(f)
    assert kw["margin"] == Margin(abs=0.01) and kw["groups"] == ["all"]
    assert kw["per_metric"] == {"prompt_tokens": Margin(rel=0.1)}
    f.write_text("margins: {}\n")
    with pytest.raises(MemlabError, match="unknown keys"):
        load_rules(f)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metrics: [prompt_tokens]", "metrics must map metric names to margins"),
        ("exclude: untrusted_items", r"exclude must be a list of names, e.g. exclude: \[unt"),
        ("groups: [1]", "groups must be a list of names"),
        ("include_latency: 'no'", "include_latency must be true or false, got 'no'"),
    ],
)
def test_a_rules_file_of_the_wrong_shape_is_a_clear_error(
    tmp_path: Path, text: str, message: str
) -> None:
    """A list for metrics was an AttributeError (exit 3), a bare string was read letter
    by letter, and include_latency: 'no' turned latency gating on."""
    f = tmp_path / "rules.yaml"
    f.write_text(text + "\n")
    with pytest.raises(MemlabError, match=message):
        load_rules(f)


# -- memlab gate end to end ------------------------------------------------------------
@pytest.fixture(scope="module")
def tdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_transcripts(tmp_path_factory.mktemp("gate") / "t", range(4), turns=60)


def run_into(out: Path, tdir: Path, *extra: str) -> Path:
    cfg = plan_run(
        [
            "transcripts=dir",
            f"transcripts.path={tdir}",
            "strategies=[memory,sliding_window]",
            "budget=60",
            "progress=false",
            "report.charts=false",
            "report.bootstrap=200",
            *extra,
        ]
    ).cfg
    experiment.run(cfg, out)
    return out


@pytest.fixture(scope="module")
def baseline(tdir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_into(tmp_path_factory.mktemp("gate") / "baseline", tdir)


def test_gate_passes_a_rerun(
    tmp_path: Path, tdir: Path, baseline: Path, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    step = tmp_path / "step_summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    run = run_into(tmp_path / "run", tdir, "seed=5", "report.bootstrap=50")  # volatile keys only
    assert main(["gate", "--baseline", str(baseline / "summary.csv"), str(run)]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "no metric moved" in out
    assert (run / "gate.md").read_text().startswith("## memlab gate")
    assert step.read_text().startswith("earlier step\n## memlab gate")
    assert (run / "gate.csv").exists()


def test_gate_fails_a_run_whose_code_ignores_similarity(
    tmp_path: Path, tdir: Path, baseline: Path, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A code change (same config) that stops ranking by similarity fails the gate."""
    import memlab.lab.strategies.memory as kind

    real = kind.RankWeights

    def broken(**kw: float) -> object:
        return real(**{**kw, "similarity": 0.0})

    monkeypatch.setattr(kind, "RankWeights", broken)
    run = run_into(tmp_path / "run", tdir)
    monkeypatch.undo()
    assert main(["gate", "--baseline", str(baseline), str(run)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "REGRESSED" in out
    table = pd.read_csv(run / "gate.csv")
    bad = table[table.status == "REGRESSED"]
    assert ("memory", "all", "fact_recall") in set(
        zip(bad.strategy, bad.group, bad.metric, strict=True)
    )
    assert "sliding_window" not in set(bad.strategy)


def test_gate_compares_deliberately_different_weights_when_allowed(
    tmp_path: Path, tdir: Path, baseline: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    run = run_into(tmp_path / "run", tdir, "memory.weights.similarity=0")
    assert main(["gate", "--baseline", str(baseline), str(run)]) == 2
    err = capsys.readouterr().err
    assert "not the baseline's experiment" in err and "memory.weights.similarity: 0.6" in err
    assert "ERROR: different experiment" in (run / "gate.md").read_text()
    args = ["gate", "--baseline", str(baseline), str(run), "--allow-config", "memory.weights"]
    assert main(args) == 1
    assert "fact_recall" in capsys.readouterr().out


def test_gate_errors_on_other_transcripts(tmp_path: Path, baseline: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    other = write_transcripts(tmp_path / "t", [1, 2, 3, 9], turns=60)
    run = run_into(tmp_path / "run", other)
    assert main(["gate", "--baseline", str(baseline), str(run)]) == 2
    err = capsys.readouterr().err
    assert "transcripts missing from the run: gen-000" in err
    assert "transcripts not in the baseline: gen-009" in err


def test_gate_errors_on_a_missing_metric(
    tmp_path: Path, tdir: Path, baseline: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    run = run_into(tmp_path / "run", tdir)
    s = pd.read_csv(run / "summary.csv")
    write_summary(run, s[s.metric != "stale_rate"])  # as a run that lost the metric would
    assert main(["gate", "--baseline", str(baseline), str(run)]) == 2
    captured = capsys.readouterr()
    assert "missing from the run" in captured.err and "stale_rate" in captured.err
    assert "ERROR" in (run / "gate.md").read_text()


def test_gate_errors_without_fingerprint_or_summary(
    tmp_path: Path, tdir: Path, baseline: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    run = run_into(tmp_path / "run", tdir)
    (run / "fingerprint.json").unlink()
    assert main(["gate", "--baseline", str(baseline), str(run)]) == 2
    assert "has no fingerprint.json" in capsys.readouterr().err
    assert main(["gate", "--baseline", str(tmp_path / "nope.csv"), str(run)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["gate", "--baseline", str(baseline), str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_gate_cannot_compare_a_summary_that_is_not_utf8(
    tmp_path: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in baseline.glob("*.*"):
        (copy / f.name).write_bytes(f.read_bytes())
    (copy / "summary.csv").write_bytes(b"\xff\xfe\x00binary\n")
    for args in ([str(copy), str(baseline)], [str(baseline), str(copy)]):
        assert main(["gate", "--markdown", str(tmp_path / "g.md"), "--baseline", *args]) == 2
        err = capsys.readouterr().err
        assert "is not a summary table (not UTF-8 text" in err and err.count("\n") == 1, err


def test_gate_refuses_a_run_that_did_not_finish(
    tmp_path: Path, tdir: Path, baseline: Path, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """An interrupted run's folder with a summary.csv that is not its result (copied
    from a finished run; a rerun into a run's folder is refused, see
    test_experiment.py): the gate refuses the folder instead of passing it."""
    import shutil

    run = run_into(tmp_path / "run", tdir)
    assert main(["gate", "--baseline", str(baseline), str(run)]) == 0

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(experiment, "run_experiment", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_into(tmp_path / "stopped", tdir)
    monkeypatch.undo()
    stopped = tmp_path / "stopped"
    for name in ("summary.csv", "probes.csv", "turns.csv"):
        shutil.copy(run / name, stopped / name)
    capsys.readouterr()
    assert main(["gate", "--baseline", str(baseline), str(stopped)]) == 2
    assert "holds no finished run" in capsys.readouterr().err


def test_gate_refuses_a_summary_changed_by_hand(
    tmp_path: Path, tdir: Path, baseline: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    run = run_into(tmp_path / "run", tdir)
    s = pd.read_csv(run / "summary.csv")
    s.loc[s.metric == "fact_recall", "mean"] = 1.0  # a "better" run, edited by hand
    s.to_csv(run / "summary.csv", index=False)
    assert main(["gate", "--baseline", str(baseline), str(run)]) == 2
    assert "summary.csv is not the one its run wrote" in capsys.readouterr().err


def test_gate_refuses_a_run_of_another_dataset_file(
    tmp_path: Path, tdir: Path, baseline: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    """Same transcripts (content), another file: the dataset's SHA-256 differs."""
    import shutil

    other = tmp_path / "t"
    shutil.copytree(tdir, other)
    first = sorted(other.glob("*.json"))[0]
    first.write_text(json.dumps(json.loads(first.read_text()), indent=7))  # same content
    run = run_into(tmp_path / "run", other)
    assert main(["gate", "--baseline", str(baseline), str(run)]) == 2
    err = capsys.readouterr().err
    assert "(1 differences): dataset file differs: sha256" in err
    allow = ["--allow-config", "provenance.dataset"]
    assert main(["gate", "--baseline", str(baseline), str(run), *allow]) == 0


def test_gate_refuses_a_run_with_other_errata(
    tmp_path: Path, tdir: Path, baseline: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    first = sorted(tdir.glob("*.json"))[0]
    t = json.loads(first.read_text())
    probe = next(x for x in t["turns"] if "probe" in x and x["probe"].get("evidence"))
    fix = [{"question_id": f"{t['id']}/{probe['id']}", "error_type": "WRONG_CITATION",
            "correct_evidence": [t["turns"][0]["id"]], "reasoning": "one"}]  # fmt: skip
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(fix))
    b.write_text(json.dumps([{**fix[0], "reasoning": "the same fix, other words"}]))
    with_a = run_into(tmp_path / "with_a", tdir, f"transcripts.errata={a}")
    with_b = run_into(tmp_path / "with_b", tdir, f"transcripts.errata={b}")
    # Against the plain baseline: the errata changed the transcripts, and the provenance.
    assert main(["gate", "--baseline", str(baseline), str(with_a)]) == 2
    err = capsys.readouterr().err
    assert "errata file differs: none in the baseline" in err
    assert "transcripts whose content changed" in err
    # Two errata files that change the same probes the same way: still refused.
    assert main(["gate", "--baseline", str(with_a), str(with_b)]) == 2
    assert "errata file differs: sha256" in capsys.readouterr().err
    assert main(["gate", "--baseline", str(with_a), str(with_a)]) == 0


# -- the project's own baseline (results/baseline, created by `make baseline`) -----------
SHIPPED = ROOT / "results" / "baseline"


def _shipped_baseline() -> Path:
    if not (SHIPPED / "summary.csv").exists():
        pytest.skip("results/baseline is absent; `make baseline` creates it from the default run")
    return SHIPPED


def test_shipped_baseline_is_the_current_default_experiment() -> None:
    """The committed baseline was made from today's shipped transcripts and default config
    (otherwise `make gate` errors): regenerate it with `make baseline` when they change."""
    from memlab.lab import fingerprint
    from memlab.lab.datasets import load_source
    from memlab.lab.experiment import effective_config

    base = _shipped_baseline()
    current = fingerprint.fingerprint(load_source("synthetic"), effective_config(plan_run([]).cfg))
    assert fingerprint.differences(fingerprint.load(base, "baseline"), current) == []


@pytest.mark.slow
def test_default_run_passes_the_shipped_baseline(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    base = _shipped_baseline()
    experiment.run(plan_run(["progress=false", "report.charts=false"]).cfg, tmp_path / "run")
    assert main(["gate", "--baseline", str(base / "summary.csv"), str(tmp_path / "run")]) == 0
