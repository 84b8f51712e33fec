"""The tune folder's report: ``tune_report.md``/``.csv``, ``trials.csv``, ``pareto.csv``
and the charts ``tune_gains.png`` (the gain on each set with its interval) and
``pareto.png`` (multi-objective: the front on the tuning and the held-apart set)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.lab.tune.gain import SETS, Decision, Gain, gain_table


def gain_lines(gains: Mapping[str, Gain]) -> list[str]:
    """The default -> tuned lines of the terminal output, one per set."""
    width = max(len(s) for s in gains)
    out = []
    for s in SETS:
        if s not in gains:
            continue
        g = gains[s]
        out.append(
            f"  {s:<{width}} ({g.transcripts} transcripts, {g.probes} probes): "
            f"{g.default:.4f} -> {g.tuned:.4f}, gain {g.interval()}; prompt tokens "
            f"{g.default_tokens:.0f} -> {g.tuned_tokens:.0f}"
        )
    return out


def gains_chart(gains: Mapping[str, Gain], path: Path, title: str) -> Path:
    """The gain on the tuning and the held-apart set, each with its paired
    interval, against a zero line: the chart that shows whether tuning transferred."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = [s for s in SETS if s in gains]
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for i, s in enumerate(sets):
        g = gains[s]
        lo, hi = g.gain - g.ci_low, g.ci_high - g.gain
        color = "#2a7ab0" if g.beats else "#888888"
        ax.errorbar([i], [g.gain], yerr=[[lo], [hi]], fmt="o", color=color, capsize=6, ms=7)
        ax.annotate(
            f"{g.gain:+.3f}\n[{g.ci_low:+.3f}, {g.ci_high:+.3f}]",
            (i, g.ci_high),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=8,
        )
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xticks(range(len(sets)))
    ax.set_xticklabels([f"{s}\n({gains[s].probes} probes)" for s in sets])
    ax.set_xlim(-0.6, len(sets) - 0.4)
    first = next(iter(gains.values()))
    metric, level = first.metric, first.level
    # The gain is signed so that positive is better: for a lower-is-better metric
    # it is default - tuned, and "tuned - default" would read a drop as a rise.
    sign = "tuned - default" if first.direction >= 0 else "default - tuned, lower is better"
    ax.set_ylabel(f"gain in {metric} ({sign})")
    ax.set_title(f"{title}\n{level:.0%} paired bootstrap over probes", fontsize=9)
    ymin, ymax = ax.get_ylim()
    pad = 0.25 * (ymax - ymin or 0.01)
    ax.set_ylim(min(ymin, -pad), ymax + pad)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def pareto_chart(trials: pd.DataFrame, front: pd.DataFrame, metric: str, path: Path) -> Path:
    """Multi-objective: every complete trial, the front on the tuning set, and the
    same front points scored on the held-apart set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    done = trials[trials["state"] == "complete"]
    ax.scatter(
        done["prompt_tokens"], done["value"], s=14, color="#bbbbbb", label="trials (tuning set)"
    )
    f = front.sort_values("tuning_prompt_tokens")
    ax.plot(
        f["tuning_prompt_tokens"],
        f["tuning_value"],
        "o-",
        color="#2a7ab0",
        label="front, tuning set",
    )
    ax.plot(
        f["held_prompt_tokens"],
        f["held_value"],
        "s--",
        color="#d07020",
        label="same points, held apart",
    )
    default = done[done["default"]]
    if not default.empty:
        ax.scatter(default["prompt_tokens"], default["value"], marker="*", s=120, color="black",
                   label="default (tuning set)", zorder=3)  # fmt: skip
    ax.set_xlabel("mean prompt tokens")
    ax.set_ylabel(metric)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown(
    header: Sequence[str],
    decision: Decision,
    values: Mapping[str, Any],
    gains: Mapping[str, Gain],
    trials: pd.DataFrame,
    preset_text: str | None,
    pareto: pd.DataFrame | None = None,
) -> str:
    """``tune_report.md``: what was tuned and how, the decision, the one set of
    values the preset contains, the gains and the trial counts."""
    from memlab.lab.report import markdown_table

    lines = ["# memlab tune", ""]
    lines += [f"- {h}" for h in header]
    lines += ["", f"**{decision.line}.**", ""]
    if preset_text is not None:
        lines += ["The preset (every value the tuned config sets):", "", "```yaml"]
        lines += [preset_text.rstrip("\n"), "```", ""]
    else:
        lines += [
            "No preset was written. The best trial's values (what a preset would contain):",
            "",
        ]
        lines += ["```yaml", *[f"{k}: {v}" for k, v in values.items()], "```", ""]
    table = gain_table(gains)
    shown = table[
        ["set", "transcripts", "probes", "default", "tuned", "gain", "ci_low", "ci_high",
         "default_tokens", "tuned_tokens"]
    ]  # fmt: skip
    lines += ["Default vs tuned, paired by probe:", "", markdown_table(shown), ""]
    lines += ["![gain on the tuning and the held-apart set](tune_gains.png)", ""]
    if pareto is not None and not pareto.empty:
        lines += ["Pareto front (tuning set) and the same configs on the held-apart set:", ""]
        lines += [markdown_table(pareto), "", "![Pareto front](pareto.png)", ""]
    counts = trials["state"].value_counts()
    lines += [
        "Trials: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + " (trials.csv, tune.log).",
        "",
    ]
    return "\n".join(lines)


def fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) and math.isfinite(v) else str(v)
