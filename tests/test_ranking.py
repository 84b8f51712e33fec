"""Ranked retrieval (memlab.lab.ranking): hand-computed cases, and LongMemEval's own
evaluation (restated from src/retrieval/eval_utils.py and run_retrieval.py) on small
haystacks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memlab.lab import ranking
from memlab.lab.ranking import (
    RANK_KS,
    effective_k,
    measures,
    metric_names,
    ndcg_at_k,
    pseudo_session,
    ranked_sessions,
    ranked_turns,
    recall_all_at_k,
    recall_any_at_k,
    session_measures,
    uninformative,
)


def test_recall_any_and_all_at_k_by_hand() -> None:
    r = ["a", "b", "c", "d"]
    assert recall_any_at_k(r, {"b", "d"}, 1) == 0.0
    assert recall_any_at_k(r, {"b", "d"}, 2) == 1.0
    assert recall_all_at_k(r, {"b", "d"}, 3) == 0.0
    assert recall_all_at_k(r, {"b", "d"}, 4) == 1.0
    assert recall_any_at_k([], {"x"}, 5) == 0.0 and recall_all_at_k([], {"x"}, 5) == 0.0
    assert math.isnan(recall_any_at_k(r, set(), 5)) and math.isnan(recall_all_at_k(r, [], 5))


def test_ndcg_by_hand_with_upstreams_discount() -> None:
    r = ["a", "b", "c", "d"]
    # DCG = rel_1 + sum_{r>=2} rel_r / log2(r): b at rank 2 counts 1, d at rank 4
    # counts 1/2; the ideal for two relevant ids is 1 + 1.
    assert ndcg_at_k(r, {"b", "d"}, 1) == 0.0
    assert ndcg_at_k(r, {"b", "d"}, 3) == pytest.approx(1 / 2)
    assert ndcg_at_k(r, {"b", "d"}, 4) == pytest.approx(1.5 / 2)
    assert ndcg_at_k(["a", "c", "b"], {"b"}, 5) == pytest.approx(1 / math.log2(3))
    assert ndcg_at_k(["x", "y", "a"], {"x", "y", "z"}, 2) == 1.0  # ideal capped at k
    # The ideal counts the relevant ids the corpus holds (upstream: sorted corpus
    # relevances): one of two relevant ids in the corpus, ranked first -> 1.
    assert ndcg_at_k(["b", "a"], {"b", "z"}, 5, n_relevant=1) == 1.0
    assert ndcg_at_k(["a"], {"z"}, 5, n_relevant=0) == 0.0
    assert math.isnan(ndcg_at_k(r, set(), 5))


def test_effective_k_widens_to_k_distinct_sessions() -> None:
    sessions = ["A", "A", "B", "A", "C", "D"]
    assert effective_k(sessions, 1) == 1
    assert effective_k(sessions, 2) == 3  # A, A, B
    assert effective_k(sessions, 3) == 5
    assert effective_k(sessions, 5) == len(sessions) + 1  # the whole ranking
    assert effective_k(sessions, 10) == 10


def test_session_measures_by_hand() -> None:
    # Sessions A (evidence a2), B, C; ranking b1, a1, a2, c1.
    session_of = {"a1": "A", "a2": "A", "b1": "B", "c1": "C"}.get
    turns = ["b1", "a1", "a2", "c1"]
    got = session_measures(turns, session_of, {"a2"}, (1, 2, 3))
    # a1 counts for "A#not-evidence" (upstream's noans_ rename): at k=2 the top turns
    # are b1, a1 (two sessions, neither relevant); at k=3: b1, a1, a2.
    assert got[1] == (0.0, 0.0, 0.0)
    assert got[2] == (0.0, 0.0, 0.0)
    assert got[3][:2] == (1.0, 1.0)
    assert got[3][2] == pytest.approx(1 / math.log2(3))  # a2 at rank 3, ideal 1
    assert pseudo_session("a1", "A", {"a2"}, {"A"}) == "A" + ranking.NOT_EVIDENCE
    assert pseudo_session("b1", "B", {"a2"}, {"A"}) == "B"
    nothing = session_measures(turns, session_of, {"zz"}, (5,))
    assert all(math.isnan(v) for v in nothing[5])


def test_ranked_turns_expand_provenance_and_sessions_dedupe() -> None:
    provenances = [("s2_1",), ("s1_1", "s1_2", "s2_1", "not-a-turn"), ("s3_1",)]
    turns = ranked_turns(provenances, {"s1_1", "s1_2", "s2_1", "s3_1"})
    assert turns == ["s2_1", "s1_1", "s1_2", "s3_1"]
    assert ranked_sessions(turns, lambda t: t.split("_")[0]) == ["s2", "s1", "s3"]
    assert ranked_sessions(["x"], lambda t: None) == []


def test_measures_names_families_and_fallback_to_sessions() -> None:
    session_of = {"a1": "A", "b1": "B"}.get
    m = measures("haystack", ["b1", "a1"], session_of, {"a1"}, (), ["a1", "b1"])
    assert set(m) == set(metric_names("haystack")) and len(m) == 2 * 3 * len(RANK_KS)
    assert m["haystack_turn_recall_any@1"] == 0.0 and m["haystack_turn_recall_any@3"] == 1.0
    assert m["haystack_turn_ndcg@5"] == 1.0  # rank 2 is not discounted upstream
    # Only evidence sessions: ranked at their best turn (session granularity).
    only = measures("context", ["b1", "a1"], session_of, (), ("A",), ["a1", "b1"])
    assert set(only) == {n for n in metric_names("context") if "_session_" in n}
    assert only["context_session_recall_any@1"] == 0.0
    assert only["context_session_recall_all@3"] == 1.0
    assert measures("context", ["a1"], session_of, (), (), ["a1"]) == {}
    assert ranking.describe("haystack_turn_ndcg@10").endswith("before packing)")
    assert ranking.parse("context_session_recall_all@5") == ("context", "session", "recall_all", 5)
    assert ranking.parse("evidence_recall") is None


def test_uninformative_when_k_reaches_the_haystack() -> None:
    assert uninformative("haystack_session_recall_all@5", 300, 5)
    assert not uninformative("haystack_session_recall_all@5", 300, 6)
    assert uninformative("context_turn_ndcg@50", 50, 3)
    assert not uninformative("haystack_turn_ndcg@50", 51, 3)
    assert not uninformative("haystack_turn_ndcg@50", math.nan, math.nan)
    assert not uninformative("evidence_recall", 1, 1)


# -- LongMemEval's own evaluation, restated ------------------------------------------------
def _upstream_dcg(relevances: list[float], k: int) -> float:
    r = np.asarray(relevances, dtype=float)[:k]
    if r.size:
        return float(r[0] + np.sum(r[1:] / np.log2(np.arange(2, r.size + 1))))
    return 0.0


def _upstream_evaluate(
    rankings: list[int], correct: list[str], corpus_ids: list[str], k: int
) -> tuple[float, float, float]:
    """eval_utils.evaluate_retrieval: recall_any, recall_all and ndcg over indices."""
    recalled = {corpus_ids[i] for i in rankings[:k]}
    relevances = [1.0 if c in correct else 0.0 for c in corpus_ids]
    actual = _upstream_dcg([relevances[i] for i in rankings[:k]], k)
    ideal = _upstream_dcg(sorted(relevances, reverse=True), k)
    return (
        float(any(c in recalled for c in correct)),
        float(all(c in recalled for c in correct)),
        actual / ideal if ideal else 0.0,
    )


def _upstream_turn2session(
    rankings: list[int], correct: list[str], corpus_ids: list[str], k: int
) -> tuple[float, float, float]:
    """eval_utils.evaluate_retrieval_turn2session: strip the turn number, widen k."""

    def strip(doc: str) -> str:
        return "_".join(doc.split("_")[:-1])

    correct = list({strip(c) for c in correct})
    sessions = [strip(c) for c in corpus_ids]
    e = k
    while e <= len(sessions) and len({sessions[i] for i in rankings[:e]}) < k:
        e += 1
    return _upstream_evaluate(rankings, correct, sessions, e)


def _haystack(rng: np.random.Generator) -> tuple[list[str], list[str], dict[str, str]]:
    """A LongMemEval-like haystack: corpus ids as run_retrieval names them at turn
    granularity (``answer_*`` sessions' non-evidence turns renamed ``noans_*``), the
    evidence turns, and our ids' sessions."""
    corpus, evidence, session_of = [], [], {}
    n_sessions = int(rng.integers(3, 12))
    answer = set(rng.choice(n_sessions, size=int(rng.integers(1, 3)), replace=False).tolist())
    for s in range(n_sessions):
        name = f"answer{s}" if s in answer else f"chat{s}"
        n_turns = int(rng.integers(1, 6))
        hits = set(rng.choice(n_turns, size=int(rng.integers(1, n_turns + 1)), replace=False))
        for t in range(n_turns):
            doc = f"{name}_{t + 1}"
            if s in answer and t in hits:
                evidence.append(doc)
            elif s in answer:
                doc = doc.replace("answer", "noans")
            corpus.append(doc)
            session_of[doc] = name  # memlab's transcript: the real session
    return corpus, evidence, session_of


@pytest.mark.parametrize("seed", range(40))
def test_measures_match_longmemeval_on_random_haystacks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    corpus, evidence, session_of = _haystack(rng)
    order = [int(i) for i in rng.permutation(len(corpus))]
    ranked = [corpus[i] for i in order]
    ours = measures("haystack", ranked, session_of.get, set(evidence), (), corpus)
    for k in RANK_KS:
        turn = _upstream_evaluate(order, evidence, corpus, k)
        session = _upstream_turn2session(order, evidence, corpus, k)
        for level, values in (("turn", turn), ("session", session)):
            for measure, value in zip(ranking.MEASURES, values, strict=True):
                name = f"haystack_{level}_{measure}@{k}"
                assert ours[name] == pytest.approx(value), (name, ranked, evidence)


def test_a_small_longmemeval_example_by_hand() -> None:
    # Two answer sessions (A: turn 2 is evidence; B: turn 1), one distractor C.
    corpus = ["answer_A_1", "answer_A_2", "answer_B_1", "chat_C_1", "chat_C_2"]
    corpus[0] = corpus[0].replace("answer", "noans")  # A's turn 1 is not evidence
    evidence = ["answer_A_2", "answer_B_1"]
    session_of = {c: c.rsplit("_", 1)[0].replace("noans", "answer") for c in corpus}
    ranked = ["chat_C_1", "noans_A_1", "answer_A_2", "chat_C_2", "answer_B_1"]
    m = measures("haystack", ranked, session_of.get, set(evidence), (), corpus)
    # Turn level, k = 3: one of two evidence turns; DCG = 1/log2(3), ideal 1 + 1.
    assert m["haystack_turn_recall_any@3"] == 1.0 and m["haystack_turn_recall_all@3"] == 0.0
    assert m["haystack_turn_ndcg@3"] == pytest.approx((1 / math.log2(3)) / 2)
    # Session level, k = 3: C, A(not evidence), A -> three sessions after 3 turns;
    # only A is retrieved (B is at turn 5).
    assert m["haystack_session_recall_any@3"] == 1.0
    assert m["haystack_session_recall_all@3"] == 0.0
    # k = 5 > 4 sessions: the whole ranking; both evidence turns, at ranks 3 and 5.
    assert m["haystack_session_recall_all@5"] == 1.0
    ideal = 2.0
    assert m["haystack_session_ndcg@5"] == pytest.approx(
        (1 / math.log2(3) + 1 / math.log2(5)) / ideal
    )
    order = [corpus.index(c) for c in ranked]
    assert _upstream_turn2session(order, evidence, corpus, 3) == (
        1.0,
        0.0,
        pytest.approx(m["haystack_session_ndcg@3"]),
    )
