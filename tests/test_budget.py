"""The budget: rows best first, and greedy packing into a token budget."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.memory.budget import SAMPLED_HEAD_ROWS, Repack, pack


def test_pack_skips_and_continues() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    tokens = np.array([50, 60, 30, 30])
    # 50 fits, 60 would overflow (50+60 > 100) so it is skipped, 30 fits, the next 30 would overflow.
    assert pack(scores, tokens, 100) == [0, 2]
    assert pack(scores, np.array([50, 60, 30, 20]), 100) == [0, 2, 3]  # exactly full
    assert pack(scores, tokens, 100, max_hits=1) == [0]
    assert pack(scores, tokens, 10) == []
    assert pack(scores, tokens, 1000, min_score=0.75) == [0, 1]


def test_pack_takes_a_budget_of_sys_maxsize_as_no_limit() -> None:
    # budget + 1 (the "smallest row" start) overflowed int64: a recall with
    # token_budget=sys.maxsize was a bare OverflowError
    scores = np.array([0.9, 0.8, 0.7])
    tokens = np.array([50, 60, 30])
    for budget in (sys.maxsize, 10**30):
        assert pack(scores, tokens, budget) == [0, 1, 2]
        assert pack(scores, tokens, budget, max_hits=2) == [0, 1]


def test_pack_breaks_ties_by_newer_then_id() -> None:
    scores = np.array([0.5, 0.5, 0.5])
    tokens = np.array([1, 1, 1])
    created = np.array([1.0, 3.0, 3.0])
    assert pack(scores, tokens, 10, ids=["c", "b", "a"], tiebreak=created) == [2, 1, 0]


def greedy(order: list[int], tokens: np.ndarray, budget: int, max_hits: int | None) -> list[int]:
    """The reference packing: skip-and-continue over rows in ``order``."""
    expected: list[int] = []
    left = budget
    for i in order:
        if max_hits is not None and len(expected) >= max_hits:
            break
        if tokens[i] <= left:
            expected.append(i)
            left -= int(tokens[i])
    return expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1, allow_nan=False), st.integers(1, 300)), min_size=0, max_size=700
    ),
    st.integers(1, 3000),
    st.one_of(st.none(), st.integers(1, 20)),
)
def test_pack_property(items: list[tuple[float, int]], budget: int, max_hits: int | None) -> None:
    scores = np.array([s for s, _ in items], dtype=np.float64)
    tokens = np.array([t for _, t in items], dtype=np.int64)
    chosen = pack(
        scores, tokens, budget, ids=[f"{i:04d}" for i in range(len(items))], max_hits=max_hits
    )
    # Never over budget, never duplicates, at most max_hits.
    assert sum(int(tokens[i]) for i in chosen) <= budget
    assert len(set(chosen)) == len(chosen)
    if max_hits is not None:
        assert len(chosen) <= max_hits
    # Reference: greedy skip-and-continue over a full stable sort.
    order = sorted(range(len(items)), key=lambda i: (-scores[i], f"{i:04d}"))
    expected = greedy(order, tokens, budget, max_hits)
    assert chosen == expected
    # the row-by-row loop (taken whenever a superseder check is given) agrees
    row_by_row = pack(
        scores,
        tokens,
        budget,
        ids=[f"{i:04d}" for i in range(len(items))],
        max_hits=max_hits,
        conflict=lambda row: None,
    )
    assert row_by_row == expected


def test_the_budget_a_superseded_row_held_goes_to_the_next_row_in_ranking_order() -> None:
    # 0 is superseded by 2. Taking 0 first left 5 tokens, so 1 (8) was skipped; 2
    # then took 0 out, and its 10 tokens went to 3 instead of 1: [2, 3], 8 tokens
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    tokens = np.array([10, 8, 5, 3])
    assert pack(scores, tokens, 15, conflict=lambda r: 2 if r == 0 else None) == [1, 2]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(1, 12), st.one_of(st.none(), st.integers(0, 11))),
        min_size=1,
        max_size=12,
    ),
    st.integers(1, 40),
    st.one_of(st.none(), st.integers(1, 6)),
)
def test_pack_with_superseders_is_a_greedy_packing_without_the_stale_rows_it_left_out(
    items: list[tuple[int, int, int | None]], budget: int, max_hits: int | None
) -> None:
    n = len(items)
    scores = np.array([s for s, _, _ in items], dtype=np.float64)
    tokens = np.array([t for _, t, _ in items], dtype=np.int64)
    newer = {i: by for i, (_, _, by) in enumerate(items) if by is not None and by < n and by != i}
    ids = [f"{i:02d}" for i in range(n)]
    chosen = pack(scores, tokens, budget, ids=ids, max_hits=max_hits, conflict=newer.get)
    assert sum(int(tokens[i]) for i in chosen) <= budget and len(set(chosen)) == len(chosen)
    assert not any(newer.get(i) in chosen for i in chosen)  # never next to its superseder
    # the superseded rows left out changed nothing else: every other row was packed
    # by skip-and-continue in ranking order
    left_out = {i for i in newer if i not in chosen}
    order = sorted((i for i in range(n) if i not in left_out), key=lambda i: (-scores[i], ids[i]))
    assert chosen == greedy(order, tokens, budget, max_hits)


def test_adjacent_rows_in_time_order_with_masks_and_ties() -> None:
    from memlab.memory.budget import adjacent_rows

    created = np.array([30.0, 10.0, 20.0, 20.0, 40.0])
    mask = np.array([True, True, True, True, True])
    assert adjacent_rows(1, created, mask, after=2) == [2, 3]  # ties broken by row order
    assert adjacent_rows(2, created, mask, before=1, after=1) == [3, 1]
    assert adjacent_rows(4, created, mask, after=1) == []
    mask[0] = False
    assert adjacent_rows(3, created, mask, after=1) == [4]  # masked rows are not neighbours


def test_pack_with_neighbors_respects_budget_and_never_duplicates() -> None:
    scores = np.array([0.9, 0.1, 0.8, 0.05, 0.7])
    tokens = np.array([10, 10, 10, 50, 10])
    nxt = {0: [1], 2: [3], 4: [0]}
    anchors: dict[int, int] = {}
    chosen = pack(
        scores, tokens, 45, expand=lambda r: nxt.get(r, []), expand_top=5, neighbor_of=anchors
    )
    # 0 then its neighbour 1; 2 (its neighbour 3 is too big: skipped); 4 (its neighbour 0 is taken).
    assert chosen == [0, 1, 2, 4]
    assert anchors == {1: 0}
    assert sum(tokens[chosen]) <= 45
    only_first = pack(scores, tokens, 100, expand=lambda r: nxt.get(r, []), expand_top=1)
    assert only_first == [0, 1, 2, 4, 3]  # 3 comes in by its own score, not as a neighbour


def test_pack_never_takes_a_row_scored_minus_inf_as_a_neighbour() -> None:
    # the recall guard leaves a row out by scoring it -inf; as the neighbour of a
    # hit it was packed all the same
    scores = np.array([0.9, -np.inf, 0.8])
    tokens = np.array([10, 10, 10])
    anchors: dict[int, int] = {}
    chosen = pack(scores, tokens, 100, expand=lambda r: [1] if r == 0 else [], neighbor_of=anchors)
    assert chosen == [0, 2]
    assert anchors == {}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.text("abc", min_size=1, max_size=3)),
        min_size=1,
        max_size=40,
        unique_by=lambda t: t[2],
    )
)
def test_order_breaks_ties_by_tiebreak_then_id(rows: list[tuple[int, int, str]]) -> None:
    from memlab.memory.budget import _order

    scores = np.array([float(s) for s, _, _ in rows])
    tiebreak = np.array([float(t) for _, t, _ in rows])
    ids = [i for _, _, i in rows]
    idx = np.arange(len(rows))[::-1]
    expected = sorted(idx, key=lambda r: (-scores[r], -tiebreak[r], ids[r]))
    assert _order(idx, scores, ids, tiebreak).tolist() == expected
    assert _order(idx, scores, None, tiebreak).tolist() == [
        int(r) for r in idx[np.lexsort((-tiebreak[idx], -scores[idx]))]
    ]


def test_pack_stops_on_the_smallest_row_it_could_still_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a masked (-inf) row with few tokens must not keep packing going: the result
    # is the same, and the ranked rows after the budget is full are never drawn
    import memlab.memory.budget as module

    drawn: list[int] = []
    real = module._best_first

    def counting(*args: Any, **kw: Any) -> Iterator[int]:
        for row in real(*args, **kw):
            drawn.append(row)
            yield row

    heads: list[list[int]] = []
    real_heads = module._heads

    def counting_heads(*args: Any, **kw: Any) -> Iterator[np.ndarray]:
        for batch in real_heads(*args, **kw):
            heads.append(batch.tolist())
            yield batch

    monkeypatch.setattr(module, "_best_first", counting)
    monkeypatch.setattr(module, "_heads", counting_heads)
    scores = np.array([3.0, 2.0, 1.0, -np.inf] + [0.5] * 50)
    tokens = np.array([40, 40, 40, 1] + [30] * 50)
    # row by row (a superseder check given): no row drawn after the budget is full
    assert pack(scores, tokens, 100, conflict=lambda row: None) == [0, 1]
    assert drawn == [0, 1]
    # a run at a time: the first head fills the budget, no second head is sorted
    scores = np.concatenate([scores, np.full(300, 0.25)])
    tokens = np.concatenate([tokens, np.full(300, 30)])
    heads.clear()
    assert pack(scores, tokens, 100) == [0, 1]
    assert len(heads) == 1


@pytest.mark.parametrize(
    ("seed", "levels", "budget", "max_hits", "min_score"),
    [
        (1, None, 800, None, -np.inf),  # distinct scores
        (2, 20, 800, None, -np.inf),  # a few score levels: ties across every head
        (3, 30, 5000, 40, 0.2),  # ties, a hit cap and a floor
        (4, None, 60_000, None, 0.9),  # the floor leaves few rows; the budget is never full
    ],
)
def test_pack_of_a_large_ranking_cuts_its_first_head_by_a_sampled_threshold(
    seed: int, levels: int | None, budget: int, max_hits: int | None, min_score: float
) -> None:
    rng = np.random.default_rng(seed)
    n = 3 * SAMPLED_HEAD_ROWS
    scores = rng.random(n)
    if levels is not None:
        scores = np.round(scores * levels) / levels
    scores[rng.random(n) < 0.1] = -np.inf  # masked rows
    tokens = rng.integers(1, 60, n)
    tiebreak = rng.integers(0, 50, n).astype(np.float64)
    ids = [f"{i:06d}" for i in range(n)]
    args = dict(ids=ids, tiebreak=tiebreak, max_hits=max_hits, min_score=min_score)
    fast = pack(scores, tokens, budget, **args)  # type: ignore[arg-type]
    slow = pack(scores, tokens, budget, conflict=lambda row: None, **args)  # type: ignore[arg-type]
    # reference: greedy skip-and-continue over a full sort (score, newer, id)
    order = sorted(
        np.flatnonzero(np.isfinite(scores) & (scores >= min_score)).tolist(),
        key=lambda i: (-scores[i], -tiebreak[i], ids[i]),
    )
    expected = greedy(order, tokens, budget, max_hits)
    assert fast == slow == expected and fast
    assert int(tokens[fast].sum()) <= budget and len(set(fast)) == len(fast)


def test_a_huge_tie_at_a_heads_edge_is_cut_not_sorted_whole() -> None:
    # 100k equal scores (a bulk import, a query matching nothing): the head takes
    # rows of the tie without ordering all of it by id, and is still a best-first
    # packing within the budget
    n = 100_000
    scores = np.full(n, 0.5)
    scores[:10] = 0.9  # ten better rows come first
    tokens = np.full(n, 20)
    ids = [f"{i:06d}" for i in range(n)]
    for conflict in (None, lambda row: None):
        chosen = pack(scores, tokens, 800, ids=ids, tiebreak=np.zeros(n), conflict=conflict)
        assert chosen[:10] == list(range(10)) and len(chosen) == 40
        assert len(set(chosen)) == 40 and (scores[chosen[10:]] == 0.5).all()


def _repack_case(
    scores: np.ndarray,
    tokens: np.ndarray,
    budget: int,
    max_hits: int | None,
    out: np.ndarray,
    tiebreak: np.ndarray | None = None,
    min_score: float = -np.inf,
) -> None:
    """Pack with a Repack, take ``out`` rows out (-inf) and pack twice more: each
    repack must equal a fresh packing of the new scores."""
    ids = [f"{i:06d}" for i in range(len(scores))]
    args: dict[str, Any] = dict(ids=ids, tiebreak=tiebreak, max_hits=max_hits, min_score=min_score)
    repack = Repack()
    first = pack(scores, tokens, budget, repack=repack, **args)
    assert first == pack(scores, tokens, budget, **args)
    for part in np.array_split(out, 2):  # two guard passes, each leaving rows out
        scores = scores.copy()
        scores[part] = -np.inf
        again = pack(scores, tokens, budget, repack=repack, **args)
        assert again == pack(scores, tokens, budget, **args)
        assert not set(again) & set(part.tolist())


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(1, 120), st.integers(0, 3)),
        min_size=0,
        max_size=600,
    ),
    st.integers(1, 2000),
    st.one_of(st.none(), st.integers(1, 20)),
    st.data(),
)
def test_a_repack_without_some_rows_equals_packing_afresh(
    items: list[tuple[int, int, int]], budget: int, max_hits: int | None, data: st.DataObject
) -> None:
    # few score levels and tiebreaks: ties inside and across heads
    scores = np.array([s / 6 for s, _, _ in items], dtype=np.float64)
    tokens = np.array([t for _, t, _ in items], dtype=np.int64)
    tiebreak = np.array([b for _, _, b in items], dtype=np.float64)
    # rows taken out: often the ones the first packing chose (what the guard removes)
    chosen = pack(scores, tokens, budget, ids=[f"{i:06d}" for i in range(len(items))],
                  tiebreak=tiebreak, max_hits=max_hits)  # fmt: skip
    pool = sorted(set(chosen) | set(range(min(len(items), 30))))
    out = data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=8)) if pool else []
    _repack_case(scores, tokens, budget, max_hits, np.array(out, dtype=np.int64), tiebreak)


def test_a_repack_of_a_large_ranking_reads_past_its_first_head() -> None:
    # the sampled first head, a floor, and more taken out than the head held
    rng = np.random.default_rng(7)
    n = 2 * SAMPLED_HEAD_ROWS
    scores = np.round(rng.random(n) * 40) / 40
    tokens = rng.integers(1, 60, n)
    top = np.argsort(-scores, kind="stable")[:1500]
    _repack_case(scores, tokens, 3000, None, top, rng.integers(0, 9, n).astype(float), 0.1)


def test_a_repack_with_another_budget_or_floor_ranks_afresh() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    tokens = np.array([10, 10, 10, 10])
    repack = Repack()
    assert pack(scores, tokens, 20, repack=repack) == [0, 1]
    # the floor changed: the kept order (of rows >= -inf) must not be reused
    assert pack(scores, tokens, 40, repack=repack, min_score=0.65) == [0, 1, 2]
    lower = scores.copy()
    lower[0] = -np.inf
    assert pack(lower, tokens, 40, repack=repack, min_score=0.65) == [1, 2]
    assert pack(lower, tokens, 40, repack=repack, min_score=0.0) == [1, 2, 3]
