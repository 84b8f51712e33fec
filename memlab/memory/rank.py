"""Vectorized hybrid ranking and budget packing.

score = w_sim * similarity + w_rec * recency + w_sal * salience + w_use * usage

- similarity: cosine similarity of query and record, clamped at 0.
- recency: ``exp(-ln 2 * age / half_life[kind])``, age = now - created_at (>= 0).
- salience: the record's salience clamped to [0, 1].
- usage: ``min(1, log10(access_count + 1) / 2)`` (100 recalls saturate it).

Every signal is in [0, 1], so each weight reads as that signal's share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from memlab.errors import InputError
from memlab.memory.records import KIND_CODES, MemoryKind
from memlab.memory.stores.base import Candidates

LN2 = math.log(2.0)
HOUR = 3600.0
SIGNALS = ("similarity", "recency", "salience", "usage")


@dataclass(frozen=True)
class RankWeights:
    """Non-negative weights of the hybrid score; at least one must be positive."""

    similarity: float = 0.6
    recency: float = 0.15
    salience: float = 0.2
    usage: float = 0.05

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or math.isnan(value) or value < 0:
                raise InputError(f"weights.{f.name} must be a number >= 0, got {value!r}")
        if sum(self.as_dict().values()) <= 0:
            raise InputError("weights are all zero; give at least one signal a positive weight")

    def as_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class HalfLives:
    """Recency half-life per memory kind, in hours (must be > 0)."""

    episodic: float = 72.0
    semantic: float = 24.0 * 90
    procedural: float = 24.0 * 365

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or math.isnan(value) or value <= 0:
                raise InputError(f"half_life.{f.name} must be a number of hours > 0, got {value!r}")

    def seconds_by_code(self) -> np.ndarray:
        """Half-lives in seconds indexed by kind code (see KIND_CODES)."""
        out = np.zeros(len(KIND_CODES), dtype=np.float64)
        for kind, code in KIND_CODES.items():
            out[code] = getattr(self, kind.value) * HOUR
        return out

    def of(self, kind: MemoryKind) -> float:
        return float(getattr(self, kind.value))


@dataclass
class Scored:
    """Scores of every candidate row and each signal's raw values."""

    scores: np.ndarray  # float32/64, -inf where masked
    components: dict[str, np.ndarray]


class HybridRanker:
    """Scores candidates with the weighted sum of the four signals, in numpy."""

    def __init__(self, weights: RankWeights | None = None, half_life: HalfLives | None = None):
        self.weights = weights or RankWeights()
        self.half_life = half_life or HalfLives()
        self._hl = self.half_life.seconds_by_code()

    def score(self, cands: Candidates, query: np.ndarray, now: float) -> Scored:
        """Score every row of ``cands`` against a unit query vector at time ``now``."""
        w = self.weights
        sim = cands.embeddings @ query.astype(np.float32, copy=False)
        np.maximum(sim, 0.0, out=sim)
        age = np.maximum(now - cands.created_at, 0.0)
        recency = np.exp(-LN2 * age / self._hl[cands.kind])
        salience = np.clip(cands.salience, 0.0, 1.0)
        usage = np.minimum(1.0, np.log10(cands.access_count + 1.0) / 2.0)
        scores = (
            w.similarity * sim.astype(np.float64)
            + w.recency * recency
            + w.salience * salience
            + w.usage * usage
        )
        scores[~cands.mask] = -np.inf
        return Scored(
            scores=scores,
            components={
                "similarity": sim,
                "recency": recency,
                "salience": salience,
                "usage": usage,
            },
        )


def pack(
    scores: np.ndarray,
    tokens: np.ndarray,
    budget: int,
    *,
    ids: list[str] | None = None,
    tiebreak: np.ndarray | None = None,
    max_hits: int | None = None,
    min_score: float = -np.inf,
) -> list[int]:
    """Choose rows by descending score until the token budget is full.

    Skip-and-continue: a row that would overflow the remaining budget is skipped
    and smaller rows further down are still tried. Ties are broken by
    ``tiebreak`` (larger first, e.g. created_at) and then by id.

    Returns:
        The chosen row indices in rank order; their tokens sum to at most ``budget``.
    """
    valid = np.isfinite(scores) & (scores >= min_score) & (tokens <= budget)
    rows = np.flatnonzero(valid)
    if rows.size == 0:
        return []
    limit = max_hits if max_hits is not None else len(rows)
    chosen: list[int] = []
    remaining = budget
    smallest = int(tokens[rows].min())
    # Sort only a head of the ranking; a budget of a few hundred tokens is almost
    # always filled from it, and a full argsort of 100k rows would dominate recall.
    head = 256
    while True:
        if rows.size > head:
            part = np.argpartition(-scores[rows], head - 1)[:head]
            batch = rows[part]
        else:
            batch = rows
        batch = _order(batch, scores, ids, tiebreak)
        for r in batch:
            t = int(tokens[r])
            if t <= remaining:
                chosen.append(int(r))
                remaining -= t
                if len(chosen) >= limit or remaining < smallest:
                    return chosen
        if batch.size == rows.size:
            return chosen
        rows = np.setdiff1d(rows, batch, assume_unique=True)
        head *= 4


def _order(
    rows: np.ndarray, scores: np.ndarray, ids: list[str] | None, tiebreak: np.ndarray | None
) -> np.ndarray:
    keys: list[np.ndarray] = []
    if ids is not None:
        keys.append(np.array([ids[i] for i in rows]))
    if tiebreak is not None:
        keys.append(-tiebreak[rows])
    keys.append(-scores[rows])
    return rows[np.lexsort(keys)]
