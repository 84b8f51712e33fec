"""Packing a recall: which ranked rows go into the token budget (shared or split
across layered scopes, with neighbours and superseders), and the hits they make."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from memlab.memory.budget import Repack, adjacent_rows, pack
from memlab.memory.layer_types import NeighborPolicy
from memlab.memory.query import Hit, RecallQuery
from memlab.memory.rank import Scored
from memlab.memory.records import KIND_CODES, MemoryKind, MemoryRecord
from memlab.memory.scopes import Layered, split_budgets
from memlab.memory.stores.base import MemoryStore


def neighbor_expander(
    policy: NeighborPolicy | None, cands: Layered
) -> Callable[[int], list[int]] | None:
    """row -> the rows of its neighbours to pack after it (same scope, adjacent in
    time, within ``policy.max_tokens``); None when the policy packs none.

    Neighbours are turns of the conversation: only an episodic hit has them, and
    only episodic records are. The record written after a note or a reflection is
    no reply to it (a reflection's "neighbour" was the next reflection, which took
    the budget of the hits below it)."""
    if policy is None or not (policy.before or policy.after):
        return None
    code = KIND_CODES[MemoryKind.EPISODIC]
    episodic = np.concatenate([c.kind == code for c in cands.parts])
    near = cands.mask & episodic
    if policy.max_tokens is not None:
        near = near & (cands.tokens <= policy.max_tokens)
    layer_of = cands.layer

    def expand(row: int) -> list[int]:
        if not episodic[row]:
            return []
        pool = near & (layer_of == layer_of[row]) if len(cands.parts) > 1 else near
        return adjacent_rows(row, cands.created_at, pool, before=policy.before,
                             after=policy.after)  # fmt: skip

    return expand


def pack_rows(
    query: RecallQuery,
    cands: Layered,
    scores: np.ndarray,
    neighbors: NeighborPolicy | None,
    expand: Callable[[int], list[int]] | None,
    neighbor_rows: dict[int, int],
    conflict: Callable[[int], int | None] | None,
    repack: Repack | None = None,
) -> list[int]:
    """The rows packed into the budget: one shared ranking, or each layer its
    share of the budget (``query.split``; what a layer leaves flows on).
    ``repack`` is passed to ``pack`` for one shared ranking (see ``Repack``)."""
    policy = neighbors
    pack_args: dict[str, Any] = dict(
        ids=cands.ids,
        tiebreak=cands.created_at,
        min_score=threshold(scores, query),
        expand=expand,
        expand_top=policy.top if policy is not None else None,
        neighbor_of=neighbor_rows,
        conflict=conflict,
    )
    if query.split is None or len(cands.parts) == 1:
        return pack(
            scores, cands.tokens, query.token_budget, max_hits=query.max_hits, repack=repack,
            **pack_args,
        )  # fmt: skip
    rows: list[int] = []
    carry = 0
    for i, share in enumerate(split_budgets(query.token_budget, query.split)):
        budget = share + carry
        left = None if query.max_hits is None else query.max_hits - len(rows)
        if budget <= 0 or left == 0:
            carry = max(budget, 0)
            continue
        if expand is None and conflict is None:
            # the layer's own slice (its rows are contiguous): no pass over the others
            a = int(cands.offsets[i])
            b = a + len(cands.parts[i])
            local = dict(pack_args, ids=cands.parts[i].ids, tiebreak=cands.created_at[a:b])
            got = pack(scores[a:b], cands.tokens[a:b], budget, max_hits=left, **local)
            got = [a + row for row in got]
        else:
            mine = np.where(cands.layer == i, scores, -np.inf)
            got = pack(mine, cands.tokens, budget, max_hits=left, **pack_args)
        rows += got
        carry = budget - int(cands.tokens[got].sum()) if got else budget
    return rows


def superseder_rows(
    store: MemoryStore, cands: Layered, stale: np.ndarray
) -> Callable[[int], int | None]:
    """For packing: row -> the row of the record that superseded it (None if it
    is in force, or its superseder is not a candidate; a record is only ever
    superseded by one of its own scope). Read lazily: only the superseded rows
    packing considers are looked up."""
    row_of: dict[tuple[str, str], int] | None = None
    cache: dict[int, int | None] = {}

    def conflict(row: int) -> int | None:
        nonlocal row_of
        if not stale[row]:
            return None
        if row not in cache:
            scope = cands.scope_of(row)
            found = store.get_many(scope, [cands.ids[row]])
            by = found[0].superseded_by if found else None
            if row_of is None:
                row_of = {(cands.scope_of(i), rid): i for i, rid in enumerate(cands.ids)}
            cache[row] = row_of.get((scope, by)) if by is not None else None
        return cache[row]

    return conflict


def hits_of(
    rows: list[int],
    records: dict[int, MemoryRecord],
    cands: Layered,
    scores: np.ndarray,
    scored: Scored,
    neighbor_rows: dict[int, int],
    mode: str,
    as_of: float | None,
) -> list[Hit]:
    """The packed rows as hits, ranked 1..n, with each signal and its weighted
    contribution; a record shows the text in force at ``as_of`` (all of it with
    ``mode == "include"``), and one with nothing left in force is dropped."""
    weights = scored.weights
    # one gather per signal, and each hit's signals read off one row tuple (not a
    # numpy scalar per hit and signal)
    at = np.asarray(rows, dtype=np.int64)
    names = list(scored.components)
    factors = np.array([weights.get(name, 0.0) for name in names], dtype=np.float64)
    # rows x signals, in float64 (float32 signals widen exactly), so each weighted
    # contribution is the same product a Python float multiply gives
    table = np.empty((len(rows), len(names)), dtype=np.float64)
    for j, arr in enumerate(scored.components.values()):
        table[:, j] = arr[at]
    values_of = table.tolist()
    weighted_of = (table * factors).tolist()
    totals = scores[at].tolist()
    hits: list[Hit] = []
    for i, row in enumerate(rows):
        record = records.get(row)
        if record is None:  # vanished meanwhile
            continue
        shown = shown_text(record, mode, as_of)
        if not shown:
            continue  # every claim in it is superseded
        components = dict(zip(names, values_of[i], strict=True))
        contributions = dict(zip(names, weighted_of[i], strict=True))
        anchor = neighbor_rows.get(row)
        hits.append(
            Hit(
                record,
                float(totals[i]),
                len(hits) + 1,
                components,
                contributions,
                neighbor_of=cands.ids[anchor] if anchor is not None else None,
                text=shown,
            )
        )
    return hits


def shown_text(record: MemoryRecord, mode: str, as_of: float | None) -> str:
    """What a hit of ``record`` carries: its whole content with ``mode ==
    "include"``, else its text without the claims superseded by ``as_of``
    (empty when every claim is)."""
    return record.content if mode == "include" else record.text_at(as_of)


def threshold(scores: np.ndarray, query: RecallQuery) -> float:
    """The lowest score a hit may have: ``min_score``, raised to ``min_score_ratio``
    of the best finite score."""
    if query.min_score_ratio <= 0:
        return query.min_score
    best = float(np.max(scores, initial=-np.inf, where=np.isfinite(scores)))
    if best == -np.inf:  # no finite score
        best = 0.0
    return max(query.min_score, query.min_score_ratio * best)
