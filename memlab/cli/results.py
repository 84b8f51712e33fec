"""Commands that read finished runs: report, compare, gate and judge calibrate."""

from __future__ import annotations

import os
from pathlib import Path

from memlab.cli.common import OK, REGRESSED, ArgumentParser, _no_progress, echo, names, target_of
from memlab.errors import InputError


def _check_resampling(command: str, bootstrap: int | None, seed: int | None) -> None:
    """The run config's checks of ``report.bootstrap`` and ``seed``, for the flags
    (None: not given, nothing to check).

    Raises:
        InputError: before anything is read or written.
    """
    from memlab.lab.metrics import bootstrap_problem, seed_problem

    for flag, problem in (
        ("--bootstrap", None if bootstrap is None else bootstrap_problem(bootstrap)),
        ("--seed", None if seed is None else seed_problem(seed)),
    ):
        if problem is not None:
            raise InputError(f"{command}: {flag} {problem}")


# -- report ---------------------------------------------------------------------------
def report(args: list[str]) -> int:
    """``memlab report DIR``: rebuild tables and charts from a run or multirun folder."""
    from memlab.lab.report import rebuild

    parser = ArgumentParser(prog="memlab report", description=report.__doc__)
    parser.add_argument("dir", type=Path, help="a run folder (results/runs/...) or multirun folder")
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=None,
        help="resamples (default: the run's report.bootstrap)",
    )
    parser.add_argument("--seed", type=int, default=None, help="default: the run's seed")
    parser.add_argument("--no-charts", action="store_true")
    parser.add_argument(
        "--heatmap",
        metavar="KEY1,KEY2",
        help="draw METRIC over two swept keys (default: the two keys when exactly two were swept)",
    )
    parser.add_argument(
        "--metric", help="the heatmap's metric (default: fact_recall, else evidence_recall)"
    )
    parser.add_argument(
        "--strategy", help="the heatmap's strategy (default: the only one, else memory)"
    )
    parser.add_argument(
        "--reference",
        metavar="STRATEGY",
        help="a run folder's differences are each strategy minus this one, on the same probes "
        "(default: memory, else the first strategy)",
    )
    parser.add_argument(
        "--differences",
        metavar="METRIC[,METRIC]",
        help="the metrics to compare (default: the run's of fact_recall, evidence_recall, "
        "answer_accuracy, stale_wins, haystack_session_recall_all@5, haystack_turn_ndcg@10, "
        "abstention_proxy)",
    )
    ns = parser.parse_args(args)
    _check_resampling("report", ns.bootstrap, ns.seed)
    if not ns.dir.is_dir():
        raise InputError(f"{ns.dir} is not a folder; pass a run or multirun folder")
    heatmap = None
    if ns.heatmap is not None:
        keys = [k.strip() for k in ns.heatmap.split(",") if k.strip()]
        if len(keys) != 2:
            raise InputError(f"--heatmap takes two swept keys, KEY1,KEY2; got {ns.heatmap!r}")
        heatmap = (keys[0], keys[1])
    for line in rebuild(
        ns.dir,
        n_boot=ns.bootstrap,
        seed=ns.seed,
        draw=not ns.no_charts,
        heatmap=heatmap,
        metric=ns.metric,
        strategy=ns.strategy,
        reference=ns.reference,
        differences=names(ns.differences),
    ):
        echo(line)
    return OK


def compare(args: list[str]) -> int:
    """``memlab compare RUN_A RUN_B``: run B against run A on the same probes: the
    paired bootstrap interval of each difference, per strategy, group and metric."""
    from memlab.lab import run_report

    parser = ArgumentParser(prog="memlab compare", description=compare.__doc__)
    parser.add_argument("run_a", type=Path, help="the run compared against (A)")
    parser.add_argument("run_b", type=Path, help="the run compared (B); differences are B - A")
    parser.add_argument(
        "--strategies",
        metavar="A_NAME:B_NAME[,...]",
        help="strategy pairs to compare (default: every strategy both runs have, with itself)",
    )
    parser.add_argument("--metrics", metavar="METRIC[,METRIC]", help="as report --differences")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-charts", action="store_true")
    parser.add_argument("--out", type=Path, help="where to write compare.md (default: RUN_B)")
    ns = parser.parse_args(args)
    _check_resampling("compare", ns.bootstrap, ns.seed)
    pairs = None
    if ns.strategies:
        pairs = []
        for item in names(ns.strategies) or []:
            a, sep, b = item.partition(":")
            if not sep or not a or not b:
                raise InputError(f"compare: --strategies takes A_NAME:B_NAME pairs, got {item!r}")
            pairs.append((a, b))
    for folder in (ns.run_a, ns.run_b):
        if not folder.is_dir():
            raise InputError(f"compare: {folder} is not a folder; pass two run folders")
    found = run_report.compare(
        ns.run_a,
        ns.run_b,
        strategies=pairs,
        metrics=names(ns.metrics),
        n_boot=ns.bootstrap,
        seed=ns.seed,
        draw=not ns.no_charts,
        out=ns.out,
    )
    for line in run_report.to_text(found.sections):
        echo(line)
    echo(f"\nwritten: {', '.join(str(p) for p in found.written)}")
    return OK


# -- gate -----------------------------------------------------------------------------------
def gate(args: list[str]) -> int:
    """``memlab gate --baseline BASELINE RUN_DIR``: fail (exit 1) when a metric of the
    run moved the wrong way beyond its tolerance; exit 2 when the run cannot be
    compared (missing metric, different transcripts or config, an unfinished run)."""
    from memlab.lab import gate as gating

    parser = ArgumentParser(prog="memlab gate", description=gate.__doc__)
    parser.add_argument("run", type=Path, help="the run folder to check")
    parser.add_argument(
        "--baseline", type=Path, required=True, help="baseline summary.csv (or its run folder)"
    )
    parser.add_argument("--rules", type=Path, help="YAML file of margins and filters")
    parser.add_argument("--margin-abs", type=float, help="absolute margin (default 0)")
    parser.add_argument("--margin-rel", type=float, help="margin relative to |baseline| (0.01)")
    parser.add_argument(
        "--margin",
        action="append",
        default=[],
        metavar="METRIC:abs=X,rel=Y",
        help="margin of one metric (repeatable)",
    )
    parser.add_argument("--include-latency", action="store_true", help="also gate *_ms metrics")
    parser.add_argument("--exclude", action="append", default=[], metavar="METRIC")
    parser.add_argument("--groups", help="comma-separated groups to gate (default: all of them)")
    parser.add_argument("--strategies", help="comma-separated strategies (default: all)")
    parser.add_argument(
        "--allow-config",
        action="append",
        default=[],
        metavar="KEY",
        help="accept a config difference under KEY (e.g. memory.weights) to compare settings",
    )
    parser.add_argument("--markdown", type=Path, help="where to write the report (RUN/gate.md)")
    ns = parser.parse_args(args)

    gate_rules = gating.rules(
        file=ns.rules,
        margin_abs=ns.margin_abs,
        margin_rel=ns.margin_rel,
        margins=ns.margin,
        include_latency=ns.include_latency,
        exclude=ns.exclude,
        groups=names(ns.groups),
        strategies=names(ns.strategies),
    )
    outcome = gating.evaluate(ns.baseline, ns.run, gate_rules, allow_config=ns.allow_config)
    if outcome.text:
        echo(outcome.text)
    md = outcome.publish(ns.markdown, os.environ.get("GITHUB_STEP_SUMMARY"))
    if outcome.result is not None:
        echo(f"\nreport: {md}")
    if outcome.error is not None:
        raise outcome.error
    return OK if outcome.passed else REGRESSED


# -- judge calibration -----------------------------------------------------------------------
JUDGE_USAGE = """usage: memlab judge calibrate [options] [judge=NAME judge.KEY=VALUE ... cache.KEY=VALUE]

targets:
  calibrate   grade the gold answers (should be accepted) and two sets of known-wrong
              answers (specific but wrong, vague but topical: should be rejected) with a
              judge; acceptance rates with 95% intervals per category
              (memlab judge calibrate --help lists the options)"""


def judge(args: list[str]) -> int:
    """``memlab judge calibrate``: a judge's true-accept and false-accept rates."""
    if target_of("judge", args, JUDGE_USAGE, ("calibrate",)) is None:
        return OK
    import time as clock

    from memlab.lab import calibration
    from memlab.lab.experiment import calibration_judge
    from memlab.lab.files import writable_folder
    from memlab.lab.fingerprint import file_sha256
    from memlab.lab.judges import provenance

    parser = ArgumentParser(
        prog="memlab judge calibrate",
        description="Grade the gold answers and two known-wrong answer sets of the public "
        "LoCoMo audit with a judge (the judge config group: judge=llm judge.prompt=locomo "
        "judge.model=... ; default judge=exact), and report how often it accepts each, per "
        "category, with Wilson 95% intervals.",
    )
    parser.add_argument("--audit", type=Path, help="a folder holding the audit's "
                        "wrong_answers_v1*.json (specific) and wrong_answers_v2*.json (vague)")  # fmt: skip
    parser.add_argument("--specific", type=Path, help="the specific-but-wrong answers file")
    parser.add_argument("--vague", type=Path, help="the vague-but-topical answers file")
    parser.add_argument("--out", type=Path, help="output folder (results/calibration/<time>)")
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="accept an answer whose score is at least this (0.5)")  # fmt: skip
    parser.add_argument("--limit", type=int, help="only the first N questions of each file")
    parser.add_argument("--concurrency", type=int, default=16, help="judge calls in flight")
    parser.add_argument("--max-cost", type=float, help="stop making judge calls past USD")
    _no_progress(parser)
    ns, rest = parser.parse_known_args(args[1:])
    flags = [a for a in rest if a.startswith("-")]
    if flags:
        raise InputError(f"judge calibrate: unknown options {flags} (see --help)")
    if ns.audit is not None:
        files = calibration.find_audit(ns.audit)
    elif ns.specific is not None and ns.vague is not None:
        files = {"specific": ns.specific, "vague": ns.vague}
    else:
        raise InputError(
            "judge calibrate: pass --audit DIR, or --specific FILE and --vague FILE "
            "(the public LoCoMo audit's wrong_answers_v1 / v2 files)"
        )
    if ns.limit is not None and ns.limit < 1:
        raise InputError(f"judge calibrate: --limit must be >= 1, got {ns.limit}")
    if ns.max_cost is not None and not ns.max_cost > 0:
        raise InputError(f"judge calibrate: --max-cost must be > 0, got {ns.max_cost}")
    calibration.check_threshold(ns.threshold)
    out = ns.out or Path("results/calibration") / clock.strftime("%Y-%m-%d_%H-%M-%S")
    # Checked now, not when the files are written: a model judge's calls cost money.
    writable_folder(out, "--out")
    items = calibration.load_answers(files["specific"], files["vague"])
    if ns.limit is not None:
        keep = list(dict.fromkeys(i.question_id for i in items))[: ns.limit]
        items = [i for i in items if i.question_id in set(keep)]
    grader = calibration_judge(rest)
    try:
        grader.check()
        graded = calibration.grade(
            grader,
            items,
            threshold=ns.threshold,
            concurrency=ns.concurrency,
            max_usd=ns.max_cost,
            progress=False if ns.no_progress else None,
        )
        identity = provenance(grader)
    finally:
        grader.close()
    summary = calibration.summarize(graded)
    origin = {
        "judge": identity,
        "threshold": ns.threshold,
        "answers": {k: {"file": str(v), "sha256": file_sha256(Path(v))} for k, v in files.items()},
    }
    written = calibration.write(out, graded, summary, origin)
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        echo(f"judge {identity['name']}: {len(items):,} answers graded")
        echo(calibration.headline(summary).to_string(index=False))
        by = summary.pivot_table(index="category", columns="set", values="accept_rate", sort=False)
        echo("\nacceptance rate by category:\n" + by.to_string(float_format="{:.1%}".format))
    skipped = int(graded["verdict"].eq("not graded (max cost)").sum())
    if skipped:
        echo(f"\nINCOMPLETE: --max-cost stopped the grading; {skipped:,} answers were not graded")
    echo(f"\nwritten: {', '.join(str(p) for p in written)}")
    return OK
