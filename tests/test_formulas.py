"""The metrics' formulas (memlab.lab.formulas) on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from memlab.lab.formulas import (
    answer_in_context,
    contains,
    evidence_recall,
    fact_recall,
    normalize,
    precision,
    stale_rate,
    stale_wins,
    token_precision,
)
from memlab.lab.strategies import ContextItem
from tests.conftest import context_item as item


def _item(text: str, created_at: float | None, scope: str = "s") -> ContextItem:
    return ContextItem(text, 5, "procedural", scope, "agent", (), 0.5, created_at)


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


def test_evidence_recall_at_k() -> None:
    from memlab.lab.metrics import evidence_recall_at_k

    items = [item(f"x{i}", (f"t{i}",)) for i in range(15)]
    assert evidence_recall_at_k(items, ["t0", "t12"], 10) == 0.5
    assert evidence_recall_at_k(items, ["t12"], 10) == 0.0
    assert evidence_recall_at_k(items, ["t12"], 13) == 1.0
    assert math.isnan(evidence_recall_at_k(items, [], 10))


def test_every_metric_documents_formula_and_empty_value() -> None:
    import memlab.lab.formulas as formulas
    import memlab.lab.metrics as mod

    helpers = {"normalize", "contains", "relevant", "straight_apostrophes"}  # text, not metrics
    for name in sorted(set(formulas.__all__) - helpers):
        doc = getattr(formulas, name).__doc__ or ""
        assert "NaN" in doc or "0.0" in doc, name
    assert "NaN" in (mod.__doc__ or "")


def test_question_coverage_by_hand() -> None:
    from memlab.lab.metrics import question_coverage

    q = "What did Caroline realize after her charity race?"  # caroline realize after charity race
    assert question_coverage(q, ["Melanie: I ran a charity race on Saturday."]) == 2 / 5
    assert question_coverage(q, ["charity", "Caroline had a charity race after all"]) == 4 / 5
    assert question_coverage(q, []) == 0.0
    assert question_coverage("what is it?", ["anything"]) == 1.0  # no content words


def test_procedure_recall_counts_steps_in_context_in_order() -> None:
    from memlab.lab.metrics import procedure_recall

    steps = ["cdn.find_zone", "cdn.purge", "cdn.verify"]
    whole = _item("1. cdn.find_zone(asset=x)\n2. cdn.purge(zone=main)\n3. cdn.verify(asset=x)", 1)
    assert procedure_recall([whole], steps) == 1.0
    # two items read in time order, whatever their rank order
    late = _item("cdn.verify(asset=x)", 20.0)
    early = _item("cdn.find_zone(asset=x) then cdn.purge(zone=main)", 10.0)
    assert procedure_recall([late, early], steps) == 1.0
    # out of order: the longest run in order counts
    swapped = _item("cdn.verify(asset=x); cdn.find_zone(asset=x)", 1.0)
    assert procedure_recall([swapped], steps) == pytest.approx(1 / 3)
    assert procedure_recall([_item("cdn.purger()", 1.0)], steps) == 0.0  # whole words only
    assert procedure_recall([], steps) == 0.0
    assert math.isnan(procedure_recall([whole], []))
