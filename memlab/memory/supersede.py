"""Supersession in the memory layer: what ``remember`` does with a consolidator's
decisions, and what ``recall`` does with superseded records.

Write time (``consolidate``): for each new trusted record of a batch, in order,
the consolidator decides which earlier records of its scope it supersedes (the
batch's earlier items count, through ``ScopeReader(pending=...)``). Every
decision is checked before anything is written: the old record must be in force
in the same scope and no newer than the new one, and a record from an untrusted
source (tool, web) never supersedes anything. The old records are returned with a
``Superseded`` entry appended (the whole record, or the span of one claim when
the old record also states other things), to be written in the same atomic
``put_many`` as the new ones. Nothing is ever deleted: a superseded record stays
on disk with who superseded it, when and why.

Read time (``SupersedePolicy.recall``, overridable per query):

- ``exclude`` (default): superseded records are not candidates at all (stores
  filter them with ``candidates(valid_at=inf)``, approximate stores before they
  choose their pool);
- ``downweight``: they stay candidates with their score multiplied by ``factor``;
- ``include``: they are ranked as if nothing had happened.

In every mode a record's superseded claims are cut from the text a hit carries
(``Hit.text``) unless the mode is ``include``, and packing never puts a record in
the same context as the record that superseded it (the newer one wins). With
``guard`` on, recall also compares the statements among the packed hits: when a
newer one states the same thing with another value, the older one is treated as
superseded for this query (a read-time check for corrections the write-time
detector missed; ``memlab.memory.recall_guard``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from memlab.errors import InputError
from memlab.memory.consolidate import Consolidator, ConsolidatorError, ScopeReader, Supersession
from memlab.memory.records import SUPERSEDED_MODES, MemoryRecord, Superseded
from memlab.memory.stores.base import MemoryStore


@dataclass(frozen=True)
class SupersedePolicy:
    """How a MemoryLayer uses supersession.

    Args:
        recall: how recall treats superseded records: ``exclude``, ``downweight``
            or ``include`` (``RecallQuery.superseded`` overrides it per query).
        factor: with ``downweight``, a superseded record's score is multiplied by this.
        min_confidence: a consolidator's decisions below this confidence are not applied.
        guard: compare the statements among the packed hits and leave an older one
            out when a newer one states the same thing with another value (see
            ``memlab.memory.recall_guard``).
        guard_top: the guard compares the best this-many packed hits (the pairs
            grow with its square; the hits that answer a query are at the top).
    """

    recall: str = "exclude"
    factor: float = 0.25
    min_confidence: float = 0.5
    guard: bool = True
    guard_top: int = 6

    def __post_init__(self) -> None:
        if self.recall not in SUPERSEDED_MODES:
            raise InputError(
                f"supersede.recall must be one of {list(SUPERSEDED_MODES)}, got {self.recall!r}"
            )
        for name in ("factor", "min_confidence"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (0.0 <= value <= 1.0)
            ):
                raise InputError(f"supersede.{name} must be a number in 0..1, got {value!r}")
        if not isinstance(self.guard, bool):
            raise InputError(f"supersede.guard must be true or false, got {self.guard!r}")
        if (
            isinstance(self.guard_top, bool)
            or not isinstance(self.guard_top, int)
            or self.guard_top < 2
        ):
            raise InputError(f"supersede.guard_top must be an integer >= 2, got {self.guard_top!r}")


@dataclass
class Consolidation:
    """What ``consolidate`` decided for a batch."""

    records: list[MemoryRecord]  # the new records (some superseded by later items)
    updated: list[MemoryRecord]  # stored records with a new Superseded entry
    decisions: list[Supersession]


def consolidate(
    store: MemoryStore,
    consolidator: Consolidator,
    records: Sequence[MemoryRecord],
    *,
    min_confidence: float = 0.5,
    pool: int | None = None,
) -> Consolidation:
    """Decide, for each record of a batch in order, what it supersedes.

    Returns the batch (items superseded by later items carry their entry) and the
    stored records to rewrite; nothing is written here.

    Raises:
        ConsolidatorError: a decision names a record that is not in force in the new
            record's scope, is newer than it, or is the new record itself (the
            consolidator is broken; nothing was written). Errors the consolidator
            raises propagate.
    """
    batch: dict[str, MemoryRecord] = {r.id: r for r in records}
    order = {r.id: i for i, r in enumerate(records)}
    updated: dict[str, MemoryRecord] = {}
    applied: list[Supersession] = []
    for i, new in enumerate(records):
        if not new.source.trusted:
            continue  # an untrusted record never supersedes anything
        pending = [batch[r.id] for r in records[:i] if r.scope == new.scope]
        pending += [u for u in updated.values() if u.scope == new.scope]
        reader = ScopeReader(store, new.scope, pending=pending, pool=pool)
        decisions = consolidator.decide(new, reader)
        seen: set[str] = set()
        for d in decisions:
            if not isinstance(d, Supersession):
                raise ConsolidatorError(
                    f"consolidator {consolidator.name} returned a {type(d).__name__}, "
                    "not a Supersession"
                )
            if d.new_id != new.id or d.old_id in seen:
                raise ConsolidatorError(
                    f"consolidator {consolidator.name} returned a decision for {d.new_id!r} "
                    f"-> {d.old_id!r} while deciding {new.id!r} (each old record at most once)"
                )
            seen.add(d.old_id)
            if d.confidence < min_confidence:
                continue
            if d.old_id in batch:
                if order[d.old_id] >= i:
                    raise ConsolidatorError(
                        f"consolidator {consolidator.name}: {new.id!r} cannot supersede "
                        f"{d.old_id!r}, which comes later in the same batch"
                    )
                old: MemoryRecord | None = batch[d.old_id]
            else:
                old = updated.get(d.old_id)
                if old is None:
                    found = reader.get_many([d.old_id])
                    old = found[0] if found else None
            if old is None or old.scope != new.scope or old.archived:
                raise ConsolidatorError(
                    f"consolidator {consolidator.name} superseded {d.old_id!r}, which is not "
                    f"an active record of scope {new.scope!r}"
                )
            if old.created_at > new.created_at:
                raise ConsolidatorError(
                    f"consolidator {consolidator.name}: {new.id!r} cannot supersede the newer "
                    f"record {old.id!r}"
                )
            if old.invalid_at is not None:
                continue  # already superseded as a whole
            span = d.span if d.partial and d.span is not None else None
            entry = Superseded(
                by=new.id,
                at=new.created_at,
                span=span,
                reason=d.reason,
                confidence=float(d.confidence),
                detail=d.detail,
            )
            changed = old.copy(superseded=(*old.superseded, entry))
            try:
                entry.check(changed)
            except InputError as exc:
                raise ConsolidatorError(
                    f"consolidator {consolidator.name} made an unusable decision: {exc}"
                ) from None
            if old.id in batch:
                batch[old.id] = changed
            else:
                updated[old.id] = changed
            applied.append(d)
    return Consolidation([batch[r.id] for r in records], list(updated.values()), applied)


def lift(record: MemoryRecord, by: set[str] | None = None) -> MemoryRecord | None:
    """The record without the entries made by the records in ``by`` (None: all), or
    None if it has none of them."""
    keep = tuple(s for s in record.superseded if by is not None and s.by not in by)
    if len(keep) == len(record.superseded):
        return None
    return record.copy(superseded=keep)


def mode_of(policy: SupersedePolicy | None, override: str | None) -> str:
    """The recall mode for a query."""
    if override is not None:
        return override
    return policy.recall if policy is not None else "exclude"


def valid_at_for(mode: str, as_of: float | None) -> float | None:
    """What to pass as ``candidates(valid_at=...)`` for a recall."""
    if as_of is not None:
        return float(as_of)
    return math.inf if mode == "exclude" else None


__all__ = [
    "Consolidation",
    "SupersedePolicy",
    "consolidate",
    "lift",
    "mode_of",
    "valid_at_for",
]
