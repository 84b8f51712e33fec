"""The "How far to trust these numbers" tables (docs/trust.md, README): errata,
full-ranking retrieval, paired differences, minimum detectable differences, the
abstention proxy and rule judges' calibration, on the development slices.

    python -m benchmarks.trust run --locomo locomo_dev2.json --errata errors_dev2.json \\
        --longmemeval longmemeval_oracle_dev48.json --longmemeval longmemeval_s_dev6.json \\
        --embedder hash                      # and --embedder minilm
    python -m benchmarks.trust judges --audit DIR      # exact and f1: no model needed
    python -m benchmarks.trust tables results/trust --readme docs/trust.md --short README.md

``run`` replays each file through the reference retrievers, ``memory`` and
``memory_longterm`` at 800 tokens (LoCoMo twice: without and with the errata),
then builds each run's report (differences against ``memory``) and compares the
two LoCoMo runs; ``tables`` writes every table from those folders between the
``<!-- trust-tables:begin -->`` / ``end`` markers (and the short errata table
between ``<!-- trust-readme:begin -->`` / ``end``). Nothing is typed by hand.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

import pandas as pd

from benchmarks.datasets import LOCOMO_ORDER, markdown, replace_block
from memlab.lab.run_report import flag

BEGIN, END = "<!-- trust-tables:begin -->", "<!-- trust-tables:end -->"
SHORT_BEGIN, SHORT_END = "<!-- trust-readme:begin -->", "<!-- trust-readme:end -->"
STRATEGIES = [
    "retriever_recency",
    "retriever_bm25",
    "retriever_dense",
    "retriever_rrf",
    "memory",
    "memory_longterm",
]
BUDGET = 800
FULL = [
    ("haystack_session_recall_all@5", "S recall_all@5"),
    ("haystack_session_ndcg@10", "S ndcg@10"),
    ("haystack_turn_recall_all@5", "T recall_all@5"),
    ("haystack_turn_ndcg@10", "T ndcg@10"),
]
TUNE, TEST = "conv-26", "conv-30"  # the abstention threshold's tuning and test conversations


# -- run --------------------------------------------------------------------------------------
def _run(name: str, out: Path, overrides: list[str]) -> Path:
    from memlab.lab.compose import compose
    from memlab.lab.datasets import DatasetWarning
    from memlab.lab.experiment import run
    from memlab.lab.report import rebuild

    folder = out / name
    if (folder / "summary.csv").exists():
        print(f"{name}: exists, kept ({folder})")
        return folder
    cfg = compose(
        [
            *overrides,
            f"strategies=[{','.join(STRATEGIES)}]",
            f"budget={BUDGET}",
            "progress=false",
            "report.charts=false",
        ]
    )
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        run(cfg, folder)
    rebuild(folder, draw=True, reference="memory")
    print(f"{name}: {time.perf_counter() - started:.1f} s -> {folder}")
    return folder


def run_all(args: argparse.Namespace) -> None:
    from memlab.lab.run_report import compare

    out = Path(args.out)
    emb = [f"embedder={args.embedder}"]
    if args.locomo:
        data = ["transcripts=locomo", f"transcripts.path={Path(args.locomo).resolve()}"]
        plain = _run(f"locomo-{args.embedder}", out, [*data, *emb])
        if args.errata:
            fixed = _run(
                f"locomo-errata-{args.embedder}",
                out,
                [*data, f"transcripts.errata={Path(args.errata).resolve()}", *emb],
            )
            compare(plain, fixed, metrics=["evidence_recall", "haystack_session_recall_all@5",
                                           "answer_in_context"], draw=False)  # fmt: skip
    for file in args.longmemeval:
        stem = Path(file).stem
        _run(
            f"longmemeval-{stem}-{args.embedder}",
            out,
            ["transcripts=longmemeval", f"transcripts.path={Path(file).resolve()}", *emb],
        )


def judges(args: argparse.Namespace) -> None:
    """Calibrate the judges that need no model (exact, f1) on the audit's answers."""
    from memlab.lab import calibration
    from memlab.lab.experiment import calibration_judge
    from memlab.lab.judges import provenance

    files = calibration.find_audit(Path(args.audit))
    items = calibration.load_answers(files["specific"], files["vague"])
    for name in ("exact", "f1"):
        judge = calibration_judge([f"judge={name}"])
        graded = calibration.grade(judge, items, progress=False)
        summary = calibration.summarize(graded)
        folder = Path(args.out) / "judges" / name
        origin = {"judge": provenance(judge), "threshold": 0.5, "answers": {}}
        calibration.write(folder, graded, summary, origin)
        print(f"judge {name}: {folder}")


# -- tables -----------------------------------------------------------------------------------
def _mean(folder: Path, strategy: str, metric: str, group: str = "all") -> tuple[float, int]:
    s = pd.read_csv(folder / "summary.csv")
    hit = s[(s.strategy == strategy) & (s.metric == metric) & (s.group == group)]
    return (float(hit["mean"].iloc[0]), int(hit["n"].iloc[0])) if len(hit) else (math.nan, 0)


def _fmt(v: float) -> str:
    return "–" if v != v else f"{v:.2f}"


def _ci(row: pd.Series) -> str:
    mark = "*" if bool(row["shown"]) else ""
    return f"{row['diff']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]{mark}"


def errata_table(root: Path, embedder: str) -> str:
    plain, fixed = root / f"locomo-{embedder}", root / f"locomo-errata-{embedder}"
    if not (plain / "summary.csv").exists() or not (fixed / "summary.csv").exists():
        return ""
    comp = pd.read_csv(fixed / "compare.csv")
    comp = comp[(comp.group == "all") & (comp.metric == "evidence_recall")].set_index("strategy")
    impact = pd.read_csv(fixed / "errata_impact.csv")
    impact = impact[impact.metric == "evidence_recall"].set_index("strategy")
    rows = []
    for s in STRATEGIES:
        before, n0 = _mean(plain, s, "evidence_recall")
        after, n1 = _mean(fixed, s, "evidence_recall")
        c = comp.loc[f"B:{s}"] if f"B:{s}" in comp.index else None
        i = impact.loc[s] if s in impact.index else None
        rows.append(
            {
                "strategy": s,
                f"without errata (n={n0})": _fmt(before),
                f"with errata (n={n1})": _fmt(after),
                "paired difference on the same questions [95% CI]": _ci(c)
                if c is not None
                else "–",
                "the corrected questions: before → after": (
                    f"{_fmt(i.mean_before)} → {_fmt(i.mean_after)} ({int(i.changed)} changed, "
                    f"{int(i.lost)} lost)"
                    if i is not None
                    else "–"
                ),
            }
        )
    return markdown(pd.DataFrame(rows))


_ROWS: dict[Path, pd.DataFrame] = {}


def _flag_share(folder: Path, strategy: str, metric: str) -> float:
    from memlab.lab.run_report import uninformative_share
    from memlab.lab.summary import load_rows

    if folder not in _ROWS:
        _ROWS[folder] = load_rows(folder)[0]
    return uninformative_share(_ROWS[folder], strategy, metric)


def full_ranking_table(root: Path) -> str:
    rows = []
    flagged = False
    for folder in sorted(root.iterdir()):
        if not (folder / "summary.csv").exists() or "errata" in folder.name:
            continue
        dataset, _, embedder = folder.name.rpartition("-")
        dataset = dataset.replace("longmemeval-longmemeval_", "longmemeval_")
        for s in STRATEGIES:
            row: dict[str, object] = {"data": dataset, "embedder": embedder, "strategy": s}
            for metric, label in FULL:
                value, _n = _mean(folder, s, metric)
                cell = _fmt(value)
                share = _flag_share(folder, s, metric)
                if share > 0:
                    cell += flag(share)
                    flagged = True
                row[label] = cell
            ev, _ = _mean(folder, s, "evidence_recall")
            row[f"evidence recall at {BUDGET} tokens"] = _fmt(ev)
            rows.append(row)
    text = markdown(pd.DataFrame(rows))
    if flagged:
        text += (
            "\n\n† uninformative: k is at least the number of sessions (turns) in the "
            "haystack, so the top k holds all of it: for every question, or for the share "
            "given in brackets."
        )
    return text


def differences_table(root: Path, embedder: str, metric: str) -> str:
    folder = root / f"locomo-{embedder}"
    if not (folder / "differences.csv").exists():
        return ""
    d = pd.read_csv(folder / "differences.csv")
    d = d[d.metric == metric]
    groups = ["all", *[f"category:{c}" for c in LOCOMO_ORDER]]
    rows = []
    for s in STRATEGIES:
        mine = d[d.strategy == s].set_index("group")
        if mine.empty:
            continue
        row: dict[str, object] = {"strategy": s}
        for g in groups:
            label = g.split(":", 1)[-1]
            row[label] = _ci(mine.loc[g]) if g in mine.index else "–"
        rows.append(row)
    return markdown(pd.DataFrame(rows))


def mdd_table(root: Path, embedder: str) -> str:
    folder = root / f"locomo-{embedder}"
    if not (folder / "mdd.csv").exists():
        return ""
    m = pd.read_csv(folder / "mdd.csv")
    groups = ["all", *[f"category:{c}" for c in LOCOMO_ORDER], "abstention:adversarial"]
    rows = []
    for g in groups:
        sub = m[m.group == g].set_index("metric")
        if sub.empty:
            continue
        rows.append(
            {
                "group": g,
                "questions": int(sub["n"].max()),
                "evidence_recall": _fmt(sub["mdd"].get("evidence_recall", math.nan)),
                "haystack_session_recall_all@5": _fmt(
                    sub["mdd"].get("haystack_session_recall_all@5", math.nan)
                ),
            }
        )
    return markdown(pd.DataFrame(rows))


def abstention_table(root: Path, embedder: str) -> str:
    from memlab.lab.calibration import wilson
    from memlab.lab.summary import load_rows

    folder = root / f"locomo-{embedder}"
    if not (folder / "probes.csv").exists():
        return ""
    probes, _ = load_rows(folder)
    rows = []
    for s in STRATEGIES:
        row: dict[str, object] = {"strategy": s}
        for conv, label in ((TUNE, "tuning (conv-26)"), (TEST, "test (conv-30)")):
            mine = probes[(probes.strategy == s) & (probes.transcript == conv)]
            adv = mine["abstention_proxy"].dropna()
            ans = mine["false_abstention_proxy"].dropna()
            k, n = int(adv.sum()), len(adv)
            lo, hi = wilson(k, n)
            row[f"abstains, adversarial, {label}"] = f"{k / n:.2f} [{lo:.2f}, {hi:.2f}] of {n}"
            k2, n2 = int(ans.sum()), len(ans)
            lo2, hi2 = wilson(k2, n2)
            row[f"abstains, answerable, {label}"] = f"{k2 / n2:.2f} [{lo2:.2f}, {hi2:.2f}] of {n2}"
        rows.append(row)
    return markdown(pd.DataFrame(rows))


def judges_table(root: Path) -> str:
    rows = []
    for name in ("exact", "f1"):
        f = root / "judges" / name / "summary.csv"
        if not f.exists():
            continue
        s = pd.read_csv(f)
        s = s[s.category == "all"].set_index("set")
        row: dict[str, object] = {"judge": f"`{name}`"}
        for key, label in (("golden", "true-accept (gold answers)"),
                           ("specific", "false-accept (specific but wrong)"),
                           ("vague", "false-accept (vague but topical)")):  # fmt: skip
            r = s.loc[key]
            row[label] = f"{r.accept_rate:.1%} [{r.ci_low:.1%}, {r.ci_high:.1%}]"
        rows.append(row)
    return markdown(pd.DataFrame(rows)) if rows else ""


def tables(args: argparse.Namespace) -> None:
    root = Path(args.dir)
    embedders = sorted(
        {f.name.rpartition("-")[2] for f in root.glob("locomo-*") if f.is_dir()},
        key=lambda e: (e != "hash", e),
    )
    parts = []
    for emb in embedders:
        text = errata_table(root, emb)
        if text:
            parts += [
                f"#### Evidence recall with and without the errata (LoCoMo development slice, "
                f"{emb} embedder, {BUDGET} tokens)\n",
                text,
                "",
            ]
    short = "\n".join(parts)
    parts += [
        "#### Full-ranking retrieval (`haystack_*`) on the development slices\n",
        "Scored questions; S = session level, T = turn level; the evidence recall column is "
        f"budget-bound ({BUDGET} tokens), for comparison.\n",
        full_ranking_table(root),
        "",
    ]
    for emb in embedders:
        for metric in ("evidence_recall", "haystack_session_recall_all@5"):
            text = differences_table(root, emb, metric)
            if text:
                parts += [
                    f"#### Paired differences against `memory`: `{metric}` (LoCoMo development "
                    f"slice, {emb})\n",
                    "Mean difference on the same questions [paired bootstrap 95% CI]; "
                    "* = the interval excludes 0.\n",
                    text,
                    "",
                ]
        text = mdd_table(root, emb)
        if text:
            parts += [
                f"#### Minimum detectable difference (LoCoMo development slice, {emb})\n",
                "Two-sided 5% test, 80% power: 3.96 × sd / sqrt(n).\n",
                text,
                "",
            ]
        text = abstention_table(root, emb)
        if text:
            parts += [
                f"#### The abstention proxy (LoCoMo development slice, {emb})\n",
                f"Share of questions whose context would make the proxy abstain "
                f"(report.abstain_below, chosen on {TUNE}) [Wilson 95% CI]; higher is better "
                f"on adversarial questions, lower on answerable ones. {TEST} is the test "
                "conversation.\n",
                text,
                "",
            ]
    text = judges_table(root)
    if text:
        parts += [
            "#### Rule judges on the audit's answers (no model)\n",
            text,
            "",
        ]
    body = "\n".join(parts).rstrip() + "\n"
    if args.readme:
        replace_block(Path(args.readme), BEGIN, END, body)
    else:
        print(body)
    if args.short and short:
        replace_block(Path(args.short), SHORT_BEGIN, SHORT_END, short.rstrip() + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.trust", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="the runs behind the tables")
    r.add_argument("--locomo", help="a LoCoMo JSON file")
    r.add_argument("--errata", help="its errata file")
    r.add_argument("--longmemeval", action="append", default=[], help="a LongMemEval JSON file")
    r.add_argument("--embedder", default="hash")
    r.add_argument("--out", default="results/trust")
    j = sub.add_parser("judges", help="calibrate the rule judges on the audit's answers")
    j.add_argument("--audit", required=True, help="the audit folder")
    j.add_argument("--out", default="results/trust")
    t = sub.add_parser("tables", help="the tables, from the run folders")
    t.add_argument("dir", nargs="?", default="results/trust")
    t.add_argument("--readme", help="replace the trust-tables block of this file")
    t.add_argument("--short", help="replace the trust-readme block (errata) of this file")
    ns = parser.parse_args(argv)
    {"run": run_all, "judges": judges, "tables": tables}[ns.command](ns)


if __name__ == "__main__":
    main()
