"""Reports: the terminal summary table, Markdown tables, a multirun's report, and
rebuilding a run or multirun folder's tables and charts from its rows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.errors import MemlabError
from memlab.lab.charts import charts, heatmap_chart, multirun_chart, pareto_chart
from memlab.lab.metrics import table_metrics
from memlab.lab.summary import (
    SUMMARY_COLUMNS,
    format_value,
    is_run_dir,
    load_rows,
    summarize,
    write_summary,
)
from memlab.lab.sweep import pareto_table, recall_metric, run_resampling, sweep_table, wide_means


def summary_table(
    summary: pd.DataFrame, group: str = "all", metrics: Sequence[str] | None = None
) -> pd.DataFrame:
    """Strategies x metrics (means) for one group, in the order strategies first
    appear; the metrics are the registry's table metrics unless given (with a
    reader's answers, ``answer_accuracy`` stands beside ``evidence_recall``)."""
    metrics = _accuracy_beside_recall(table_metrics() if metrics is None else list(metrics))
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


def _accuracy_beside_recall(metrics: list[str]) -> list[str]:
    if "answer_accuracy" not in metrics or "evidence_recall" not in metrics:
        return metrics
    rest = [m for m in metrics if m != "answer_accuracy"]
    at = rest.index("evidence_recall") + 1
    return [*rest[:at], "answer_accuracy", *rest[at:]]


def answers_lines(answers: Any) -> list[str]:
    """What a reader did in a run (or would do, in a dry run), for the terminal."""
    t = answers.tally
    judged = t.judge_calls + t.judge_cached
    if answers.dry_run:
        lines = [
            "dry run: nothing was sent and nothing was written",
            f"  reader {answers.reader}: {t.probes:,} probes, {t.reader_calls:,} calls to make, "
            f"{t.reader_cached:,} answered from the cache",
            f"    ~{t.reader_prompt_tokens:,} prompt tokens (ceil(chars / 4)), at most "
            f"{t.reader_completion_tokens:,} answer tokens (max_tokens per call)",
        ]
        if judged:
            lines.append(
                f"  judge {answers.judge}: {t.judge_calls:,} calls to make, "
                f"{t.judge_cached:,} from the cache, at most ${t.judge_usd:.4f}"
            )
        limit = f" (reader.max_usd {answers.limit:g})" if answers.limit else ""
        lines.append(f"  estimated cost: at most ${t.cost_usd:.4f}{limit}")
        return lines
    lines = [
        f"reader {answers.reader}: {t.reader_calls + t.reader_cached:,} probes answered "
        f"({t.reader_calls:,} requests, {t.reader_cached:,} from the cache); "
        f"judge {answers.judge}"
        + (f" ({t.judge_calls:,} requests, {t.judge_cached:,} from the cache)" if judged else ""),
        f"spent this run: ${t.cost_usd:.4f} ({t.reader_prompt_tokens + t.judge_prompt_tokens:,} "
        f"prompt + {t.reader_completion_tokens + t.judge_completion_tokens:,} answer tokens "
        f"sent); at most {answers.max_in_flight} in flight; {answers.seconds:.1f} s",
    ]
    if answers.stopped is not None:
        lines.append(
            f"INCOMPLETE: {answers.stopped}; {t.skipped:,} probes were not answered and the "
            "run stopped after the transcript in progress (fingerprint.json says so; the gate "
            "refuses it). The answers received are cached: a rerun with a higher limit pays "
            "only for the rest."
        )
    return lines


def format_table(table: pd.DataFrame) -> str:
    return table.to_string(formatters=dict.fromkeys(table.columns, format_value))


def format_cell(v: Any) -> str:
    """A table cell: floats as ``format_value``, anything else as text."""
    return format_value(v) if isinstance(v, float) else str(v)


def markdown_table(table: pd.DataFrame, *, index: bool = False) -> str:
    """A DataFrame as a Markdown table (floats formatted like the terminal table)."""
    frame = table.reset_index() if index else table
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(format_cell(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


def sweep_report(
    path: Path,
    *,
    recompute: bool = False,
    n_boot: int | None = None,
    seed: int | None = None,
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
        if "answer_accuracy" in set(table.loc[table["group"] == "all", "metric"]):
            # One point per strategy and job (e.g. per budget): where stuffing degrades.
            accuracy = pareto_table(table, keys, "answer_accuracy")
            written.append(pareto_chart(accuracy, keys, "answer_accuracy", charts_dir))
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


def _incomplete_note(run: Path) -> list[str]:
    """A warning line when a reader's cost limit stopped the run early."""
    from memlab.lab import fingerprint

    try:
        incomplete = fingerprint.load(run).get("incomplete")
    except MemlabError:
        return []
    if not isinstance(incomplete, dict):
        return []
    return [
        f"\nINCOMPLETE: {incomplete.get('reason')}; {incomplete.get('probes_unanswered')} probes "
        f"unanswered, {incomplete.get('transcripts_replayed')} of {incomplete.get('transcripts')} "
        "transcripts replayed"
    ]


def _heatmap_strategies(strategies: Sequence[str]) -> list[str]:
    if len(strategies) == 1:
        return list(strategies)
    return ["memory"] if "memory" in strategies else [strategies[0]]


def rebuild(
    path: Path,
    *,
    n_boot: int | None = None,
    seed: int | None = None,
    draw: bool = True,
    heatmap: tuple[str, str] | None = None,
    metric: str | None = None,
    strategy: str | None = None,
    reference: str | None = None,
    differences: Sequence[str] | None = None,
) -> list[str]:
    """Rebuild summary.csv and charts of a run folder, with the report of how far to
    trust it (``memlab.lab.run_report``: differences against ``reference`` for the
    metrics ``differences``, minimum detectable differences, the ranked retrieval
    families, abstention, errata; report.md), or of every job of a multirun folder
    plus the sweep report (``sweep_report``); return lines to print. ``n_boot`` and
    ``seed``: the bootstrap's resamples and seed, None: each run's own
    (``sweep.run_resampling``), so a rebuild reproduces the run's intervals."""
    from memlab.lab import run_report

    lines: list[str] = []
    if is_run_dir(path):
        from memlab.lab import fingerprint

        if (path / fingerprint.FILENAME).exists():
            # Rebuilding would seal another run's rows under this run's config.
            fp = fingerprint.load(path)
            fingerprint.check_finished(path, fp)
            fingerprint.check_rows(path, fp)
        probes, turns = load_rows(path)
        # A misspelt --reference or --differences must not cost the folder its
        # summary.csv and charts, rewritten with this call's resampling.
        run_report.check_options(probes, reference=reference, metrics=differences)
        n_boot, seed = run_resampling(path, n_boot, seed)
        summary = summarize(probes, turns, n_boot=n_boot, seed=seed)
        write_summary(path, summary)
        written = charts(probes, turns, summary, path / "charts") if draw else []
        sections, drawn = run_report.build(
            path, probes, summary, reference=reference, metrics=differences,
            n_boot=n_boot, seed=seed, draw=draw,
        )  # fmt: skip
        written += drawn
        lines.append(format_table(summary_table(summary)))
        lines += run_report.to_text(sections)
        lines += _incomplete_note(path)
        lines.append(
            f"\nrebuilt {path / 'summary.csv'}, {path / run_report.REPORT}"
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
