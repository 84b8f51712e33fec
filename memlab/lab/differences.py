"""Differences that are real: paired intervals, and what a sample can detect.

Two strategies of a run (or the same strategy in two runs) answer the same
probes, so their difference is measured per probe: for every probe of a group
where both have a value, d = value(strategy) - value(reference). ``diff`` is the
mean of d and ``ci_low`` / ``ci_high`` its seeded percentile bootstrap interval
(probes resampled with replacement: the paired bootstrap; the same resampling as
every interval of summary.csv). A difference is *shown* when its interval
excludes 0; ``verdict`` then says whether the strategy is better or worse than
the reference by the metric's direction.

Probes are resampled one by one, although the probes of one conversation are
not independent; on a handful of conversations (LoCoMo has ten) a resampling of
conversations would be too coarse, so read an interval that barely excludes 0
with care.

The minimum detectable difference (``minimum_detectable``) of a group and
metric at its current n is

    mdd = (z_{1 - alpha/2} + z_{power}) * sqrt(2) * sd / sqrt(n)

with sd the metric's standard deviation over the group's probes within each
strategy, pooled over the strategies: the smallest true difference between two
strategies whose errors are independent that a two-sided test at level alpha
finds with the given power (0.05 and 0.8 by default: mdd = 3.96 sd / sqrt(n)).
Strategies whose errors go together (most do: the same hard questions) can
detect less; the paired interval is the test itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

import pandas as pd

from memlab.errors import MemlabError
from memlab.lab.metrics import bootstrap_ci, direction
from memlab.lab.metrics import metrics as registered
from memlab.lab.summary import probe_groups

KEY = ["transcript", "probe"]
DIFFERENCE_COLUMNS = [
    "group", "metric", "strategy", "reference", "n", "mean", "reference_mean", "diff",
    "ci_low", "ci_high", "shown", "verdict",
]  # fmt: skip
MDD_COLUMNS = ["group", "metric", "n", "sd", "mdd"]
DEFAULT_METRICS = (
    "fact_recall",
    "evidence_recall",
    "answer_accuracy",
    "stale_wins",
    "haystack_session_recall_all@5",
    "haystack_turn_ndcg@10",
    "abstention_proxy",
)
"""The metrics ``memlab report`` compares by default (those a run has)."""


def pick_metrics(probes: pd.DataFrame, metrics: Sequence[str] | None = None) -> list[str]:
    """The metrics to compare: ``metrics`` (each must be a column), or the
    ``DEFAULT_METRICS`` the rows have.

    Raises:
        MemlabError: a named metric is not in the rows, or is a column of them that
            is not a per-probe metric (``scope``, ``category``, ``distance``).
    """
    if metrics is None:
        return [m for m in DEFAULT_METRICS if m in probes and probes[m].notna().any()]
    missing = [m for m in metrics if m not in probes]
    if missing:
        raise MemlabError(
            f"metrics {missing} are not in this run's probes.csv; it has e.g. "
            f"{[m for m in DEFAULT_METRICS if m in probes][:5]}"
        )
    # A text column failed deep in the bootstrap ("internal error: ValueError: could
    # not convert string to float"), a number such as distance gave a meaningless table.
    per_probe = {m.name for m in registered("probe")}
    other = [m for m in metrics if m not in per_probe]
    if other:
        raise MemlabError(
            f"{other} are columns of this run's probes.csv but not per-probe metrics; "
            f"name metrics, e.g. {[m for m in DEFAULT_METRICS if m in probes][:5]}"
        )
    return list(metrics)


def reference_of(probes: pd.DataFrame, reference: str | None) -> str:
    """The reference strategy: ``reference`` if given (it must be in the run), else
    ``memory`` when the run has it, else the run's first strategy.

    Raises:
        MemlabError: the named strategy is not in the run.
    """
    strategies = list(dict.fromkeys(probes["strategy"])) if "strategy" in probes else []
    if not strategies:
        raise MemlabError("the run has no probes to compare")
    if reference is None:
        return "memory" if "memory" in strategies else strategies[0]
    if reference not in strategies:
        raise MemlabError(f"--reference {reference!r} is not in this run; it has {strategies}")
    return reference


def paired(
    values: pd.Series,
    reference: pd.Series,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float, float, int]:
    """(mean difference, ci_low, ci_high, n) of ``values - reference`` over the
    index labels both have a value for (the paired bootstrap). No pair: NaNs, 0."""
    both = pd.concat([values.rename("a"), reference.rename("b")], axis=1, join="inner").dropna()
    d = (both["a"].astype(float) - both["b"].astype(float)).to_numpy()
    return bootstrap_ci(d, n_boot, seed, level)


def _verdict(metric: str, diff: float, lo: float, hi: float) -> tuple[bool, str]:
    shown = bool(lo > 0 or hi < 0) if not math.isnan(diff) else False
    if not shown:
        return False, "no difference shown"
    d = direction(metric)
    if d == 0:
        return True, "higher" if diff > 0 else "lower"
    return True, "better" if d * diff > 0 else "worse"


def _keyed(rows: pd.DataFrame, metric: str) -> pd.Series:
    return rows.set_index(KEY)[metric] if metric in rows else pd.Series(dtype=float)


def differences(
    probes: pd.DataFrame,
    reference: str | None = None,
    *,
    metrics: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Every strategy against the reference, per group and metric (see the module
    docstring); columns ``DIFFERENCE_COLUMNS``.

    Args:
        probes: a run's probes.csv rows.
        reference: the reference strategy (``reference_of``).
        metrics: the metrics (``pick_metrics``).
        groups: the groups (default: every group of summary.csv).
        n_boot: bootstrap resamples.
        seed: the bootstrap's seed.
        level: the intervals' confidence level.

    Raises:
        MemlabError: an unknown reference or metric.
    """
    ref = reference_of(probes, reference)
    chosen = pick_metrics(probes, metrics)
    masks = probe_groups(probes)
    rows = []
    for group, mask in masks.items():
        if groups is not None and group not in groups:
            continue
        sub = probes[mask]
        base = sub[sub["strategy"] == ref]
        for metric in chosen:
            ref_values = _keyed(base, metric)
            for strategy in dict.fromkeys(sub["strategy"]):
                if strategy == ref:
                    continue
                mine = _keyed(sub[sub["strategy"] == strategy], metric)
                diff, lo, hi, n = paired(mine, ref_values, n_boot=n_boot, seed=seed, level=level)
                if n == 0:
                    continue
                pairs = pd.concat([mine, ref_values], axis=1, join="inner").dropna()
                shown, verdict = _verdict(metric, diff, lo, hi)
                rows.append(
                    dict(group=group, metric=metric, strategy=strategy, reference=ref, n=n,
                         mean=float(pairs.iloc[:, 0].mean()),
                         reference_mean=float(pairs.iloc[:, 1].mean()),
                         diff=diff, ci_low=lo, ci_high=hi, shown=shown, verdict=verdict)
                )  # fmt: skip
    return pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS)


def compare_runs(
    run_a: pd.DataFrame,
    run_b: pd.DataFrame,
    *,
    strategies: Sequence[tuple[str, str]] | None = None,
    metrics: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Run B against run A on the same probes: for each strategy pair (a, b) (by
    default every strategy both runs have, paired with itself), the paired
    difference b - a per group and metric (groups as run A's probes form them).
    Columns ``DIFFERENCE_COLUMNS``, with ``strategy`` = "b" and ``reference`` =
    "a" named ``A:<name>`` and ``B:<name>``.

    Raises:
        MemlabError: the runs share no strategy (pass ``strategies``), a named one
            is missing, or the runs did not answer the same probes.
    """
    names_a = list(dict.fromkeys(run_a["strategy"])) if "strategy" in run_a else []
    names_b = list(dict.fromkeys(run_b["strategy"])) if "strategy" in run_b else []
    if strategies is None:
        strategies = [(s, s) for s in names_a if s in names_b]
        if not strategies:
            raise MemlabError(
                f"the runs share no strategy (A has {names_a}, B has {names_b}); name a pair "
                "with --strategies A_NAME:B_NAME"
            )
    for a, b in strategies:
        if a not in names_a or b not in names_b:
            raise MemlabError(f"strategy pair {a}:{b}: run A has {names_a}, run B has {names_b}")
    keys_a = set(map(tuple, run_a[run_a["strategy"] == strategies[0][0]][KEY].to_numpy()))
    keys_b = set(map(tuple, run_b[run_b["strategy"] == strategies[0][1]][KEY].to_numpy()))
    if keys_a != keys_b:
        raise MemlabError(
            f"the runs did not answer the same probes ({len(keys_a)} in A, {len(keys_b)} in B, "
            f"{len(keys_a & keys_b)} in both); compare runs of the same transcripts"
        )
    chosen = pick_metrics(run_a, metrics)
    chosen = [m for m in chosen if m in run_b]
    rows = []
    for a, b in strategies:
        mine_a = run_a[run_a["strategy"] == a]
        mine_b = run_b[run_b["strategy"] == b].set_index(KEY)
        for group, mask in probe_groups(mine_a).items():
            if groups is not None and group not in groups:
                continue
            sub_a = mine_a[mask.loc[mine_a.index]]
            keys = pd.MultiIndex.from_frame(sub_a[KEY])
            for metric in chosen:
                ref_values = sub_a.set_index(KEY)[metric]
                values = mine_b[metric].reindex(keys)
                diff, lo, hi, n = paired(values, ref_values, n_boot=n_boot, seed=seed, level=level)
                if n == 0:
                    continue
                pairs = pd.concat([values, ref_values], axis=1, join="inner").dropna()
                shown, verdict = _verdict(metric, diff, lo, hi)
                rows.append(
                    dict(group=group, metric=metric, strategy=f"B:{b}", reference=f"A:{a}",
                         n=n, mean=float(pairs.iloc[:, 0].mean()),
                         reference_mean=float(pairs.iloc[:, 1].mean()),
                         diff=diff, ci_low=lo, ci_high=hi, shown=shown, verdict=verdict)
                )  # fmt: skip
    return pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS)


def z(p: float) -> float:
    """The standard normal quantile of ``p``."""
    return NormalDist().inv_cdf(p)


def minimum_detectable(
    probes: pd.DataFrame,
    *,
    metrics: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> pd.DataFrame:
    """The minimum detectable difference of each group and metric at its current n
    (see the module docstring); columns ``MDD_COLUMNS``. ``n`` is the probes of
    the group with a value (the largest over the strategies); ``sd`` the pooled
    within-strategy standard deviation. A group whose values never vary: sd 0,
    mdd 0 (every strategy scores the same on each of its probes)."""
    chosen = pick_metrics(probes, metrics)
    factor = (z(1 - alpha / 2) + z(power)) * math.sqrt(2)
    rows = []
    for group, mask in probe_groups(probes).items():
        if groups is not None and group not in groups:
            continue
        sub = probes[mask]
        for metric in chosen:
            if metric not in sub:
                continue
            by = sub.groupby("strategy")[metric]
            counts = by.count()
            n = int(counts.max()) if len(counts) else 0
            if n < 2:
                continue
            var = by.var(ddof=1).dropna()
            weights = (counts[var.index] - 1).clip(lower=0)
            pooled = float((var * weights).sum() / weights.sum()) if weights.sum() > 0 else 0.0
            sd = math.sqrt(max(pooled, 0.0))
            rows.append(
                dict(group=group, metric=metric, n=n, sd=sd, mdd=factor * sd / math.sqrt(n))
            )
    return pd.DataFrame(rows, columns=MDD_COLUMNS)


def interval(row: Mapping[Any, Any], digits: int = 3) -> str:
    """``+0.052 [+0.021, +0.083]*`` (``*``: the interval excludes 0)."""
    if any(isinstance(row[k], float) and math.isnan(row[k]) for k in ("diff", "ci_low", "ci_high")):
        return "-"
    mark = "*" if row["shown"] else ""
    f = f"{{:+.{digits}f}}"
    return f"{f.format(row['diff'])} [{f.format(row['ci_low'])}, {f.format(row['ci_high'])}]{mark}"


def wide(table: pd.DataFrame, metric: str, groups: Sequence[str] | None = None) -> pd.DataFrame:
    """One metric's differences as strategies x groups of ``interval`` cells."""
    sub = table[table["metric"] == metric]
    if sub.empty:
        return pd.DataFrame()
    order = list(dict.fromkeys(sub["group"])) if groups is None else list(groups)
    cells = {(str(r["strategy"]), str(r["group"])): interval(r) for r in sub.to_dict("records")}
    strategies = list(dict.fromkeys(sub["strategy"]))
    data = {g: [cells.get((s, g), "-") for s in strategies] for g in order if g in set(sub.group)}
    return pd.DataFrame(data, index=pd.Index(strategies, name="strategy"))


__all__ = [
    "DEFAULT_METRICS",
    "DIFFERENCE_COLUMNS",
    "MDD_COLUMNS",
    "compare_runs",
    "differences",
    "interval",
    "minimum_detectable",
    "paired",
    "pick_metrics",
    "reference_of",
    "wide",
    "z",
]
