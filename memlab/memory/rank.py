"""Vectorized hybrid ranking: one score per candidate row (``memlab.memory.budget``
packs the ranked rows into a token budget).

score = w_sim * similarity + w_lex * lexical + w_rec * recency + w_time * time
        + w_sal * salience + w_use * usage

- similarity: cosine similarity of query and record, 0 below ``SIM_FLOOR`` (1e-6:
  negative cosines and the rounding noise of none).
- lexical: the record's BM25 for the query over the scope, divided by the best
  BM25 in the scope (so the best lexical match scores 1); 0 without a match.
- recency: ``exp(-ln 2 * age / half_life[kind])``, age = now - created_at (>= 0).
- time: only when the query names a period ("last week", "in May 2023"): 1 for
  records made inside it, halving per window-width outside (see
  memlab.memory.timeparse). The recency term is then switched off for that
  query, since "newer is better" is the wrong prior for a question about a period.
- salience: the record's salience clamped to [0, 1].
- usage: ``min(1, log10(access_count + 1) / 2)`` (100 recalls saturate it).

With ``fusion="rrf"`` similarity and lexical enter by reciprocal rank instead:
each becomes ``(k + 1) / (k + rank)`` (1 for the top record, 0 for records with
no lexical match), so neither signal's scale can drown the other.

Every signal is in [0, 1], so each weight reads as that signal's share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from memlab.errors import InputError
from memlab.memory.budget import SAMPLED_HEAD_ROWS, sampled_cut
from memlab.memory.checks import check_number
from memlab.memory.records import KIND_CODES, MemoryKind
from memlab.memory.stores.base import Candidates
from memlab.memory.timeparse import TimeWindow, time_signal

LN2 = math.log(2.0)
HOUR = 3600.0
SIGNALS = ("similarity", "lexical", "recency", "time", "salience", "usage")
FUSIONS = ("weighted", "rrf")


#: The range of a positive weight (see ``RankWeights``).
WEIGHT_MIN = 1e-30
WEIGHT_MAX = 1e30


@dataclass(frozen=True)
class RankWeights:
    """Non-negative weights of the hybrid score; at least one must be positive, and
    each positive one within ``WEIGHT_MIN`` .. ``WEIGHT_MAX`` (1e-30 .. 1e30).

    ``lexical`` and ``time`` default to 0, which keeps the four-signal score of
    the original design.
    """

    similarity: float = 0.6
    recency: float = 0.15
    salience: float = 0.2
    usage: float = 0.05
    lexical: float = 0.0
    time: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            w = check_number(getattr(self, f.name), f"weights.{f.name}", lo=0.0)
            # float32 signals times the weight: above float32's range the products
            # were inf, and inf * 0 NaN (recall returned nothing); far below it they
            # were 0 (every score tied)
            if w and not WEIGHT_MIN <= w <= WEIGHT_MAX:
                raise InputError(
                    f"weights.{f.name} must be 0 or within {WEIGHT_MIN:g}..{WEIGHT_MAX:g}, "
                    f"got {w!r}; only the weights' ratios matter, so scale them all"
                )
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
            check_number(getattr(self, f.name), f"half_life.{f.name} (hours)", above=0.0)

    def as_dict(self) -> dict[str, float]:
        """Hours by kind name (``candidates``' ``half_life``)."""
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}

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
    """Scores of every candidate row, each signal's raw values, and the weights
    that applied to this query (recency's is 0 when a time window replaced it)."""

    scores: np.ndarray  # float64, -inf where masked
    components: dict[str, np.ndarray]
    weights: dict[str, float]


class HybridRanker:
    """Scores candidates with the weighted sum of the signals, in numpy.

    Args:
        weights: the signal weights.
        half_life: recency half-life per kind.
        fusion: ``"weighted"`` (signals as they are) or ``"rrf"`` (similarity and
            lexical by reciprocal rank).
        rrf_k: the reciprocal-rank constant (60 as in the RRF paper).
    """

    def __init__(
        self,
        weights: RankWeights | None = None,
        half_life: HalfLives | None = None,
        *,
        fusion: str = "weighted",
        rrf_k: float = 60.0,
    ):
        if not isinstance(fusion, str) or fusion not in FUSIONS:
            raise InputError(f"fusion must be one of {list(FUSIONS)}, got {fusion!r}")
        check_number(rrf_k, "rrf_k", above=0.0)
        if weights is not None and not isinstance(weights, RankWeights):
            raise InputError(f"weights must be a RankWeights, got {type(weights).__name__}")
        if half_life is not None and not isinstance(half_life, HalfLives):
            raise InputError(f"half_life must be a HalfLives, got {type(half_life).__name__}")
        self.weights = weights or RankWeights()
        self.half_life = half_life or HalfLives()
        self.fusion = fusion
        self.rrf_k = float(rrf_k)
        self._hl = self.half_life.seconds_by_code()

    @property
    def uses_lexical(self) -> bool:
        return self.weights.lexical > 0

    def score(
        self,
        cands: Candidates,
        query: np.ndarray,
        now: float,
        *,
        window: TimeWindow | None = None,
    ) -> Scored:
        """Score every row of ``cands`` against a unit query vector at time ``now``.

        ``cands.lexical`` (raw BM25) feeds the lexical signal; ``window`` (a period
        the query names) feeds the time signal.
        """
        return self.score_layers([cands], query, now, window=window)

    def score_layers(
        self,
        layers: Sequence[Candidates],
        query: np.ndarray,
        now: float,
        *,
        window: TimeWindow | None = None,
    ) -> Scored:
        """Score the rows of several candidate sets as one ranking (rows in order:
        the first set's, then the second's...), as if they were one scope.

        Lexical scores are normalized by the best raw BM25 over all sets and RRF
        ranks are taken over all rows; embeddings are never copied (one
        matrix-vector product per set).
        """
        w = self.weights.as_dict()
        q = query.astype(np.float32, copy=False)
        weighted = self.fusion == "weighted"
        # A store's reduced-precision scan gives exact cosines for its top rows and a
        # bound elsewhere; the head is made exact below (_exact_head).
        bounded = weighted and any(c.similarity is not None for c in layers)

        def layer_sim(c: Candidates, out: np.ndarray | None = None) -> np.ndarray:
            if weighted and c.similarity is not None:
                if out is None:
                    return np.array(c.similarity, dtype=np.float32)
                out[...] = c.similarity
                return out
            return c.dot(q, out)

        if len(layers) == 1:
            cands = layers[0]
            mask, sim = cands.mask, layer_sim(cands)
            created, kind = cands.created_at, cands.kind
            salience, access, raw_lex = cands.salience, cands.access_count, cands.lexical
        else:
            mask = np.concatenate([c.mask for c in layers])
            # each layer's product written in place: no per-layer array to concatenate
            sim = np.empty(sum(len(c) for c in layers), dtype=np.float32)
            at = 0
            for c in layers:
                layer_sim(c, sim[at : at + len(c)])
                at += len(c)
            created = np.concatenate([c.created_at for c in layers])
            kind = np.concatenate([c.kind for c in layers])
            salience = np.concatenate([c.salience for c in layers])
            access = np.concatenate([c.access_count for c in layers])
            raw_lex = None
            if any(c.lexical is not None for c in layers):
                raw_lex = np.concatenate(
                    [c.lexical if c.lexical is not None else np.zeros(len(c)) for c in layers]
                )
        floor_similarity(sim)
        components: dict[str, np.ndarray] = {"similarity": sim}
        if raw_lex is not None:
            lex = np.where(mask, raw_lex, 0.0)
            best = float(lex.max()) if lex.size else 0.0
            components["lexical"] = lex / best if best > 0 else np.zeros_like(lex)
        # exp(-ln2 * age / half-life), computed in one buffer (the same operations in
        # the same order as the expression, without its four temporaries)
        recency = np.subtract(now, created)
        np.maximum(recency, 0.0, out=recency)
        np.multiply(-LN2, recency, out=recency)
        np.divide(recency, np.take(self._hl, kind), out=recency)
        components["recency"] = np.exp(recency, out=recency)
        if window is not None and w["time"] > 0:
            components["time"] = time_signal(created, window)
            w["recency"] = 0.0
        else:
            w["time"] = 0.0
        components["salience"] = np.clip(salience, 0.0, 1.0)
        components["usage"] = usage_signal(access)
        if self.fusion == "rrf":
            for name in ("similarity", "lexical"):
                if name in components:
                    components[name] = self._reciprocal_rank(components[name], mask)
        scores = np.zeros(len(sim), dtype=np.float64)
        for name, values in components.items():
            if w.get(name, 0.0):
                scores += w[name] * values
        scores[~mask] = -np.inf
        if bounded and w["similarity"]:
            _exact_head(scores, sim, _ExactCosine(layers, q), w["similarity"])
        return Scored(scores=scores, components=components, weights=w)

    def _reciprocal_rank(self, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(k + 1) / (k + rank) among unmasked rows with a positive value, else 0."""
        out = np.zeros(len(values), dtype=np.float64)
        live = np.flatnonzero(mask & (values > 0))
        if live.size:
            order = live[np.argsort(-values[live], kind="stable")]
            out[order] = (self.rrf_k + 1.0) / (self.rrf_k + np.arange(1, live.size + 1))
        return out


_USAGE = np.minimum(1.0, np.log10(np.arange(100) + 1.0) / 2.0)  # 99 recalls and up: 1.0


def usage_signal(access_count: np.ndarray) -> np.ndarray:
    """``min(1, log10(access_count + 1) / 2)`` of each row, read from a table (the
    same values, without a logarithm per row at every recall)."""
    # counts are never negative (records check it), so clipping the index to the
    # table is the min(., 99) of the formula without a pass of its own (1 ms
    # against 4 ms at 1M rows)
    return np.take(_USAGE, access_count, mode="clip")


EXACT_HEAD = 256  # rows whose scores are exact after a reduced-precision scan


class _ExactCosine:
    """Float32 cosines of chosen rows of several candidate sets taken as one (rows
    in order: the first set's, then the second's...), without copying embeddings."""

    def __init__(self, layers: Sequence[Candidates], query: np.ndarray) -> None:
        self.layers = layers
        self.query = query
        self.starts = np.cumsum([0] + [len(c) for c in layers])

    def all(self) -> np.ndarray:
        """Every row's cosine (one matrix-vector product per set)."""
        return np.concatenate([c.dot(self.query) for c in self.layers])

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        if len(self.layers) == 1:
            return self.layers[0].embeddings[rows] @ self.query
        out = np.empty(len(rows), dtype=np.float32)
        which = np.searchsorted(self.starts, rows, side="right") - 1
        for i in np.unique(which):
            sel = which == i
            out[sel] = self.layers[i].embeddings[rows[sel] - self.starts[i]] @ self.query
        return out


def _exact_head(scores: np.ndarray, sim: np.ndarray, cosine: _ExactCosine, w_sim: float) -> None:
    """Make the best ``EXACT_HEAD`` scores exact after a store's reduced-precision
    scan (in place).

    ``sim`` holds exact cosines for some rows and, for the others, an upper bound
    (see memlab.memory.stores.indexed.ScanPolicy), so every score is exact or too
    high. The best ``EXACT_HEAD`` rows are re-scored with their float32 cosine; then,
    while any row not yet re-scored has a score (a bound) at least the
    ``EXACT_HEAD``-th best exact score, all such rows are re-scored at once. That
    threshold only rises, and a row below it cannot enter the head. When more than
    a quarter of the rows would need it, every row is re-scored with one
    matrix-vector product (cheaper than gathering them).
    """
    finite = np.isfinite(scores)
    n_live = int(np.count_nonzero(finite))
    if n_live == 0:
        return
    k = min(EXACT_HEAD, n_live)
    todo = _best_rows(scores, finite, n_live, k)
    done = np.zeros(len(scores), dtype=bool)
    while todo.size:
        if 4 * todo.size > n_live:
            true = floor_similarity(cosine.all())
            scores[finite] += w_sim * (true[finite].astype(np.float64) - sim[finite])
            sim[:] = true
            return
        true = floor_similarity(cosine(todo))
        scores[todo] += w_sim * (true.astype(np.float64) - sim[todo])
        sim[todo] = true
        done[todo] = True
        exact = scores[done]
        if exact.size < k:
            return  # every finite row is exact
        floor = np.partition(exact, exact.size - k)[exact.size - k]
        # a finite floor: rows scored -inf (masked) are never at or above it
        todo = np.flatnonzero(scores >= floor)
        todo = todo[~done[todo]]


#: A cosine below this counts as none. A query and a row that share no feature (the
#: hash embedder's sparse vectors, often) have cosine 0, but the float32 product
#: leaves rounding noise of either sign there (1e-10 to 1e-7), and its sign follows
#: the CPU's summation order: ranked as it came, the rows of no similarity ordered
#: themselves by the machine, and a budget filled with them held other records on
#: another CPU (11 of the 107 shipped probes of ``memory_similarity_only`` packed
#: other records with float64 sums). Far below any similarity that means anything.
SIM_FLOOR = np.float32(1e-6)


def floor_similarity(sim: np.ndarray) -> np.ndarray:
    """``sim`` (float32 cosines) with every value below ``SIM_FLOOR`` set to 0, in place
    (negative cosines are no evidence either; NaN stays NaN); returns ``sim``."""
    # two branch-free passes: a masked copyto branches per element and took 4.5 ms
    # at 1M cosines of either sign (these take 0.6 ms; the old clamp alone 0.4 ms)
    np.maximum(sim, np.float32(0.0), out=sim)
    np.multiply(sim, sim >= SIM_FLOOR, out=sim)
    return sim


def _best_rows(scores: np.ndarray, finite: np.ndarray, n_live: int, k: int) -> np.ndarray:
    """``k`` rows of the best finite scores (which of a tie is not specified).

    In a large ranking a strided sample places a threshold about ``2k`` rows deep
    (``budget.sampled_cut``), and only the rows at or above it are partitioned; if the sample put it too
    high, every finite row is.
    """
    if len(scores) >= SAMPLED_HEAD_ROWS:
        cut = sampled_cut(scores, finite, n_live, k)
        if cut is not None:
            rows = np.flatnonzero(scores >= cut)
            if rows.size >= k:
                return rows[np.argpartition(-scores[rows], k - 1)[:k]]
    live = np.flatnonzero(finite)
    return live[np.argpartition(-scores[live], k - 1)[:k]] if live.size > k else live
