"""The retrieval-quality tables: the memory layer against plain retrievers at the
same budget, on the LoCoMo and LongMemEval development slices.

    python -m benchmarks.datasets sweep --locomo FILE --budgets 800,1600 \\
        --strategies retriever_bm25,retriever_dense,retriever_rrf,... --embedder minilm --tag -retrieval
    python -m benchmarks.datasets retrieval results/multirun/datasets/*-retrieval --readme README.md

Every number comes from the runs' summary.csv; nothing is typed by hand.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from benchmarks.datasets import LOCOMO_ORDER, collect, markdown, replace_block

BEGIN = "<!-- retrieval-tables:begin -->"
END = "<!-- retrieval-tables:end -->"
METRICS = [
    "evidence_recall",
    "evidence_recall@10",
    "haystack_session_recall_any@5",
    "haystack_session_recall_all@5",
]
ORDER = [
    "retriever_recency", "retriever_bm25", "retriever_dense", "retriever_rrf", "memory",
    "memory_longterm", "memory_longterm_no_lexical", "memory_longterm_no_neighbors",
    "memory_longterm_no_time", "memory_longterm_no_rewrite",
]  # fmt: skip


def _value(d: pd.DataFrame, strategy: str, metric: str, budget: int, group: str = "all") -> float:
    hit = d[
        (d.strategy == strategy) & (d.metric == metric) & (d.budget == budget) & (d.group == group)
    ]
    return float(hit["mean"].iloc[0]) if len(hit) else float("nan")


def _strategies(d: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(d.strategy))
    return [s for s in ORDER if s in present] + [s for s in present if s not in ORDER]


def locomo_table(d: pd.DataFrame) -> str:
    rows = []
    for emb in dict.fromkeys(d.embedder):
        e = d[d.embedder == emb]
        for s in _strategies(e):
            rows.append(
                {
                    "embedder": emb,
                    "strategy": s,
                    "evidence recall@10": _value(e, s, "evidence_recall@10", 800),
                    "recall at 800 tokens": _value(e, s, "evidence_recall", 800),
                    "at 1600 tokens": _value(e, s, "evidence_recall", 1600),
                }
            )
    return markdown(pd.DataFrame(rows))


def category_table(d: pd.DataFrame, embedder: str) -> str:
    e = d[d.embedder == embedder]
    cats = [c for c in LOCOMO_ORDER if f"category:{c}" in set(e.group)]
    rows = []
    for s in _strategies(e):
        for budget in (800, 1600):
            row: dict[str, object] = {"strategy": s, "budget": budget}
            for c in cats:
                row[c] = _value(e, s, "evidence_recall", budget, f"category:{c}")
            row["all scored"] = _value(e, s, "evidence_recall", budget)
            rows.append(row)
    return markdown(pd.DataFrame(rows))


def longmemeval_table(d: pd.DataFrame) -> str:
    rows = []
    for (file, emb), e in d.groupby(["file", "embedder"], sort=False):
        for s in _strategies(e):
            rows.append(
                {
                    "slice": f"`{file}`",
                    "embedder": emb,
                    "strategy": s,
                    "session recall_any@5 (full ranking)": _value(
                        e, s, "haystack_session_recall_any@5", 800
                    ),
                    "session recall_all@5 (full ranking)": _value(
                        e, s, "haystack_session_recall_all@5", 800
                    ),
                    "evidence recall (800 tokens)": _value(e, s, "evidence_recall", 800),
                }
            )
    return markdown(pd.DataFrame(rows))


def retrieval(args: argparse.Namespace) -> None:
    data = collect([Path(x) for x in args.dirs], METRICS)
    out = []
    loc = data[data.dataset == "locomo"]
    if len(loc):
        out.append(
            "LoCoMo development slice (conv-26, conv-30), evidence recall of the scored questions:\n"
        )
        out.append(locomo_table(loc))
        for emb in dict.fromkeys(loc.embedder):
            out.append(f"\nBy category ({emb}):\n")
            out.append(category_table(loc, emb))
    lme = data[data.dataset == "longmemeval"]
    if len(lme):
        out.append("\nLongMemEval development slices, scored questions, budget 800 tokens:\n")
        out.append(longmemeval_table(lme))
    text = "\n".join(out)
    if args.readme:
        replace_block(Path(args.readme), BEGIN, END, text)
    else:
        print(text)
