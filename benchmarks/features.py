"""Procedures, reflection and layered scopes, measured: ``python -m benchmarks.features``.

Replays two transcript sets through ``memory`` and the feature strategies
(``memlab run``, SQLite stores kept in the run folder), then reads the probes and
the final stores:

- ``sessions`` (transcripts/sessions): multi-session conversations with repeated
  tool-use tasks. It was used while building the features (the procedure slot's
  threshold was chosen on other seeds of the same generator, 101-112);
- ``synthetic`` (transcripts/synthetic, the 20 shipped support conversations):
  not used while building them.

``--dir NAME=FOLDER`` measures another transcript folder too (for example seeds
of the generators that were not used while building: ``memlab synth --seed 7001
--out DIR``). Each set is replayed into ``results/features/runs/<name>``, an
earlier run folder replaced (a run of older code would give older figures);
``--reuse`` reads a run folder that already holds a ``summary.csv`` instead.

Writes ``results/features/summary.csv`` (one row per set and strategy) and
``results/features/features.png``, and prints the table as markdown (the docs
table in docs/features.md). Columns:

- ``fact_recall``, ``cross_session``, ``session_local``: mean fact recall over all
  probes with needed facts, over those whose evidence lies in earlier sessions
  only, and over those whose evidence lies in the probe's own session;
- ``procedure_recall``: mean over procedure probes (share of needed steps in
  context, in order); ``step_tokens``: the tokens of the items stating them;
- ``context_tokens``: mean tokens per probe's context;
- ``active_records``: active records at the end of a transcript (mean), and
  ``records_vs_memory``: that over ``memory``'s; ``active_tokens``: their tokens;
- ``leaks``: context items from another scope or another session of the user
  (summed over probes; must be 0);
- ``promoted``: reflection records that carry untrusted content above the
  untrusted cap, or as trusted (a trusted reflection quoting six or more words of
  a tool/web turn) - summed over the final stores; must be 0.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from memlab.lab.schema import default_of
from memlab.lab.transcripts import Transcript, load_dir
from memlab.memory import MemoryLayer, Source
from memlab.memory.quotes import Untrusted, find_quotes

OUT = Path("results/features")
STRATEGIES = (
    "memory",
    "memory_procedural",
    "memory_procedural_no_slot",
    "memory_reflect",
    "memory_reflect_no_supersede",
    "memory_layered",
    "memory_layered_no_reflect",
)
SETS = {"sessions": Path("transcripts/sessions"), "synthetic": Path("transcripts/synthetic")}
UNTRUSTED_CAP = default_of(MemoryLayer, "untrusted_salience_cap")  # the lab's too


def replay(name: str, out: Path, folder: Path | None = None) -> None:
    source = (
        [f"transcripts={name}"]
        if folder is None
        else ["transcripts=dir", f"transcripts.path={folder}"]
    )
    cmd = [
        str(Path(sys.executable).parent / "memlab"), "run", *source, "store=sqlite",
        f"strategies=[{','.join(STRATEGIES)}]", f"hydra.run.dir={out}", "progress=false",
    ]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def probe_where(transcripts: list[Transcript]) -> dict[tuple[str, str], str]:
    """(transcript, probe id) -> ``cross_session``, ``session_local`` or ``mixed``."""
    out = {}
    for t in transcripts:
        for x in t.turns:
            if x.probe is None or not x.probe.evidence:
                continue
            sessions = {t.turns[t.index[e]].session for e in x.probe.evidence}
            if sessions == {x.session}:
                out[(t.id, x.id)] = "session_local"
            elif x.session not in sessions:
                out[(t.id, x.id)] = "cross_session"
            else:
                out[(t.id, x.id)] = "mixed"
    return out


def promoted(run: Path, transcripts: list[Transcript], strategy: str) -> int:
    """Reflection records holding untrusted content above the cap or as trusted."""
    outside = {
        t.id: [Untrusted(x.text, Source(x.source), x.id) for x in t.turns
               if x.source in ("tool", "web")]
        for t in transcripts
    }  # fmt: skip
    n = 0
    for db in sorted((run / "stores" / strategy).glob("*.db")):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute(
                "SELECT content, source, salience, meta FROM records WHERE kind = 'semantic' "
                "AND meta LIKE '%\"reflection\"%'"
            ).fetchall()
        finally:
            con.close()
        for content, source, salience, _meta in rows:
            trusted = Source(source).trusted
            if (not trusted and float(salience) > UNTRUSTED_CAP) or (
                trusted and find_quotes(content, outside[db.stem], min_words=6)
            ):
                n += 1
    return n


def measure(name: str, run: Path, folder: Path) -> pd.DataFrame:
    transcripts = load_dir(folder)
    where = probe_where(transcripts)
    probes = pd.read_csv(run / "probes.csv")
    probes["where"] = [
        where.get((t, p), "") for t, p in zip(probes.transcript, probes.probe, strict=True)
    ]
    summary = pd.read_csv(run / "summary.csv")
    finals = summary[summary.metric == "final_store_records"].set_index("strategy")["mean"]
    tokens = summary[summary.metric == "final_store_tokens"].set_index("strategy")["mean"]
    rows = []
    for strategy in STRATEGIES:
        p = probes[probes.strategy == strategy]
        proc = p[p.category == "procedure"] if "category" in p else p.iloc[0:0]
        rows.append({
            "set": name,
            "strategy": strategy,
            "probes": len(p),
            "fact_recall": p.fact_recall.mean(),
            "cross_session": p[p["where"] == "cross_session"].fact_recall.mean(),
            "session_local": p[p["where"] == "session_local"].fact_recall.mean(),
            "procedure_recall": proc.procedure_recall.mean() if len(proc) else np.nan,
            "step_tokens": proc.step_tokens.mean() if len(proc) else np.nan,
            "context_tokens": p.context_tokens.mean(),
            "active_records": float(finals.get(strategy, np.nan)),
            "active_tokens": float(tokens.get(strategy, np.nan)),
            "leaks": float(p.leaks.sum()),
            "promoted": promoted(run, transcripts, strategy),
        })  # fmt: skip
    df = pd.DataFrame(rows)
    df["records_vs_memory"] = df.active_records / float(finals["memory"])
    return df


def chart(df: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    for ax, (col, label) in zip(
        axes,
        [("fact_recall", "fact recall (0-1)"), ("procedure_recall", "procedure recall (0-1)"),
         ("context_tokens", "context tokens per probe")],
        strict=True,
    ):  # fmt: skip
        sets = list(dict.fromkeys(df["set"]))
        width = 0.8 / len(sets)
        x = np.arange(len(STRATEGIES))
        for i, s in enumerate(sets):
            vals = df[df["set"] == s].set_index("strategy").reindex(STRATEGIES)[col]
            bars = ax.bar(x + i * width, vals, width, label=s)  # NaN (no such probes): no bar
            if col == "procedure_recall":
                for b, v in zip(bars, vals, strict=True):
                    if not np.isnan(v):
                        ax.annotate(f"{v:.2f}", (b.get_x() + b.get_width() / 2, v),
                                    ha="center", va="bottom", fontsize=8)  # fmt: skip
        ax.set_xticks(x + width * (len(sets) - 1) / 2)
        ax.set_xticklabels([s.replace("memory_", "") for s in STRATEGIES], rotation=35,
                           ha="right")  # fmt: skip
        ax.set_ylabel(label)
        if col != "context_tokens":
            ax.set_ylim(0, 1.05)
        ax.set_ylim(bottom=0)
    axes[0].legend(title="transcripts", loc="lower left")
    axes[1].set_title("procedure probes (sessions set only)", fontsize=9)
    fig.suptitle("Procedures, reflection and layered scopes (budget 400 tokens, hash embedder)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


FORMATS = {"context_tokens": "{:.0f}", "active_tokens": "{:.0f}", "leaks": "{:.0f}",
           "active_records": "{:.1f}", "records_vs_memory": "{:.2f}"}  # fmt: skip


def markdown(df: pd.DataFrame) -> str:
    cols = ["set", "strategy", "fact_recall", "cross_session", "session_local",
            "procedure_recall", "context_tokens", "active_records", "records_vs_memory",
            "active_tokens", "leaks", "promoted"]  # fmt: skip
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, float):
                cells.append("-" if np.isnan(v) else FORMATS.get(c, "{:.3f}").format(v))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.features", description=__doc__)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--sets",
        nargs="*",
        default=None,
        choices=list(SETS),
        help="shipped sets to measure (default: all, unless --dir is given)",
    )
    parser.add_argument("--dir", action="append", default=[], metavar="NAME=FOLDER",
                        help="also measure a transcript folder (e.g. generated seeds that were "
                        "not used while building), repeatable")  # fmt: skip
    parser.add_argument("--reuse", action="store_true",
                        help="read run folders that already hold a summary.csv instead of "
                        "replaying them (figures of the code that wrote them)")  # fmt: skip
    ns = parser.parse_args(argv)
    folders: dict[str, tuple[Path, bool]] = {
        name: (SETS[name], True)
        for name in (ns.sets if ns.sets is not None else [] if ns.dir else SETS)
    }
    for item in ns.dir:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            parser.error(f"--dir takes NAME=FOLDER, got {item!r}")
        folders[name] = (Path(folder), False)
    frames = []
    for name, (folder, shipped) in folders.items():
        run = ns.out / "runs" / name
        if not (ns.reuse and (run / "summary.csv").exists()):
            shutil.rmtree(run, ignore_errors=True)
            replay(name, run, None if shipped else folder.resolve())
        frames.append(measure(name, run, folder))
    df = pd.concat(frames, ignore_index=True)
    ns.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(ns.out / "summary.csv", index=False, float_format="%.4f")
    chart(df, ns.out / "features.png")
    print(markdown(df))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
