"""Sweeps: planning a multirun before it starts, and reading one after it ran.

Planning (``plan_run``) composes and validates the config of every swept value
before Hydra launches any job. Reading (``sweep_table``) turns a multirun folder
into one tidy table over its jobs, with the swept keys as columns, and finds
the Pareto front of recall against prompt tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.errors import ConfigError, MemlabError
from memlab.lab.summary import SUMMARY_COLUMNS, is_run_dir, load_rows, summarize, write_summary


def job_dirs(path: Path) -> list[Path]:
    """The run folders of a multirun folder, in job order."""
    jobs = [p for p in path.iterdir() if p.is_dir() and is_run_dir(p)]
    return sorted(jobs, key=_job_order)


def _job_order(p: Path) -> tuple[bool, int, str]:
    return (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name)


def failed_jobs(path: Path) -> list[Path]:
    """Job folders Hydra created (they hold ``.hydra/``) that have no results."""
    return sorted(
        (p for p in path.iterdir() if p.is_dir() and (p / ".hydra").is_dir() and not is_run_dir(p)),
        key=_job_order,
    )


def _override_key(key: str) -> str:
    return key.lstrip("+~")


def _parse_value(text: str) -> Any:
    """An override's value as YAML reads it (numbers become numbers); lists and
    dicts stay text so that a table cell holds one scalar."""
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return text


def job_overrides(job: Path) -> dict[str, Any]:
    """The command-line overrides a Hydra job ran with (key -> value)."""
    f = job / ".hydra" / "overrides.yaml"
    if not f.exists():
        return {}
    from omegaconf import OmegaConf

    out: dict[str, Any] = {}
    for item in OmegaConf.to_container(OmegaConf.load(f)) or []:
        key, _, value = str(item).partition("=")
        out[_override_key(key)] = _parse_value(value)
    return out


def swept_keys(path: Path, overrides: Sequence[dict[str, Any]]) -> list[str]:
    """The keys a multirun swept, in the order they were given.

    A key counts as swept when the multirun's command line gave it a sweep
    (``a=1,2``, ``range(...)``, ``interval(...)``), when ``hydra.sweeper.params``
    (e.g. from an experiment preset) lists it, or when its value differs
    between jobs.
    """
    from omegaconf import OmegaConf

    keys: list[str] = []
    f = path / "multirun.yaml"
    if f.exists():
        cfg = OmegaConf.load(f)
        params = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
        keys += [_override_key(str(k)) for k in params]
        task = OmegaConf.select(cfg, "hydra.overrides.task") or []
        try:
            from hydra.core.override_parser.overrides_parser import OverridesParser

            parsed = OverridesParser.create().parse_overrides([str(t) for t in task])
            keys += [_override_key(o.get_key_element()) for o in parsed if o.is_sweep_override()]
        except Exception:  # an unparsable record: fall back to what varies
            pass
    every = list(dict.fromkeys(k for o in overrides for k in o))
    for k in every:
        values = {repr(o.get(k)) for o in overrides}
        if len(values) > 1:
            keys.append(k)
    keys = list(dict.fromkeys(keys))
    # Report keys in the order a job's command line lists them.
    order = {k: i for i, k in enumerate(every)}
    return sorted(keys, key=lambda k: order.get(k, len(order)))


def sweep_table(
    path: Path,
    *,
    recompute: bool = False,
    n_boot: int | None = None,
    seed: int | None = None,
    draw: bool = False,
) -> tuple[pd.DataFrame, list[str], list[Path]]:
    """One tidy table over every job of a multirun folder (a rebuilt summary
    resamples with ``n_boot`` and ``seed``, None: the job's own, see
    ``run_resampling``).

    Returns:
        (table, swept keys, failed job folders). The table has one row per job,
        strategy, group and metric: ``job``, one column per swept key (the value
        the job ran with), then the summary.csv columns. A job's summary.csv is
        read as written by the run, or rebuilt from its rows when ``recompute``
        is set or it is missing.
    """
    jobs = job_dirs(path)
    failed = failed_jobs(path)
    if not jobs:
        hint = f" ({len(failed)} job folders without results: did the jobs fail?)" if failed else ""
        raise MemlabError(
            f"{path} holds no memlab run (no probes.csv here or in its subfolders){hint}"
        )
    overrides = [job_overrides(j) for j in jobs]
    keys = swept_keys(path, overrides)
    frames = []
    for job, ov in zip(jobs, overrides, strict=True):
        summary_file = job / "summary.csv"
        if recompute or not summary_file.exists():
            from memlab.lab import fingerprint

            if (job / fingerprint.FILENAME).exists():
                fingerprint.check_rows(job, fingerprint.load(job), f"job {job.name}")
            probes, turns = load_rows(job)
            boot, job_seed = run_resampling(job, n_boot, seed)
            summary = summarize(probes, turns, n_boot=boot, seed=job_seed)
            write_summary(job, summary)
            if draw:
                from memlab.lab.charts import charts

                charts(probes, turns, summary, job / "charts")
        else:
            summary = pd.read_csv(summary_file)
        head = {"job": _job_label(job.name)}
        head.update({k: ov.get(k, _config_value(job, k)) for k in keys})
        summary = summary.reindex(columns=SUMMARY_COLUMNS)
        for i, (k, v) in enumerate(head.items()):
            summary.insert(i, k, [v] * len(summary))
        frames.append(summary)
    table = pd.concat(frames, ignore_index=True)
    return table, keys, failed


def _job_label(name: str) -> int | str:
    return int(name) if name.isdigit() else name


def _config_value(job: Path, key: str) -> Any:
    """A key's value in a job's resolved config (for a swept key it did not override)."""
    from omegaconf import OmegaConf

    for f in (job / ".hydra" / "config.yaml", job / "config.yaml"):
        if f.exists():
            try:
                value = OmegaConf.select(OmegaConf.load(f), key, default=None)
            except Exception:
                return None
            if value is None or isinstance(value, bool | int | float | str):
                return value
            return str(OmegaConf.to_container(value))
    return None


DEFAULT_BOOTSTRAP, DEFAULT_SEED = 1000, 0
"""What a rebuild resamples with when neither the caller nor the run's config says."""


def run_resampling(job: Path, n_boot: int | None, seed: int | None) -> tuple[int, int]:
    """The bootstrap resamples and seed to rebuild ``job``'s summary with: the given
    ones, else the run's own (``report.bootstrap`` and ``seed`` of its config.yaml),
    else 1000 and 0. A rebuild then reproduces the intervals the run wrote."""
    from memlab.lab.metrics import bootstrap_problem, seed_problem

    if n_boot is None:
        found = _config_value(job, "report.bootstrap")
        n_boot = found if bootstrap_problem(found) is None else DEFAULT_BOOTSTRAP
    if seed is None:
        found = _config_value(job, "seed")
        seed = found if seed_problem(found) is None else DEFAULT_SEED
    return n_boot, seed


def recall_metric(table: pd.DataFrame) -> str:
    """fact_recall when the runs scored facts, else evidence_recall."""
    present = set(table.loc[table["group"] == "all", "metric"])
    for m in ("fact_recall", "evidence_recall", "answer_in_context"):
        if m in present:
            return m
    raise MemlabError("the runs have no recall metric (fact_recall, evidence_recall)")


def pareto_front(points: pd.DataFrame, x: str, y: str) -> pd.Series:
    """Which points are Pareto-optimal for lower ``x`` and higher ``y``.

    A point is on the front when no other point has x <= its x and y >= its y
    with at least one strict. Points with a NaN coordinate are never on it.
    Returns a boolean Series aligned with ``points``.
    """
    flags = dict.fromkeys(points.index, False)
    valid = points[[x, y]].dropna()
    order = valid.sort_values([x, y], ascending=[True, False])
    best, best_x = -math.inf, math.nan
    for idx, cost, value in zip(order.index, order[x], order[y], strict=True):
        if float(value) > best:
            flags[idx] = True
            best, best_x = float(value), float(cost)
        elif float(value) == best and float(cost) == best_x:
            # The same point as the last one on the front (e.g. two strategies that
            # answer alike): neither dominates the other, so both are on it.
            flags[idx] = True
    return pd.Series(flags, dtype=bool).reindex(points.index)


def wide_means(table: pd.DataFrame, keys: Sequence[str], group: str = "all") -> pd.DataFrame:
    """One row per job and strategy, one column per metric (means) plus the swept keys."""
    sub = table[table["group"] == group]
    wide = sub.pivot_table(index=["job", "strategy"], columns="metric", values="mean", sort=False)
    wide = wide.reset_index()
    wide.columns.name = None
    first = sub.drop_duplicates(["job", "strategy"]).set_index(["job", "strategy"])
    for k in reversed(list(keys)):
        wide.insert(
            1, k, [first.loc[(j, s), k] for j, s in zip(wide.job, wide.strategy, strict=True)]
        )
    return wide


def pareto_table(
    table: pd.DataFrame, keys: Sequence[str], metric: str | None = None
) -> pd.DataFrame:
    """Every (job, strategy) point with its recall, prompt tokens and ``on_front``."""
    metric = metric or recall_metric(table)
    wide = wide_means(table, keys)
    if "prompt_tokens" not in wide or metric not in wide:
        raise MemlabError(f"the runs lack prompt_tokens or {metric}; cannot draw a Pareto front")
    out = wide[["job", *keys, "strategy", metric, "prompt_tokens"]].copy()
    out["on_front"] = pareto_front(out, "prompt_tokens", metric)
    return out


# -- planning -------------------------------------------------------------------------
def sweep_variants(overrides: list[str], params: dict[str, str] | None = None) -> list[list[str]]:
    """Override lists that together check every value of every sweep.

    The first list takes each sweep's first value; each further list changes one
    swept key to another of its values. ``params`` (``hydra.sweeper.params``,
    e.g. from an experiment preset) count as sweeps unless the command line
    sets the same key. Intervals (``interval(a, b)``, an Optuna search range)
    have no values to list: they are left to the trials.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep

    parser = OverridesParser.create()
    parsed = parser.parse_overrides(overrides)
    given = {o.get_key_element().lstrip("+~") for o in parsed}
    extra = [f"{k}={v}" for k, v in (params or {}).items() if str(k).lstrip("+~") not in given]
    parsed += parser.parse_overrides(extra)
    base: list[str] = []
    sweeps: list[tuple[str, list[str]]] = []
    for o in parsed:
        if o.is_sweep_override():
            if isinstance(o.value(), IntervalSweep):
                continue
            key, values = o.get_key_element(), list(o.sweep_string_iterator())
            sweeps.append((key, values))
            if values:
                base.append(f"{key}={values[0]}")
        else:
            base.append(o.input_line or f"{o.get_key_element()}={o.get_value_element_as_str()}")
    variants = [base]
    for key, values in sweeps:
        others = [b for b in base if not b.startswith(f"{key}=")]
        variants += [[*others, f"{key}={v}"] for v in values[1:]]
    return variants


def first_of_sweeps(overrides: list[str]) -> list[str]:
    """The overrides with each sweep (``a=1,2``) replaced by its first value, so a
    multirun's config can be checked once before any job starts."""
    return sweep_variants(overrides)[0]


def task_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides that change the experiment (no flags, no ``hydra.*`` keys)."""
    return [o for o in overrides if not o.startswith(("-", "hydra.", "hydra/"))]


@dataclass
class Plan:
    """What a ``memlab run``/``tune`` command line will do, checked before Hydra starts.

    Attributes:
        cfg: the first job's composed config.
        multirun: whether Hydra runs a sweep.
        output: the run folder (single run) or the sweep folder (multirun).
        output_given: the command line named that folder (else it is added).
        jobs_checked: how many configs were composed and validated.
    """

    cfg: Any
    multirun: bool
    output: Path
    output_given: bool
    jobs_checked: int

    @property
    def sweep_dir(self) -> Path | None:
        return self.output if self.multirun else None


def plan_run(overrides: list[str], config_name: str = "config") -> Plan:
    """Compose and validate the config of every swept value before Hydra runs
    anything, and check that the output folder can be written.

    Raises:
        ConfigError: one line naming the bad key or value.
        OutputError: the run or sweep folder cannot be written.
    """
    from memlab.lab.compose import compose, compose_all, one_line
    from memlab.lab.config import validate
    from memlab.lab.files import writable_folder

    flags = [o for o in overrides if o.startswith("-")]
    args = [o for o in overrides if not o.startswith("-")]
    hydra_args = [o for o in args if o.startswith(("hydra.", "hydra/"))]
    task = [o for o in args if o not in hydra_args]
    try:
        first = first_of_sweeps(task)
    except Exception as exc:  # the override grammar's parse errors
        raise ConfigError(
            f"cannot parse the overrides: {one_line(exc).split('; See https')[0]} "
            "(quote values with special characters: key='value')"
        ) from None
    full = compose([*first, *hydra_args], config_name, with_hydra=True)
    h = full.hydra
    multirun = bool({"-m", "--multirun"} & set(flags)) or str(h.mode).endswith("MULTIRUN")
    if not multirun and first != task:
        swept = next(a for a, b in zip(task, first, strict=True) if a != b)
        raise ConfigError(f"{swept} is a sweep; add -m to run one job per value")
    params = {}
    if multirun and h.sweeper.get("params"):
        params = {str(k): str(v) for k, v in h.sweeper.params.items()}
    variants = sweep_variants(task, params) if multirun else [task]
    configs = compose_all([[*v, *hydra_args] for v in variants], config_name)
    for composed in configs:
        validate(composed)
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    output = Path(str(h.sweep.dir if multirun else h.run.dir))
    writable_folder(output, key)
    if multirun and output.is_dir() and (job_dirs(output) or failed_jobs(output)):
        raise ConfigError(
            f"hydra.sweep.dir {output} already holds a multirun; choose another folder "
            "so that no job overwrites an earlier one"
        )
    given = any(a.startswith(f"{key}=") for a in hydra_args)
    return Plan(configs[0], multirun, output, given, len(variants))
