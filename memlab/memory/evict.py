"""Eviction: TTL for episodes, a capacity cap, a salience floor, cold-salience decay.

The salience floor is absolute: a record whose salience was at or above the floor
when it was written (or approved) is never deleted by a TTL or by capacity, even
after cold decay has lowered its salience. Decay lowers a record's ranking weight,
never its protection. The salience a record was written with is kept in
``meta["salience_written"]`` by the first decay that changes it (records that never
decayed carry no such key: their salience is the written one). Any explicit write of
a new salience (``MemoryLayer.approve``, a procedure's success or failure) drops the
key, so protection follows what the caller said last, and restarts the decay clock
(``meta["decayed_at"]``: its time), so idle time before it is not decayed again.

``EvictionPolicy(decay_unprotects=True)`` is the deliberate alternative: protection
follows the current, decayed salience, so a once-important record that nobody recalls
loses its protection once decay takes it below the floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from memlab.memory.checks import check_bool, check_instance, check_number, check_time
from memlab.memory.rank import HOUR, HybridRanker, usage_signal
from memlab.memory.records import (
    KIND_CODES,
    UNTRUSTED_SOURCES,
    MemoryKind,
    MemoryRecord,
    check_scope,
    untrusted_mask,
)
from memlab.memory.stores.base import MemoryStore, scope_columns


@dataclass
class EvictionReport:
    """What one eviction pass changed in a scope."""

    expired: list[str] = field(default_factory=list)  # deleted by a TTL
    dropped: list[str] = field(default_factory=list)  # deleted by capacity
    decayed: list[str] = field(default_factory=list)  # salience lowered
    over_capacity: int = 0  # records still above max_records (all protected by the floor)

    @property
    def deleted(self) -> list[str]:
        return self.expired + self.dropped


@dataclass(frozen=True)
class EvictionPolicy:
    """When memories are forgotten.

    Args:
        episodic_ttl: hours after which an episodic record (active or archived) is
            deleted; semantic and procedural records never expire. None: no TTL.
        max_records: cap on a scope's active records; the lowest-scored evictable
            records are deleted until the scope fits. None: no cap.
        salience_floor: records with salience at or above this are never evicted
            (by TTL or capacity). None: no protection.
        cold_decay: factor (0..1] applied to the salience of a record for every
            ``cold_after`` hours in which no recall returned it, so a once-important
            record that nobody needs stops outranking what is needed now. It lowers
            the ranking weight only: the floor still protects what was written at or
            above it (unless ``decay_unprotects``). None: off.
        cold_after: hours without a recall before salience starts to decay.
        untrusted_ttl: hours after which a tool/web record (episodic or semantic)
            is deleted (tool output is transient and never folded into summaries, so
            without this it piles up until the episodic TTL). None: no separate TTL.
        decay_unprotects: False (default): the floor protects what was written at or
            above it, whatever decay does later. True: protection follows the decayed
            salience (see the module docstring).

    Procedural records never expire on a clock: no TTL applies to them (capacity
    may still drop an unprotected one). Deleting a correction lifts nothing: what it
    superseded stays superseded (an aged-out correction is not a wrong one;
    ``MemoryLayer.forget`` and ``reinstate`` undo a supersession).
    """

    episodic_ttl: float | None = None
    max_records: int | None = None
    salience_floor: float | None = 0.8
    cold_decay: float | None = None
    cold_after: float = 24.0 * 30
    untrusted_ttl: float | None = None
    decay_unprotects: bool = False

    def __post_init__(self) -> None:
        check_number(self.episodic_ttl, "eviction.episodic_ttl", above=0.0, none=True)
        check_number(self.max_records, "eviction.max_records", lo=1, integer=True, none=True)
        check_number(self.salience_floor, "eviction.salience_floor", lo=0.0, hi=1.0, none=True)
        check_number(self.cold_decay, "eviction.cold_decay", above=0.0, hi=1.0, none=True)
        check_number(self.untrusted_ttl, "eviction.untrusted_ttl", above=0.0, none=True)
        check_number(self.cold_after, "eviction.cold_after", above=0.0)
        # any truthy value ("no", 1) used to turn protection-follows-decay on
        check_bool(self.decay_unprotects, "eviction.decay_unprotects")

    def protected(self, salience: float) -> bool:
        """Whether a record with this salience is at or above the floor."""
        return self.salience_floor is not None and salience >= self.salience_floor

    def protects(self, record: MemoryRecord) -> bool:
        """Whether the floor protects ``record``: its salience as written is at or
        above the floor (its current salience with ``decay_unprotects``)."""
        if self.salience_floor is None:
            return False
        salience = record.salience
        if not self.decay_unprotects:
            salience = max(salience, written_salience(record))
        return salience >= self.salience_floor

    def apply(
        self, store: MemoryStore, scope: str, now: float, ranker: HybridRanker | None = None
    ) -> EvictionReport:
        """Run decay, then the TTLs, then capacity on one scope; return what changed.

        Capacity ranks by the query-independent part of the hybrid score
        (recency, salience, usage) with the ranker's weights.

        Raises:
            InputError: a bad ``store``, ``scope``, ``now`` (epoch seconds) or
                ``ranker``; nothing is changed.
        """
        # checked first: a NaN ``now`` made every rule false (nothing evicted, no
        # word said), a string one a bare TypeError
        check_instance(store, MemoryStore, "eviction: store", none=False)
        check_scope(scope)
        now = check_time(now, "eviction: now")
        check_instance(ranker, HybridRanker, "eviction: ranker")
        report = EvictionReport()
        records = self._affected(store, scope, now)
        if records and self.cold_decay is not None and self.cold_decay < 1.0:
            changed = self._decay(records, now)
            if changed:
                store.put_many(changed)
                report.decayed = [r.id for r in changed]
                by_id = {r.id: r for r in changed}
                records = [by_id.get(r.id, r) for r in records]
        expired: dict[str, None] = {}
        if self.episodic_ttl is not None:
            cutoff = now - self.episodic_ttl * HOUR
            for r in records:
                if r.kind is MemoryKind.EPISODIC and r.created_at < cutoff and not self.protects(r):
                    expired[r.id] = None
        if self.untrusted_ttl is not None:
            cutoff = now - self.untrusted_ttl * HOUR
            for r in records:
                if (
                    r.source in UNTRUSTED_SOURCES
                    and r.kind is not MemoryKind.PROCEDURAL
                    and r.created_at < cutoff
                    and not self.protects(r)
                ):
                    expired[r.id] = None
        report.expired = list(expired)
        if report.expired:
            store.delete(scope, report.expired)
        if self.max_records is not None:
            # the expired are deleted already: the columns and the list hold what is left
            excess = scope_columns(store, scope).n_active - self.max_records
            if excess > 0:
                evictable = [r for r in store.list(scope) if not self.protects(r)]
                order = _keep_order(evictable, now, ranker or HybridRanker())
                report.dropped = [evictable[i].id for i in order[:excess]]
                if report.dropped:
                    store.delete(scope, report.dropped)
                report.over_capacity = excess - len(report.dropped)
        return report

    def _affected(self, store: MemoryStore, scope: str, now: float) -> list[MemoryRecord]:
        """The records decay or a TTL could change now, in store.list() order.

        Eviction runs at every turn: it picks them from the scope's column arrays
        and loads only those, instead of listing the scope (quadratic over a long
        replay). The column tests are necessary conditions; the rules themselves
        decide on the loaded records.
        """
        cols = scope_columns(store, scope, include_archived=True)
        live = cols.mask
        maybe = np.zeros(len(cols), dtype=bool)
        if self.cold_decay is not None and self.cold_decay < 1.0:
            # a record's decay clock starts at its last recall or later (its last decay)
            idle = now - cols.last_accessed_at >= self.cold_after * HOUR
            maybe |= idle & (cols.salience > 0)
        if self.episodic_ttl is not None:
            old = cols.created_at < now - self.episodic_ttl * HOUR
            maybe |= old & (cols.kind == KIND_CODES[MemoryKind.EPISODIC])
        if self.untrusted_ttl is not None:
            old = cols.created_at < now - self.untrusted_ttl * HOUR
            untrusted = untrusted_mask(cols.source)
            maybe |= old & untrusted & (cols.kind != KIND_CODES[MemoryKind.PROCEDURAL])
        rows = np.flatnonzero(live & maybe)
        if len(rows) == 0:
            return []
        records = store.get_many(scope, [cols.ids[i] for i in rows])
        return sorted(records, key=lambda r: (r.created_at, r.id))

    def _decay(self, records: list[MemoryRecord], now: float) -> list[MemoryRecord]:
        assert self.cold_decay is not None
        period = self.cold_after * HOUR
        changed = []
        for r in records:
            since = max(r.last_accessed_at, float(r.meta.get(DECAYED_KEY, r.created_at)))
            periods = math.floor((now - since) / period)
            if periods >= 1 and r.salience > 0:
                new = r.copy(salience=float(r.salience * self.cold_decay**periods))
                new.meta.setdefault(WRITTEN_KEY, float(r.salience))
                new.meta[DECAYED_KEY] = since + periods * period
                changed.append(new)
        return changed


WRITTEN_KEY = "salience_written"
DECAYED_KEY = "decayed_at"  # when cold decay last lowered, or a write set, the salience
REVIEWED_KEY = "reviewed_by"  # who approved the record (MemoryLayer.approve)


def written_salience(record: MemoryRecord) -> float:
    """The salience ``record`` was written (or approved) with, before any decay."""
    value = record.meta.get(WRITTEN_KEY)
    return float(value) if isinstance(value, int | float) else float(record.salience)


def _keep_order(records: list[MemoryRecord], now: float, ranker: HybridRanker) -> np.ndarray:
    """Indices of records from least to most worth keeping: records a newer one
    superseded whole first (history recall leaves out; keeping one over the record
    in force that superseded it left the scope holding only the stale value), then
    by the query-independent score."""
    if not records:
        return np.zeros(0, dtype=np.int64)
    w = ranker.weights
    hl = np.array([ranker.half_life.of(r.kind) * HOUR for r in records])
    age = np.maximum(now - np.array([r.created_at for r in records]), 0.0)
    recency = np.exp(-math.log(2.0) * age / hl)
    salience = np.clip(np.array([r.salience for r in records]), 0.0, 1.0)
    usage = usage_signal(np.array([r.access_count for r in records], dtype=np.int64))
    score = w.recency * recency + w.salience * salience + w.usage * usage
    created = np.array([r.created_at for r in records])
    in_force = np.array([r.invalid_at is None for r in records])
    return np.lexsort((created, score, in_force))
