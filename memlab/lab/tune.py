"""Tuning: the tuning/held-apart split, the constrained objective, one trial, and
the finish (the best config as a preset, scored next to the default on both sets).

``memlab tune`` drives Hydra's Optuna sweeper; each trial (``run_trial``)
replays the tuning transcripts and returns ``objective(...)``; ``finish`` writes
the preset and ``tune_report.csv``/``.md``.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.errors import ConfigError, MemlabError

WEIGHTS = "memory.weights."


def split_ids(
    ids: Sequence[str],
    *,
    holdout_fraction: float = 0.3,
    seed: int = 0,
    tuning_ids: Sequence[str] | None = None,
    holdout_ids: Sequence[str] | None = None,
) -> tuple[list[str], list[str]]:
    """Split transcript ids into a tuning set and a held-apart set.

    With explicit ``tuning_ids`` and/or ``holdout_ids`` those are used (a side
    not given is every other id). Otherwise the ids are sorted, shuffled with
    ``random.Random(seed)`` and ``round(n * holdout_fraction)`` of them (at
    least 1, at most n - 1) are held apart, so the split depends only on the
    set of ids and the seed.

    Returns:
        (tuning ids, held-apart ids), each in the order of ``ids``.

    Raises:
        ConfigError: fewer than 2 transcripts, unknown or overlapping ids, an empty side.
    """
    known = list(dict.fromkeys(ids))
    if len(known) < 2:
        raise ConfigError(
            f"tuning needs at least 2 transcripts (one to tune on, one held apart); got {len(known)}"
        )
    for key, given in (("tune.tuning_ids", tuning_ids), ("tune.holdout_ids", holdout_ids)):
        unknown = [i for i in given or [] if i not in known]
        if unknown:
            raise ConfigError(f"config key '{key}': {unknown} are not among the transcripts")
    if tuning_ids is not None or holdout_ids is not None:
        hold = set(holdout_ids or [i for i in known if i not in set(tuning_ids or [])])
        tune = set(tuning_ids or [i for i in known if i not in hold])
        both = sorted(hold & tune)
        if both:
            raise ConfigError(
                f"config keys 'tune.tuning_ids' and 'tune.holdout_ids' share {both}; "
                "a held-apart transcript must never be tuned on"
            )
    else:
        if not 0 < holdout_fraction < 1:
            raise ConfigError(
                f"config key 'tune.holdout_fraction': must be in (0, 1), got {holdout_fraction}"
            )
        order = sorted(known)
        random.Random(seed).shuffle(order)
        k = min(len(order) - 1, max(1, round(len(order) * holdout_fraction)))
        hold = set(order[:k])
        tune = set(order[k:])
    if not tune or not hold:
        side = "tuning" if not tune else "held-apart"
        raise ConfigError(f"the {side} set is empty; give tune.tuning_ids and tune.holdout_ids")
    return [i for i in known if i in tune], [i for i in known if i in hold]


def objective(
    value: float,
    prompt_tokens: float,
    *,
    direction: int,
    max_prompt_tokens: float | None,
    penalty: float = 1.0,
) -> float:
    """The number a trial returns to the (maximizing) sweeper.

    Formula: ``s = direction * value``; when ``max_prompt_tokens`` is set and the
    mean prompt tokens exceed it, the trial is infeasible and scores
    ``s - penalty * (1 + excess / max_prompt_tokens)``, so with the default
    penalty 1 an infeasible trial ranks below every feasible one for metrics in
    0..1. A NaN value (nothing scored) gives -inf.
    """
    if math.isnan(value):
        return -math.inf
    s = direction * value
    if max_prompt_tokens is not None and prompt_tokens > max_prompt_tokens:
        s -= penalty * (1.0 + (prompt_tokens - max_prompt_tokens) / max_prompt_tokens)
    return float(s)


def _round(v: float, digits: int = 4) -> float:
    if v == 0 or not math.isfinite(v):
        return float(v)
    return float(round(v, max(0, digits - 1 - math.floor(math.log10(abs(v))))))


def best_overrides(
    params: Mapping[str, Any], weights: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The best trial's parameters as the values a preset writes.

    Numbers are rounded to 4 significant digits (integers stay integers). When
    ranking weights were tuned and ``weights`` (the config's own weights, by
    signal name) is given, the whole weight vector, tuned and fixed weights
    alike, is rescaled to sum to 1 and written: scaling every weight by one
    factor never changes a ranking. The written preset is what is evaluated, so
    the reported scores are the preset's own.
    """
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, float):
            out[k] = _round(v)
        else:
            out[k] = v
    if weights is not None and any(k.startswith(WEIGHTS) for k in params):
        full = {f"{WEIGHTS}{name}": float(w) for name, w in weights.items()}
        full.update({k: float(v) for k, v in params.items() if k.startswith(WEIGHTS)})
        total = sum(full.values())
        if total > 0:
            for k in list(out):
                if k.startswith(WEIGHTS):
                    del out[k]
            out.update({k: round(v / total, 4) for k, v in full.items()})
    return out


def preset_yaml(values: Mapping[str, Any], groups: Collection[str] = (), header: str = "") -> str:
    """An experiment preset (``# @package _global_``) that sets ``values``.

    Dotted keys become nested mappings; keys naming a config group (``groups``,
    e.g. ``eviction``) become ``override /group: option`` entries of the
    defaults list.
    """
    import yaml

    tree: dict[str, Any] = {}
    defaults = []
    for key, value in values.items():
        if key in groups:
            defaults.append({f"override /{key}": value})
            continue
        node = tree
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    body: dict[str, Any] = {}
    if defaults:
        body["defaults"] = defaults
    body.update(tree)
    lines = ["# @package _global_"] + [f"# {h}" if h else "#" for h in header.splitlines()]
    return "\n".join(lines) + "\n" + yaml.safe_dump(body, sort_keys=False)


def gain_table(rows: Sequence[Mapping[str, Any]], metric: str) -> pd.DataFrame:
    """Default vs tuned per set: one row per set with both scores and the gain.

    ``rows`` hold ``set``, ``config`` (default | tuned), ``transcripts``,
    ``value``, ``ci_low``, ``ci_high``, ``prompt_tokens`` and optionally
    ``feasible`` (within the prompt-token constraint). Gain is tuned - default
    (absolute) and relative to default (NaN when default is 0).
    """
    df = pd.DataFrame(rows)
    out = []
    for s in dict.fromkeys(df["set"]):
        d = df[(df["set"] == s) & (df["config"] == "default")].iloc[0]
        t = df[(df["set"] == s) & (df["config"] == "tuned")].iloc[0]
        gain = t["value"] - d["value"]
        out.append(
            {
                "set": s,
                "transcripts": int(d["transcripts"]),
                f"default_{metric}": d["value"],
                f"default_{metric}_ci": f"[{d['ci_low']:.3f}, {d['ci_high']:.3f}]",
                f"tuned_{metric}": t["value"],
                f"tuned_{metric}_ci": f"[{t['ci_low']:.3f}, {t['ci_high']:.3f}]",
                "gain": gain,
                "gain_relative": gain / d["value"] if d["value"] else math.nan,
                "default_prompt_tokens": d["prompt_tokens"],
                "tuned_prompt_tokens": t["prompt_tokens"],
            }
        )
        if "feasible" in df:
            out[-1]["default_feasible"] = bool(d["feasible"])
            out[-1]["tuned_feasible"] = bool(t["feasible"])
    return pd.DataFrame(out)


def warm_tpe(warm_start: Mapping[str, Any] | None = None, **tpe_kwargs: Any) -> Any:
    """Optuna's TPE sampler whose first trial takes ``warm_start`` values.

    conf/tune.yaml passes the config's own values (the default weights and
    half-lives), so trial 0 scores the default config and the best trial is
    never worse than it on the tuning set. A parameter without a warm value, or
    whose warm value lies outside its search range, is sampled by TPE. Every
    other trial is plain TPE with ``tpe_kwargs`` (``seed``, ...).
    """
    from memlab.errors import require

    optuna = require("optuna", feature="memlab tune", extra="tune")
    warm = dict(warm_start or {})

    class WarmStartTPESampler(optuna.samplers.TPESampler):  # type: ignore[name-defined]
        def sample_independent(
            self, study: Any, trial: Any, param_name: str, param_distribution: Any
        ) -> Any:
            if trial.number == 0 and param_name in warm:
                value = warm[param_name]
                internal = param_distribution.to_internal_repr(value)
                if param_distribution._contains(internal):
                    return value
            return super().sample_independent(study, trial, param_name, param_distribution)

    return WarmStartTPESampler(**tpe_kwargs)


# -- the trials and the evaluation (``memlab tune``) ---------------------------------
def split(transcripts: Sequence[Any], tc: Any) -> tuple[list[str], list[str]]:
    """(tuning ids, held-apart ids) of loaded transcripts under a ``tune`` config."""
    return split_ids(
        [x.id for x in transcripts],
        holdout_fraction=tc.holdout_fraction,
        seed=tc.split_seed,
        tuning_ids=list(tc.tuning_ids) if tc.tuning_ids is not None else None,
        holdout_ids=list(tc.holdout_ids) if tc.holdout_ids is not None else None,
    )


def metric_row(summary: pd.DataFrame, strategy: str, group: str, metric: str) -> Any:
    """The summary row of one (strategy, group, metric).

    Raises:
        MemlabError: the run has no such row.
    """
    sub = summary[
        (summary["strategy"] == strategy)
        & (summary["group"] == group)
        & (summary["metric"] == metric)
    ]
    if sub.empty:
        raise MemlabError(
            f"strategy {strategy!r}, group {group!r} has no {metric!r} on these transcripts; "
            "choose another tune.metric or tune.group"
        )
    return sub.iloc[0]


@dataclass(frozen=True)
class Trial:
    """One tuning trial's outcome (also written to ``trial.json``)."""

    metric: str
    value: float
    prompt_tokens: float
    feasible: bool
    objective: float
    run: Any  # the experiment's RunResult

    def line(self) -> str:
        return (
            f"  {self.metric} {self.value:.4f}, prompt tokens {self.prompt_tokens:.0f}"
            + ("" if self.feasible else " (over tune.max_prompt_tokens)")
            + f", objective {self.objective:.4f}"
        )


def run_trial(cfg: Any, out: Path) -> Trial:
    """One tuning trial: replay the tuning transcripts (never the held-apart ones),
    write the run folder and ``trial.json``, and score the trial (see ``objective``)."""
    from memlab.lab import experiment
    from memlab.lab.config import validate
    from memlab.lab.files import atomic_write_text
    from memlab.lab.metrics import direction

    v = validate(cfg)
    tc = v.run.tune
    if tc is None:
        raise ConfigError("config key 'tune': a tuning trial needs it (conf/tune.yaml sets it)")
    transcripts = experiment.load_transcripts(v, progress=False)
    tuning, _ = split(transcripts, tc)
    chosen = [x for x in transcripts if x.id in set(tuning)]
    # Trials need means; the evaluation draws the intervals.
    result = experiment.run(
        cfg, out, transcripts=chosen, overrides={"report.bootstrap": 0, "report.charts": False}
    )
    value = float(metric_row(result.summary, tc.strategy, tc.group, tc.metric)["mean"])
    tokens = float(metric_row(result.summary, tc.strategy, tc.group, "prompt_tokens")["mean"])
    score = objective(
        value,
        tokens,
        direction=direction(tc.metric),
        max_prompt_tokens=tc.max_prompt_tokens,
        penalty=tc.penalty,
    )
    feasible = tc.max_prompt_tokens is None or tokens <= tc.max_prompt_tokens
    trial = Trial(tc.metric, value, tokens, feasible, score, result)
    record = {k: getattr(trial, k) for k in ("metric", "value", "feasible", "objective")}
    record["prompt_tokens"] = tokens
    atomic_write_text(out / "trial.json", json.dumps(record, indent=1) + "\n")
    return trial


@dataclass
class TuneReport:
    """What ``finish`` found and wrote."""

    header: str
    values: dict[str, Any]
    best_value: float
    table: pd.DataFrame
    preset: Path
    use: str
    markdown: Path
    runs: list[Any] = field(default_factory=list)  # the evaluation's RunResults


def tune_markdown(header: str, preset_text: str, table: pd.DataFrame) -> str:
    """``tune_report.md``: the header, the preset and the default-vs-tuned table."""
    from memlab.lab.report import markdown_table

    lines = ["# memlab tune", "", *[f"{h}  " for h in header.splitlines()], ""]
    lines += ["Best parameters:", "", "```yaml", preset_text.rstrip("\n"), "```", ""]
    return "\n".join(lines) + "\n" + markdown_table(table)


def finish(
    overrides: Sequence[str],
    sweep_dir: Path,
    transcripts: Sequence[Any],
    tuning: Sequence[str],
    holdout: Sequence[str],
) -> TuneReport:
    """After the trials: write the best config as an experiment preset, score the
    default and the tuned config on the tuning and the held-apart transcripts,
    and write ``tune_report.csv``/``.md``.

    Raises:
        MemlabError: the sweep wrote no result, or the preset does not
            reproduce the tuned config.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from memlab.lab import experiment
    from memlab.lab.config import compose, conf_dir
    from memlab.lab.files import atomic_write_text
    from memlab.lab.sweep import task_overrides

    results = sweep_dir / "optimization_results.yaml"
    if not results.exists():
        raise MemlabError(f"the tuning sweep wrote no {results}; see the trials in {sweep_dir}")
    best = OmegaConf.to_container(OmegaConf.load(results))
    if not isinstance(best, dict) or "best_params" not in best:
        raise MemlabError(f"{results} holds no best_params; see the trials in {sweep_dir}")
    task = task_overrides(overrides)
    # Search ranges given on the command line (budget='int(interval(200,800))') are
    # the sweep itself, not a setting of the default config.
    parsed = OverridesParser.create().parse_overrides(task)
    task = [t for t, o in zip(task, parsed, strict=True) if not o.is_sweep_override()]
    base = compose(task, "tune")
    tc = base.tune
    weights = OmegaConf.to_container(base.memory.weights)
    values = best_overrides(best["best_params"], weights)  # type: ignore[arg-type]
    tuned = compose(task + [f"{k}={v}" for k, v in values.items()], "tune")
    groups = {k for k in values if (conf_dir() / k).is_dir()}
    conf = (sweep_dir / "conf").resolve()
    use = f"memlab run +experiment={tc.preset} 'hydra.searchpath=[file://{conf}]'"
    header = (
        f"memlab tune: best of {tc.n_trials} trials (TPE, seed {tc.seed}) maximizing "
        f"{tc.metric} of strategy {tc.strategy}, group {tc.group}"
        + (f", mean prompt tokens <= {tc.max_prompt_tokens:g}" if tc.max_prompt_tokens else "")
        + f".\nTuned on: {', '.join(tuning)}\nHeld apart: {', '.join(holdout)}\nUse: {use}"
    )
    preset = conf / "experiment" / f"{tc.preset}.yaml"
    preset_text = preset_yaml(values, groups, header)
    atomic_write_text(preset, preset_text)
    if not any(o.lstrip("+~").startswith("experiment=") for o in task):
        # The preset file itself must reproduce the tuned config.
        via_preset = compose(
            [*task, f"+experiment={tc.preset}", f"hydra.searchpath=[file://{conf}]"], "tune"
        )
        for k in values:
            if k not in groups and OmegaConf.select(via_preset, k) != OmegaConf.select(tuned, k):
                raise MemlabError(f"the written preset {preset} does not set {k}; please report")
    by_id = {x.id: x for x in transcripts}
    rows = []
    runs = []
    for name, cfg in (("default", base), ("tuned", tuned)):
        for set_name, ids in (("tuning", tuning), ("held-apart", holdout)):
            result = experiment.run(
                cfg,
                sweep_dir / "eval" / f"{name}_{set_name}",
                transcripts=[by_id[i] for i in ids],
                overrides={"tune": None, "report.charts": False, "progress": False},
            )
            runs.append(result)
            row = metric_row(result.summary, tc.strategy, tc.group, tc.metric)
            tokens = metric_row(result.summary, tc.strategy, tc.group, "prompt_tokens")
            rows.append(
                {
                    "set": set_name,
                    "config": name,
                    "transcripts": len(ids),
                    "value": row["mean"],
                    "ci_low": row["ci_low"],
                    "ci_high": row["ci_high"],
                    "prompt_tokens": tokens["mean"],
                }
            )
            if tc.max_prompt_tokens is not None:
                rows[-1]["feasible"] = bool(tokens["mean"] <= tc.max_prompt_tokens)
    table = gain_table(rows, tc.metric)
    atomic_write_text(sweep_dir / "tune_report.csv", table.to_csv(index=False))
    md = sweep_dir / "tune_report.md"
    atomic_write_text(md, tune_markdown(header, preset_text, table))
    return TuneReport(
        header=header,
        values=values,
        best_value=float(best["best_value"]),
        table=table,
        preset=preset,
        use=use,
        markdown=md,
        runs=runs,
    )
