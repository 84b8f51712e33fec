"""The recall pipeline behind ``MemoryLayer.recall`` and ``MemoryLayer.rank``:
embed the query, read each scope's candidates, score them as one ranking, pack the
best into the token budget (with the recall guard and supersession), and turn the
packed rows into hits."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memlab.memory.budget import Repack, ranked
from memlab.memory.checks import MAX_ID_CHARS
from memlab.memory.layer_types import Ranking, RecallResult
from memlab.memory.packing import (
    hits_of,
    neighbor_expander,
    pack_rows,
    shown_text,
    superseder_rows,
)
from memlab.memory.query import RecallQuery
from memlab.memory.rank import Scored
from memlab.memory.records import MemoryRecord, untrusted_mask
from memlab.memory.scopes import Layered
from memlab.memory.stores.base import MemoryStore
from memlab.memory.supersede import mode_of, valid_at_for
from memlab.memory.timeparse import TimeWindow, parse_time

if TYPE_CHECKING:
    from memlab.memory.layer import MemoryLayer


#: How many times the recall guard checks a recall's packed hits. Each check that
#: finds a conflict is followed by a packing without (or with down-weighted) the
#: older records, so the hits never hold a record the guard left out; the records
#: that packing brings in after the last check are not compared.
GUARD_PASSES = 3


def recall(layer: MemoryLayer, query: RecallQuery, touch: bool) -> RecallResult:
    """``MemoryLayer.recall`` for a checked query (see there)."""
    mode = mode_of(layer.supersede, query.superseded)
    as_of = query.as_of
    valid_at = valid_at_for(mode, as_of)
    now, text, window, cands, scored = score(layer, query, valid_at)
    if scored is None:
        return RecallResult(query, [], now, 0, text, window, mode)
    mask = cands.mask
    scores = scored.scores
    conflict = None
    if valid_at is None:  # superseded records are candidates in this mode
        stale = cands.superseded & mask
        if stale.any():
            if mode == "downweight":
                scores = np.where(stale, scores * layer.supersede.factor, scores)
            conflict = superseder_rows(layer.store, cands, stale)
    neighbor_rows: dict[int, int] = {}
    expand = neighbor_expander(layer.neighbors, cands)
    guarded: list[tuple[str, str, str]] = []
    left_out: set[str] = set()  # the old ids in guarded
    # keyed by row, so each packed row's id is looked up in the layered ids once
    records: dict[int, MemoryRecord] = {}
    # excluding only sets the guarded rows to -inf, so a second pass re-reads the
    # first one's order (a down-weighted row moves: rank afresh then)
    repack = Repack() if mode == "exclude" and layer.guard is not None else None
    checks = 0
    # a note's fold time, by row (read once: the loop may pack a note again)
    folded_at: dict[int, float | None] = {}

    def written_by(row: int, t: float) -> bool:
        if row not in folded_at:
            folded_at[row] = fold_time(layer.store, records[row], cands.scopes)
        at = folded_at[row]
        return at is None or at <= t

    while True:  # the guard may leave hits out: pack again without them
        neighbor_rows.clear()
        rows = pack_rows(
            query, cands, scores, layer.neighbors, expand, neighbor_rows, conflict, repack
        )
        by_scope: dict[str, dict[str, int]] = {}
        unread = [row for row in rows if row not in records]
        for row, (scope, rid) in zip(unread, cands.keys(unread), strict=True):
            by_scope.setdefault(scope, {})[rid] = row
        for scope, wanted in by_scope.items():
            for rec in layer.store.get_many(scope, list(wanted)):
                if rec.scope == scope and rec.id in wanted:
                    records[wanted[rec.id]] = rec
        # a record in force whose every claim is superseded (a note both of whose
        # facts were corrected) has no text to give and is dropped from the hits:
        # packed, it spent the budget that a record with something to say fits in
        empty = [r for r in rows if r in records and not shown_text(records[r], mode, as_of)]
        if as_of is not None:
            empty += [r for r in rows if r in records and not written_by(r, as_of)]
        if empty:
            scores = scores.copy()
            scores[empty] = -np.inf
            continue
        if layer.guard is None or mode == "include" or checks == GUARD_PASSES:
            break  # after the last check the packing above applied what it found
        top = [records[r] for r in rows if r in records]
        found = layer.guard.conflicts(top[: layer.supersede.guard_top], as_of, cands.scopes)
        checks += 1
        # a down-weighted record can be packed and found again: weigh it down once
        found = [f for f in found if f[0] not in left_out]
        if not found:
            break
        scores = scores.copy()
        row_of = {records[r].id: r for r in rows if r in records}  # ids are store-unique
        for old_id, newer_id, why in found:
            r = row_of[old_id]
            scores[r] = -np.inf if mode == "exclude" else scores[r] * layer.supersede.factor
            guarded.append((old_id, newer_id, why))
            left_out.add(old_id)
    hits = hits_of(rows, records, cands, scores, scored, neighbor_rows, mode, as_of)
    if touch and hits and as_of is None:
        touched: dict[str, list[str]] = {}
        for h in hits:
            touched.setdefault(h.record.scope, []).append(h.record.id)
        for scope, ids in touched.items():
            layer.store.touch(scope, ids, now)
    return RecallResult(query, hits, now, cands.n_active, text, window, mode, guarded)


def fold_time(store: MemoryStore, record: MemoryRecord, scopes: Sequence[str]) -> float | None:
    """When a summary note was written, or None when it is no note (or that cannot be
    told). A note is dated by the newest episode it folds, but written when the fold
    ran, which archived its episodes at that moment: the earliest ``archived_at`` of
    those episodes. Read only from the recall's own scopes (a note's ``from_scope``
    outside them is not looked at)."""
    folded = record.meta.get("summary_of")
    if not isinstance(folded, list) or not folded:
        return None
    source = record.meta.get("from_scope", record.scope)
    if source not in scopes:
        return None
    # a summary_of written by hand may hold anything: only what can be an id is read
    ids = [i for i in folded if isinstance(i, str) and 0 < len(i) <= MAX_ID_CHARS]
    times = [r.archived_at for r in store.get_many(source, ids) if r.archived_at is not None]
    return min(times) if times else None


def rank(layer: MemoryLayer, query: RecallQuery) -> Ranking:
    """``MemoryLayer.rank`` for a checked query (see there)."""
    mode = mode_of(layer.supersede, query.superseded)
    valid_at = valid_at_for(mode, query.as_of)
    now, text, _, cands, scored = score(layer, query, valid_at)
    if scored is None:
        return Ranking(query, [], np.zeros(0), now, text)
    scores = scored.scores
    if valid_at is None and mode == "downweight":
        stale = cands.superseded & cands.mask
        scores = np.where(stale, scores * layer.supersede.factor, scores)
    rows = list(
        ranked(
            scores,
            cands.tokens,
            int(cands.tokens.max()),
            ids=cands.ids,
            tiebreak=cands.created_at,
        )
    )
    return Ranking(query, [cands.ids[r] for r in rows], scores[rows], now, text)


def score(
    layer: MemoryLayer, query: RecallQuery, valid_at: float | None
) -> tuple[float, str, TimeWindow | None, Layered, Scored | None]:
    """The candidates of the query's scopes scored for ``query`` (``recall`` and
    ``rank``): (now, rewritten text, time window, candidates side by side,
    scores; None when the scopes have no candidates). Several scopes are scored
    as one ranking (``HybridRanker.score_layers``). ``valid_at`` is passed to
    ``candidates`` (see ``supersede.valid_at_for``); the time to rank against is
    ``query.now``, else ``query.as_of``, else the clock. The caller checked that the
    layer is open."""
    if query.now is not None:
        now = float(query.now)
    else:
        now = float(query.as_of) if query.as_of is not None else layer.clock()
    text = layer.rewriter.rewrite(query.text) if layer.rewriter is not None else query.text
    window = parse_time(query.text, now) if layer.ranker.weights.time > 0 else None
    qvec = layer.embed_query(text)
    scopes = query.scopes
    # A named period switches recency off (see rank), so no recency hint then.
    recency = window is None and layer.ranker.weights.recency > 0
    half_life = layer.ranker.half_life.as_dict() if recency else None
    parts = [
        layer.store.candidates(
            scope,
            qvec,
            kinds=query.kinds,
            include_archived=False,
            pool=layer.pool,
            text=text if layer.ranker.uses_lexical else None,
            weights=layer.ranker.weights.as_dict(),
            valid_at=valid_at,
            now=now if recency else None,
            half_life=half_life,
        )
        for scope in scopes
    ]
    if not query.include_untrusted:
        parts = [dataclasses.replace(c, mask=c.mask & ~untrusted_mask(c.source)) for c in parts]
    cands = Layered.of(scopes, parts)
    if len(cands) == 0:
        return now, text, window, cands, None
    return now, text, window, cands, layer.ranker.score_layers(parts, qvec, now, window=window)
