"""``memlab tune`` from command line to report: plan, search, evaluate, decide.

1. ``plan``: compose and check the config, the search space and the split, open
   (or resume) the tune folder; nothing runs until everything checks out.
2. ``search``: the Optuna study (``study.optimize``), in this process and in
   ``tune.workers - 1`` more.
3. ``evaluate``: the default config and the best trial's (in multi-objective
   mode: the Pareto trial chosen by ``choose``) on the tuning and the held-apart
   transcripts, and the paired gain intervals (``gain.paired_gain``).
4. ``decide`` and write: the preset only when the held-apart gain excludes 0 (or
   with ``force``), then ``tune_report.md``/``.csv``, ``trials.csv`` and charts.
"""

from __future__ import annotations

import contextlib
import math
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.errors import ConfigError, MemlabError
from memlab.lab.tune.gain import Decision, Gain, decide, paired_gain
from memlab.lab.tune.space import (
    as_overrides,
    fixed_overrides,
    preset_yaml,
    search_space,
    trial_values,
)
from memlab.lab.tune.split import split
from memlab.lab.tune.study import Context, counted, optimize, trials_table

#: keys that may change when a study is resumed (they do not change what a trial measures)
RESUMABLE = ("tune.n_trials", "tune.workers", "tune.out", "tune.storage", "progress")


@dataclass
class Plan:
    """A checked ``memlab tune``: the trial context and what the evaluation needs."""

    context: Context
    cfg: Any  # the default config (composed)
    transcripts: list[Any]
    tuning: list[str]
    holdout: list[str]
    groups: set[str]
    resumed: int  # trials already in the study


def _hydra_keys(args: list[str]) -> None:
    bad = [
        a
        for a in args
        if a.startswith(("hydra.", "hydra/")) and not a.startswith("hydra.searchpath")
    ]
    if bad:
        raise ConfigError(
            f"{bad[0]}: memlab tune runs no Hydra sweep; its folder is tune.out=DIR and its "
            "study tune.storage=URL (only hydra.searchpath is accepted)"
        )


def fingerprint(cfg: Any, ctx_space: Any, tuning: list[str], holdout: list[str]) -> dict[str, Any]:
    """What a resumed study must match: the effective config (less ``RESUMABLE``
    keys), the search space and the split."""
    import json

    from omegaconf import OmegaConf

    from memlab.lab.config import validate

    eff = validate(cfg).config
    plain = OmegaConf.create(json.loads(json.dumps(eff, default=str)))
    for key in RESUMABLE:
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(plain, parent) if parent else plain
        if node is not None and leaf in node:
            del node[leaf]
    top = OmegaConf.to_container(plain)
    assert isinstance(top, dict)
    out = {str(k): json.dumps(v, sort_keys=True, default=str) for k, v in top.items()}
    out["search space"] = json.dumps(ctx_space.spec, sort_keys=True)
    out["split"] = json.dumps([tuning, holdout])
    return out


def plan(args: list[str], *, worker: bool = False) -> Plan:
    """Check a ``memlab tune`` command line and prepare the study.

    Raises:
        ConfigError: a bad key, value, search range or split, or a tune folder
            that holds something else (nothing is written then).
        OutputError: the tune folder cannot be written.
    """
    from omegaconf import OmegaConf

    from memlab.lab.compose import compose
    from memlab.lab.config import conf_dir, validate
    from memlab.lab.experiment import load_transcripts
    from memlab.lab.files import writable_folder

    _hydra_keys(args)
    fixed = fixed_overrides(args)
    full = compose(fixed, "tune", with_hydra=True)
    choices = dict(full.hydra.runtime.choices)
    cfg = compose(fixed, "tune")
    v = validate(cfg)
    tc = v.run.tune
    if tc is None:
        raise ConfigError("config key 'tune': memlab tune needs it (conf/tune.yaml sets it)")
    space = search_space(args, dict(tc.params))
    groups = {k for k in space.params if (conf_dir() / k).is_dir()}
    for key in space.params:
        if key not in groups and OmegaConf.select(cfg, key, default="\x00missing") == "\x00missing":
            raise ConfigError(
                f"search key '{key}' is not a config key (memlab tune --cfg job prints every key)"
            )
    weights = {str(k): float(w) for k, w in OmegaConf.to_container(cfg.memory.weights).items()}  # type: ignore[union-attr]
    warm: dict[str, Any] = {}
    for key in space.params:
        value = choices.get(key) if key in groups else OmegaConf.select(cfg, key)
        if value is not None and space.contains(key, value):
            warm[key] = value
    # The default trial's config must compose and validate: this catches a bad key early.
    validate(compose([*space.fixed, *as_overrides(trial_values(warm, weights))], "tune"))
    transcripts = load_transcripts(v, progress=False if worker else None)
    tuning_ids, holdout = split(transcripts, tc)
    out = (
        Path(tc.out)
        if tc.out
        else Path("results/tune") / datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    )
    storage = tc.storage or f"sqlite:///{(out / 'study.db').resolve()}"
    resumed = 0
    created = not out.exists()
    if not worker:
        writable_folder(out, "tune.out")
        if (
            tc.storage is None
            and out.is_dir()
            and any(out.iterdir())
            and not (out / "study.db").exists()
        ):
            raise ConfigError(
                f"tune.out {out} is a folder that holds no tune (no study.db); choose a new "
                "folder so that nothing in it is overwritten"
            )
        out.mkdir(parents=True, exist_ok=True)
    by_id = {t.id: t for t in transcripts}
    ctx = Context(
        task=list(space.fixed),
        space=space,
        weights=weights,
        tc=tc,
        out=out,
        storage=storage,
        tuning=[by_id[i] for i in tuning_ids],
        warm=warm,
    )
    ctx.fingerprint = fingerprint(cfg, space, tuning_ids, holdout)
    if not worker:
        from memlab.lab.tune.study import open_study

        try:
            resumed = counted(open_study(ctx))
        except BaseException:
            # A storage that cannot be opened (or holds another study) leaves no
            # empty tune folder behind.
            if created:
                with contextlib.suppress(OSError):
                    out.rmdir()
            raise
    return Plan(ctx, cfg, transcripts, tuning_ids, holdout, groups, resumed)


# -- the search ------------------------------------------------------------------------
def search(p: Plan, args: list[str], progress: bool | None = None) -> Any:
    """Run the study's trials in this process and in ``tune.workers - 1`` more.

    Raises:
        MemlabError: a worker process stopped with an error.
    """
    import multiprocessing as mp

    from memlab.lab.tune.study import worker_main
    from memlab.progress import bar

    ctx = p.context
    n = ctx.tc.n_trials
    procs = []
    if ctx.tc.workers > 1:
        spawn = mp.get_context("spawn")
        for i in range(1, ctx.tc.workers):
            proc = spawn.Process(target=worker_main, args=(list(args), i))
            proc.start()
            procs.append(proc)
    shown = bar(total=n, initial=min(p.resumed, n), progress=progress, desc="tune", unit="trial")

    def on_trial(study: Any, ft: Any) -> None:
        shown.n = min(counted(study), n)
        shown.set_postfix_str(f"trial {ft.number} {ft.state.name.lower()}", refresh=True)

    try:
        study = optimize(ctx, on_trial=on_trial)
        for proc in procs:
            proc.join()
    except BaseException:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
        raise
    finally:
        shown.close()
    failed = [i for i, proc in enumerate(procs, 1) if proc.exitcode != 0]
    if failed:
        raise MemlabError(
            f"tune worker(s) {failed} stopped with an error (see {ctx.out / 'tune.log'}); "
            "the study keeps every finished trial: rerun the same command to resume"
        )
    return study


# -- the evaluation --------------------------------------------------------------------
def _finished(study: Any) -> list[Any]:
    from memlab.lab.tune.study import optuna_module

    optuna = optuna_module()
    return list(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))


def choose(study: Any, ctx: Context) -> tuple[Any, list[Any]]:
    """The trial whose config is evaluated (and its Pareto front in multi-objective mode).

    Single objective: the best trial. Multi-objective: among the Pareto trials
    (feasible ones, with ``tune.max_prompt_tokens``), the best in the metric whose
    prompt tokens do not exceed the default trial's; without such a point, the best
    in the metric.

    Raises:
        MemlabError: no trial completed.
    """
    from memlab.lab.metrics import direction

    done = _finished(study)
    if not done:
        raise MemlabError(
            f"no trial completed (see {ctx.out / 'tune.log'}); the study keeps what ran"
        )
    if not ctx.tc.multi_objective:
        return study.best_trial, []
    sign = direction(ctx.tc.metric)
    front = sorted(study.best_trials, key=lambda t: t.values[1])
    if not front:
        raise MemlabError(
            f"no trial is feasible under tune.max_prompt_tokens={ctx.tc.max_prompt_tokens:g}"
        )
    default = next((t for t in done if t.user_attrs.get("default")), None)
    limit = default.values[1] if default is not None else math.inf
    cheap = [t for t in front if t.values[1] <= limit + 1e-9] or front
    return max(cheap, key=lambda t: (sign * t.values[0], -t.values[1])), front


def _run(p: Plan, cfg: Any, name: str, ids: list[str]) -> Any:
    from memlab.lab import experiment

    out = p.context.out / "eval" / name
    if out.exists():  # an earlier finish of this (resumed) tune: derived, recomputed
        shutil.rmtree(out)
    by_id = {t.id: t for t in p.transcripts}
    return experiment.run(
        cfg,
        out,
        transcripts=[by_id[i] for i in ids],
        overrides={"tune": None, "report.charts": False, "progress": False},
    )


def _gain(p: Plan, default: Any, tuned: Any, set_name: str) -> Gain:
    from memlab.lab.metrics import direction

    tc, run = p.context.tc, validate_run(p.cfg)
    return paired_gain(
        default.probes,
        tuned.probes,
        set_name=set_name,
        metric=tc.metric,
        direction=direction(tc.metric),
        strategy=tc.strategy,
        group=tc.group,
        n_boot=max(run.report.bootstrap, 1000),
        seed=run.seed,
        level=tc.level,
    )


def validate_run(cfg: Any) -> Any:
    from memlab.lab.config import validate

    return validate(cfg).run


@dataclass
class Outcome:
    """What ``run`` found and wrote."""

    values: dict[str, Any]
    gains: dict[str, Gain]
    decision: Decision
    trials: pd.DataFrame
    report: Path
    preset: Path | None
    use: str | None
    pareto: pd.DataFrame | None = None
    runs: list[Any] = field(default_factory=list)


def evaluate(p: Plan, study: Any, *, force: bool = False) -> Outcome:
    """Score the default and the chosen trial's config on both sets, decide, write."""
    from memlab.lab.compose import compose
    from memlab.lab.files import atomic_write_text
    from memlab.lab.tune.report import gains_chart, markdown, pareto_chart

    ctx, tc = p.context, p.context.tc
    best, front = choose(study, ctx)
    values = dict(best.user_attrs["values"])
    tuned_cfg = compose([*ctx.task, *as_overrides(values)], "tune")
    runs, gains = [], {}
    held_default = None
    for set_name, ids in (("tuning", p.tuning), ("held-apart", p.holdout)):
        d = _run(p, p.cfg, f"default_{set_name}", ids)
        t = _run(p, tuned_cfg, f"tuned_{set_name}", ids)
        runs += [d, t]
        gains[set_name] = _gain(p, d, t, set_name)
        held_default = d
    same = bool(best.user_attrs.get("default")) or (
        set(ctx.warm) == set(ctx.space.params) and values == trial_values(ctx.warm, ctx.weights)
    )
    decision = decide(
        gains, same_as_default=same, max_prompt_tokens=tc.max_prompt_tokens, force=force
    )
    pareto = None
    if front:
        rows = []
        for ft in front:
            if ft.number == best.number:
                held = gains["held-apart"]
            else:
                cfg = compose([*ctx.task, *as_overrides(ft.user_attrs["values"])], "tune")
                r = _run(p, cfg, f"pareto_{ft.number}_held-apart", p.holdout)
                runs.append(r)
                held = _gain(p, held_default, r, "held-apart")
            rows.append(
                {
                    "trial": ft.number,
                    "chosen": ft.number == best.number,
                    "tuning_value": ft.values[0],
                    "tuning_prompt_tokens": ft.values[1],
                    "held_value": held.tuned,
                    "held_prompt_tokens": held.tuned_tokens,
                    "held_gain": held.gain,
                    "held_gain_ci_low": held.ci_low,
                    "held_gain_ci_high": held.ci_high,
                }
            )
        pareto = pd.DataFrame(rows)
    trials = trials_table(study)
    out = ctx.out
    conf = (out / "conf").resolve()
    preset_file = conf / "experiment" / f"{tc.preset}.yaml"
    use = f"memlab run +experiment={tc.preset} 'hydra.searchpath=[file://{conf}]'"
    header = describe(p, study, trials)
    preset_text = None
    if decision.write:
        lines = [*header, decision.line + ("" if decision.beats else " (written with --force)")]
        preset_text = preset_yaml(values, p.groups, "\n".join(lines))
        atomic_write_text(preset_file, preset_text)
        _check_preset(ctx.task, values, p.groups, tc.preset, conf)
    elif preset_file.exists():
        preset_file.unlink()  # from an earlier finish of this study; no longer justified
    table = pd.DataFrame([vars(g) for g in gains.values()])
    atomic_write_text(out / "tune_report.csv", table.to_csv(index=False))
    atomic_write_text(out / "trials.csv", trials.to_csv(index=False))
    gains_chart(gains, out / "tune_gains.png", f"{tc.metric} of {tc.strategy}: tuned vs default")
    if pareto is not None:
        atomic_write_text(out / "pareto.csv", pareto.to_csv(index=False))
        pareto_chart(trials, pareto, tc.metric, out / "pareto.png")
    report = out / "tune_report.md"
    text = markdown(header, decision, values, gains, trials, preset_text, pareto)
    atomic_write_text(report, text)
    return Outcome(
        values=values,
        gains=gains,
        decision=decision,
        trials=trials,
        report=report,
        preset=preset_file if decision.write else None,
        use=use if decision.write else None,
        pareto=pareto,
        runs=runs,
    )


def describe(p: Plan, study: Any, trials: pd.DataFrame) -> list[str]:
    """The report's header: metric, direction, objective, trials, seed, split, storage."""
    from memlab.lab.metrics import direction

    tc = p.context.tc
    run = validate_run(p.cfg)
    embedder = str(p.cfg.embedder.name)
    sign = direction(tc.metric)
    goal = f"{'maximize' if sign > 0 else 'minimize'} {tc.metric} of strategy {tc.strategy}, probe group {tc.group}"
    if tc.multi_objective:
        goal += ", and minimize mean prompt tokens (multi-objective, Pareto front)"
    if tc.max_prompt_tokens is not None:
        goal += f", mean prompt tokens <= {tc.max_prompt_tokens:g}"
    counts = trials["state"].value_counts().to_dict()
    return [
        f"objective: {goal}",
        f"trials: {len(trials)} ({', '.join(f'{n} {s}' for s, n in counts.items())}); "
        f"sampler TPE, seed {tc.seed}, trial 0 the default config; pruner {p.context.tc.pruner if p.context.pruning else 'none'}; "
        f"workers {tc.workers}",
        f"search space: {', '.join(f'{k}={v}' for k, v in p.context.space.spec.items())}",
        f"tuned on ({len(p.tuning)}): {', '.join(p.tuning)}",
        f"held apart ({len(p.holdout)}): {', '.join(p.holdout)} (split seed {tc.split_seed}; never replayed by a trial)",
        f"embedder: {embedder}, budget {run.budget} tokens",
        f"study: {tc.study} in {p.context.storage}",
    ]


def _check_preset(
    task: list[str], values: dict[str, Any], groups: set[str], name: str, conf: Path
) -> None:
    """The written preset must reproduce the tuned config."""
    from omegaconf import OmegaConf

    from memlab.lab.compose import compose

    if any(o.lstrip("+~").startswith("experiment=") for o in task):
        return
    # A plain value of a searched key on the command line is only the default config's.
    task = [o for o in task if o.partition("=")[0].lstrip("+~") not in values]
    tuned = compose([*task, *as_overrides(values)], "tune")
    via = compose([*task, f"+experiment={name}", f"hydra.searchpath=[file://{conf}]"], "tune")
    for k in values:
        if k not in groups and OmegaConf.select(via, k) != OmegaConf.select(tuned, k):
            raise MemlabError(f"the written preset {conf} does not set {k}; please report")


def run(
    args: list[str], *, force: bool = False, progress: bool | None = None, echo: Any = print
) -> Outcome:
    """``memlab tune``: plan, search, evaluate, decide; ``echo`` prints progress lines."""
    from memlab.lab.metrics import direction
    from memlab.lab.tune.report import gain_lines
    from memlab.lab.tune.study import close_log

    p = plan(args)
    ctx, tc = p.context, p.context.tc
    shown = progress if progress is not None else (None if validate_run(p.cfg).progress else False)
    sign = direction(tc.metric)
    echo(
        f"memlab tune: {'maximize' if sign > 0 else 'minimize'} {tc.metric} of {tc.strategy} "
        f"(group {tc.group}) over {tc.n_trials} trials (seed {tc.seed}), "
        f"embedder {p.cfg.embedder.name}"
        + (" against prompt tokens" if tc.multi_objective else "")
        + (f", mean prompt tokens <= {tc.max_prompt_tokens:g}" if tc.max_prompt_tokens else "")
        + f"\n  tuning set ({len(p.tuning)}): {', '.join(p.tuning)}"
        + f"\n  held apart ({len(p.holdout)}): {', '.join(p.holdout)}"
        + f"\n  folder: {ctx.out}  (study {ctx.storage})"
        + (f"\n  resuming: {p.resumed} trials already done" if p.resumed else "")
    )
    try:
        study = search(p, args, shown)
        outcome = evaluate(p, study, force=force)
    finally:
        close_log()
    counts = outcome.trials["state"].value_counts().to_dict()
    echo(
        f"\ntrials: {', '.join(f'{n} {s}' for s, n in counts.items())} (log: {ctx.out / 'tune.log'})"
    )
    echo(
        f"{tc.metric} of {tc.strategy} (group {tc.group}), default -> tuned, paired gain [{tc.level:.0%} CI]:"
    )
    for line in gain_lines(outcome.gains):
        echo(line)
    echo("\n" + outcome.decision.line)
    label = "the preset" if outcome.preset else "the best trial (no preset written)"
    echo(f"{label}: " + ", ".join(f"{k}={v}" for k, v in outcome.values.items()))
    if outcome.preset is not None:
        echo(f"preset: {outcome.preset}\nuse it: {outcome.use}")
    elif not outcome.decision.beats:
        echo("no preset written (memlab tune --force writes it anyway)")
    echo(f"report: {outcome.report}")
    return outcome
