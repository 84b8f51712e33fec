"""The recall guard: a read-time check for corrections the write-time detector missed.

A consolidator decides at write time with what it can find then (a few neighbours
by similarity and BM25). At recall the question is narrower: the hits a recall
packed all answer one query. When two of them state the same thing with
different values, the newer one is in force; the guard leaves the older one out
of this recall (the store is not changed). It asks the consolidator's own rules
(``judge``, e.g. ``RuleConsolidator.judge``) about the packed records only, so it
costs a few clause comparisons per recall.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memlab.memory.consolidate import Supersession
from memlab.memory.records import MemoryRecord


class Judge(Protocol):
    """A consolidator that can decide on given records without a store."""

    def judge(self, new: MemoryRecord, olds: Sequence[MemoryRecord]) -> list[Supersession]:
        """Which of ``olds`` (older records the caller chose to compare) ``new``
        supersedes."""
        ...


class RecallGuard:
    """Pairs of packed hits where the newer one supersedes the older one.

    Args:
        judge: decides whether a record supersedes older ones (``RuleConsolidator``).
    """

    def __init__(self, judge: Judge) -> None:
        self.judge = judge

    def conflicts(
        self,
        records: Sequence[MemoryRecord],
        as_of: float | None = None,
        layers: Sequence[str] | None = None,
    ) -> list[tuple[str, str, str]]:
        """(older id, newer id, why) for each record a newer one among ``records``
        supersedes as a whole (newest first). Partial decisions (a claim inside a
        multi-fact record) leave the record in: its other claims still hold.
        ``as_of`` is unused: the records given are those held at that time.

        ``layers``: the recall's scopes, narrowest first. A newer record is compared
        with the older ones of its own scope and of the broader layers after it (a
        correction told in a session beats the stale fact the user's layer still
        holds, in this recall; the store is not changed), never with a narrower
        layer's. None: only records of the same scope are compared.
        """
        order = sorted(records, key=lambda r: (r.created_at, r.id))
        rank = {s: i for i, s in enumerate(layers or ())}
        gone: set[str] = set()
        out: list[tuple[str, str, str]] = []
        for j in range(len(order) - 1, 0, -1):
            new = order[j]
            if new.id in gone:
                continue
            mine = rank.get(new.scope)
            olds = [
                o
                for o in order[:j]
                if o.id not in gone
                and (o.scope == new.scope or (mine is not None and rank.get(o.scope, -1) > mine))
            ]
            for d in self.judge.judge(new, olds):
                if d.partial or d.old_id in gone:
                    continue
                gone.add(d.old_id)
                out.append((d.old_id, new.id, f"{d.reason}: {d.detail}"))
        return out


__all__ = ["Judge", "RecallGuard"]
