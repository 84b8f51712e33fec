"""A run's tables: per-probe and per-turn rows aggregated into summary.csv, and the
run folder's files (probes.csv, turns.csv, summary.csv).

summary.csv is long form: one row per strategy, probe group and metric, with the
mean, a seeded bootstrap 95% interval and n. Which metrics it holds comes from
the metric registry (``memlab.lab.metrics.METRICS``): every per-probe metric for
every probe group, the per-turn metrics and the ``final_*`` store sizes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memlab.errors import MemlabError
from memlab.lab.files import atomic_write
from memlab.lab.metrics import bootstrap_ci, metrics

SUMMARY_COLUMNS = ["strategy", "group", "metric", "mean", "ci_low", "ci_high", "n"]


def probe_groups(probes: pd.DataFrame) -> dict[str, pd.Series]:
    """Row masks of the probe groups in summary.csv.

    ``all`` is every scored probe; ``far`` the scored probes whose evidence lies
    beyond ``report.far_turns`` same-scope turns; ``corrected`` the scored probes
    that need a fact that was corrected; ``category:<name>`` the scored probes of
    a category; ``abstention:<name>`` its abstention questions (LoCoMo's
    adversarial questions, LongMemEval's ``_abs`` questions: the right answer is
    that the conversation does not say), scored by their own metrics
    (``abstention_proxy``; a reader's ``answer_accuracy``) and out of every other
    group's averages; ``unscored:<name>`` its other unscored probes (e.g. a
    question an erratum excluded), kept visible.
    """
    if probes.empty:
        return {}
    scored = probes["scored"].astype(bool)
    groups = {
        "all": scored,
        "far": scored & probes["far"].astype(bool),
        "corrected": scored & probes["corrected"].astype(bool),
    }
    abstention = (
        probes["abstention"].fillna(False).astype(bool)
        if "abstention" in probes
        else pd.Series(False, index=probes.index)
    )
    category = probes["category"].fillna("")
    cats = sorted(c for c in category.unique() if c)
    for prefix, wanted in (
        ("category", scored),
        ("abstention", ~scored & abstention),
        ("unscored", ~scored & ~abstention),
    ):
        for cat in cats:
            mask = wanted & (category == cat)
            if mask.any():
                groups[f"{prefix}:{cat}"] = mask
    return groups


def summarize(
    probes: pd.DataFrame, turns: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Long-form summary: one row per strategy, group and metric, with the mean,
    a seeded bootstrap 95% interval and n (the probes, turns or transcripts scored)."""
    rows: list[dict[str, Any]] = []

    def add(strategy: str, group: str, metric: str, values: pd.Series, keep_empty: bool) -> None:
        mean, lo, hi, n = bootstrap_ci(values.to_numpy(dtype=float), n_boot, seed)
        if n or keep_empty:
            rows.append(dict(strategy=strategy, group=group, metric=metric, mean=mean,
                             ci_low=lo, ci_high=hi, n=n))  # fmt: skip

    strategies = list(
        dict.fromkeys(list(probes.get("strategy", [])) + list(turns.get("strategy", [])))
    )
    groups = probe_groups(probes)
    probe_metrics = [m.name for m in metrics("probe")]
    for s in strategies:
        mine = probes[probes["strategy"] == s] if not probes.empty else probes
        for gname, mask in groups.items():
            sub = mine[mask.loc[mine.index]]
            for m in probe_metrics:
                if not sub.empty and m in sub:
                    add(s, gname, m, sub[m], keep_empty=False)
        tmine = turns[turns["strategy"] == s] if not turns.empty else turns
        if tmine.empty:
            continue
        for metric in metrics("turn"):
            if metric.name in tmine:
                add(s, "all", metric.name, tmine[metric.name], keep_empty=True)
        final = tmine.sort_values("turn_index").groupby("transcript").tail(1)
        for metric in metrics("final"):
            if metric.column in final:
                add(s, "all", metric.name, final[metric.column], keep_empty=True)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def format_value(v: float) -> str:
    """A metric value for tables: '-' for NaN, integers as such, thousands without
    decimals, else 3 decimals."""
    if isinstance(v, int | np.integer) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, float) and math.isnan(v):
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3f}"


def write_summary(out: Path, summary: pd.DataFrame) -> Path:
    """Write summary.csv atomically (a temp file renamed into place) and seal the
    run's fingerprint with it, so a failed or interrupted run never leaves a
    summary.csv the gate could take for its result.

    Raises:
        OutputError: the folder cannot be written.
    """
    from memlab.lab import fingerprint

    path = atomic_write(out / "summary.csv", _csv(summary))
    if (out / fingerprint.FILENAME).exists():
        fingerprint.seal(out)
    return path


def write_tables(
    out: Path, probes: pd.DataFrame, turns: pd.DataFrame, summary: pd.DataFrame
) -> None:
    """probes.csv, turns.csv (and Parquet copies when pyarrow is installed), then
    summary.csv last (see ``write_summary``).

    Raises:
        OutputError: the folder cannot be written.
    """
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        parquet = False
    else:
        parquet = True
    for name, frame in (("probes", probes), ("turns", turns)):
        atomic_write(out / f"{name}.csv", _csv(frame))
        if parquet:
            atomic_write(out / f"{name}.parquet", _parquet(frame), binary=True)
    write_summary(out, summary)


def _csv(frame: pd.DataFrame) -> Callable[[Any], None]:
    return lambda f: frame.to_csv(f, index=False)


def _parquet(frame: pd.DataFrame) -> Callable[[Any], None]:
    return lambda f: frame.to_parquet(f, index=False)


PROBE_KEYS = ("transcript", "strategy", "scored", "far", "corrected")
TURN_KEYS = ("transcript", "strategy", "turn_index")
"""The columns summarize needs of probes.csv and turns.csv."""


def load_rows(run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    reading = run_dir / "probes.csv"
    try:
        probes = pd.read_csv(
            reading, dtype={"category": str}, keep_default_na=False, na_values=[""]
        )
        reading = run_dir / "turns.csv"
        turns = pd.read_csv(reading)
    except FileNotFoundError as exc:
        raise MemlabError(
            f"{run_dir} is not a memlab run folder (missing {Path(exc.filename).name})"
        ) from None
    except pd.errors.EmptyDataError:
        return pd.DataFrame(), pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise MemlabError(
            f"{reading} is not a table memlab wrote ({detail}); restore the folder or re-run it"
        ) from None
    for name, frame, needed in (
        ("probes.csv", probes, PROBE_KEYS),
        ("turns.csv", turns, TURN_KEYS),
    ):
        lacking = [c for c in needed if c not in frame]
        if lacking and not frame.empty:
            raise MemlabError(
                f"{run_dir / name} lacks the columns {lacking}; it is not a table memlab "
                "wrote: restore the folder or re-run it"
            )
    if "category" in probes:
        probes["category"] = probes["category"].astype(object).where(probes["category"].notna(), "")
    return probes, turns


def is_run_dir(path: Path) -> bool:
    return (path / "probes.csv").exists() and (path / "turns.csv").exists()
