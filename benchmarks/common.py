"""Helpers shared by the benchmarks: seeded workloads and timing."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from memlab.memory import HashEmbedder, MemoryRecord

START = 1_780_000_000.0


def corpus(n: int, seed: int = 0) -> list[str]:
    """n short, varied support-chat lines from a seeded vocabulary."""
    rng = np.random.default_rng(seed)
    subjects = ["we", "our team", "the client", "my manager", "the on-call engineer", "billing"]
    verbs = ["deploys to", "prefers", "moved to", "asked about", "switched to", "runs", "pays for"]
    objects = [
        f"{a}-{b}"
        for a in ["gke", "eks", "aks", "nomad", "heroku", "fly", "render", "k3s"]
        for b in ["europe", "us-east", "asia", "canary", "prod", "staging", "edge", "lab"]
    ]
    words = [f"token{i}" for i in range(4000)]
    out = []
    for _ in range(n):
        extra = " ".join(rng.choice(words, 6))
        out.append(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {extra}")
    return out


def records(
    n: int, scope: str, embedder: HashEmbedder, seed: int = 0, batch: int = 5000
) -> list[MemoryRecord]:
    """n embedded episodic records in one scope, one minute apart."""
    texts = corpus(n, seed)
    vecs = np.concatenate([embedder.embed(texts[i : i + batch]) for i in range(0, n, batch)])
    rng = np.random.default_rng(seed + 1)
    sal = rng.uniform(0, 1, n)
    return [
        MemoryRecord(
            id=f"{scope}-{seed}-{i}",
            content=texts[i],
            embedding=vecs[i],
            kind="episodic",
            scope=scope,
            salience=float(sal[i]),
            tokens=-(-len(texts[i]) // 4),
            created_at=START + 60.0 * i,
            last_accessed_at=START + 60.0 * i,
        )
        for i in range(n)
    ]


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    """Wall-clock seconds of each of ``repeat`` calls."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))
