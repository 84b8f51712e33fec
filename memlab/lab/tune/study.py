"""The Optuna study behind ``memlab tune``: storage, sampler, pruner, one trial, workers.

The study lives in an Optuna storage (default ``sqlite:///<tune folder>/study.db``),
so a tune that stopped resumes where it was (run the same command with the same
``tune.out``) and several processes can share it (``tune.workers``, or more
``memlab tune`` commands on the same folder). ``optuna-dashboard <storage URL>``
shows it live. Each trial replays the tuning transcripts (never the held-apart
ones) with the values it sampled, rescaled as a preset would write them
(``space.trial_values``), into ``<tune folder>/trials/<number>/``.

Logs are quiet: Optuna's own logger is silenced and one plain line per trial
(no colour codes) goes to ``<tune folder>/tune.log``; a progress bar is drawn on
a terminal only.
"""

from __future__ import annotations

import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.errors import ConfigError, MemlabError, require
from memlab.lab.tune.space import SearchSpace, as_overrides, trial_values

LOG = "memlab.tune"


def optuna_module() -> Any:
    """Optuna, imported lazily (the ``tune`` extra), with its own logging silenced."""
    optuna = require("optuna", feature="memlab tune", extra="tune")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.logging.disable_default_handler()
    return optuna


def objective(
    value: float,
    prompt_tokens: float,
    *,
    direction: int,
    max_prompt_tokens: float | None,
    penalty: float = 1.0,
) -> float:
    """The number a single-objective trial returns to the (maximizing) study.

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


def running_means(
    rows: Sequence[dict[str, Any]], strategy: str, group: str, metric: str
) -> tuple[float, float]:
    """(metric mean, prompt-token mean) of ``strategy``'s probes in ``group`` so far."""
    from memlab.lab.summary import probe_groups

    probes = pd.DataFrame([r for r in rows if r["strategy"] == strategy])
    if probes.empty or metric not in probes:
        return math.nan, math.nan
    mask = probe_groups(probes).get(group)
    if mask is None or not mask.any():
        return math.nan, math.nan
    return float(probes.loc[mask, metric].mean()), float(probes.loc[mask, "prompt_tokens"].mean())


@dataclass
class Context:
    """Everything a trial needs, in any process (built by ``tuner.plan``).

    Attributes:
        task: the fixed overrides every trial config is composed from.
        space: the search space.
        weights: the config's own ranking weights (for rescaling).
        tc: the ``tune`` settings.
        out: the tune folder.
        storage: the Optuna storage URL.
        tuning: the tuning transcripts (loaded).
        warm: the default config's values of the searched keys (trial 0).
        fingerprint: what a resumed study must match.
    """

    task: list[str]
    space: SearchSpace
    weights: dict[str, float]
    tc: Any
    out: Path
    storage: str
    tuning: list[Any]
    warm: dict[str, Any]
    fingerprint: dict[str, Any] = field(default_factory=dict)

    @property
    def directions(self) -> list[str]:
        from memlab.lab.metrics import direction

        if not self.tc.multi_objective:
            return ["maximize"]
        return ["maximize" if direction(self.tc.metric) > 0 else "minimize", "minimize"]

    @property
    def pruning(self) -> bool:
        return self.tc.pruner != "none" and not self.tc.multi_objective


def storage_object(url: str) -> Any:
    """An Optuna RDB storage for ``url``: SQLite waits for the lock instead of failing
    (several workers), and a heartbeat marks the trials of a killed worker failed.

    Raises:
        ConfigError: the URL is not one Optuna can open.
    """
    optuna = optuna_module()
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 120}}
    try:
        with warnings.catch_warnings():  # the heartbeat is "experimental" in optuna 5.0
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(
                url, heartbeat_interval=30, grace_period=120, **kwargs
            )
    except Exception as exc:  # sqlalchemy's errors: bad URL, missing driver, locked file
        raise ConfigError(f"config key 'tune.storage': cannot open {url!r}: {exc}") from None


def sampler(ctx: Context, worker: int = 0, history: int = 0) -> Any:
    """TPE seeded with ``tune.seed + worker`` (plus a step per trial already in a
    resumed study, so that a resumed search does not repeat its first random
    trials); in multi-objective mode with ``tune.max_prompt_tokens`` as a constraint."""
    optuna = optuna_module()
    constraints = None
    limit = ctx.tc.max_prompt_tokens
    if ctx.tc.multi_objective and limit is not None:

        def constraints(ft: Any) -> list[float]:
            return [float(ft.user_attrs.get("prompt_tokens", math.inf)) - float(limit)]

    seed = ctx.tc.seed + worker + 7919 * history
    return optuna.samplers.TPESampler(seed=seed, constraints_func=constraints)


def pruner(ctx: Context) -> Any:
    """MedianPruner (after 5 complete trials, from half of the tuning transcripts on), or none."""
    optuna = optuna_module()
    if not ctx.pruning:
        return optuna.pruners.NopPruner()
    return optuna.pruners.MedianPruner(
        n_startup_trials=5, n_warmup_steps=max(0, len(ctx.tuning) // 2 - 1)
    )


def open_study(ctx: Context, worker: int = 0) -> Any:
    """Create the study or load it from the storage (resume).

    Raises:
        ConfigError: the storage holds this study with other settings or directions.
    """
    optuna = optuna_module()
    storage = storage_object(ctx.storage)
    name = ctx.tc.study
    existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage)}
    if name in existing:
        study = optuna.load_study(
            study_name=name, storage=storage, sampler=sampler(ctx, worker), pruner=pruner(ctx)
        )
        had = study.user_attrs.get("memlab")
        if had != ctx.fingerprint:
            differ = sorted(
                k for k in set(had or {}) | set(ctx.fingerprint)
                if (had or {}).get(k) != ctx.fingerprint.get(k)
            )  # fmt: skip
            raise ConfigError(
                f"study {name!r} in {ctx.storage} was tuned with other settings (they differ "
                f"in: {', '.join(differ) or 'everything'}); resume it with the same command "
                "line, or choose another tune.out (or tune.study)"
            )
        study.sampler = sampler(ctx, worker, history=len(study.get_trials(deepcopy=False)))
        return study
    study = optuna.create_study(
        study_name=name,
        storage=storage,
        sampler=sampler(ctx, worker),
        pruner=pruner(ctx),
        directions=ctx.directions,
        load_if_exists=True,  # another worker may have created it meanwhile
    )
    study.set_user_attr("memlab", ctx.fingerprint)
    return study


COUNTED = ("COMPLETE", "PRUNED")


def counted(study: Any) -> int:
    """Completed and pruned trials (what ``tune.n_trials`` counts)."""
    optuna = optuna_module()
    states = tuple(getattr(optuna.trial.TrialState, s) for s in COUNTED)
    return len(study.get_trials(deepcopy=False, states=states))


def enqueue_default(study: Any, ctx: Context) -> None:
    """Queue the default config as a trial unless one ran or waits (trial 0 of a new study)."""
    optuna = optuna_module()
    live = (
        optuna.trial.TrialState.COMPLETE,
        optuna.trial.TrialState.PRUNED,
        optuna.trial.TrialState.RUNNING,
        optuna.trial.TrialState.WAITING,
    )
    if any("default" in t.user_attrs for t in study.get_trials(deepcopy=False, states=live)):
        return
    # A searched key whose default lies outside its range is sampled: then trial 0
    # is not the default config, and is not called so.
    whole = set(ctx.warm) == set(ctx.space.params)
    study.enqueue_trial(dict(ctx.warm), user_attrs={"default": whole})


def make_objective(ctx: Context, log: logging.Logger) -> Callable[[Any], Any]:
    """The function Optuna calls per trial: sample, compose, replay, score."""
    from memlab.lab import experiment
    from memlab.lab.compose import compose
    from memlab.lab.files import atomic_write_text
    from memlab.lab.metrics import direction

    optuna = optuna_module()
    tc = ctx.tc
    sign = direction(tc.metric)

    def score(value: float, tokens: float) -> float:
        return objective(
            value,
            tokens,
            direction=sign,
            max_prompt_tokens=tc.max_prompt_tokens,
            penalty=tc.penalty,
        )

    def run(trial: Any) -> Any:
        started = time.perf_counter()
        values = trial_values(ctx.space.suggest(trial), ctx.weights)
        trial.set_user_attr("values", values)
        out = ctx.out / "trials" / str(trial.number)
        trial.set_user_attr("run", str(out))
        cfg = compose([*ctx.task, *as_overrides(values)], "tune")
        seen: list[dict[str, Any]] = []

        def on_scored(transcript: Any, rows: list[dict[str, Any]]) -> None:
            seen.extend(rows)
            if not ctx.pruning:
                return
            value, tokens = running_means(seen, tc.strategy, tc.group, tc.metric)
            if math.isnan(value):
                return
            step = len({r["transcript"] for r in seen}) - 1
            trial.report(score(value, tokens), step)
            if trial.should_prune():
                raise optuna.TrialPruned(
                    f"pruned after {step + 1} of {len(ctx.tuning)} transcripts"
                )

        result = experiment.run(
            cfg,
            out,
            transcripts=ctx.tuning,
            overrides={
                "tune": None,
                "report.bootstrap": 0,  # trials need means; the evaluation draws intervals
                "report.charts": False,
                "progress": False,
            },
            on_scored=on_scored,
        )
        value = float(metric_row(result.summary, tc.strategy, tc.group, tc.metric)["mean"])
        tokens = float(metric_row(result.summary, tc.strategy, tc.group, "prompt_tokens")["mean"])
        feasible = tc.max_prompt_tokens is None or tokens <= tc.max_prompt_tokens
        record = {
            "metric": tc.metric,
            "value": value,
            "prompt_tokens": tokens,
            "feasible": feasible,
            "objective": score(value, tokens),
            "values": values,
            "seconds": round(time.perf_counter() - started, 3),
        }
        for k in ("value", "prompt_tokens", "feasible", "seconds"):
            trial.set_user_attr(k, record[k])
        atomic_write_text(out / "trial.json", json.dumps(record, indent=1) + "\n")
        if tc.multi_objective:
            return value, tokens
        return record["objective"]

    return run


def trial_line(ft: Any, metric: str) -> str:
    """One plain log line per finished trial."""
    state = ft.state.name.lower()
    attrs = ft.user_attrs
    parts = [f"trial {ft.number} {state}"]
    if "value" in attrs:
        parts.append(f"{metric} {attrs['value']:.4f}, prompt tokens {attrs['prompt_tokens']:.0f}")
    elif ft.intermediate_values:
        step, v = max(ft.intermediate_values.items())
        parts.append(f"score {v:.4f} after {step + 1} transcripts")
    if attrs.get("default"):
        parts.append("(the default config)")
    values = attrs.get("values") or ft.params
    parts.append(" ".join(f"{k}={v}" for k, v in values.items()))
    return ", ".join(parts)


class _OneLine(logging.Filter):
    """Log records as one line each: a failed trial's traceback stays out of the file
    (the trial's state and error message are in it, and in ``trials.csv``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        record.msg = " ".join(str(record.msg).split())
        return True


def file_log(out: Path) -> logging.Logger:
    """``<out>/tune.log``: plain lines, no colour codes; Optuna's warnings go there too."""
    log = logging.getLogger(LOG)
    log.setLevel(logging.INFO)
    log.propagate = False
    path = str((out / "tune.log").resolve())
    if not any(getattr(h, "baseFilename", None) == path for h in log.handlers):
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(message)s"))
        handler.addFilter(_OneLine())
        log.addHandler(handler)
        logging.getLogger("optuna").addHandler(handler)
    return log


def close_log() -> None:
    for name in (LOG, "optuna"):
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            if isinstance(h, logging.FileHandler):
                logger.removeHandler(h)
                h.close()


def optimize(
    ctx: Context,
    *,
    worker: int = 0,
    on_trial: Callable[[Any, Any], None] | None = None,
) -> Any:
    """Run trials until the study holds ``tune.n_trials`` completed or pruned ones.

    Returns:
        The study. A trial whose sampled config is invalid (e.g. every weight 0)
        fails and the search goes on; any other error stops it (the study keeps
        every finished trial).
    """
    optuna = optuna_module()
    log = file_log(ctx.out)
    study = open_study(ctx, worker)
    if worker == 0:
        enqueue_default(study, ctx)
    states = tuple(getattr(optuna.trial.TrialState, s) for s in COUNTED)
    stop = optuna.study.MaxTrialsCallback(ctx.tc.n_trials, states=states)

    def logged(study: Any, ft: Any) -> None:
        log.info(trial_line(ft, ctx.tc.metric))
        if on_trial is not None:
            on_trial(study, ft)

    remaining = ctx.tc.n_trials - counted(study)
    if remaining <= 0:
        return study
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.optimize(
            make_objective(ctx, log),
            n_trials=remaining if ctx.tc.workers == 1 else None,
            callbacks=[stop, logged],
            catch=(ConfigError,),
            gc_after_trial=False,
            show_progress_bar=False,
        )
    return study


def worker_main(args: list[str], worker: int) -> None:
    """A worker process of ``tune.workers`` > 1: plan the same tune, run trials."""
    from memlab.lab.tune.tuner import plan

    log = logging.getLogger(LOG)
    try:
        ctx = plan(args, worker=True).context
        optimize(ctx, worker=worker)
    except BaseException as exc:
        log.error(f"worker {worker} stopped: {type(exc).__name__}: {exc}")
        raise
    finally:
        close_log()


def trials_table(study: Any) -> pd.DataFrame:
    """One row per trial: number, state, the metric, prompt tokens, feasibility, the
    objective, seconds, whether it is the default config, then the values it ran with."""
    rows = []
    for ft in study.get_trials(deepcopy=False):
        a = ft.user_attrs
        row: dict[str, Any] = {
            "trial": ft.number,
            "state": ft.state.name.lower(),
            "value": a.get("value", math.nan),
            "prompt_tokens": a.get("prompt_tokens", math.nan),
            "feasible": a.get("feasible"),
            "objective": ft.values[0] if ft.values and len(ft.values) == 1 else math.nan,
            "seconds": a.get("seconds", math.nan),
            "default": bool(a.get("default", False)),
        }
        row.update(a.get("values") or {})
        rows.append(row)
    return pd.DataFrame(rows)
