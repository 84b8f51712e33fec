"""Tables and charts from replay rows: summary.csv (long form), PNG charts, the
terminal summary, and rebuilding all of it from a run or multirun folder."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memlab.errors import MemlabError
from memlab.lab.metrics import METRICS, bootstrap_ci

PROBE_METRICS = [m for m in METRICS]
TURN_METRICS = ["write_ms", "maintain_ms"]
FINAL_METRICS = ["store_records", "store_archived", "store_tokens", "store_bytes"]
SUMMARY_COLUMNS = ["strategy", "group", "metric", "mean", "ci_low", "ci_high", "n"]
TABLE_METRICS = [
    "fact_recall", "evidence_recall", "precision", "stale_rate", "stale_wins",
    "context_tokens", "prompt_tokens", "leaks", "untrusted_items", "recall_ms",
]  # fmt: skip


def probe_groups(probes: pd.DataFrame) -> dict[str, pd.Series]:
    """Row masks of the probe groups in summary.csv.

    ``all`` is every scored probe; ``far`` the scored probes whose evidence lies
    beyond ``report.far_turns`` same-scope turns; ``corrected`` the scored probes
    that need a fact that was corrected; ``category:<name>`` the scored probes of
    a category; ``unscored:<name>`` its unscored probes (LoCoMo's adversarial
    questions, LongMemEval's abstention questions), kept visible but out of every
    other group's averages.
    """
    if probes.empty:
        return {}
    scored = probes["scored"].astype(bool)
    groups = {
        "all": scored,
        "far": scored & probes["far"].astype(bool),
        "corrected": scored & probes["corrected"].astype(bool),
    }
    category = probes["category"].fillna("")
    cats = sorted(c for c in category.unique() if c)
    for prefix, wanted in (("category", scored), ("unscored", ~scored)):
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
    for s in strategies:
        mine = probes[probes["strategy"] == s] if not probes.empty else probes
        for gname, mask in groups.items():
            sub = mine[mask.loc[mine.index]]
            for m in PROBE_METRICS:
                if not sub.empty and m in sub:
                    add(s, gname, m, sub[m], keep_empty=False)
        tmine = turns[turns["strategy"] == s] if not turns.empty else turns
        if tmine.empty:
            continue
        for m in TURN_METRICS:
            add(s, "all", m, tmine[m], keep_empty=True)
        final = tmine.sort_values("turn_index").groupby("transcript").tail(1)
        for m in FINAL_METRICS:
            add(s, "all", f"final_{m}", final[m], keep_empty=True)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def summary_table(
    summary: pd.DataFrame, group: str = "all", metrics: Sequence[str] = TABLE_METRICS
) -> pd.DataFrame:
    """Strategies x metrics (means) for one group, in the order strategies first appear."""
    sub = summary[summary["group"] == group]
    order = list(dict.fromkeys(sub["strategy"]))
    table = sub.pivot_table(index="strategy", columns="metric", values="mean", sort=False)
    cols = [m for m in metrics if m in table.columns]
    table = table.reindex(index=order, columns=cols)
    if group == "all":
        far = summary[(summary["group"] == "far") & (summary["metric"] == "fact_recall")]
        if not far.empty:
            table.insert(
                1 if "fact_recall" in cols else 0,
                "fact_recall_far",
                far.set_index("strategy")["mean"].reindex(order),
            )
    return table


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


def format_table(table: pd.DataFrame) -> str:
    return table.to_string(formatters=dict.fromkeys(table.columns, format_value))


# -- charts ---------------------------------------------------------------------
def _plt() -> Any:
    import logging

    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def charts(
    probes: pd.DataFrame, turns: pd.DataFrame, summary: pd.DataFrame, out: Path
) -> list[Path]:
    """Draw the run's charts into ``out``; return the files written."""
    out.mkdir(parents=True, exist_ok=True)
    plt = _plt()
    written: list[Path] = []
    strategies = list(dict.fromkeys(summary["strategy"]))

    # 1. Recall and precision by strategy, with bootstrap intervals.
    wanted = [
        ("all", "fact_recall"),
        ("far", "fact_recall"),
        ("all", "evidence_recall"),
        ("all", "precision"),
    ]
    present = [
        (g, m) for g, m in wanted if not summary[(summary.group == g) & (summary.metric == m)].empty
    ]
    if present:
        fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(strategies) + 2), 4))
        width = 0.8 / len(present)
        for k, (g, m) in enumerate(present):
            sub = (
                summary[(summary.group == g) & (summary.metric == m)]
                .set_index("strategy")
                .reindex(strategies)
            )
            x = np.arange(len(strategies)) + k * width
            err = np.vstack([sub["mean"] - sub["ci_low"], sub["ci_high"] - sub["mean"]]).clip(min=0)
            label = m if g == "all" else f"{m} ({g} probes)"
            ax.bar(x, sub["mean"], width, yerr=err, capsize=3, label=label)
        ax.set_xticks(
            np.arange(len(strategies)) + width * (len(present) - 1) / 2,
            strategies,
            rotation=20,
            ha="right",
        )
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("mean over probes (95% bootstrap CI)")
        ax.set_title("Recall and precision by strategy")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
        written.append(_save(fig, out / "recall_precision.png"))

    # 2. Prompt tokens at each probe, by position in the transcript.
    if not probes.empty:
        fig, ax = plt.subplots(figsize=(7, 4))
        for i, s in enumerate(strategies):
            sub = probes[probes.strategy == s].groupby("turn_index")["prompt_tokens"].mean()
            if not sub.empty:
                ax.plot(sub.index, sub.values, marker=".", label=s, **_style(i))
        ax.set_yscale("log")
        ax.set_xlabel("turn index of the probe")
        ax.set_ylabel("prompt tokens (mean over transcripts, log)")
        ax.set_title("Prompt size per turn")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
        written.append(_save(fig, out / "prompt_tokens.png"))

    # 3. Store growth per turn (active records and tokens).
    if not turns.empty:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for s in strategies:
            sub = (
                turns[turns.strategy == s]
                .groupby("turn_index")[["store_records", "store_tokens"]]
                .mean()
            )
            if sub.empty:
                continue
            axes[0].plot(sub.index, sub["store_records"], label=s)
            axes[1].plot(sub.index, sub["store_tokens"], label=s)
        axes[0].set_ylabel("active records (mean over transcripts)")
        axes[1].set_ylabel("active tokens (mean over transcripts)")
        for ax in axes:
            ax.set_xlabel("turn index")
        axes[0].set_title("Store growth: records")
        axes[1].set_title("Store growth: tokens")
        axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
        written.append(_save(fig, out / "store_growth.png"))

    # 4. Stale facts on probes that need a corrected fact.
    stale = summary[
        (summary.group == "corrected")
        & summary.metric.isin(["stale_rate", "stale_wins", "fact_recall"])
    ]
    if not stale.empty:
        fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(strategies) + 2), 4))
        metrics = ["fact_recall", "stale_rate", "stale_wins"]
        width = 0.8 / len(metrics)
        for k, m in enumerate(metrics):
            sub = stale[stale.metric == m].set_index("strategy").reindex(strategies)
            err = np.vstack([sub["mean"] - sub["ci_low"], sub["ci_high"] - sub["mean"]]).clip(min=0)
            ax.bar(
                np.arange(len(strategies)) + k * width,
                sub["mean"],
                width,
                yerr=err,
                capsize=3,
                label=m,
            )
        ax.set_xticks(np.arange(len(strategies)) + width, strategies, rotation=20, ha="right")
        ax.set_ylim(0, 1.05)
        ax.set_title("Probes that need a corrected fact")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
        written.append(_save(fig, out / "stale_rate.png"))

    # 5. Per-category evidence recall and answer-in-context, when probes carry
    # categories; unscored groups (adversarial, abstention) are drawn hatched.
    for metric, title, name in (
        ("evidence_recall", "Evidence recall", "evidence_recall_by_category.png"),
        ("answer_in_context", "Answer found in the context", "answer_in_context_by_category.png"),
    ):
        path = _category_chart(plt, summary, strategies, metric, title, out / name)
        if path is not None:
            written.append(path)
    return written


def _category_chart(
    plt: Any, summary: pd.DataFrame, strategies: list[str], metric: str, title: str, path: Path
) -> Path | None:
    is_cat = summary.group.str.startswith(("category:", "unscored:"))
    cats = summary[is_cat & (summary.metric == metric)]
    if cats.empty:
        return None
    groups = sorted(dict.fromkeys(cats.group), key=lambda g: (g.startswith("unscored:"), g))
    labels = [
        g.split(":", 1)[1] + ("\n(unscored)" if g.startswith("unscored:") else "") for g in groups
    ]
    fig, ax = plt.subplots(figsize=(max(8, 0.22 * len(groups) * len(strategies) + 3), 4.5))
    width = 0.8 / len(strategies)
    for k, s in enumerate(strategies):
        sub = cats[cats.strategy == s].set_index("group").reindex(groups)
        bars = ax.bar(np.arange(len(groups)) + k * width, sub["mean"], width, label=s)
        for bar, g in zip(bars, groups, strict=True):
            if g.startswith("unscored:"):
                bar.set_hatch("//")
    n = cats[cats.strategy == strategies[0]].set_index("group")["n"].reindex(groups)
    ax.set_xticks(
        np.arange(len(groups)) + width * (len(strategies) - 1) / 2,
        [f"{lab}\nn={int(c)}" if c == c else lab for lab, c in zip(labels, n, strict=True)],
        fontsize=8,
    )
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(f"{metric} (mean over probes)")
    ax.set_title(f"{title} by question category")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return _save(fig, path)


STYLES = ["-", "--", "-.", ":"]


def _style(i: int) -> dict[str, Any]:
    """Line styles that keep overlapping strategies visible."""
    return {"linestyle": STYLES[i % len(STYLES)], "linewidth": 2.2 - 0.3 * (i % 4)}


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


# -- run folders ----------------------------------------------------------------
def write_tables(
    out: Path, probes: pd.DataFrame, turns: pd.DataFrame, summary: pd.DataFrame
) -> None:
    """probes.csv, turns.csv, summary.csv (and Parquet copies when pyarrow is installed)."""
    out.mkdir(parents=True, exist_ok=True)
    probes.to_csv(out / "probes.csv", index=False)
    turns.to_csv(out / "turns.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return
    probes.to_parquet(out / "probes.parquet", index=False)
    turns.to_parquet(out / "turns.parquet", index=False)


def load_rows(run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    try:
        probes = pd.read_csv(
            run_dir / "probes.csv", dtype={"category": str}, keep_default_na=False, na_values=[""]
        )
        turns = pd.read_csv(run_dir / "turns.csv")
    except FileNotFoundError as exc:
        raise MemlabError(
            f"{run_dir} is not a memlab run folder (missing {Path(exc.filename).name})"
        ) from None
    except pd.errors.EmptyDataError:
        return pd.DataFrame(), pd.DataFrame()
    if "category" in probes:
        probes["category"] = probes["category"].astype(object).where(probes["category"].notna(), "")
    return probes, turns


def is_run_dir(path: Path) -> bool:
    return (path / "probes.csv").exists() and (path / "turns.csv").exists()


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
    path: Path, *, recompute: bool = False, n_boot: int = 1000, seed: int = 0, draw: bool = False
) -> tuple[pd.DataFrame, list[str], list[Path]]:
    """One tidy table over every job of a multirun folder.

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
            probes, turns = load_rows(job)
            summary = summarize(probes, turns, n_boot=n_boot, seed=seed)
            summary.to_csv(summary_file, index=False)
            if draw:
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
    best = -math.inf
    for idx, value in zip(order.index, order[y], strict=True):
        if float(value) > best:
            flags[idx] = True
            best = float(value)
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


def pareto_chart(points: pd.DataFrame, keys: Sequence[str], metric: str, out: Path) -> Path:
    """Recall against prompt tokens for every job and strategy, the front as a step line."""
    out.mkdir(parents=True, exist_ok=True)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5))
    for s, g in points.groupby("strategy", sort=False):
        ax.scatter(g["prompt_tokens"], g[metric], label=str(s), alpha=0.75)
    front = points[points["on_front"]].sort_values("prompt_tokens")
    if not front.empty:
        ax.step(
            front["prompt_tokens"],
            front[metric],
            where="post",
            color="black",
            linewidth=1,
            label="Pareto front",
        )
        several = points["strategy"].nunique() > 1
        for _, row in front.iterrows():
            label = f"{row['job']}: " + ", ".join(f"{k.split('.')[-1]}={row[k]}" for k in keys)
            if several:
                label += f" ({row['strategy']})"
            ax.annotate(
                label.rstrip(": "),
                (row["prompt_tokens"], row[metric]),
                fontsize=7,
                xytext=(3, -9),
                textcoords="offset points",
            )
    ax.set_xlabel("prompt tokens (mean per probe)")
    ax.set_ylabel(f"{metric} (mean over probes)")
    ax.set_title(f"{metric} vs prompt tokens across jobs (front: job: swept values)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return _save(fig, out / f"pareto_{metric}_vs_prompt_tokens.png")


def _sorted_values(values: Sequence[Any]) -> list[Any]:
    uniq = list(dict.fromkeys(values))
    try:
        return sorted(uniq, key=float)
    except (TypeError, ValueError):
        return sorted(uniq, key=str)


def heatmap_chart(
    table: pd.DataFrame,
    keys: tuple[str, str],
    metric: str,
    out: Path,
    *,
    strategy: str,
    group: str = "all",
) -> Path:
    """A metric's mean for every pair of values of two swept keys (one strategy).

    Cells where several jobs share the pair (other keys swept too) show the mean
    over those jobs; the title says so.
    """
    k1, k2 = keys
    sub = table[
        (table["metric"] == metric) & (table["strategy"] == strategy) & (table["group"] == group)
    ]
    if sub.empty:
        raise MemlabError(
            f"no {metric!r} rows for strategy {strategy!r}, group {group!r} in this sweep"
        )
    rows, cols = _sorted_values(list(sub[k1])), _sorted_values(list(sub[k2]))
    grid = np.full((len(rows), len(cols)), np.nan)
    counts = np.zeros_like(grid)
    for (a, b), g in sub.groupby([k1, k2], sort=False, dropna=False):
        grid[rows.index(a), cols.index(b)] = g["mean"].mean()
        counts[rows.index(a), cols.index(b)] = len(g)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 3, 0.7 * len(rows) + 2.2))
    direction = METRICS[metric].direction if metric in METRICS else 0
    im = ax.imshow(grid, cmap="viridis" if direction >= 0 else "viridis_r", aspect="auto")
    finite = grid[np.isfinite(grid)]
    mid = float(np.mean([finite.min(), finite.max()])) if finite.size else 0.0
    for i in range(len(rows)):
        for j in range(len(cols)):
            if np.isfinite(grid[i, j]):
                ax.text(
                    j,
                    i,
                    format_value(float(grid[i, j])),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if (grid[i, j] < mid) == (direction >= 0) else "black",
                )
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    ax.set_xlabel(k2)
    ax.set_ylabel(k1)
    note = " (mean over jobs per cell)" if counts.max() > 1 else ""
    ax.set_title(f"{metric}, {strategy}, group {group}{note}", fontsize=9)
    fig.colorbar(im, ax=ax)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{k1}_x_{k2}_{strategy}")
    return _save(fig, out / f"heatmap_{metric}_{safe}.png")


def sweep_report(
    path: Path,
    *,
    recompute: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    draw: bool = True,
    heatmap: tuple[str, str] | None = None,
    metric: str | None = None,
    strategy: str | None = None,
) -> list[str]:
    """Build a multirun folder's report; return lines to print.

    Writes ``multirun_summary.csv`` (see ``sweep_table``), ``pareto.csv`` and, when
    ``draw`` is set, ``charts/``: the Pareto front of recall against prompt
    tokens, precision against prompt tokens, and a heatmap of ``metric`` over
    two swept keys (``heatmap``; by default the two keys when exactly two were
    swept) for ``strategy`` (default: the only one, else ``memory``, else the first).

    Raises:
        MemlabError: no jobs with results, unknown heatmap key, metric or strategy.
    """
    table, keys, failed = sweep_table(
        path, recompute=recompute, n_boot=n_boot, seed=seed, draw=draw
    )
    table.to_csv(path / "multirun_summary.csv", index=False)
    strategies = list(dict.fromkeys(table["strategy"]))
    recall = recall_metric(table)
    metric = metric or recall
    if metric not in set(table["metric"]):
        raise MemlabError(
            f"--metric {metric!r} is not in this sweep; choose one of {sorted(set(table['metric']))}"
        )
    if heatmap is not None:
        unknown = [k for k in heatmap if k not in table.columns or k in SUMMARY_COLUMNS]
        if unknown:
            raise MemlabError(
                f"--heatmap key {unknown[0]!r} was not swept here; swept keys: {keys or '(none)'}"
            )
    elif len(keys) == 2:
        heatmap = (keys[0], keys[1])
    if strategy is not None and strategy not in strategies:
        raise MemlabError(f"--strategy {strategy!r} is not in this sweep; it has {strategies}")
    points = pareto_table(table, keys, recall)
    points.to_csv(path / "pareto.csv", index=False)
    written: list[Path] = []
    if draw:
        charts_dir = path / "charts"
        written.append(pareto_chart(points, keys, recall, charts_dir))
        written.append(multirun_chart(table, charts_dir))
        if heatmap is not None:
            chosen = [strategy] if strategy else _heatmap_strategies(strategies)
            for s in chosen:
                written.append(heatmap_chart(table, heatmap, metric, charts_dir, strategy=s))
    lines = []
    view = wide_means(table, keys)
    cols = [
        c for c in ("fact_recall", "evidence_recall", "precision", "prompt_tokens") if c in view
    ]
    shown = view[["job", *keys, "strategy", *cols]].set_index(["job", *keys, "strategy"])
    lines.append(format_table(shown))
    front = points[points["on_front"]]
    lines.append(
        f"\nPareto front ({recall} vs prompt_tokens): "
        + ", ".join(f"job {j} {s}" for j, s in zip(front["job"], front["strategy"], strict=True))
    )
    if failed:
        lines.append(
            f"warning: {len(failed)} jobs have no results (failed or still running): "
            + ", ".join(p.name for p in failed)
        )
    n_jobs = table["job"].nunique()
    lines.append(
        f"\n{n_jobs} jobs, swept {', '.join(keys) or 'nothing'}: {path / 'multirun_summary.csv'}, "
        f"{path / 'pareto.csv'}"
        + (f", {len(written)} charts in {path / 'charts'}" if written else "")
    )
    return lines


def _heatmap_strategies(strategies: Sequence[str]) -> list[str]:
    if len(strategies) == 1:
        return list(strategies)
    return ["memory"] if "memory" in strategies else [strategies[0]]


def rebuild(
    path: Path,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    draw: bool = True,
    heatmap: tuple[str, str] | None = None,
    metric: str | None = None,
    strategy: str | None = None,
) -> list[str]:
    """Rebuild summary.csv and charts of a run folder, or of every job of a multirun
    folder plus the sweep report (``sweep_report``); return lines to print."""
    lines: list[str] = []
    if is_run_dir(path):
        probes, turns = load_rows(path)
        summary = summarize(probes, turns, n_boot=n_boot, seed=seed)
        summary.to_csv(path / "summary.csv", index=False)
        written = charts(probes, turns, summary, path / "charts") if draw else []
        lines.append(format_table(summary_table(summary)))
        lines.append(
            f"\nrebuilt {path / 'summary.csv'}"
            + (f" and {len(written)} charts in {path / 'charts'}" if written else "")
        )
        return lines
    return sweep_report(
        path,
        recompute=True,
        n_boot=n_boot,
        seed=seed,
        draw=draw,
        heatmap=heatmap,
        metric=metric,
        strategy=strategy,
    )


def multirun_chart(combined: pd.DataFrame, out: Path) -> Path:
    """Precision against prompt tokens, one point per job and strategy."""
    out.mkdir(parents=True, exist_ok=True)
    plt = _plt()
    sub = combined[combined.group == "all"]
    wide = sub.pivot_table(index=["job", "strategy"], columns="metric", values="mean").reset_index()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s, g in wide.groupby("strategy", sort=False):
        if {"prompt_tokens", "precision"} <= set(g.columns):
            ax.scatter(g["prompt_tokens"], g["precision"], label=s)
            for _, row in g.iterrows():
                ax.annotate(
                    str(row["job"]), (row["prompt_tokens"], row["precision"]), fontsize=7, alpha=0.7
                )
    ax.set_xscale("log")
    ax.set_xlabel("prompt tokens (mean per probe, log)")
    ax.set_ylabel("precision")
    ax.set_title("Precision vs prompt size across jobs (labels: job number)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return _save(fig, out / "precision_vs_prompt_tokens.png")
