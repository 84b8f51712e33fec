"""Calibrate `memlab bench store`'s clustered corpus against real sentence embeddings.

Reads the chat turns and questions of the LoCoMo and LongMemEval slices in
../shared/datasets, embeds them with all-MiniLM-L6-v2 (offline, through the
persistent embedding cache, so only the first run pays ~1 min), and prints side
by side the neighbourhood statistics (``memlab.bench.workload.vector_stats``) of

- MiniLM on the real turns (what ``MINILM_STATS`` records),
- the clustered generator at the same sizes (``ClusterShape`` defaults),
- the hash embedder on the ``topics`` corpus (the worst case),

plus the distribution of ``estimate_salience`` over the turns
(``SALIENCE_LEVELS``). ``--fit`` refits ``ClusterShape`` (Nelder-Mead, a minute
or two) and prints the new parameters. ``--hnsw`` compares what matters to the
store benchmark, how hard each set is for pgvector's HNSW index (recall@10 of
the index against exact cosine at a few ``ef_search``), on the turns and, with
``--sentences``, on the ~38k sentences of the turns (~6 min of MiniLM the first
time), each against the generator and the hash corpus at the same size.

    python -m benchmarks.calibrate_workload [--fit] [--hnsw [--sentences]] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

from memlab.bench.workload import (
    CALIBRATION_QUERIES,
    CALIBRATION_RECORDS,
    MINILM_STATS,
    TOPIC_SIZE,
    ClusteredVectors,
    ClusterShape,
    Corpus,
    calibration_sample,
    thread_sizes,
    vector_stats,
)

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
# How far apart two statistics may be before they count as one unit of misfit.
SCALE = {
    "pair_mean": 0.02, "pair_std": 0.02, "nn1": 0.03, "nn10": 0.03, "nn100": 0.03,
    "participation": 15.0, "lid": 1.0, "q1": 0.03, "q10": 0.03, "q100": 0.03,
}  # fmt: skip


def chat_texts(folder: Path) -> tuple[list[str], list[str]]:
    """Distinct turns and questions of the LoCoMo and LongMemEval slices."""
    turns: list[str] = []
    questions: list[str] = []
    for sample in json.loads((folder / "locomo" / "locomo_dev2.json").read_text()):
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                turns += [t["text"] for t in session if t.get("text")]
        questions += [q["question"] for q in sample["qa"]]
    for name in ("longmemeval_s_dev6.json", "longmemeval_oracle_dev48.json"):
        for item in json.loads((folder / "longmemeval" / name).read_text()):
            for session in item["haystack_sessions"]:
                turns += [t["content"] for t in session if t.get("content")]
            questions.append(item["question"])
    turns = list(dict.fromkeys(t.strip() for t in turns if t.strip()))
    questions = list(dict.fromkeys(q.strip() for q in questions))
    return turns, questions


def misfit(stats: dict[str, float], target: dict[str, float]) -> float:
    return sum(((stats[k] - target[k]) / SCALE[k]) ** 2 for k in SCALE)


def fit(target: dict[str, float], start: ClusterShape) -> ClusterShape:
    from scipy.optimize import minimize

    names = [f.name for f in fields(ClusterShape) if f.name != "popularity"]  # kept fixed

    def shape(x: np.ndarray) -> ClusterShape:
        fitted = {k: float(abs(v)) for k, v in zip(names, x, strict=True)}
        return ClusterShape(**fitted, popularity=start.popularity)

    def loss(x: np.ndarray) -> float:
        records, queries = calibration_sample(0, shape(x))
        return misfit(vector_stats(records, queries), target)

    x0 = np.array([getattr(start, k) for k in names])
    best = minimize(loss, x0, method="Nelder-Mead", options={"maxfev": 300, "xatol": 1e-3})
    return shape(best.x)


def generated(n: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n records and n_queries queries of the clustered generator."""
    gen = ClusteredVectors(max(1, round(n / TOPIC_SIZE)), seed)
    rng = np.random.default_rng(seed + 1)
    sizes = thread_sizes(n, rng)
    centres = gen.threads(gen.topic_choice(len(sizes), rng))
    queries = gen.queries(centres[rng.integers(len(centres), size=n_queries)])
    return gen.records(np.repeat(centres, sizes, axis=0)), queries


def hashed(n: int, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """n lines and n_queries questions of the topics corpus, hash-embedded."""
    from memlab.memory import HashEmbedder

    corpus = Corpus(max(1, round(n / TOPIC_SIZE)), 0)
    emb = HashEmbedder(384)
    lines = corpus.lines(n, 0)
    vecs = np.concatenate([emb.embed(lines[i : i + 4096]) for i in range(0, n, 4096)])
    return vecs, emb.embed(corpus.queries(n_queries, 1))


def hnsw_recall(
    dsn: str, sets: dict[str, tuple[np.ndarray, np.ndarray]], efs: tuple[int, ...]
) -> None:
    """Print recall@10 of a default pgvector HNSW index (m=16, ef_construction=64,
    cosine) against exact cosine, per set and ef_search (in a throw-away schema)."""
    import psycopg
    from psycopg.types import TypeInfo

    from memlab.memory.stores.pg.sql import register_vector

    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn, TypeInfo.fetch(conn, "vector"))
        conn.execute("DROP SCHEMA IF EXISTS memlab_calibrate CASCADE")
        conn.execute("CREATE SCHEMA memlab_calibrate")
        conn.execute("SET search_path = memlab_calibrate, public")
        try:
            for name, (records, queries) in sets.items():
                conn.execute("DROP TABLE IF EXISTS v")
                conn.execute("CREATE TABLE v (id int PRIMARY KEY, e vector(384))")
                with (
                    conn.cursor(binary=True) as cur,
                    cur.copy("COPY v (id, e) FROM STDIN (FORMAT BINARY)") as copy,
                ):
                    copy.set_types(["int4", "vector"])
                    for i, x in enumerate(records):
                        copy.write_row((i, x))
                t = time.perf_counter()
                conn.execute("CREATE INDEX ON v USING hnsw (e vector_cosine_ops)")
                built = time.perf_counter() - t
                exact = np.argsort(-(queries @ records.T), axis=1)[:, :10]
                cells = []
                for ef in efs:
                    conn.execute(f"SET hnsw.ef_search = {int(ef)}")
                    hits = [
                        len(
                            {r[0] for r in conn.execute(
                                "SELECT id FROM v ORDER BY e <=> %s LIMIT 10", (q,)
                            ).fetchall()} & set(exact[i].tolist())
                        ) / 10
                        for i, q in enumerate(queries)
                    ]  # fmt: skip
                    cells.append(f"ef_search {ef}: {np.mean(hits):.3f}")
                print(f"{name:<22} {len(records):>7,} vectors (built in {built:.0f} s)  "
                      + "  ".join(cells))  # fmt: skip
        finally:
            conn.execute("DROP SCHEMA IF EXISTS memlab_calibrate CASCADE")


def sentences(turns: list[str]) -> list[str]:
    """The distinct sentences (over 15 characters) of the turns."""
    parts = (s.strip() for t in turns for s in re.split(r"(?<=[.!?])\s+|\n+", t))
    return list(dict.fromkeys(s for s in parts if len(s) > 15))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=Path, default=DATASETS)
    ap.add_argument("--fit", action="store_true", help="refit ClusterShape")
    ap.add_argument("--hnsw", action="store_true", help="compare HNSW recall on each set")
    ap.add_argument("--sentences", action="store_true", help="--hnsw also on ~38k sentences")
    ap.add_argument("--dsn", default=None, help="PostgreSQL for --hnsw (default: embedded)")
    args = ap.parse_args(argv)
    if not args.datasets.is_dir():
        print(f"{args.datasets} is absent; the calibration needs the shared datasets")
        return 1
    from memlab.memory import CachedEmbedder, MiniLMEmbedder
    from memlab.memory.salience import estimate_salience

    turns, questions = chat_texts(args.datasets)
    print(f"{len(turns)} turns, {len(questions)} questions")
    minilm = CachedEmbedder(MiniLMEmbedder())
    real = vector_stats(minilm.embed(turns), minilm.embed(questions))
    records, queries = calibration_sample(0)
    gen = vector_stats(records, queries)
    worst = vector_stats(*hashed(CALIBRATION_RECORDS, CALIBRATION_QUERIES))
    print(f"\n{'statistic':<14}{'MiniLM':>9}{'stored':>9}{'clustered':>11}{'hash topics':>13}")
    for k in SCALE:
        print(f"{k:<14}{real[k]:>9.3f}{MINILM_STATS[k]:>9.3f}{gen[k]:>11.3f}{worst[k]:>13.3f}")
    print(f"misfit (sum of squared scaled differences): clustered {misfit(gen, real):.2f}")
    levels = Counter(round(estimate_salience(t), 2) for t in turns)
    print("\nestimate_salience over the turns (value, share):")
    print(", ".join(f"({v:.2f}, {levels[v] / len(turns):.4f})" for v in sorted(levels)))
    if args.hnsw:
        from memlab.memory.stores.pg.server import embedded_dsn

        dsn = args.dsn or embedded_dsn()
        q = minilm.embed(questions)
        n = len(turns)
        print("\nHNSW recall@10 against exact cosine (questions as queries):")
        sets = {
            "MiniLM turns": (minilm.embed(turns), q),
            "clustered": generated(n, len(questions)),
            "hash topics": hashed(n, len(questions)),
        }
        if args.sentences:
            lines = sentences(turns)
            sets.update({
                "MiniLM sentences": (minilm.embed(lines), q),
                "clustered (same n)": generated(len(lines), len(questions)),
                "hash topics (same n)": hashed(len(lines), len(questions)),
            })  # fmt: skip
        hnsw_recall(dsn, sets, (10, 20, 40, 80))
    if args.fit:
        shape = fit(real, ClusterShape())
        records, queries = calibration_sample(0, shape)
        print(f"\nfitted {json.dumps({k: round(v, 4) for k, v in asdict(shape).items()})}")
        print(f"misfit {misfit(vector_stats(records, queries), real):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
