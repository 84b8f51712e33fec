"""Figures for docs/tuning.md: what the long workload (transcripts=synthetic_long) shows.

Reads folders that memlab wrote (it runs nothing itself) and prints markdown tables;
with --charts DIR it also draws the docs' charts there (results/long, linked from docs/img/long).

    memlab run transcripts=synthetic_long hydra.run.dir=R
    memlab run -m +experiment=eviction transcripts=synthetic_long hydra.sweep.dir=E
    memlab run -m +experiment=half_life_budget transcripts=synthetic_long hydra.sweep.dir=H
    memlab run -m +experiment=weights_grid transcripts=synthetic_long hydra.sweep.dir=W
    memlab tune ... tune.out=T1   (one or more tunes, LABEL=DIR)
    python -m benchmarks.long_workload --run R --eviction E --half-life H --weights W \
        --tune "shipped, hash=T1" --tune "synthetic_long, hash=T2" --charts results/long

Every interval is a 95% paired bootstrap over probes (memlab.lab.tune.gain.paired_gain):
the same probes answered under two settings.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.lab.report import markdown_table
from memlab.lab.sweep import job_dirs, job_overrides
from memlab.lab.tune.gain import paired_gain


def _probes(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "probes.csv")


def strategies_table(run: Path) -> pd.DataFrame:
    """Quality per token of every strategy of one run (group all)."""
    s = pd.read_csv(run / "summary.csv")
    s = s[s["group"] == "all"]
    wide = s.pivot_table(index="strategy", columns="metric", values="mean", sort=False)
    out = wide[["fact_recall", "prompt_tokens"]].copy()
    out["fact_recall per 1k prompt tokens"] = 1000 * out["fact_recall"] / out["prompt_tokens"]
    return out.reset_index()


def eviction_table(sweep: Path, metric: str = "fact_recall") -> pd.DataFrame:
    """Each eviction policy against ``none``, per strategy: the paired gain and its interval."""
    jobs = {str(job_overrides(j).get("eviction")): j for j in job_dirs(sweep)}
    base = _probes(jobs["none"])
    rows = []
    for policy, job in jobs.items():
        probes = _probes(job)
        for strategy in dict.fromkeys(probes["strategy"]):
            g = paired_gain(base, probes, set_name=policy, metric=metric, direction=1,
                            strategy=strategy, group="all", n_boot=2000)  # fmt: skip
            turns = pd.read_csv(job / "turns.csv")
            mine = turns[turns["strategy"] == strategy]
            final = mine.groupby("transcript").tail(1)["store_records"].mean()
            rows.append({"eviction": policy, "strategy": strategy, metric: g.tuned,
                         "vs none": g.gain, "ci_low": g.ci_low, "ci_high": g.ci_high,
                         "beyond CI": g.ci_low > 0 or g.ci_high < 0,
                         "active records at the end": final})  # fmt: skip
    return pd.DataFrame(rows)


def floor_table(sweep: Path, metric: str = "fact_recall") -> pd.DataFrame:
    """memory_no_floor against memory under each eviction policy (paired)."""
    rows = []
    for job in job_dirs(sweep):
        policy = str(job_overrides(job).get("eviction"))
        probes = _probes(job)
        ref = probes[probes["strategy"] == "memory"].assign(strategy="x")
        alt = probes[probes["strategy"] == "memory_no_floor"].assign(strategy="x")
        g = paired_gain(ref, alt, set_name=policy, metric=metric, direction=1, strategy="x",
                        group="all", n_boot=2000)  # fmt: skip
        changed = int((ref.set_index(["transcript", "probe"])[metric]
                       != alt.set_index(["transcript", "probe"])[metric]).sum())  # fmt: skip
        rows.append({"eviction": policy, "memory": g.default, "memory_no_floor": g.tuned,
                     "difference": g.gain, "ci_low": g.ci_low, "ci_high": g.ci_high,
                     "probes that differ": changed})  # fmt: skip
    return pd.DataFrame(rows)


def sweep_range(sweep: Path, metric: str = "fact_recall", strategy: str = "memory") -> pd.DataFrame:
    """Every job's mean of ``metric`` for ``strategy``, with its overrides."""
    rows = []
    for job in job_dirs(sweep):
        s = pd.read_csv(job / "summary.csv")
        sel = s[(s["strategy"] == strategy) & (s["group"] == "all")].set_index("metric")["mean"]
        rows.append(
            {**job_overrides(job), metric: sel[metric], "prompt_tokens": sel["prompt_tokens"]}
        )
    return pd.DataFrame(rows)


def weights_chart(grid: pd.DataFrame, path: Path) -> Path:
    """fact_recall over the weights grid: one panel per similarity weight, recency on
    the x axis, one line per salience weight."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sims = sorted(grid["memory.weights.similarity"].unique())
    fig, axes = plt.subplots(1, len(sims), figsize=(8.4, 3.2), sharey=True)
    for ax, sim in zip(axes, sims, strict=True):
        sub = grid[grid["memory.weights.similarity"] == sim]
        for sal, line in sub.groupby("memory.weights.salience"):
            line = line.sort_values("memory.weights.recency")
            ax.plot(
                line["memory.weights.recency"], line["fact_recall"], "o-", label=f"salience {sal:g}"
            )
        ax.set_title(f"similarity {sim:g}", fontsize=9)
        ax.set_xlabel("recency weight")
    axes[0].set_ylabel("fact_recall (memory)")
    axes[0].set_ylim(0, 1)
    axes[-1].legend(fontsize=7)
    fig.suptitle("synthetic_long: the weights_grid preset (usage 0.05, budget 400)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tune_rows(tunes: list[tuple[str, Path]]) -> pd.DataFrame:
    rows = []
    for label, folder in tunes:
        t = pd.read_csv(folder / "tune_report.csv")
        for r in t.itertuples():
            rows.append({"tune": label, "set": r.set, "probes": r.probes, "default": r.default,
                         "tuned": r.tuned, "gain": r.gain, "ci_low": r.ci_low,
                         "ci_high": r.ci_high})  # fmt: skip
    return pd.DataFrame(rows)


def _finish(fig: Any, ax: Any, ticks: list[str], ylabel: str, title: str, path: Path) -> Path:
    """A zero line, the x ticks, labels and the file: the end of every gain chart."""
    import matplotlib.pyplot as plt

    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(ticks)))
    ax.set_xticklabels(ticks, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}\n95% paired bootstrap over probes", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw(
    charts: Path,
    evictions: pd.DataFrame | None,
    tunes: pd.DataFrame | None,
    strategies: pd.DataFrame | None,
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    charts.mkdir(parents=True, exist_ok=True)
    out = []
    if evictions is not None:
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        strategies_ = list(dict.fromkeys(evictions["strategy"]))
        policies = list(dict.fromkeys(evictions["eviction"]))
        width = 0.8 / len(strategies_)
        for k, s in enumerate(strategies_):
            sub = evictions[evictions["strategy"] == s].set_index("eviction").loc[policies]
            xs = [i + (k - (len(strategies_) - 1) / 2) * width for i in range(len(policies))]
            ax.errorbar(xs, sub["vs none"], yerr=[sub["vs none"] - sub["ci_low"],
                        sub["ci_high"] - sub["vs none"]], fmt="o", capsize=4, label=s)  # fmt: skip
        title = "synthetic_long: each eviction policy against none"
        out.append(
            _finish(
                fig, ax, policies, "fact_recall vs eviction=none", title, charts / "eviction.png"
            )
        )
    if tunes is not None and not tunes.empty:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        labels = list(dict.fromkeys(tunes["tune"]))
        for k, (s, color) in enumerate((("tuning", "#2a7ab0"), ("held-apart", "#d07020"))):
            sub = tunes[tunes["set"] == s].set_index("tune").loc[labels]
            xs = [i + (k - 0.5) * 0.3 for i in range(len(labels))]
            ax.errorbar(xs, sub["gain"], yerr=[sub["gain"] - sub["ci_low"], sub["ci_high"] - sub["gain"]],
                        fmt="o", capsize=5, color=color, label=f"{s} set")  # fmt: skip
        ticks = [lbl.replace(", ", "\n") for lbl in labels]
        ylabel = "fact_recall gain of the best trial\nover the default (tuned - default)"
        title = "memlab tune: gain on the tuning set vs on held-apart transcripts"
        out.append(_finish(fig, ax, ticks, ylabel, title, charts / "tune_gains.png"))
    if strategies is not None:
        fig, ax = plt.subplots(figsize=(6.0, 3.8))
        for r in strategies.itertuples():
            ax.scatter(r.prompt_tokens, r.fact_recall, s=30)
            ax.annotate(r.strategy, (r.prompt_tokens, r.fact_recall), fontsize=7,
                        xytext=(4, 2), textcoords="offset points")  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("mean prompt tokens (log scale)")
        ax.set_ylabel("fact_recall")
        ax.set_ylim(-0.03, 1.05)
        ax.set_title("synthetic_long: recall against prompt size, budget 400", fontsize=9)
        fig.tight_layout()
        out.append(charts / "strategies.png")
        fig.savefig(out[-1], dpi=110)
        plt.close(fig)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path)
    parser.add_argument("--eviction", type=Path)
    parser.add_argument("--half-life", type=Path)
    parser.add_argument("--weights", type=Path)
    parser.add_argument("--tune", action="append", default=[], metavar="LABEL=DIR")
    parser.add_argument("--charts", type=Path)
    ns = parser.parse_args()
    pd.set_option("display.width", 200)
    strategies = evictions = tunes = None
    if ns.run:
        strategies = strategies_table(ns.run)
        print("## strategies\n\n" + markdown_table(strategies) + "\n")
    if ns.eviction:
        evictions = eviction_table(ns.eviction)
        print("## eviction vs none\n\n" + markdown_table(evictions) + "\n")
        print("## floor\n\n" + markdown_table(floor_table(ns.eviction)) + "\n")
    for name, folder in (("half-life x budget", ns.half_life), ("weights grid", ns.weights)):
        if folder:
            r = sweep_range(folder)
            print(
                f"## {name}: fact_recall {r['fact_recall'].min():.3f} .. {r['fact_recall'].max():.3f}\n"
            )
            print(markdown_table(r.sort_values("fact_recall")) + "\n")
            if ns.charts and folder == ns.weights:
                ns.charts.mkdir(parents=True, exist_ok=True)
                print(f"chart: {weights_chart(r, ns.charts / 'weights_grid.png')}")
    if ns.tune:
        pairs = []
        for item in ns.tune:
            label, _, folder = item.rpartition("=")
            pairs.append((label, Path(folder)))
        tunes = tune_rows(pairs)
        print("## tunes\n\n" + markdown_table(tunes) + "\n")
    if ns.charts:
        for p in draw(ns.charts, evictions, tunes, strategies):
            print(f"chart: {p}")


if __name__ == "__main__":
    main()
