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
    strategies = list(
        dict.fromkeys(list(probes.get("strategy", [])) + list(turns.get("strategy", [])))
    )
    groups = probe_groups(probes)
    for s in strategies:
        mine = probes[probes["strategy"] == s] if not probes.empty else probes
        for gname, mask in groups.items():
            sub = mine[mask.loc[mine.index]]
            if sub.empty:
                continue
            for m in PROBE_METRICS:
                if m in sub:
                    mean, lo, hi, n = bootstrap_ci(sub[m].to_numpy(dtype=float), n_boot, seed)
                    if n:
                        rows.append(
                            dict(
                                strategy=s,
                                group=gname,
                                metric=m,
                                mean=mean,
                                ci_low=lo,
                                ci_high=hi,
                                n=n,
                            )
                        )
        tmine = turns[turns["strategy"] == s] if not turns.empty else turns
        if tmine.empty:
            continue
        for m in TURN_METRICS:
            mean, lo, hi, n = bootstrap_ci(tmine[m].to_numpy(dtype=float), n_boot, seed)
            rows.append(
                dict(strategy=s, group="all", metric=m, mean=mean, ci_low=lo, ci_high=hi, n=n)
            )
        final = tmine.sort_values("turn_index").groupby("transcript").tail(1)
        for m in FINAL_METRICS:
            mean, lo, hi, n = bootstrap_ci(final[m].to_numpy(dtype=float), n_boot, seed)
            rows.append(
                dict(
                    strategy=s,
                    group="all",
                    metric=f"final_{m}",
                    mean=mean,
                    ci_low=lo,
                    ci_high=hi,
                    n=n,
                )
            )
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


def format_table(table: pd.DataFrame) -> str:
    def fmt(v: float) -> str:
        if isinstance(v, float) and math.isnan(v):
            return "-"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.3f}"

    return table.to_string(formatters=dict.fromkeys(table.columns, fmt))


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
    return sorted(
        jobs, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name)
    )


def job_overrides(job: Path) -> dict[str, str]:
    """The command-line overrides a Hydra job ran with (key -> value)."""
    f = job / ".hydra" / "overrides.yaml"
    if not f.exists():
        return {}
    from omegaconf import OmegaConf

    out: dict[str, str] = {}
    for item in OmegaConf.to_container(OmegaConf.load(f)) or []:
        key, _, value = str(item).partition("=")
        out[key.lstrip("+~")] = value
    return out


def rebuild(path: Path, *, n_boot: int = 1000, seed: int = 0, draw: bool = True) -> list[str]:
    """Rebuild summary.csv and charts of a run folder, or of every job of a multirun
    folder plus one combined table and chart; return lines to print."""
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
    jobs = job_dirs(path)
    if not jobs:
        raise MemlabError(f"{path} holds no memlab run (no probes.csv here or in its subfolders)")
    frames = []
    for job in jobs:
        probes, turns = load_rows(job)
        summary = summarize(probes, turns, n_boot=n_boot, seed=seed)
        summary.to_csv(job / "summary.csv", index=False)
        if draw:
            charts(probes, turns, summary, job / "charts")
        overrides = job_overrides(job)
        summary.insert(0, "job", job.name)
        for k, v in overrides.items():
            summary[k] = v
        frames.append(summary)
    combined = pd.concat(frames, ignore_index=True)
    combined.to_csv(path / "multirun_summary.csv", index=False)
    written = [multirun_chart(combined, path / "charts")] if draw else []
    keys = [c for c in combined.columns if c not in SUMMARY_COLUMNS and c != "job"]
    view = combined[
        (combined.group == "all")
        & combined.metric.isin(["fact_recall", "evidence_recall", "precision", "prompt_tokens"])
    ]
    table = view.pivot_table(
        index=["job", *keys, "strategy"], columns="metric", values="mean", sort=False
    )
    lines.append(format_table(table))
    lines.append(
        f"\n{len(jobs)} jobs: {path / 'multirun_summary.csv'}"
        + (f", {written[0]}" if written else "")
    )
    return lines


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
