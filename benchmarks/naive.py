"""The reference design's approach, as a baseline: one JSON file rewritten on every
write (embeddings as float lists) and records scored in a Python loop."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from memlab.memory import MemoryRecord


class RewriteJsonStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[dict] = []

    def put(self, r: MemoryRecord) -> None:
        self.records.append(
            {
                "id": r.id, "content": r.content, "embedding": r.embedding.tolist(),
                "scope": r.scope, "kind": r.kind.value, "salience": r.salience,
                "created_at": r.created_at, "access_count": r.access_count,
            }
        )  # fmt: skip
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.records))
        os.replace(tmp, self.path)


def loop_recall(
    records: list[MemoryRecord], scope: str, q: np.ndarray, now: float, k: int = 10
) -> list[str]:
    """Score every record in Python, one at a time, and sort."""
    scored = []
    for r in records:
        if r.scope != scope:
            continue
        sim = max(0.0, float(np.dot(r.embedding, q)))
        recency = math.exp(-math.log(2) * max(0.0, now - r.created_at) / (72 * 3600))
        usage = min(1.0, math.log10(r.access_count + 1) / 2)
        scored.append((0.6 * sim + 0.15 * recency + 0.2 * r.salience + 0.05 * usage, r.id))
    scored.sort(reverse=True)
    return [i for _, i in scored[:k]]
