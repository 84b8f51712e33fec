"""How far to trust a run: the sections ``memlab report`` adds for one run folder.

- **Differences** against a reference strategy (``--reference``, default
  ``memory``): the paired bootstrap interval of each strategy's difference per
  group, marked ``*`` when it excludes 0 (``memlab.lab.differences``);
  ``differences.csv``, and ``charts/difference_<metric>.png``
  (``memlab.lab.charts.difference_chart``).
- **Minimum detectable difference** per group at its current n (``mdd.csv``).
- **Ranked retrieval**, in two families named apart: the full ranking
  (``haystack_*``, comparable with published tables) and the budget-bound one
  (``context_*``); a value is marked ``†`` when, for some of the group's probes,
  k is at least the number of sessions (turns) in the haystack, where the top k
  holds everything (``memlab.lab.ranking.uninformative``).
- **Abstention** (LoCoMo's adversarial, LongMemEval's ``_abs`` questions).
- **Errata** applied (``errata.csv``) and what each metric lost or changed
  (``errata_impact.csv``).

Everything is written to ``report.md`` too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from memlab.lab import differences as diff
from memlab.lab import ranking
from memlab.lab.charts import difference_chart
from memlab.lab.files import atomic_write, atomic_write_text
from memlab.lab.summary import format_value

REPORT = "report.md"
DIFFERENCES = "differences.csv"
MDD = "mdd.csv"
RANKED_COLUMNS = [
    "session_recall_any@5",
    "session_recall_all@5",
    "session_ndcg@10",
    "turn_recall_all@5",
    "turn_ndcg@10",
    "turn_recall_all@50",
]
"""The ranked measures the report shows (prefixed with each family)."""
UNINFORMATIVE = "†"


@dataclass
class Section:
    """A titled part of the report: a note, then captioned tables."""

    title: str
    note: str = ""
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)


def shown_groups(groups: Sequence[str]) -> list[str]:
    """The groups a report table shows: ``all``, then categories, then abstention."""
    order = ["all", *sorted(g for g in groups if g.startswith("category:"))]
    return order + sorted(g for g in groups if g.startswith("abstention:"))


def difference_sections(
    probes: pd.DataFrame,
    *,
    reference: str | None = None,
    metrics: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> tuple[list[Section], pd.DataFrame, pd.DataFrame]:
    """The differences and minimum-detectable-difference sections, and their tables."""
    ref = diff.reference_of(probes, reference)
    table = diff.differences(probes, ref, metrics=metrics, n_boot=n_boot, seed=seed)
    mdd = diff.minimum_detectable(probes, metrics=metrics)
    groups = shown_groups(list(dict.fromkeys(table["group"])))
    section = Section(
        f"Differences against `{ref}`",
        "Per probe, the strategy's value minus the reference's on the same probe: the mean "
        "difference and its paired bootstrap 95% interval. * = the interval excludes 0 (a "
        "difference the data show); no * = these probes cannot tell the two apart.",
    )
    for metric in dict.fromkeys(table["metric"]):
        section.tables.append((f"`{metric}`", diff.wide(table, metric, groups)))
    sections = [section]
    if not mdd.empty:
        wide = mdd[mdd.group.isin(groups)].pivot_table(
            index="group", columns="metric", values="mdd", sort=False
        )
        n = mdd.groupby("group", sort=False)["n"].max()
        wide.insert(0, "n", n.reindex(wide.index).astype(int))
        wide = wide.reindex([g for g in groups if g in wide.index])
        sections.append(
            Section(
                "Minimum detectable difference at the current n",
                "The smallest true difference between two strategies that a two-sided test "
                "at 5% finds with 80% power here: 3.96 x sd / sqrt(n), sd the metric's "
                "spread within a strategy. A smaller difference between two rows of this "
                "run is not a finding.",
                [("", wide)],
            )
        )
    return sections, table, mdd


def uninformative_share(probes: pd.DataFrame, strategy: str, metric: str) -> float:
    """The share of a strategy's scored probes with a value of ``metric`` where k
    reaches the haystack's size (NaN: no such probe, or sizes not recorded)."""
    if metric not in probes or "haystack_turns" not in probes:
        return math.nan
    mine = probes[(probes["strategy"] == strategy) & probes["scored"].astype(bool)]
    mine = mine[mine[metric].notna()]
    if mine.empty:
        return math.nan
    flags = [
        ranking.uninformative(metric, t, s)
        for t, s in zip(mine["haystack_turns"], mine["haystack_sessions"], strict=True)
    ]
    return float(np.mean(flags))


def flag(share: float) -> str:
    """``†`` when every probe's value is uninformative, ``†(12%)`` when a share is."""
    return UNINFORMATIVE if share >= 1 else f"{UNINFORMATIVE}({share:.0%})"


def ranked_sections(probes: pd.DataFrame, summary: pd.DataFrame) -> list[Section]:
    """The full-ranking and budget-bound retrieval sections (when the run has them)."""
    out = []
    titles = {
        "haystack": (
            "Ranked retrieval, full ranking (`haystack_*`)",
            "LongMemEval's recall_any@k, recall_all@k and nDCG@k on the strategy's ranking of "
            "everything it remembers, before packing: comparable with published retrieval "
            "tables.",
        ),
        "context": (
            "Ranked retrieval within the budget (`context_*`)",
            "The same measures on the context packed into the token budget: what is below "
            "the budget is missing, so these saturate at the budget; not comparable with "
            "published tables.",
        ),
    }
    sub = summary[summary["group"] == "all"]
    for family, (title, note) in titles.items():
        names = [f"{family}_{c}" for c in RANKED_COLUMNS]
        present = [n for n in names if (sub["metric"] == n).any()]
        if not present:
            continue
        strategies = list(dict.fromkeys(sub[sub["metric"].isin(present)]["strategy"]))
        rows = {}
        flagged = False
        for s in strategies:
            cells = []
            for name in present:
                hit = sub[(sub["strategy"] == s) & (sub["metric"] == name)]["mean"]
                value = format_value(float(hit.iloc[0])) if len(hit) else "-"
                share = uninformative_share(probes, s, name)
                if share > 0:
                    value += flag(share)
                    flagged = True
                cells.append(value)
            rows[s] = cells
        table = pd.DataFrame.from_dict(
            rows, orient="index", columns=[n.removeprefix(f"{family}_") for n in present]
        )
        table.index.name = "strategy"
        flag_note = (
            f" {UNINFORMATIVE} = uninformative: k is at least the number of sessions (turns) "
            "in the haystack, so the top k holds all of it (for every probe, or for the "
            "share given)."
            if flagged
            else ""
        )
        out.append(Section(title, note + flag_note, [("scored probes (group all)", table)]))
    return out


def abstention_section(summary: pd.DataFrame) -> Section | None:
    """Abstention questions: the proxy without a reader, a reader's grade with one."""
    metrics = {
        "abstention_proxy": "abstention:",
        "answer_accuracy": "abstention:",
        "false_abstention_proxy": "all",
    }
    rows: dict[str, dict[str, str]] = {}
    for metric, group in metrics.items():
        sub = summary[summary["metric"] == metric]
        sub = sub[sub["group"].str.startswith(group) if group.endswith(":") else sub.group == group]
        for s, g in sub.groupby("strategy", sort=False):
            n = g["n"].sum()
            mean = float((g["mean"] * g["n"]).sum() / n) if n else math.nan
            label = f"{metric} ({'abstention questions' if group.endswith(':') else 'answerable'})"
            rows.setdefault(str(s), {})[label] = f"{format_value(mean)} (n={int(n)})"
    if not any("abstention questions" in k for r in rows.values() for k in r):
        return None
    table = pd.DataFrame.from_dict(rows, orient="index").fillna("-")
    table.index.name = "strategy"
    return Section(
        "Abstention questions",
        "LoCoMo's adversarial and LongMemEval's _abs questions: the right answer is that the "
        "conversation does not say. With a reader, answer_accuracy grades whether the answer "
        "says so; without one, abstention_proxy is the share whose context covers the "
        "question too little (report.abstain_below), and false_abstention_proxy the same on "
        "answerable questions (lower is better).",
        [("", table)],
    )


def errata_section(path: Path) -> Section | None:
    """The errata applied and what each metric lost or changed (from the run's files)."""
    applied_file, impact_file = path / "errata.csv", path / "errata_impact.csv"
    if not applied_file.exists():
        return None
    applied = pd.read_csv(applied_file)
    counts = applied.groupby(["error_type", "action"]).size().rename("questions").reset_index()
    section = Section(
        f"Errata: {len(applied)} applied",
        "Each row of errata.csv names the question and what changed; errata_impact.csv "
        "compares each metric on the same contexts against the ground truth before and "
        "after. lost = scored before, not after (a dropped answer, an excluded question); "
        "changed = scored both times, differently.",
        [("by error type", counts.set_index("error_type"))],
    )
    if impact_file.exists():
        impact = pd.read_csv(impact_file)
        keep = ["evidence_recall", "answer_in_context", "answer_accuracy",
                "haystack_session_recall_all@5", "fact_recall"]  # fmt: skip
        impact = impact[impact["metric"].isin(keep)]
        if not impact.empty:
            view = impact.assign(
                before=impact["mean_before"].map(format_value),
                after=impact["mean_after"].map(format_value),
            )[["strategy", "metric", "errata_probes", "lost", "changed", "before", "after"]]
            section.tables.append(("on the corrected questions", view.set_index("strategy")))
    return section


def check_options(
    probes: pd.DataFrame, *, reference: str | None = None, metrics: Sequence[str] | None = None
) -> None:
    """Check ``build``'s reference and metrics against a run's rows, before anything
    is written (``build`` compares only a run of several strategies).

    Raises:
        MemlabError: an unknown reference or metric.
    """
    if probes.empty or probes["strategy"].nunique() < 2:
        return
    diff.reference_of(probes, reference)
    diff.pick_metrics(probes, metrics)


def build(
    path: Path,
    probes: pd.DataFrame,
    summary: pd.DataFrame,
    *,
    reference: str | None = None,
    metrics: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    draw: bool = True,
) -> tuple[list[Section], list[Path]]:
    """Every section of a run folder's report; writes differences.csv, mdd.csv,
    report.md and (with ``draw``) the difference charts.

    Raises:
        MemlabError: an unknown reference or metric.
        OutputError: the folder cannot be written.
    """
    sections: list[Section] = []
    written: list[Path] = []
    if probes.empty:
        return sections, written
    many = probes["strategy"].nunique() > 1
    if many:
        found, table, mdd = difference_sections(
            probes, reference=reference, metrics=metrics, n_boot=n_boot, seed=seed
        )
        sections += found
        atomic_write(path / DIFFERENCES, lambda f: table.to_csv(f, index=False))
        atomic_write(path / MDD, lambda f: mdd.to_csv(f, index=False))
        if draw:
            drawn = table[table["group"].isin(shown_groups(list(dict.fromkeys(table["group"]))))]
            for metric in dict.fromkeys(table["metric"]):
                chart = difference_chart(drawn, metric, path / "charts")
                if chart is not None:
                    written.append(chart)
    sections += ranked_sections(probes, summary)
    for extra in (abstention_section(summary), errata_section(path)):
        if extra is not None:
            sections.append(extra)
    atomic_write_text(path / REPORT, to_markdown(sections))
    return sections, written


COMPARE = "compare.md"
COMPARE_TABLE = "compare.csv"


@dataclass
class Comparison:
    """What ``compare`` found: the sections, the table, notes on how the runs
    differ, and the files written."""

    sections: list[Section]
    table: pd.DataFrame
    notes: list[str]
    written: list[Path]


def compare(
    run_a: Path,
    run_b: Path,
    *,
    strategies: Sequence[tuple[str, str]] | None = None,
    metrics: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    draw: bool = True,
    out: Path | None = None,
) -> Comparison:
    """``memlab compare RUN_A RUN_B``: run B against run A on the same probes, per
    strategy pair, group and metric (``differences.compare_runs``), written to
    ``out`` (default: run B's folder) as compare.md, compare.csv and
    charts/compare_<metric>.png.

    Raises:
        MemlabError: a folder is not a finished run, the runs read different
            datasets or answered different probes, or a metric is unknown.
    """
    from memlab.errors import MemlabError
    from memlab.lab import fingerprint
    from memlab.lab.summary import load_rows

    fps = []
    for label, folder in (("A", run_a), ("B", run_b)):
        fp = fingerprint.load(folder, f"run {label}")
        fingerprint.check_sealed(folder, fp, f"run {label}")
        fingerprint.check_rows(folder, fp, f"run {label}")
        fps.append(fp)
    notes = [
        n.replace("in the baseline", "in A").replace("in the run", "in B")
        for n in fingerprint.differences(fps[0], fps[1])
        if not n.startswith("transcripts whose content changed")
    ]
    if any(n.startswith("dataset file differs") for n in notes):
        raise MemlabError(
            f"runs {run_a} and {run_b} read different datasets ({notes[0]}); a paired "
            "comparison needs the same questions"
        )
    rows_a, _ = load_rows(run_a)
    rows_b, _ = load_rows(run_b)
    table = diff.compare_runs(
        rows_a, rows_b, strategies=strategies, metrics=metrics, n_boot=n_boot, seed=seed
    )
    groups = shown_groups(list(dict.fromkeys(table["group"])))
    section = Section(
        "Run B against run A",
        f"A = {run_a}, B = {run_b}. Per probe, B's value minus A's on the same probe: the "
        "mean and its paired bootstrap 95% interval; * = the interval excludes 0.",
    )
    for metric in dict.fromkeys(table["metric"]):
        section.tables.append((f"`{metric}`", diff.wide(table, metric, groups)))
    sections = [section]
    if notes:
        sections.append(Section("How the runs differ", "\n".join(f"- {n}" for n in notes)))
    target = out or run_b
    written: list[Path] = []
    target.mkdir(parents=True, exist_ok=True)
    written.append(atomic_write(target / COMPARE_TABLE, lambda f: table.to_csv(f, index=False)))
    text = to_markdown(sections, "memlab compare")
    written.append(atomic_write_text(target / COMPARE, text))
    if draw:
        drawn = table[table["group"].isin(groups)]
        for metric in dict.fromkeys(drawn["metric"]):
            chart = difference_chart(drawn, metric, target / "charts", prefix="compare")
            if chart is not None:
                written.append(chart)
    return Comparison(sections, table, notes, written)


def _cell(v: object) -> str:
    return format_value(v) if isinstance(v, float) else str(v)


def to_text(sections: Sequence[Section]) -> list[str]:
    """The sections for a terminal."""
    lines: list[str] = []
    for s in sections:
        lines += ["", s.title.replace("`", ""), "-" * len(s.title.replace("`", ""))]
        if not s.tables and s.note:
            lines.append(s.note)
        for caption, table in s.tables:
            if caption:
                lines.append(caption.replace("`", ""))
            lines.append(table.to_string(formatters=dict.fromkeys(table.columns, _cell)))
    return lines


def to_markdown(sections: Sequence[Section], title: str = "How far to trust this run") -> str:
    """The sections as Markdown (report.md)."""
    from memlab.lab.report import markdown_table

    parts = [f"# {title}\n"]
    for s in sections:
        parts.append(f"## {s.title}\n")
        if s.note:
            parts.append(s.note + "\n")
        for caption, table in s.tables:
            if caption:
                parts.append(f"{caption}:\n")
            parts.append(markdown_table(table, index=True))
    if len(parts) == 1:
        parts.append("This run has one strategy and no benchmark measures: nothing to add.\n")
    return "\n".join(parts)


__all__ = [
    "DIFFERENCES",
    "MDD",
    "REPORT",
    "Section",
    "abstention_section",
    "build",
    "compare",
    "difference_sections",
    "errata_section",
    "flag",
    "ranked_sections",
    "to_markdown",
    "to_text",
    "uninformative_share",
]
