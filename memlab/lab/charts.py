"""PNG charts of a run (recall and precision, prompt size, store growth, stale
facts, per-category recall; with a reader, answer accuracy against prompt size
and per category) and of a multirun (Pareto front, precision against prompt
size, heatmaps over two swept keys), and differences between strategies with
their paired intervals. Axes say what is drawn and over what."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memlab.errors import MemlabError
from memlab.lab.metrics import direction
from memlab.lab.summary import format_value


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
    # categories; abstention and unscored groups are drawn hatched.
    for metric, title, name in (
        ("evidence_recall", "Evidence recall", "evidence_recall_by_category.png"),
        ("answer_in_context", "Answer found in the context", "answer_in_context_by_category.png"),
        ("answer_accuracy", "Answer accuracy (judged)", "answer_accuracy_by_category.png"),
    ):
        path = _category_chart(plt, summary, strategies, metric, title, out / name)
        if path is not None:
            written.append(path)

    # 6. With a reader: answer accuracy against the prompt size, one point per strategy.
    path = accuracy_chart(summary, out)
    if path is not None:
        written.append(path)
    return written


def accuracy_chart(summary: pd.DataFrame, out: Path) -> Path | None:
    """Answer accuracy (95% bootstrap CI) against mean prompt tokens, one point per
    strategy: the tokens the reader's endpoint counted when the run has them, else
    the lab's estimate. None when the run has no answers."""
    sub = summary[summary.group == "all"]
    acc = sub[sub.metric == "answer_accuracy"].set_index("strategy")
    if acc.empty:
        return None
    x_metric = (
        "reader_prompt_tokens" if (sub.metric == "reader_prompt_tokens").any() else "prompt_tokens"
    )
    x = sub[sub.metric == x_metric].set_index("strategy")["mean"].reindex(acc.index)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, s in enumerate(acc.index):
        row = acc.loc[s]
        err = [[max(0.0, row["mean"] - row["ci_low"])], [max(0.0, row["ci_high"] - row["mean"])]]
        ax.errorbar(
            [x[s]],
            [row["mean"]],
            yerr=err,
            fmt="o",
            capsize=3,
            label=f"{s} (n={int(row['n'])})",
            color=f"C{i % 10}",
        )
    ax.set_xscale("log")
    ax.set_ylim(0, 1.05)
    what = "as the reader's endpoint counted" if x_metric == "reader_prompt_tokens" else "estimated"
    ax.set_xlabel(f"prompt tokens per probe (mean, {what}; log)")
    ax.set_ylabel("answer accuracy (mean, 95% bootstrap CI)")
    ax.set_title("Answer accuracy vs prompt size")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    out.mkdir(parents=True, exist_ok=True)
    return _save(fig, out / "accuracy_vs_prompt_tokens.png")


def difference_chart(
    table: pd.DataFrame, metric: str, out: Path, prefix: str = "difference"
) -> Path | None:
    """The differences of one metric against the reference (``differences`` rows),
    with their paired intervals: one row per strategy, one marker per group
    (filled when the interval excludes 0), a line at 0; ``<prefix>_<metric>.png``."""
    sub = table[table["metric"] == metric]
    if sub.empty:
        return None
    groups = list(dict.fromkeys(sub["group"]))
    strategies = list(dict.fromkeys(sub["strategy"]))
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(strategies) * max(1, len(groups)) ** 0.5 + 2))
    step = 0.8 / max(1, len(groups))
    for k, g in enumerate(groups):
        rows = sub[sub["group"] == g].set_index("strategy").reindex(strategies)
        y = np.arange(len(strategies)) + k * step
        err = np.vstack([rows["diff"] - rows["ci_low"], rows["ci_high"] - rows["diff"]]).clip(min=0)
        color = f"C{k % 10}"
        ax.errorbar(rows["diff"], y, xerr=err, fmt="none", ecolor=color, capsize=2, lw=1)
        shown = rows["shown"].fillna(False).astype(bool).to_numpy()
        ax.scatter(rows["diff"][shown], y[shown], color=color, zorder=3, label=g)
        ax.scatter(rows["diff"][~shown], y[~shown], facecolors="white", edgecolors=color, zorder=3)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(np.arange(len(strategies)) + step * (len(groups) - 1) / 2, strategies)
    ax.invert_yaxis()
    ref = str(sub["reference"].iloc[0])
    ax.set_xlabel(f"{metric}: strategy - {ref}, same probes (mean, paired bootstrap 95% CI)")
    ax.set_title(f"Difference from {ref} (filled: the interval excludes 0)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    out.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in metric)
    return _save(fig, out / f"{prefix}_{safe}.png")


OUTSIDE_ALL = ("abstention:", "unscored:")
"""Groups kept out of the ``all`` averages (drawn hatched)."""


def _category_chart(
    plt: Any, summary: pd.DataFrame, strategies: list[str], metric: str, title: str, path: Path
) -> Path | None:
    is_cat = summary.group.str.startswith(("category:", *OUTSIDE_ALL))
    cats = summary[is_cat & (summary.metric == metric)]
    if cats.empty:
        return None
    groups = sorted(dict.fromkeys(cats.group), key=lambda g: (g.startswith(OUTSIDE_ALL), g))
    labels = [
        g.split(":", 1)[1] + (f"\n({g.split(':', 1)[0]})" if g.startswith(OUTSIDE_ALL) else "")
        for g in groups
    ]
    fig, ax = plt.subplots(figsize=(max(8, 0.22 * len(groups) * len(strategies) + 3), 4.5))
    width = 0.8 / len(strategies)
    for k, s in enumerate(strategies):
        sub = cats[cats.strategy == s].set_index("group").reindex(groups)
        bars = ax.bar(np.arange(len(groups)) + k * width, sub["mean"], width, label=s)
        for bar, g in zip(bars, groups, strict=True):
            if g.startswith(OUTSIDE_ALL):
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
        stacked: dict[tuple[float, float], int] = {}
        for _, row in front.iterrows():
            label = f"{row['job']}: " + ", ".join(f"{k.split('.')[-1]}={row[k]}" for k in keys)
            if several:
                label += f" ({row['strategy']})"
            at = (float(row["prompt_tokens"]), float(row[metric]))
            below = stacked[at] = stacked.get(at, -1) + 1  # equal points: labels one under another
            ax.annotate(
                label.rstrip(": "),
                at,
                fontsize=7,
                xytext=(3, -9 - 8 * below),
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
    sign = direction(metric)
    im = ax.imshow(grid, cmap="viridis" if sign >= 0 else "viridis_r", aspect="auto")
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
                    color="white" if (grid[i, j] < mid) == (sign >= 0) else "black",
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
