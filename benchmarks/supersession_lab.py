"""The lab's supersession figures: corrected, false-correction and plain-fact probes
per strategy, from finished ``memlab run`` folders, as a table and a chart.

    python -m benchmarks.supersession_lab --run "held-out, hash=results/runs/heldout-hash" \\
        --run "held-out, MiniLM=results/runs/heldout-minilm" --out docs/img/supersession

Each ``--run LABEL=DIR`` names a run folder (its ``summary.csv``); the table has
one row per run, strategy and probe group, with ``fact_recall``, ``stale_rate``
and ``stale_wins`` (means and bootstrap intervals, as the run reported them), and
the chart shows fact recall and stale wins per group with those intervals.
``--markdown`` prints the table as Markdown (docs/supersession.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

GROUPS = {
    "category:corrected": "corrected",
    "category:false_correction": "false correction",
    "category:fact": "plain fact",
    "all": "all probes",
}
METRICS = ("fact_recall", "stale_rate", "stale_wins")


def table(runs: Sequence[tuple[str, Path]]) -> pd.DataFrame:
    """One row per run, strategy and probe group (long format: mean, ci_low, ci_high, n)."""
    frames = []
    for label, folder in runs:
        s = pd.read_csv(folder / "summary.csv")
        s = s[s.group.isin(GROUPS) & s.metric.isin(METRICS)]
        frames.append(s.assign(run=label, group=s.group.map(GROUPS)))
    return pd.concat(frames, ignore_index=True)


def markdown(df: pd.DataFrame) -> str:
    """Runs x strategies x groups, each metric as ``mean (low-high)``."""
    cell = df.assign(
        value=[
            f"{m:.2f} ({lo:.2f}-{hi:.2f})"
            for m, lo, hi in zip(df["mean"], df.ci_low, df.ci_high, strict=True)
        ]
    )
    wide = cell.pivot_table(
        index=["run", "strategy", "group", "n"], columns="metric", values="value", aggfunc="first"
    ).reset_index()
    rank = {g: i for i, g in enumerate(GROUPS.values())}
    wide = wide.assign(_g=wide.group.map(rank)).sort_values(
        ["run", "strategy", "_g"], kind="stable"
    )
    cols = ["run", "strategy", "group", "n", *METRICS]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in wide[cols].iterrows():
        lines.append(
            "| " + " | ".join(str(row[c]) if c != "n" else str(int(row[c])) for c in cols) + " |"
        )
    return "\n".join(lines)


def chart(df: pd.DataFrame, path: Path) -> Path:
    """Fact recall and stale wins per probe group, one panel row per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    runs = list(dict.fromkeys(df.run))
    strategies = list(dict.fromkeys(df.strategy))
    groups = [g for g in GROUPS.values() if g in set(df.group) and g != "all probes"]
    fig, axes = plt.subplots(len(runs), 2, figsize=(11, 3.2 * len(runs)), squeeze=False)
    width = 0.8 / len(strategies)
    for i, run in enumerate(runs):
        for j, metric in enumerate(("fact_recall", "stale_wins")):
            ax = axes[i][j]
            for k, strategy in enumerate(strategies):
                part = df[(df.run == run) & (df.strategy == strategy) & (df.metric == metric)]
                part = part.set_index("group").reindex(groups)
                x = np.arange(len(groups)) + (k - (len(strategies) - 1) / 2) * width
                err = np.vstack([part["mean"] - part.ci_low, part.ci_high - part["mean"]])
                ax.bar(x, part["mean"], width, yerr=err, capsize=3, label=strategy)
            ax.set_xticks(np.arange(len(groups)), groups)
            ax.set_ylim(0, 1)
            ax.set_ylabel(metric.replace("_", " ") + " (95% CI)")
            ax.set_title(
                f"{run}: {metric.replace('_', ' ')}"
                + (" (lower is better)" if metric == "stale_wins" else "")
            )
    axes[0][0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.supersession_lab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--run", action="append", required=True, metavar="LABEL=DIR")
    ap.add_argument("--out", default="results/bench", help="folder for the CSV and the PNG")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args(argv)
    runs = []
    for spec in args.run:
        label, sep, folder = spec.partition("=")
        if not sep or not (Path(folder) / "summary.csv").is_file():
            ap.error(f"--run {spec!r}: expected LABEL=DIR with DIR/summary.csv")
        runs.append((label, Path(folder)))
    df = table(runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "supersession-lab.csv", index=False)
    print(markdown(df) if args.markdown else df.to_string(index=False))
    print(f"chart: {chart(df, out / 'supersession-lab.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
