"""The seeded workloads of `memlab bench store` (memlab.bench.workload)."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.bench.workload import (
    CALIBRATION_QUERIES,
    CALIBRATION_RECORDS,
    DIMS,
    MINILM_STATS,
    OTHER_SCOPES,
    SALIENCE_LEVELS,
    SCOPE,
    START,
    ClusteredVectors,
    Corpus,
    LookupEmbedder,
    calibration_sample,
    flat_lines,
    flat_records,
    make_workload,
    thread_sizes,
    vector_stats,
)
from memlab.errors import ConfigError, InputError
from memlab.memory import HashEmbedder


def test_thread_sizes_cover_n_exactly() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 7, 100, 5000):
        sizes = thread_sizes(n, rng)
        assert sizes.sum() == n
        assert sizes.min() >= 1


def test_vector_stats_of_a_known_set() -> None:
    # Orthonormal vectors: every pair (and every neighbour) has cosine 0, and the
    # covariance of 200 one-hot vectors in 200 dims is spread evenly.
    x = np.eye(200)
    stats = vector_stats(x)
    assert stats["pair_mean"] == pytest.approx(0.0)
    assert stats["pair_std"] == pytest.approx(0.0)
    assert stats["nn1"] == pytest.approx(0.0) and stats["nn100"] == pytest.approx(0.0)
    assert stats["participation"] == pytest.approx(199.0, rel=1e-6)
    assert stats["lid"] == np.inf  # all neighbours equidistant
    # Queries equal to records: the nearest is the record itself (cosine 1).
    stats = vector_stats(x, x[:5])
    assert stats["q1"] == pytest.approx(1.0) and stats["q10"] == pytest.approx(0.0)


def test_vector_stats_needs_more_than_100_records() -> None:
    with pytest.raises(InputError, match="more than 100"):
        vector_stats(np.eye(50))


def test_clustered_vectors_are_seeded_unit_float32() -> None:
    a, b = ClusteredVectors(10, seed=4), ClusteredVectors(10, seed=4)
    ca = a.threads(np.arange(10))
    cb = b.threads(np.arange(10))
    ra, rb = a.records(np.repeat(ca, 3, axis=0)), b.records(np.repeat(cb, 3, axis=0))
    assert ra.dtype == np.float32 and ra.shape == (30, DIMS)
    assert np.array_equal(ra, rb)
    assert np.allclose(np.linalg.norm(ra, axis=1), 1.0, atol=1e-5)
    # Records of one thread are nearer each other than records of other topics.
    sims = ra @ ra.T
    same = np.mean([sims[3 * t, 3 * t + 1] for t in range(10)])
    other = np.mean([sims[3 * t, 3 * ((t + 1) % 10)] for t in range(10)])
    assert same > other + 0.2
    with pytest.raises(InputError):
        ClusteredVectors(0, seed=1)


def test_the_generator_matches_the_minilm_statistics_it_was_fitted_to() -> None:
    records, queries = calibration_sample()
    assert records.shape == (CALIBRATION_RECORDS, DIMS)
    assert queries.shape == (CALIBRATION_QUERIES, DIMS)
    stats = vector_stats(records, queries)
    for key in ("pair_mean", "nn1", "nn10", "nn100", "q1", "q10", "q100"):
        assert stats[key] == pytest.approx(MINILM_STATS[key], abs=0.06), key
    assert stats["lid"] == pytest.approx(MINILM_STATS["lid"], abs=2.5)
    # And it is far from the hash embedder's near-random geometry (lid ~33).
    assert stats["lid"] < 15


def test_salience_levels_are_a_distribution() -> None:
    levels, shares = zip(*SALIENCE_LEVELS, strict=True)
    assert sum(shares) == pytest.approx(1.0, abs=0.01)
    assert all(0.0 <= v <= 1.0 for v in levels)


def test_corpus_lines_and_questions_are_seeded_and_topical() -> None:
    c = Corpus(5, seed=2)
    assert c.lines(20, seed=1) == Corpus(5, seed=2).lines(20, seed=1)
    assert c.lines(20, seed=1) != c.lines(20, seed=2)
    lines, topics = c.draw(50, seed=3)
    words = {c.vocab[j] for j in c.topics[int(topics[0])]}
    assert len(words & set(lines[0].split())) >= 3
    q = c.questions(np.array([topics[0]]), np.random.default_rng(0))[0]
    assert len(words & set(q.rstrip("?").split())) == 2


def test_flat_lines_are_seeded() -> None:
    assert flat_lines(10, 1) == flat_lines(10, 1)
    assert all(line.count("token") == 6 for line in flat_lines(10, 1))


@pytest.mark.parametrize("corpus", ["clustered", "topics", "flat"])
def test_make_workload_shapes(corpus: str) -> None:
    w = make_workload(300, queries=7, single=20, corpus=corpus)
    assert len(w.records) == 300 and {r.scope for r in w.records} == {SCOPE}
    assert len(w.others) == 150 and {r.scope for r in w.others} <= set(OTHER_SCOPES)
    assert len(w.extra) == 20 and len(w.queries) == 7
    ids = [r.id for r in w.records + w.others + w.extra]
    assert len(set(ids)) == len(ids)
    times = [r.created_at for r in w.records + w.others]
    assert len(set(times)) == len(times)  # one minute apart, never equal
    assert min(r.created_at for r in w.extra) > max(times)
    assert w.now > max(r.created_at for r in w.extra)
    vecs = w.embedder().embed(w.queries)
    assert vecs.shape == (7, DIMS) and vecs.dtype == np.float32
    again = make_workload(300, queries=7, single=20, corpus=corpus)
    assert [r.content for r in again.records] == [r.content for r in w.records]
    assert all(
        np.array_equal(a.embedding, b.embedding)
        for a, b in zip(again.records, w.records, strict=True)
    )


def test_clustered_queries_ask_about_the_scope() -> None:
    """Each query's nearest record (exact cosine) is usually in the measured scope,
    not in the other scopes talking about the same topics."""
    w = make_workload(2000, queries=40, single=10)
    q = w.embedder().embed(w.queries)
    mine = np.stack([r.embedding for r in w.records])
    theirs = np.stack([r.embedding for r in w.others])
    best_mine, best_theirs = (q @ mine.T).max(axis=1), (q @ theirs.T).max(axis=1)
    assert np.mean(best_mine > best_theirs) > 0.6


def test_make_workload_rejects_unknown_settings() -> None:
    with pytest.raises(ConfigError, match="corpus"):
        make_workload(100, corpus="poems")
    with pytest.raises(ConfigError, match="salience"):
        make_workload(100, salience="random")


def test_lookup_embedder_knows_only_its_texts() -> None:
    emb = LookupEmbedder({"a": np.ones(DIMS, dtype=np.float32)})
    assert emb.dims == DIMS and emb.embed(["a"]).shape == (1, DIMS)
    with pytest.raises(InputError, match="no vector"):
        emb.embed(["b"])


def test_workload_is_seeded_and_scoped() -> None:
    a = make_workload(300, seed=3, queries=5, single=20)
    b = make_workload(300, seed=3, queries=5, single=20)
    assert [r.content for r in a.records] == [r.content for r in b.records]
    assert all(
        np.array_equal(x.embedding, y.embedding) for x, y in zip(a.records, b.records, strict=True)
    )
    assert a.queries == b.queries and len(a.queries) == 5
    assert {r.scope for r in a.records} == {SCOPE} == {r.scope for r in a.extra}
    assert {r.scope for r in a.others} == set(OTHER_SCOPES) and len(a.others) == 150
    assert len(a.extra) == 20
    assert len({r.id for r in a.records + a.others + a.extra}) == 300 + 150 + 20
    assert min(r.created_at for r in a.extra) > max(r.created_at for r in a.records + a.others)
    assert a.now > max(r.created_at for r in a.extra)
    c = make_workload(300, seed=4, queries=5, single=20)
    assert [r.content for r in c.records] != [r.content for r in a.records]


def test_topic_corpus_separates_related_from_unrelated_lines() -> None:
    gen = Corpus(20, seed=0)
    lines, topic_of = gen.draw(400, seed=1)
    assert lines == gen.lines(400, seed=1)
    emb = HashEmbedder(384)
    vecs = emb.embed(lines)
    sims = vecs @ vecs.T
    off = ~np.eye(len(lines), dtype=bool)
    same = np.equal.outer(topic_of, topic_of) & off
    unrelated = sims[~same & off].mean()
    assert unrelated < 0.1 and sims[same].mean() > 1.5 * unrelated
    flat = emb.embed(flat_lines(200, seed=1))
    # The flat vocabulary makes any two lines look alike (the hard case).
    assert (flat @ flat.T)[~np.eye(200, dtype=bool)].mean() > 0.3


def test_flat_records_are_make_bench_s_seeded_single_scope_workload() -> None:
    emb = HashEmbedder(64)
    a = flat_records(50, "alice", emb, seed=3, batch=16)
    b = flat_records(50, "alice", emb, seed=3)
    assert [r.content for r in a] == flat_lines(50, seed=3) == [r.content for r in b]
    assert all(np.array_equal(x.embedding, y.embedding) for x, y in zip(a, b, strict=True))
    assert {r.scope for r in a} == {"alice"} and len({r.id for r in a}) == 50
    assert [r.created_at for r in a] == [START + 60.0 * i for i in range(50)]
    assert all(0.0 <= r.salience <= 1.0 for r in a)
    assert np.allclose(np.linalg.norm(np.stack([r.embedding for r in a]), axis=1), 1.0)
    other = flat_records(50, "alice", emb, seed=4)
    assert [r.content for r in other] != [r.content for r in a]
    assert flat_records(0, "alice", emb) == []
