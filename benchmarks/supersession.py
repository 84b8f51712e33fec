"""Supersession detection, scored against ground truth, and its cost per write.

    python -m benchmarks.supersession                         # shipped transcripts, hash
    python -m benchmarks.supersession --dir /tmp/fresh --embedder hash,minilm
    python -m benchmarks.supersession --longmemeval FILE [--longmemeval FILE2]
    python -m benchmarks.supersession --cost 1000,10000
    python -m benchmarks.supersession --list-errors 20         # print missed / extra edges

Transcripts (format v1) are replayed turn by turn: every turn becomes a record
(user, agent, tool and web turns alike, as the lab's ``memory`` strategy stores
them), and the consolidator decides at each write which earlier records the new
one supersedes. Ground truth comes from the turns' ``mentions``: a turn that
states fact f with value v supersedes every earlier, still active, trusted turn
of its scope that states f with another value (agent echoes included). A turn
that restates the value in force supersedes nothing.

Two replays per data set and embedder:

- ``oracle``: before each write, the store holds exactly the records that are
  active by ground truth, so each write's decision is scored on its own
  (precision and recall of supersession edges; errors do not compound);
- ``closed``: the consolidator's own decisions retire records (as the layer
  will), and each probe checks the needed facts: ``lost`` (no active record
  states the value in force any more, although one was written) and ``stale``
  (an active record still states a stale value without the value in force).

The replays emulate supersession with ``mark_archived`` (archived records are not
candidates): they score the consolidator alone, outside the layer.

LongMemEval (``--longmemeval``) has no mentions; for knowledge-update questions
the evidence turns say which turn holds the old value and which the new one:
the benchmark reports whether the newest evidence turn stays active, whether the
older ones are superseded, and, for every question type, how often evidence is
superseded (harm) and how many supersessions fire per 100 trusted writes.

``--cost`` times ``remember()`` with and without detection in the same process
(interleaved), at each scope size, on two workloads: the bench corpus
(``benchmarks.common``) and turns of the shipped transcripts.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.supersession_cost import cost
from benchmarks.supersession_data import (
    ROOT,
    SHIPPED,
    Episode,
    Turn,
    has_value,
    load_longmemeval,
    load_transcripts,
)
from memlab.memory import (
    CachedEmbedder,
    Embedder,
    HashEmbedder,
    InMemoryStore,
    MemoryKind,
    MemoryRecord,
    ModelCache,
    Source,
)
from memlab.memory.consolidate import (
    Consolidator,
    ScopeReader,
    Supersession,
)
from memlab.memory.rule_consolidator import RuleConsolidator, RulePolicy

OUT = ROOT / "results" / "bench"
UNTRUSTED = {"tool", "web"}
#: Independent of the detector's own tables: only labels the correction style.
STYLE_CUES = re.compile(
    r"\b(actually|now|correction|update|changed?|moved|switched|instead|no longer|"
    r"anymore|from now on|sorry|oh wait|scratch|new|became|went from|renegotiated)\b",
    re.I,
)


# -- embedders -------------------------------------------------------------------
def make_embedder(name: str) -> Embedder:
    if name == "hash":
        return HashEmbedder(384)
    if name == "minilm":
        from memlab.memory import MiniLMEmbedder

        return CachedEmbedder(MiniLMEmbedder(threads=1), ModelCache())
    raise SystemExit(f"unknown embedder {name!r}; use hash or minilm")


# -- ground truth ----------------------------------------------------------------
def gold_edges(turns: Sequence[Turn], new: int, active: Iterable[int]) -> set[int]:
    """Indices of active earlier trusted turns (same scope) that turn ``new`` supersedes."""
    t = turns[new]
    if t.source in UNTRUSTED or not t.mentions:
        return set()
    out = set()
    for i in active:
        u = turns[i]
        if u.scope != t.scope or u.source in UNTRUSTED:
            continue
        if any(f in u.mentions and u.mentions[f] != v for f, v in t.mentions.items()):
            out.add(i)
    return out


def style_of(new: Turn, old: Turn) -> str:
    """How a correction is phrased: ``names-old`` (the old value is in the new text),
    ``cue`` (a change word, old value not named) or ``no-cue``."""
    stale = [v for f, v in old.mentions.items() if f in new.mentions and new.mentions[f] != v]
    if any(has_value(new.text, v) for v in stale):
        return "names-old"
    return "cue" if STYLE_CUES.search(new.text) else "no-cue"


# -- replay -----------------------------------------------------------------------
def records_of(ep: Episode, emb: Embedder) -> list[MemoryRecord]:
    vecs = emb.embed([t.text for t in ep.turns])
    return [
        MemoryRecord(
            id=t.id,
            content=t.text,
            embedding=vecs[i],
            kind=MemoryKind.EPISODIC,
            scope=t.scope,
            salience=0.5,
            tokens=-(-len(t.text) // 4),
            created_at=t.time,
            last_accessed_at=t.time,
            source=Source(t.source),
        )
        for i, t in enumerate(ep.turns)
    ]


def replay(
    ep: Episode, recs: list[MemoryRecord], det: Consolidator, mode: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Replay one episode; returns (edge rows, probe rows)."""
    turns = ep.turns
    store = InMemoryStore()
    pos = {t.id: i for i, t in enumerate(turns)}
    gold_active: set[int] = set()
    # what each trusted record still contributes: its text, minus the claims that were
    # superseded when the supersession was partial; "" once wholly superseded
    visible: dict[int, str] = {}
    whole: dict[int, str] = {}  # the same if every supersession retired a whole record
    edges: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    for i, (t, rec) in enumerate(zip(turns, recs, strict=True)):
        if t.probe and t.needs:
            probes.extend(_probe_rows(ep, i, visible, whole))
        gold = gold_edges(turns, i, gold_active)
        decided: list[Supersession] = []
        if t.source not in UNTRUSTED:
            decided = det.decide(rec, ScopeReader(store, rec.scope))
        pred = {pos[d.old_id]: d for d in decided}
        for j in gold | set(pred):
            d = pred.get(j)
            old = turns[j]
            edges.append(
                {
                    "episode": ep.id,
                    "kind": ep.kind,
                    "new": t.id,
                    "old": old.id,
                    "gold": j in gold,
                    "predicted": d is not None,
                    "reason": d.reason if d else "",
                    "confidence": d.confidence if d else np.nan,
                    "partial": d.partial if d else False,
                    "detail": d.detail if d else "",
                    "style": style_of(t, old) if j in gold else "",
                    "old_role": old.role,
                    "old_facts": len(old.mentions),
                    "new_text": t.text,
                    "old_text": old.text,
                    "new_is_correction": bool(gold),
                }
            )
        if not gold and not pred and t.source not in UNTRUSTED:
            edges.append(
                {"episode": ep.id, "kind": ep.kind, "new": t.id, "old": "", "gold": False,
                 "predicted": False, "new_is_correction": False, "new_text": t.text}
            )  # fmt: skip
        store.put(rec)
        if mode == "oracle":
            retire = {j: _gold_claim(t, turns[j]) for j in gold}
        else:
            retire = {j: d.span if d.partial else None for j, d in pred.items()}
        if retire:
            store.mark_archived(rec.scope, [turns[j].id for j in retire], t.time)
        for j, span in retire.items():
            whole[j] = ""
            text = visible.get(j, "")
            visible[j] = (
                ""
                if span is None
                else text[: span[0]] + " " * (span[1] - span[0]) + text[span[1] :]
            )
        gold_active -= gold
        if t.source not in UNTRUSTED:
            gold_active.add(i)
            visible[i] = whole[i] = t.text
    return edges, probes


def _gold_claim(new: Turn, old: Turn) -> tuple[int, int] | None:
    """The span of ``old`` that states the values ``new`` replaces, when ``old`` also
    states other facts (else None: the whole record is replaced)."""
    stale = [v for f, v in old.mentions.items() if f in new.mentions and new.mentions[f] != v]
    others = [v for f, v in old.mentions.items() if f not in new.mentions]
    if not others:
        return None
    spans = [(m.start(), m.end()) for m in re.finditer(r"[^.!?;]+[.!?;]?", old.text)]
    hit = [sp for sp in spans if any(has_value(old.text[sp[0] : sp[1]], v) for v in stale)]
    if not hit:
        return None
    return hit[0][0], hit[-1][1]


def _probe_rows(
    ep: Episode, at: int, visible: dict[int, str], whole: dict[int, str]
) -> list[dict[str, Any]]:
    turns = ep.turns
    probe = turns[at]
    rows = []
    for fact in probe.needs:
        history = [
            (i, t.mentions[fact]) for i, t in enumerate(turns[:at])
            if t.scope == probe.scope and fact in t.mentions and t.source not in UNTRUSTED
        ]  # fmt: skip
        if not history:
            continue
        current = history[-1][1]
        stale_values = {v for _, v in history if v != current}
        row: dict[str, Any] = {
            "episode": ep.id,
            "probe": probe.id,
            "fact": fact,
            "group": "corrected" if stale_values else "plain",
        }
        for name, texts in (("", visible), ("_whole", whole)):
            row["lost" + name] = not any(has_value(texts.get(i, ""), current) for i, _ in history)
            row["stale" + name] = any(
                has_value(texts.get(i, ""), v) and not has_value(texts.get(i, ""), current)
                for i, v in history
                if v != current
            )
        rows.append(row)
    return rows


# -- scoring ----------------------------------------------------------------------
def edge_summary(edges: pd.DataFrame) -> dict[str, Any]:
    real = edges[edges["old"] != ""]
    tp = int((real.gold & real.predicted).sum())
    fp = int((~real.gold & real.predicted).sum())
    fn = int((real.gold & ~real.predicted).sum())
    writes = edges.drop_duplicates(["episode", "new"])
    plain = writes[~writes.new_is_correction]
    fired = set(zip(real[real.predicted].episode, real[real.predicted].new, strict=True))
    over = sum((e, n) in fired for e, n in zip(plain.episode, plain.new, strict=True))
    # a correction is caught when every gold edge of it was predicted
    per_corr = real[real.gold].groupby(["episode", "new"])["predicted"].agg(["all", "any"])
    return {
        "gold_edges": tp + fn,
        "predicted_edges": tp + fp,
        "precision": tp / (tp + fp) if tp + fp else np.nan,
        "recall": tp / (tp + fn) if tp + fn else np.nan,
        "corrections": len(per_corr),
        "caught_all": float(per_corr["all"].mean()) if len(per_corr) else np.nan,
        "missed_all": float((~per_corr["any"]).mean()) if len(per_corr) else np.nan,
        "writes_without_correction": len(plain),
        "over_fired": over / len(plain) if len(plain) else np.nan,
    }


def by_style(edges: pd.DataFrame) -> pd.DataFrame:
    real = edges[(edges["old"] != "") & edges.gold]
    real = real.assign(old_kind=np.where(real.old_role == "agent", "echo/answer", "statement"))
    g = real.groupby(["style", "old_kind"])["predicted"]
    return pd.DataFrame({"gold_edges": g.size(), "recall": g.mean()}).reset_index()


def fp_kinds(edges: pd.DataFrame) -> Counter[str]:
    fp = edges[(edges["old"] != "") & ~edges.gold & edges.predicted]
    return Counter(fp["reason"])


def probe_summary(probes: pd.DataFrame) -> pd.DataFrame:
    if probes.empty:
        return pd.DataFrame()
    g = probes.groupby("group")
    return pd.DataFrame(
        {
            "needs": g.size(),
            "lost": g["lost"].mean(),
            "stale": g["stale"].mean(),
            "lost_whole": g["lost_whole"].mean(),
            "stale_whole": g["stale_whole"].mean(),
        }
    )


# -- LongMemEval -------------------------------------------------------------------
def replay_lme(ep: Episode, recs: list[MemoryRecord], det: Consolidator) -> dict[str, Any]:
    store = InMemoryStore()
    superseded: dict[str, Supersession] = {}
    writes = 0
    for t, rec in zip(ep.turns, recs, strict=True):
        if t.source not in UNTRUSTED:
            writes += 1
            for d in det.decide(rec, ScopeReader(store, rec.scope)):
                superseded[d.old_id] = d
        store.put(rec)
        olds = [d.old_id for d in superseded.values() if d.new_id == rec.id]
        if olds:
            store.mark_archived(rec.scope, olds, t.time)
    evidence = [t for t in ep.turns if t.evidence]
    sessions = sorted(
        {t.id.rsplit("_", 1)[0] for t in evidence},
        key=lambda s: min(t.time for t in evidence if t.id.startswith(s + "_")),
    )
    newest = [t for t in evidence if t.id.startswith(sessions[-1] + "_")] if sessions else []
    older = [t for t in evidence if t not in newest]
    answer_active = any(
        has_value(t.text, ep.answer) for t in ep.turns
        if t.source == "user" and t.id not in superseded
    ) if ep.answer else False  # fmt: skip
    return {
        "episode": ep.id,
        "kind": ep.kind,
        "writes": writes,
        "superseded": len(superseded),
        "per_100_writes": 100 * len(superseded) / max(1, writes),
        "evidence": len(evidence),
        "evidence_superseded": sum(t.id in superseded for t in evidence),
        "newest_evidence_kept": all(t.id not in superseded for t in newest) if newest else np.nan,
        "older_evidence": len(older),
        "older_evidence_superseded": sum(t.id in superseded for t in older),
        "older_superseded_by_newest": sum(
            t.id in superseded and superseded[t.id].new_id in {n.id for n in newest} for t in older
        ),
        "answer_in_active_user_turn": answer_active,
        "reasons": dict(Counter(d.reason for d in superseded.values())),
    }


# -- driver -----------------------------------------------------------------------
def run_transcripts(
    name: str, episodes: list[Episode], embedders: Sequence[str], det: Consolidator
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    edge_frames, probe_frames, summary = [], [], []
    for emb_name in embedders:
        emb = make_embedder(emb_name)
        encoded = [(ep, records_of(ep, emb)) for ep in episodes]
        for mode in ("oracle", "closed"):
            edges, probes = [], []
            t0 = time.perf_counter()
            for ep, recs in encoded:
                e, p = replay(ep, recs, det, mode)
                edges += e
                probes += p
            ef = pd.DataFrame(edges).assign(data=name, embedder=emb_name, mode=mode)
            pf = pd.DataFrame(probes).assign(data=name, embedder=emb_name, mode=mode)
            edge_frames.append(ef)
            probe_frames.append(pf)
            s = edge_summary(ef) | {"data": name, "embedder": emb_name, "mode": mode}
            ps = probe_summary(pf)
            for group in ("corrected", "plain"):
                if group in ps.index:
                    for col in ps.columns:
                        s[f"{group}_{col}"] = ps.loc[group, col]
            s["seconds"] = time.perf_counter() - t0
            summary.append(s)
            print(f"  {name} / {emb_name} / {mode}: done in {s['seconds']:.1f} s", flush=True)
    return pd.concat(edge_frames), pd.concat(probe_frames), pd.DataFrame(summary)


def _fmt(df: pd.DataFrame) -> str:
    return df.to_string(index=False, float_format=lambda x: f"{x:.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.supersession", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--dir", action="append", default=[], help="transcript folder (repeatable); "
                    "default: the shipped transcripts")  # fmt: skip
    ap.add_argument("--longmemeval", action="append", default=[], help="LongMemEval JSON file")
    ap.add_argument("--embedder", default="hash", help="comma-separated: hash,minilm")
    ap.add_argument("--cost", default="", help="scope sizes for the cost bench, e.g. 1000,10000")
    ap.add_argument("--cost-writes", type=int, default=300)
    ap.add_argument("--list-errors", type=int, default=0, help="print this many misses and extras")
    ap.add_argument("--out", default=str(OUT), help="folder for the CSV tables")
    ap.add_argument("--no-transcripts", action="store_true", help="skip transcript replays")
    ap.add_argument("--corpus", action="store_true",
                    help="also run the hand-written cases (tests/consolidate_cases.py)")  # fmt: skip
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a RulePolicy field, e.g. --set min_similar=0.4 (repeatable)")  # fmt: skip
    args = ap.parse_args(argv)
    det = RuleConsolidator(_policy(args.set))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    embedders = [e.strip() for e in args.embedder.split(",") if e.strip()]
    pd.set_option("display.width", 200)
    if not args.no_transcripts:
        folders = [Path(d) for d in args.dir] or [SHIPPED]
        summaries, styles = [], []
        for folder in folders:
            episodes = load_transcripts(folder)
            name = "shipped" if folder.resolve() == SHIPPED.resolve() else folder.name
            print(f"{name}: {len(episodes)} transcripts", flush=True)
            edges, _probes, summary = run_transcripts(name, episodes, embedders, det)
            summaries.append(summary)
            oracle = edges[edges["mode"] == "oracle"]
            for emb_name, part in oracle.groupby("embedder"):
                styles.append(by_style(part).assign(data=name, embedder=emb_name))
                if args.list_errors:
                    _list_errors(part, args.list_errors, f"{name}/{emb_name}")
                print(f"  false positives by reason ({name}/{emb_name}): {dict(fp_kinds(part))}")
            edges.to_csv(out / f"supersession-edges-{name}.csv", index=False)
        table = pd.concat(summaries)
        cols = ["data", "embedder", "mode", "gold_edges", "predicted_edges", "precision",
                "recall", "corrections", "caught_all", "missed_all", "over_fired",
                "corrected_lost", "corrected_stale", "plain_lost", "plain_lost_whole",
                "plain_stale"]  # fmt: skip
        print("\nSupersession edges (oracle: each write scored alone; closed: own decisions)")
        print(_fmt(table[[c for c in cols if c in table]]))
        style_table = pd.concat(styles)
        print("\nRecall of gold edges by correction style (oracle)")
        print(_fmt(style_table))
        table.to_csv(out / "supersession.csv", index=False)
        style_table.to_csv(out / "supersession-styles.csv", index=False)
        print(f"chart: {chart(table, style_table, out / 'supersession.png')}")
    if args.corpus:
        corpus_table = run_corpus(embedders, det)
        print("\nHand-written cases (tests/consolidate_cases.py): share passed per kind")
        print(_fmt(corpus_table))
        corpus_table.to_csv(out / "supersession-corpus.csv", index=False)
    for path in args.longmemeval:
        episodes = load_longmemeval(Path(path))
        for emb_name in embedders:
            emb = make_embedder(emb_name)
            rows = [replay_lme(ep, records_of(ep, emb), det) for ep in episodes]
            df = pd.DataFrame(rows).assign(data=Path(path).stem, embedder=emb_name)
            df.to_csv(out / f"supersession-lme-{Path(path).stem}-{emb_name}.csv", index=False)
            print(f"\nLongMemEval {Path(path).name} / {emb_name}")
            print(_fmt(_lme_table(df)))
            ku = df[df.kind == "knowledge-update"]
            if len(ku):
                print("knowledge-update questions:")
                print(_fmt(ku[["episode", "writes", "superseded", "older_evidence",
                               "older_superseded_by_newest", "older_evidence_superseded",
                               "newest_evidence_kept", "answer_in_active_user_turn"]]))  # fmt: skip
    if args.cost:
        sizes = [int(s) for s in args.cost.split(",") if s.strip()]
        print("\nCost of detection per remember (hash embedder, InMemoryStore; same process)")
        table = cost(sizes, det, args.cost_writes)
        print(_fmt(table))
        for _, row in table.iterrows():
            ok = "OK" if row.ratio_p50 <= 2.0 else "MISSED"
            rok = "OK" if row.recall_supersede_p50_ms < 1.0 else "MISSED"
            print(f"  {row.workload:<16} @{row.records:>7,}: remember with detection "
                  f"{row.ratio_p50:.2f}x without ({ok}, target <= 2x); recall p50 "
                  f"{row.recall_supersede_p50_ms:.2f} ms ({rok}, target < 1 ms)")  # fmt: skip
        table.to_csv(out / "supersession-cost.csv", index=False)
    return 0


def run_corpus(embedders: Sequence[str], det: Consolidator) -> pd.DataFrame:
    """The hand-written cases, per kind: how many pass (exactly the expected set)."""
    sys.path.insert(0, str(ROOT))
    from tests.consolidate_cases import CASES, STEPS, run_case, run_steps, superseded

    rows = []
    for emb_name in embedders:
        emb = make_embedder(emb_name)
        for c in CASES:
            got = run_case(c, emb, det)
            ok = superseded(got) == set(c.expected) and (
                c.partial is None or all(d.partial == c.partial for d in got)
            )
            wrong = bool(superseded(got) - set(c.expected))
            rows.append({"embedder": emb_name, "kind": c.kind, "passed": ok, "wrong": wrong})
        for st in STEPS:
            steps = run_steps(st, emb, det)
            ok = steps == [set(e) for e in st.expected]
            wrong = any(g - set(e) for g, e in zip(steps, st.expected, strict=True))
            rows.append({"embedder": emb_name, "kind": st.kind, "passed": ok, "wrong": wrong})
    df = pd.DataFrame(rows)
    g = df.groupby(["embedder", "kind"])
    table = pd.DataFrame(
        {"cases": g.size(), "passed": g["passed"].mean(), "over_fired": g["wrong"].mean()}
    ).reset_index()
    total = df.groupby("embedder").agg(cases=("passed", "size"), passed=("passed", "mean"),
                                       over_fired=("wrong", "mean")).reset_index()  # fmt: skip
    return pd.concat([table, total.assign(kind="ALL")], ignore_index=True)


def chart(table: pd.DataFrame, styles: pd.DataFrame, path: Path) -> Path:
    """Precision and recall of supersession edges per data set and embedder (each
    write scored alone), and recall per correction style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    oracle = table[table["mode"] == "oracle"]
    labels = [f"{d}\n{e}" for d, e in zip(oracle["data"], oracle["embedder"], strict=True)]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
    x = np.arange(len(oracle))
    ax1.bar(x - 0.2, oracle["precision"], 0.4, label="precision")
    ax1.bar(x + 0.2, oracle["recall"], 0.4, label="recall")
    ax1.set_xticks(x, labels, fontsize=8)
    ax1.set_ylim(0, 1)
    ax1.set_ylabel("share of supersession edges")
    ax1.set_title("Edges: precision and recall")
    ax1.legend(loc="lower right")
    st = styles.assign(label=styles["style"] + "\n" + styles["old_kind"])
    kinds = list(dict.fromkeys(st["label"]))
    groups = list(dict.fromkeys(zip(st["data"], st["embedder"], strict=True)))
    width = 0.8 / max(1, len(groups))
    for k, (d, e) in enumerate(groups):
        sub = st[(st["data"] == d) & (st["embedder"] == e)].set_index("label").reindex(kinds)
        ax2.bar(np.arange(len(kinds)) + k * width, sub["recall"], width, label=f"{d} / {e}")
    ax2.set_xticks(np.arange(len(kinds)) + width * (len(groups) - 1) / 2, kinds, fontsize=8)
    ax2.set_ylim(0, 1)
    ax2.set_ylabel("recall of gold edges")
    ax2.set_title("Recall by correction style")
    ax2.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _policy(settings: Sequence[str]) -> RulePolicy:
    values: dict[str, Any] = {}
    fields = RulePolicy.__dataclass_fields__
    for item in settings:
        name, _, raw = item.partition("=")
        if name not in fields:
            raise SystemExit(f"--set {item}: RulePolicy has no field {name!r}")
        default = getattr(RulePolicy(), name)
        if raw == "None":
            values[name] = None
        elif isinstance(default, bool):
            values[name] = raw.lower() in ("1", "true", "yes")
        else:
            values[name] = type(default or 0)(raw)
    return RulePolicy(**values)


def _lme_table(df: pd.DataFrame) -> pd.DataFrame:
    g = df.groupby("kind")
    return pd.DataFrame(
        {
            "questions": g.size(),
            "writes": g["writes"].sum(),
            "superseded_per_100_writes": 100 * g["superseded"].sum() / g["writes"].sum(),
            "evidence": g["evidence"].sum(),
            "evidence_superseded": g["evidence_superseded"].sum(),
            "older_ev": g["older_evidence"].sum(),
            "older_ev_superseded": g["older_evidence_superseded"].sum(),
            "newest_ev_kept": g["newest_evidence_kept"].mean(),
        }
    ).reset_index()


def _list_errors(edges: pd.DataFrame, n: int, label: str) -> None:
    real = edges[edges["old"] != ""]
    misses = real[real.gold & ~real.predicted]
    extras = real[~real.gold & real.predicted]
    print(f"\n--- {label}: {len(misses)} missed edges (showing {min(n, len(misses))})")
    for r in misses.head(n).to_dict("records"):
        print(f"  [{r['style']}/{r['old_role']}] {r['episode']} {r['new']}<-{r['old']}\n"
              f"     NEW {str(r['new_text'])[:110]!r}\n     OLD {str(r['old_text'])[:110]!r}")  # fmt: skip
    print(f"--- {label}: {len(extras)} extra edges (showing {min(n, len(extras))})")
    for r in extras.head(n).to_dict("records"):
        print(f"  [{r['reason']} {r['confidence']:.2f}] {r['episode']} {r['new']}<-{r['old']}: "
              f"{str(r['detail'])[:100]}\n     NEW {str(r['new_text'])[:110]!r}\n"
              f"     OLD {str(r['old_text'])[:110]!r}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
