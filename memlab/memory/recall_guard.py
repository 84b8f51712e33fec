"""The recall guard: a read-time check for corrections the write-time detector missed.

A consolidator decides at write time with what it can find then (a few neighbours
by similarity and BM25). At recall the question is narrower: the hits a recall
packed all answer one query. When two of them state the same thing with
different values, the newer one is in force; the guard leaves the older one out
of this recall (the store is not changed). It uses the rules of
``RuleConsolidator`` (``judge``) on the packed records only, so it costs a few
clause comparisons per recall and nothing when no two hits look alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlab.memory.records import MemoryRecord
from memlab.memory.rule_consolidator import RuleConsolidator, RulePolicy


class RuleGuard:
    """Pairs of packed hits where the newer one supersedes the older one.

    Args:
        policy: the rules' knobs (RulePolicy).
    """

    def __init__(self, policy: RulePolicy | None = None) -> None:
        self.rules = RuleConsolidator(policy)

    def conflicts(
        self, records: Sequence[MemoryRecord], as_of: float | None = None
    ) -> list[tuple[str, str, str]]:
        """(older id, newer id, why) for each record a newer one among ``records``
        supersedes as a whole. Partial decisions (a claim inside a multi-fact
        record) leave the record in: its other claims still hold."""
        order = sorted(records, key=lambda r: (r.created_at, r.id))
        gone: set[str] = set()
        out: list[tuple[str, str, str]] = []
        for j in range(len(order) - 1, 0, -1):
            new = order[j]
            if new.id in gone:
                continue
            olds = [o for o in order[:j] if o.id not in gone]
            for d in self.rules.judge(new, olds):
                if d.partial:
                    continue
                gone.add(d.old_id)
                out.append((d.old_id, new.id, f"{d.reason}: {d.detail}"))
        return out


__all__ = ["RuleGuard"]
