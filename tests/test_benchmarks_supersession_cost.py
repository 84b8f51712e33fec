"""The supersession cost bench (benchmarks/supersession_cost.py): one row per
workload and size, ratios of real timings, and the share of writes that decided."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.supersession_cost import COST_WORKLOADS, _Counting, cost
from memlab.memory import HashEmbedder, MemoryKind, MemoryRecord
from memlab.memory.consolidate import EXPLICIT, NoConsolidator, ScopeReader, Supersession
from memlab.memory.rule_consolidator import RuleConsolidator


def test_cost_rows_per_workload_with_positive_ratios() -> None:
    table = cost([60], RuleConsolidator(), writes=4)
    assert list(table["workload"]) == list(COST_WORKLOADS)
    assert (table["records"] == 60).all()
    for col in ("remember_p50_us", "with_detection_p50_us", "recall_p50_ms",
                "recall_supersede_p50_ms", "ratio_p50", "ratio_mean"):  # fmt: skip
        assert (table[col] > 0).all(), col
    assert table["fired_share"].between(0, 1).all()


def test_a_consolidator_that_never_decides_fires_on_no_write() -> None:
    table = cost([30], NoConsolidator(), writes=3)
    assert (table["fired_share"] == 0).all()


class _Always:
    name = "always"

    def decide(self, new: MemoryRecord, reader: ScopeReader) -> list[Supersession]:
        return [Supersession("old", new.id, EXPLICIT, 1.0)]

    def judge(self, new: MemoryRecord, olds: Sequence[MemoryRecord]) -> list[Supersession]:
        return [Supersession(o.id, new.id, EXPLICIT, 1.0) for o in olds]


def test_counting_counts_the_writes_that_decided_and_passes_judge_through() -> None:
    vec = HashEmbedder(16).embed(["x"])[0]
    rec = MemoryRecord("n", "x", vec, MemoryKind.EPISODIC, "a", 0.5, 1, 0.0, 0.0)
    old = MemoryRecord("old", "y", vec, MemoryKind.EPISODIC, "a", 0.5, 1, 0.0, 0.0)
    counting = _Counting(_Always())
    assert counting.name == "always"
    for _ in range(3):
        counting.decide(rec, None)  # type: ignore[arg-type]
    assert counting.fired == 3
    assert [s.old_id for s in counting.judge(rec, [old])] == ["old"]
    none = _Counting(NoConsolidator())
    none.decide(rec, None)  # type: ignore[arg-type]
    assert none.fired == 0
    assert not hasattr(none, "judge")  # no recall guard for a consolidator that can't judge
