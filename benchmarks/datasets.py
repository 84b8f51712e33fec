"""Real benchmarks (LoCoMo, LongMemEval): run every strategy at several budgets and
turn the run folders into the README's per-category tables.

    python -m benchmarks.datasets sweep --locomo FILE --longmemeval FILE [...]
    python -m benchmarks.datasets table results/multirun/datasets/* --readme README.md
    python -m benchmarks.datasets speed --locomo FILE [--strategies memory,...]

``sweep`` runs one ``memlab run -m`` per file (budgets x embedder) and prints the
wall time of each; ``table`` reads the jobs' summary.csv files, writes one tidy
CSV (``--csv``) and prints Markdown tables (or replaces the block between the
``<!-- datasets-tables:begin -->`` / ``end`` markers of ``--readme``). Every
number in the README tables comes from here, never from hand.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from memlab.lab.sweep import job_dirs, job_overrides

BEGIN = "<!-- datasets-tables:begin -->"
END = "<!-- datasets-tables:end -->"
RANKED = [  # the measures LongMemEval's print_retrieval_metrics.py reports
    "session_recall_all@5",
    "session_ndcg@5",
    "session_recall_all@10",
    "session_ndcg@10",
    "turn_recall_all@5",
    "turn_ndcg@5",
    "turn_recall_all@10",
    "turn_ndcg@10",
    "turn_recall_all@50",
    "turn_ndcg@50",
]
FAMILIES = {
    "haystack": "Full-ranking retrieval (`haystack_*`: each strategy's ranking of everything it "
    "remembers, before packing, as LongMemEval evaluates retrievers; comparable with published "
    "tables)",
    "context": "Ranked retrieval within the budget (`context_*`: the same measures on the packed "
    "context; they saturate at the budget and are not comparable with published tables)",
}
UPSTREAM = [f"{family}_{m}" for family in FAMILIES for m in RANKED]
LOCOMO_ORDER = ["multi-hop", "temporal", "open-domain", "single-hop"]
TABLE_METRICS = ["evidence_recall", "answer_in_context", "context_tokens", *UPSTREAM]


# -- sweep ----------------------------------------------------------------------------
def sweep(args: argparse.Namespace) -> None:
    runs = [("locomo", f) for f in args.locomo] + [("longmemeval", f) for f in args.longmemeval]
    if not runs:
        sys.exit("give at least one --locomo or --longmemeval file")
    for dataset, file in runs:
        name = f"{dataset}-{Path(file).stem}-{args.embedder}{args.tag}"
        out = Path(args.out) / name
        cmd = [
            sys.executable,
            "-m",
            "memlab.cli",
            "run",
            "-m",
            f"transcripts={dataset}",
            f"transcripts.path={Path(file).resolve()}",
            f"budget={args.budgets}",
            f"embedder={args.embedder}",
            "progress=false",
            "report.charts=false",
            f"report.bootstrap={args.bootstrap}",
            f"hydra.sweep.dir={out}",
        ]
        if args.strategies:
            cmd.append(f"strategies=[{args.strategies}]")
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            sys.exit(f"{name} failed:\n{proc.stderr}")
        print(f"{name}: {elapsed:.1f} s for budgets {args.budgets} -> {out}")


# -- speed ----------------------------------------------------------------------------
LOCOMO_FULL = {"conversations": 10, "turns": 5882, "questions": 1986}  # upstream locomo10.json


def speed(args: argparse.Namespace) -> None:
    """Replay a LoCoMo file through strategies and extrapolate to the full LoCoMo."""
    import warnings

    from memlab.lab import experiment
    from memlab.lab.compose import compose
    from memlab.lab.config import validate
    from memlab.lab.datasets import DatasetWarning, load_source
    from memlab.lab.replay import ReplaySettings, replay
    from memlab.memory import MemoEmbedder

    v = validate(
        compose(
            [
                "transcripts=locomo",
                f"transcripts.path={Path(args.locomo).resolve()}",
                f"embedder={args.embedder}",
                f"budget={args.budget}",
                f"strategies=[{args.strategies}]",
            ]
        )
    )
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        transcripts = load_source("locomo", v.run.transcripts.path)
    load_s = time.perf_counter() - started
    # As `memlab run` does: the persistent model cache, one batched call per transcript.
    models = experiment.models(v)
    memo = MemoEmbedder(models.embedder)
    factories = experiment.strategy_factories(v, Path(args.out), memo, models.summarizer)
    settings = ReplaySettings(budget=args.budget)
    turns = sum(sum(t.probe is None for t in x.turns) for x in transcripts)
    questions = sum(len(x.probes) for x in transcripts)
    n = len(transcripts)
    print(
        f"{args.locomo}: {n} conversations, {turns} turns, {questions} questions; load {load_s:.2f} s"
    )
    for name in args.strategies.split(","):
        factory = factories[name]
        per = []
        for t in transcripts:
            t0 = time.perf_counter()
            memo.clear()
            memo.prefetch([turn.text for turn in t.turns])
            strategy = factory(t)
            try:
                replay(t, strategy, settings)
            finally:
                strategy.close()
            per.append(time.perf_counter() - t0)
        total = sum(per)
        by_conv = total / n * LOCOMO_FULL["conversations"]
        by_item = total / (turns + questions) * (LOCOMO_FULL["turns"] + LOCOMO_FULL["questions"])
        print(
            f"  {name:<24} {total:6.2f} s ({', '.join(f'{x:.2f}' for x in per)}); "
            f"full LoCoMo: {by_conv:5.1f} s per-conversation, {by_item:5.1f} s per-turn+question"
        )
    models.close()
    for label, stats in models.cache_stats().items():
        print(f"  {label} cache: {stats}")


# -- tables ---------------------------------------------------------------------------
def collect(dirs: list[Path], metrics: list[str] = TABLE_METRICS) -> pd.DataFrame:
    """Every job's summary.csv with its dataset, file, budget and embedder."""
    frames = []
    for d in dirs:
        for job in job_dirs(d):
            o = job_overrides(job)
            s = pd.read_csv(job / "summary.csv")
            s = s[s.metric.isin(metrics)]
            s.insert(0, "dataset", o.get("transcripts", "?"))
            s.insert(1, "file", Path(o.get("transcripts.path", "?")).name)
            s.insert(2, "embedder", o.get("embedder", "hash"))
            s.insert(3, "budget", int(o.get("budget", 800)))
            frames.append(s)
    if not frames:
        sys.exit(f"no run folders with summary.csv under {', '.join(map(str, dirs))}")
    return pd.concat(frames, ignore_index=True)


def _pooled(sub: pd.DataFrame) -> float:
    """Mean over several groups, weighted by their n."""
    n = sub["n"].sum()
    return float((sub["mean"] * sub["n"]).sum() / n) if n else float("nan")


def _fmt(v: object, whole: bool = False) -> str:
    if not isinstance(v, float):
        return str(v)
    if v != v:  # NaN: the metric does not apply
        return "–"
    return f"{v:,.0f}" if whole else f"{v:.2f}"


def budget_free(data: pd.DataFrame) -> set[tuple[str, str]]:
    """(embedder, strategy) pairs whose every number is the same at every budget
    (stuff_all and sliding_window ignore the budget): they get one table row."""
    out = set()
    for (emb, strat), g in data.groupby(["embedder", "strategy"], sort=False):
        values = g.pivot_table(index=["metric", "group"], columns="budget", values="mean")
        if values.shape[1] > 1 and values.T.nunique(dropna=False).eq(1).all():
            out.add((emb, strat))
    return out


def wide(
    data: pd.DataFrame,
    metric: str,
    columns: list[tuple[str, str]],
    free: set[tuple[str, str]],
) -> pd.DataFrame:
    """Rows (embedder, budget, strategy) x the given (label, group) columns; a
    group ``unscored:*`` pools every unscored group. Budget-free strategies get
    one row with budget ``any``."""
    rows = []
    sub = data[data.metric == metric]
    order = {s: i for i, s in enumerate(dict.fromkeys(data.strategy))}
    for (emb, budget, strat), g in sub.groupby(["embedder", "budget", "strategy"], sort=False):
        if (emb, strat) in free:
            if budget != sub[sub.strategy == strat].budget.min():
                continue
            budget = "any"
        row: dict[str, object] = {"embedder": emb, "budget": budget, "strategy": strat}
        for label, group in columns:
            if group == "unscored:*":
                row[label] = _pooled(g[g.group.str.startswith(("abstention:", "unscored:"))])
            else:
                hit = g[g.group == group]["mean"]
                row[label] = float(hit.iloc[0]) if len(hit) else float("nan")
        rows.append(row)
    table = pd.DataFrame(rows)
    key = table.budget.map(lambda b: -1 if b == "any" else int(b))
    table = table.assign(_b=key, _o=table.strategy.map(order))
    return table.sort_values(["embedder", "_b", "_o"]).drop(columns=["_b", "_o"])


def markdown(table: pd.DataFrame, whole: frozenset[str] = frozenset()) -> str:
    """A Markdown table; columns in ``whole`` are printed as whole numbers."""
    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in table.iterrows():
        cells = [f"`{v}`" if c == "strategy" else _fmt(v, c in whole) for c, v in r.items()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def category_columns(data: pd.DataFrame) -> list[tuple[str, str]]:
    groups = set(data.group)
    cats = sorted(g.split(":", 1)[1] for g in groups if g.startswith("category:"))
    if set(LOCOMO_ORDER) >= set(cats):
        cats = [c for c in LOCOMO_ORDER if c in cats]
    cols = [(c, f"category:{c}") for c in cats] + [("all scored", "all")]
    unscored = sorted(
        g.split(":", 1)[1] for g in groups if g.startswith(("abstention:", "unscored:"))
    )
    if unscored:
        label = "adversarial†" if unscored == ["adversarial"] else "abstention†"
        cols.append((label, "unscored:*"))
    return cols


def describe(data: pd.DataFrame) -> str:
    """How many probes the tables average over (the largest n of any metric, for
    the first strategy at the smallest budget: context_tokens is never NaN)."""
    first = data[data.budget == data.budget.min()]
    first = first[first.strategy == first.strategy.iloc[0]]
    n_all = int(first[first.group == "all"]["n"].max())
    unscored = first[first.group.str.startswith(("abstention:", "unscored:"))]
    n_uns = int(unscored.groupby("group")["n"].max().sum()) if len(unscored) else 0
    return f"{n_all} scored questions" + (f", {n_uns} unscored" if n_uns else "")


def tables(data: pd.DataFrame) -> str:
    out: list[str] = []
    for (dataset, file), d in data.groupby(["dataset", "file"], sort=False):
        cols = category_columns(d)
        free = budget_free(d)
        keys = ["embedder", "budget", "strategy"]
        out.append(f"#### {dataset}: `{file}` ({describe(d)})\n")
        er = wide(d, "evidence_recall", cols, free)
        tokens = wide(d, "context_tokens", [("context tokens", "all")], free)
        er = er.merge(tokens, on=keys, how="left")
        out.append("Evidence recall (share of evidence turns in the context, by provenance):\n")
        out.append(markdown(er, frozenset({"context tokens"})))
        out.append("\nAnswer found in the context (normalized whole-word match):\n")
        out.append(markdown(wide(d, "answer_in_context", cols, free)))
        for family, title in FAMILIES.items():
            names = [f"{family}_{m}" for m in RANKED]
            if not d.metric.isin(names).any():
                continue
            short = [m.replace("session_", "S ").replace("turn_", "T ") for m in RANKED]
            parts = [
                wide(d, m, [(label, "all")], free).set_index(keys)
                for m, label in zip(names, short, strict=True)
            ]
            up = pd.concat(parts, axis=1).reset_index()
            out.append(f"\n{title}; scored questions, S = session level, T = turn level:\n")
            out.append(markdown(up))
        out.append("")
    return "\n".join(out)


def replace_block(readme: Path, begin: str, end: str, text: str) -> None:
    """Replace the text between two marker lines of a README."""
    doc = readme.read_text()
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(doc):
        sys.exit(f"{readme} has no {begin} ... {end} block to replace")
    readme.write_text(pattern.sub(lambda _: f"{begin}\n{text}\n{end}", doc))
    print(f"updated {readme}")


def table(args: argparse.Namespace) -> None:
    data = collect([Path(d) for d in args.dirs])
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        data.to_csv(args.csv, index=False)
    text = tables(data)
    if args.readme:
        replace_block(Path(args.readme), BEGIN, END, text)
    else:
        print(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.datasets", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="run every strategy at each budget on benchmark files")
    s.add_argument("--locomo", action="append", default=[], help="a LoCoMo JSON file")
    s.add_argument("--longmemeval", action="append", default=[], help="a LongMemEval JSON file")
    s.add_argument("--budgets", default="400,800,1600")
    s.add_argument("--embedder", default="hash")
    s.add_argument("--bootstrap", type=int, default=200)
    s.add_argument("--out", default="results/multirun/datasets")
    s.add_argument("--strategies", default="", help="comma-separated presets (default: config's)")
    s.add_argument("--tag", default="", help="suffix for the output folder name")
    sp = sub.add_parser("speed", help="time replays of a LoCoMo file, extrapolate to all of it")
    sp.add_argument("--locomo", required=True, help="a LoCoMo JSON file")
    sp.add_argument("--strategies", default="memory")
    sp.add_argument("--embedder", default="hash")
    sp.add_argument("--budget", type=int, default=800)
    sp.add_argument("--out", default="results/bench/raw/datasets")
    t = sub.add_parser("table", help="Markdown tables from sweep folders")
    t.add_argument("dirs", nargs="+", help="multirun folders written by sweep")
    t.add_argument("--csv", default=None, help="also write the tidy numbers here")
    t.add_argument("--readme", default=None, help="replace the tables block of this file")
    r = sub.add_parser("retrieval", help="the retrieval-quality tables (README, issue 8)")
    r.add_argument("dirs", nargs="+", help="multirun folders written by sweep")
    r.add_argument("--readme", default=None, help="replace the retrieval block of this file")
    ns = parser.parse_args(argv)
    if ns.command == "retrieval":
        from benchmarks.retrieval import retrieval

        retrieval(ns)
        return
    {"sweep": sweep, "speed": speed, "table": table}[ns.command](ns)


if __name__ == "__main__":
    main()
