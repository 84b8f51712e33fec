"""Hybrid scoring: each signal's formula, fusion and the time window."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memlab.errors import InputError
from memlab.memory import HalfLives, HybridRanker, RankWeights
from memlab.memory.stores.base import Candidates
from tests.conftest import make_record, vec


def test_weights_are_validated() -> None:
    with pytest.raises(InputError, match="weights.recency"):
        RankWeights(recency=-0.1)
    with pytest.raises(InputError, match="all zero"):
        RankWeights(0, 0, 0, 0)
    with pytest.raises(InputError, match="half_life.episodic"):
        HalfLives(episodic=0)


@pytest.mark.parametrize("weight", [1e39, 1e31, 1e-31, 1e-46])
def test_a_weight_beyond_the_range_of_float32_signals_is_refused(weight: float) -> None:
    # before, similarity=1e39 made every product with a float32 signal inf (and
    # inf * 0 NaN): recall returned nothing; 1e-46 made them 0, every score tied
    with pytest.raises(InputError, match="weights.similarity must be 0 or within 1e-30..1e"):
        RankWeights(similarity=weight)
    edge = RankWeights(similarity=1e30, recency=1e-30, salience=0, usage=0)
    ranker = HybridRanker(edge)
    records = [make_record(content=f"r{i}", embedding=vec(i), created_at=0.0) for i in range(3)]
    scores = ranker.score(Candidates.from_records(records, len(vec(1))), vec(1), 0.0).scores
    assert np.isfinite(scores).all() and int(np.argmax(scores)) == 1


def test_each_signal_follows_its_formula() -> None:
    now = 1_000_000.0
    q = vec(1)
    records = [
        make_record(content="a", embedding=q, created_at=now, salience=0.3),  # sim 1, age 0
        make_record(
            content="b", embedding=-q, created_at=now - 72 * 3600, salience=0.9, access_count=9
        ),
        make_record(
            content="c",
            kind="semantic",
            embedding=q,
            created_at=now - 24 * 3600 * 90,
            access_count=999,
        ),
    ]
    cands = Candidates.from_records(records, len(q))
    ranker = HybridRanker(RankWeights(1, 1, 1, 1), HalfLives(episodic=72, semantic=24 * 90))
    out = ranker.score(cands, q, now)
    c = out.components
    assert c["similarity"][0] == pytest.approx(1.0, abs=1e-6)
    assert c["similarity"][1] == 0.0  # clamped at 0
    assert c["recency"][0] == pytest.approx(1.0)
    assert c["recency"][1] == pytest.approx(0.5)  # one half-life
    assert c["recency"][2] == pytest.approx(0.5)  # the semantic half-life
    assert c["usage"][0] == 0.0
    assert c["usage"][1] == pytest.approx(math.log10(10) / 2)
    assert c["usage"][2] == 1.0  # saturates
    assert c["salience"][1] == pytest.approx(0.9)
    total = sum(c[k] for k in c)
    np.testing.assert_allclose(out.scores, total, rtol=1e-6)


def test_future_records_count_as_brand_new_and_masked_rows_are_excluded() -> None:
    q = vec(2)
    cands = Candidates.from_records([make_record(embedding=q, created_at=500.0)], len(q))
    out = HybridRanker().score(cands, q, now=100.0)
    assert out.components["recency"][0] == 1.0
    cands.mask[:] = False
    assert np.isneginf(HybridRanker().score(cands, q, now=100.0).scores[0])


def test_lexical_and_rrf_signals() -> None:
    q = vec(5)
    recs = [make_record(content=f"r{i}", embedding=vec(i), created_at=1.0) for i in range(4)]
    cands = Candidates.from_records(recs, len(q))
    cands.lexical = np.array([0.0, 2.0, 4.0, 1.0])
    weighted = HybridRanker(
        RankWeights(similarity=0, recency=0, salience=0, usage=0, lexical=1)
    ).score(cands, q, 1.0)
    np.testing.assert_allclose(weighted.components["lexical"], [0.0, 0.5, 1.0, 0.25])
    np.testing.assert_allclose(weighted.scores, [0.0, 0.5, 1.0, 0.25])
    rrf = HybridRanker(
        RankWeights(similarity=0, recency=0, salience=0, usage=0, lexical=1), fusion="rrf", rrf_k=60
    )
    out = rrf.score(cands, q, 1.0)
    np.testing.assert_allclose(out.components["lexical"], [0.0, 61 / 62, 1.0, 61 / 63])
    with pytest.raises(InputError, match="fusion"):
        HybridRanker(fusion="magic")


def test_time_window_replaces_recency() -> None:
    from memlab.memory.timeparse import TimeWindow

    q = vec(1)
    old = make_record(content="old", embedding=q, created_at=100.0)
    new = make_record(content="new", embedding=q, created_at=10_000_000.0)
    cands = Candidates.from_records([old, new], len(q))
    ranker = HybridRanker(RankWeights(similarity=0, recency=1, salience=0, usage=0, time=1))
    plain = ranker.score(cands, q, 10_000_000.0)
    assert plain.scores[1] > plain.scores[0] and plain.weights["time"] == 0.0
    windowed = ranker.score(cands, q, 10_000_000.0, window=TimeWindow(0.0, 1000.0, "long ago"))
    assert windowed.weights["recency"] == 0.0
    assert windowed.components["time"][0] == 1.0 and windowed.scores[0] > windowed.scores[1]


def test_usage_signal_is_the_formula() -> None:
    from memlab.memory.rank import usage_signal

    counts = np.arange(0, 20_000)
    assert np.array_equal(usage_signal(counts), np.minimum(1.0, np.log10(counts + 1.0) / 2.0))


def test_rounding_noise_around_zero_similarity_is_no_similarity() -> None:
    # A query and rows sharing no feature have cosine 0; a float32 product gives them
    # noise of either sign whose sign follows the CPU. Rows whose cosines are only
    # that noise must score and rank exactly like rows at 0 (by the tiebreak), so the
    # order does not depend on the machine.
    dims = 8
    q = np.zeros(dims, dtype=np.float32)
    q[0] = 1.0

    def row(cos: float) -> np.ndarray:
        r = np.zeros(dims, dtype=np.float32)
        r[0], r[1] = cos, math.sqrt(1.0 - cos * cos)
        return r

    now = 1_000_000.0
    noise = [3e-10, -2e-9, 1.3e-10, 8e-8, 0.0]
    ranker = HybridRanker(RankWeights(similarity=1, recency=0, salience=0, usage=0))
    scored = {}
    for label, cosines in (("noisy", noise), ("exact", [0.0] * len(noise))):
        records = [
            make_record(content=f"r{i}", embedding=row(c), created_at=now - i)
            for i, c in enumerate(cosines)
        ]
        out = ranker.score(Candidates.from_records(records, dims), q, now)
        assert out.components["similarity"].tolist() == [0.0] * len(noise), label
        scored[label] = out.scores.tolist()
    assert scored["noisy"] == scored["exact"]
    # a real similarity, however small, still counts
    records = [make_record(content="a", embedding=row(1e-3), created_at=now)]
    out = ranker.score(Candidates.from_records(records, dims), q, now)
    assert out.components["similarity"][0] == pytest.approx(1e-3, rel=1e-3)


def test_floor_similarity_keeps_nan_and_clears_everything_below_the_floor() -> None:
    from memlab.memory.rank import SIM_FLOOR, floor_similarity

    sim = np.array([-0.5, -np.inf, 0.0, 1e-9, 9.9e-7, SIM_FLOOR, 0.3, np.inf, np.nan], np.float32)
    out = floor_similarity(sim)
    assert out is sim
    assert out[:5].tolist() == [0.0] * 5 and not np.signbit(out[:5]).any()
    assert out[5:8].tolist() == [SIM_FLOOR, np.float32(0.3), np.inf]
    assert np.isnan(out[8])
