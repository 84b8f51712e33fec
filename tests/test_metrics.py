"""Every metric on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memlab.lab.metrics import (
    CONTEXT_METRICS,
    HAYSTACK_METRICS,
    METRICS,
    bootstrap_ci,
    bootstrap_problem,
    evidence_distance,
    ranked_items,
    score_probe,
    seed_problem,
)
from memlab.lab.strategies import Context, ContextItem
from memlab.lab.transcripts import Transcript, load
from tests.conftest import FIXTURES
from tests.conftest import context_item as item


def test_score_probe_on_the_handmade_transcript() -> None:
    t = load(FIXTURES / "handmade.json")
    i = t.index["t9"]
    probe = t.turns[i]
    ctx = Context(  # a memory strategy's hits, best first
        [
            item("We deploy everything on GKE in europe-west1.", ("t0",), tokens=12, score=0.9),
            item("Actually we moved off GKE, everything now runs on Nomad.", ("t7",), tokens=14,
                 score=0.8),
            item("thanks!", ("t4",), tokens=2, score=0.3),
            item("tool returned 200", ("t5",), source="tool", tokens=5, score=0.2),
            item("We deploy on EKS in us-east-1.", ("t3",), scope="bob:support", tokens=8,
                 score=0.1),
        ]
    )  # fmt: skip
    m = score_probe(t, i, probe, ctx, prompt_overhead_tokens=60, price_per_1k_tokens=0.5)
    assert m["fact_recall"] == 0.5  # Nomad yes, PagerDuty no
    assert m["precision"] == pytest.approx(1 / 5)  # only the t7 item (t2 is absent)
    assert m["token_precision"] == pytest.approx(14 / 41)
    assert m["stale_rate"] == 0.5  # cluster has a GKE-only item
    assert m["stale_wins"] == 0.5  # and it is ranked first
    assert m["evidence_recall"] == 0.5  # t7 of t7, t2
    assert m["answer_in_context"] == 1.0
    assert m["context_tokens"] == 41
    assert m["prompt_tokens"] == 41 + 15 + 60
    assert m["cost_usd"] == pytest.approx(116 / 1000 * 0.5)
    assert m["leaks"] == 1 and m["untrusted_items"] == 1 and m["context_items"] == 5
    assert set(m) <= set(METRICS)


def test_stale_wins_reads_a_context_of_turns_newest_first() -> None:
    # stuff_all and sliding_window list turns oldest first and rank by recency: the
    # correction (t7) is their top-ranked mention, although it comes after t0
    t = load(FIXTURES / "handmade.json")
    i = t.index["t9"]
    turns = [
        item("We deploy everything on GKE in europe-west1.", ("t0",)),
        item("Actually we moved off GKE, everything now runs on Nomad.", ("t7",)),
    ]
    m = score_probe(t, i, t.turns[i], Context(turns), prompt_overhead_tokens=0)
    assert m["stale_rate"] == 0.5 and m["stale_wins"] == 0.0
    m = score_probe(t, i, t.turns[i], Context(turns[:1]), prompt_overhead_tokens=0)
    assert m["stale_wins"] == 0.5  # the stale value is its only mention


def test_evidence_distance_counts_same_scope_turns() -> None:
    t = load(FIXTURES / "handmade.json")
    i = t.index["t9"]
    # alice's turns before t9: t0 t1 t2 t4 t5 t6 t7 t8; newest evidence t7 is 2 back.
    assert evidence_distance(t, i, t.turns[i]) == 2
    j = t.index["t10"]
    assert evidence_distance(t, j, t.turns[j]) == 1


def test_bootstrap_ci() -> None:
    mean, lo, hi, n = bootstrap_ci([1.0, 0.0, 1.0, 1.0, np.nan], n_boot=2000, seed=1)
    assert n == 4 and mean == 0.75 and 0.0 <= lo < mean < hi <= 1.0
    assert bootstrap_ci([1.0, 0.0, 1.0, 1.0], 2000, 1) == bootstrap_ci(
        [1.0, 0.0, 1.0, 1.0], 2000, 1
    )
    assert bootstrap_ci([], 100)[3] == 0 and math.isnan(bootstrap_ci([], 100)[0])
    assert bootstrap_ci([0.3], 100)[:3] == (0.3, 0.3, 0.3)
    assert bootstrap_ci([0.5, 0.5], 100)[:3] == (0.5, 0.5, 0.5)


def test_seed_and_resample_count_problems() -> None:
    assert seed_problem(0) is None and seed_problem(2**70) is None
    assert bootstrap_problem(0) is None and bootstrap_problem(1000) is None
    assert bootstrap_problem(100_000) is None
    # 10**11 resamples was a MemoryError (exit 3) after the whole replay.
    assert bootstrap_problem(10**11) == "must be at most 100,000 resamples, got 100,000,000,000"
    for bad in (-1, True, 1.5):
        assert seed_problem(bad) == f"must be an integer >= 0, got {bad!r}"  # type: ignore[arg-type]
        assert bootstrap_problem(bad) is not None  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # what a seed_problem keeps from the bootstrap
        bootstrap_ci([0.0, 1.0], 10, seed=-1)


# -- ranked retrieval (memlab.lab.ranking; the measures are tested in test_ranking) -----
def scored_item(prov: tuple[str, ...], score: float | None) -> ContextItem:
    return ContextItem("x", 1, "turn", "s", "user", prov, score)


def test_ranked_items_memory_order_or_newest_first() -> None:
    ranked = [scored_item(("b",), 0.9), scored_item(("a",), 0.5)]
    assert ranked_items(Context(ranked)) == ranked
    chrono = [scored_item(("a",), None), scored_item(("b",), None)]
    assert ranked_items(Context(chrono)) == chrono[::-1]


def _session_transcript() -> Transcript:
    data = {
        "format": "memlab.transcript/1",
        "id": "ses",
        "turns": [
            {"id": "a1", "ts": "2026-01-01T00:00:00Z", "scope": "u", "role": "user",
             "text": "I have a cat", "session": "A"},
            {"id": "b1", "ts": "2026-01-02T00:00:00Z", "scope": "u", "role": "user",
             "text": "I like tea", "session": "B"},
            {"id": "q", "ts": "2026-01-03T00:00:00Z", "scope": "u", "role": "user",
             "text": "What pet?", "probe": {"evidence": ["a1"], "evidence_sessions": ["A"],
                                            "answer": "cat", "detached": True}},
        ],
    }  # fmt: skip
    return Transcript.from_dict(data)


def test_score_probe_ranked_families_only_for_benchmark_probes() -> None:
    t = _session_transcript()
    ctx = Context([scored_item(("b1",), 0.9), scored_item(("a1",), 0.2)])
    full = [("a1",), ("b1",)]  # the strategy's full ranking puts a1 first
    m = score_probe(t, 2, t.turns[2], ctx, ranking=full, benchmark=True)
    assert m["context_session_recall_any@1"] == 0.0 and m["context_session_recall_any@3"] == 1.0
    assert m["context_turn_recall_all@1"] == 0.0 and m["context_turn_recall_all@3"] == 1.0
    assert m["haystack_turn_recall_all@1"] == 1.0 and m["haystack_session_ndcg@1"] == 1.0
    assert set(HAYSTACK_METRICS) <= set(m) and set(CONTEXT_METRICS) <= set(m)
    # Without a full ranking (a strategy that cannot show one): the context family only.
    no_full = score_probe(t, 2, t.turns[2], ctx, benchmark=True)
    assert not set(HAYSTACK_METRICS) & set(no_full) and set(CONTEXT_METRICS) <= set(no_full)
    # Off (the default for transcripts not from a benchmark adapter): neither.
    off = score_probe(t, 2, t.turns[2], ctx, ranking=full)
    assert not (set(HAYSTACK_METRICS) | set(CONTEXT_METRICS)) & set(off)
    plain = load(FIXTURES / "handmade.json")
    i = plain.index["t9"]
    plain_metrics = score_probe(plain, i, plain.turns[i], ctx, benchmark=True)
    assert "evidence_recall@10" in plain_metrics


# -- the registry --------------------------------------------------------------------------
def test_every_metric_is_registered_with_direction_and_level() -> None:
    from memlab.lab.metrics import direction, metrics, table_metrics

    probe = [m.name for m in metrics("probe")]
    assert probe[:4] == ["fact_recall", "precision", "token_precision", "stale_rate"]
    assert "recall_ms" in probe and set(HAYSTACK_METRICS + CONTEXT_METRICS) <= set(probe)
    assert [m.name for m in metrics("turn")] == ["write_ms", "maintain_ms"]
    assert [m.column for m in metrics("final")] == [
        "store_records", "store_archived", "store_tokens", "store_bytes"
    ]  # fmt: skip
    assert direction("fact_recall") == 1 and direction("leaks") == -1
    assert direction("write_ms") == -1 and direction("final_store_bytes") == 0
    assert direction("no_such_metric") == 0
    assert table_metrics()[:2] == ["fact_recall", "precision"] and "recall_ms" in table_metrics()
    for _, m in METRICS.items():
        assert m.description and m.direction in (-1, 0, 1)


def test_a_registered_metric_is_scored_for_every_probe() -> None:
    from memlab.lab.metrics import Metric, register_metric, table_metrics

    t = load(FIXTURES / "handmade.json")
    i = t.index["t9"]
    register_metric(
        Metric(
            "toy_items_squared",
            -1,
            "context items squared",
            table=True,
            compute=lambda s: float(len(s.context.items) ** 2),
        )
    )
    try:
        m = score_probe(t, i, t.turns[i], Context([item("a"), item("b")]))
        assert m["toy_items_squared"] == 4.0
        assert list(m)[-1] == "toy_items_squared"  # after the built-ins, in registration order
        assert table_metrics()[-1] == "toy_items_squared"
    finally:
        METRICS.unregister("toy_items_squared")
    assert "toy_items_squared" not in score_probe(t, i, t.turns[i], Context([item("a")]))
    with pytest.raises(ValueError, match="direction must be"):
        Metric("bad", 2, "no")


# -- abstention (LoCoMo's adversarial questions) ----------------------------------------------
def _abstention_transcript() -> Transcript:
    data = {
        "format": "memlab.transcript/1",
        "id": "adv",
        "meta": {"dataset": "locomo"},
        "turns": [
            {"id": "D1:1", "ts": "2026-01-01T00:00:00Z", "scope": "c", "role": "user",
             "text": "Melanie: I ran a charity race on Saturday.", "session": "session_1"},
            {"id": "Q1", "ts": "2026-01-02T00:00:00Z", "scope": "c", "role": "user",
             "text": "What did Caroline realize after her charity race?",
             "probe": {"evidence": ["D1:1"], "answer": "self-care matters", "scored": False,
                       "detached": True, "category": "adversarial",
                       "meta": {"abstention": True}}},
            {"id": "Q2", "ts": "2026-01-02T00:00:01Z", "scope": "c", "role": "user",
             "text": "When did Melanie run the charity race?",
             "probe": {"evidence": ["D1:1"], "answer": "Saturday", "detached": True,
                       "category": "temporal"}},
        ],
    }  # fmt: skip
    return Transcript.from_dict(data)


def test_abstention_proxies_on_abstention_and_answerable_questions() -> None:
    t = _abstention_transcript()
    ctx = Context([ContextItem(t.turns[0].text, 10, "turn", "c", "user", ("D1:1",), 0.9)])
    adv = score_probe(t, 1, t.turns[1], ctx, benchmark=True, abstain_below=0.65)
    assert adv["question_coverage"] == 2 / 5 and adv["abstention_proxy"] == 1.0
    assert "false_abstention_proxy" not in adv
    ok = score_probe(t, 2, t.turns[2], ctx, benchmark=True, abstain_below=0.65)
    # terms melanie, run, charity, race: three of four in the turn ("ran" is not "run")
    assert ok["question_coverage"] == 0.75 and ok["false_abstention_proxy"] == 0.0
    assert "abstention_proxy" not in ok
    strict = score_probe(t, 2, t.turns[2], ctx, benchmark=True, abstain_below=0.8)
    assert strict["false_abstention_proxy"] == 1.0
    off = score_probe(t, 1, t.turns[1], ctx)  # not a benchmark run: no proxies
    assert not {"abstention_proxy", "question_coverage"} & set(off)


# -- procedure probes and session layers ---------------------------------------------
def _item(text: str, created_at: float | None, scope: str = "s") -> ContextItem:
    return ContextItem(text, 5, "procedural", scope, "agent", (), 0.5, created_at)


def test_leaks_count_another_session_but_not_the_probes_own() -> None:
    from memlab.lab.metrics import own_scopes
    from memlab.lab.transcripts import Turn

    probe = Turn("t9", "2026-01-01T00:00:00Z", 0.0, "alice", "user", "user", "q", session="s2")
    assert own_scopes(probe) == frozenset({"alice", "alice:s2"})
    assert "alice:s1" not in own_scopes(probe)
    bare = Turn("t9", "2026-01-01T00:00:00Z", 0.0, "alice", "user", "user", "q")
    assert own_scopes(bare) == frozenset({"alice"})
