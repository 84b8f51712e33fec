"""Every metric on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memlab.lab.metrics import (
    METRICS,
    answer_in_context,
    bootstrap_ci,
    contains,
    evidence_distance,
    evidence_recall,
    fact_recall,
    normalize,
    precision,
    score_probe,
    stale_rate,
    stale_wins,
    token_precision,
)
from memlab.lab.strategies import Context, ContextItem
from memlab.lab.transcripts import load
from tests.conftest import FIXTURES


def item(
    text: str,
    prov: tuple[str, ...] = (),
    scope: str = "alice:support",
    source: str = "user",
    tokens: int = 10,
) -> ContextItem:
    return ContextItem(
        text=text, tokens=tokens, kind="turn", scope=scope, source=source, provenance=prov
    )


def test_normalized_whole_word_matching() -> None:
    t = normalize("We deploy on GKE, in europe-west1.")
    assert contains(t, "gke") and contains(t, "Europe-West1") and contains(t, "on GKE")
    assert not contains(t, "GK") and not contains(t, "") and not contains(t, "  ")
    assert contains(normalize("ｆｌａｔ white"), "flat white")  # NFKC


def test_fact_recall_cases() -> None:
    needed = [("Nomad", ["GKE"]), ("PagerDuty", [])]
    assert fact_recall(normalize("we run nomad"), needed) == 0.5
    assert fact_recall(normalize("nomad and pagerduty"), needed) == 1.0
    assert math.isnan(fact_recall(normalize("x"), []))


def test_precision_cases() -> None:
    assert precision([True, False, False, True]) == 0.5
    assert precision([]) == 0.0
    assert token_precision([True, False], [30, 10]) == 0.75
    assert token_precision([], []) == 0.0


def test_stale_cases() -> None:
    needed = [("Nomad", ["GKE"]), ("PagerDuty", [])]
    stale_only = [normalize("we deploy on GKE")]
    both = [normalize("we moved off GKE to Nomad")]
    # One of two needed facts is stated only with a stale value.
    assert stale_rate(stale_only, needed) == 0.5
    assert stale_rate(both, needed) == 0.0  # a correction states both: not stale
    # stale_wins looks at the first item that mentions any value of the fact.
    assert stale_wins([normalize("GKE"), normalize("Nomad")], needed) == 0.5
    assert stale_wins([normalize("Nomad"), normalize("GKE")], needed) == 0.0
    assert stale_rate([normalize("GKE"), normalize("Nomad")], needed) == 0.5
    assert math.isnan(stale_rate([], [])) and math.isnan(stale_wins([], []))


def test_evidence_and_answer() -> None:
    assert evidence_recall({"t1", "t2", "t9"}, ["t1", "t3"]) == 0.5
    assert math.isnan(evidence_recall({"t1"}, []))
    assert answer_in_context(normalize("it runs on Nomad now"), "nomad") == 1.0
    assert answer_in_context(normalize("it runs on Nomads"), "nomad") == 0.0
    assert math.isnan(answer_in_context("x", None)) and math.isnan(answer_in_context("x", "  "))


def test_score_probe_on_the_handmade_transcript() -> None:
    t = load(FIXTURES / "handmade.json")
    i = t.index["t9"]
    probe = t.turns[i]
    ctx = Context(
        [
            item("We deploy everything on GKE in europe-west1.", ("t0",), tokens=12),
            item("Actually we moved off GKE, everything now runs on Nomad.", ("t7",), tokens=14),
            item("thanks!", ("t4",), tokens=2),
            item("tool returned 200", ("t5",), source="tool", tokens=5),
            item("We deploy on EKS in us-east-1.", ("t3",), scope="bob:support", tokens=8),
        ]
    )
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


def test_every_metric_documents_formula_and_empty_value() -> None:
    import memlab.lab.metrics as mod

    for fn in [
        fact_recall,
        precision,
        token_precision,
        stale_rate,
        stale_wins,
        evidence_recall,
        answer_in_context,
    ]:
        doc = fn.__doc__ or ""
        assert "NaN" in doc or "0.0" in doc, fn.__name__
    assert "NaN" in (mod.__doc__ or "")
