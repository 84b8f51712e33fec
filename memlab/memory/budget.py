"""Rows best first and packing them into a token budget.

``ranked`` yields the rows that could fit a budget, best first (ties: the larger
tiebreak, then the id), sorting only a head of the ranking at a time; ``pack``
chooses rows greedily by descending score until the budget is full, skipping a
row that does not fit and trying the ones after it, optionally with each chosen
row's neighbours (``adjacent_rows``) and never next to a row that conflicts with
it. The scores come from ``memlab.memory.rank``; recall's use of both, across
layered scopes, is ``memlab.memory.packing``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence

import numpy as np


def ranked(
    scores: np.ndarray,
    tokens: np.ndarray,
    budget: int,
    *,
    ids: Sequence[str] | None = None,
    tiebreak: np.ndarray | None = None,
    min_score: float = -np.inf,
) -> Iterator[int]:
    """Rows that could fit the budget, best first (ties: larger ``tiebreak``, then id).

    Only a head of the ranking is sorted at a time: a budget of a few hundred
    tokens is almost always filled from it, and a full argsort of 100k rows would
    dominate recall.
    """
    return _best_first(_rankable(scores, tokens, budget, min_score), scores, ids, tiebreak)


def _rankable(scores: np.ndarray, tokens: np.ndarray, budget: int, min_score: float) -> np.ndarray:
    """The rows ``ranked`` yields (see ``_rankable_mask``)."""
    return np.flatnonzero(_rankable_mask(scores, tokens, budget, min_score))


def _rankable_mask(
    scores: np.ndarray, tokens: np.ndarray, budget: int, min_score: float
) -> np.ndarray:
    """Which rows may be packed: a finite score of at least ``min_score``, and
    tokens within the budget."""
    mask = np.isfinite(scores) & (tokens <= budget)
    if min_score > -np.inf:  # every finite score is at least -inf
        mask &= scores >= min_score
    return mask


def _best_first(
    rows: np.ndarray, scores: np.ndarray, ids: Sequence[str] | None, tiebreak: np.ndarray | None
) -> Iterator[int]:
    """``rows`` best first, a head of the ranking sorted at a time (see ``ranked``)."""
    for batch in _heads(rows, scores, ids, tiebreak):
        yield from batch.tolist()


_HEAD = 256  # rows of the first head of a ranking (each later one is 4x the last)
_TIED_HEAD = 8  # a head grown by ties past this many times its size is cut instead


def _heads(
    rows: np.ndarray, scores: np.ndarray, ids: Sequence[str] | None, tiebreak: np.ndarray | None
) -> Iterator[np.ndarray]:
    """``rows`` best first, as ordered batches: the best 256 (and any row tied with
    the 256th), then the next 1024, then 4x more each time (each batch sorted, the
    rest only partitioned)."""
    head = _HEAD
    while rows.size:
        if rows.size <= head:
            yield _order(rows, scores, ids, tiebreak)
            return
        # the head largest: partition at n - head (no negated copy); every row tied
        # with the head's lowest score joins it, so a tie is not split between two
        # heads (which would order its rows by score alone) -- unless the tie is
        # huge (a bulk import of equal records, a query that matches none of
        # them): sorting all of it by id would cost more than the whole recall,
        # so it is split where the partition put it
        values = scores[rows]
        part = np.argpartition(values, rows.size - head)
        top = values >= values[part[rows.size - head]]
        if np.count_nonzero(top) > _TIED_HEAD * head:
            top = np.zeros(rows.size, dtype=bool)
            top[part[rows.size - head :]] = True
        yield _order(rows[top], scores, ids, tiebreak)
        rows = rows[~top]
        head *= 4


# From this many rows the plain packing's first head is cut by a score threshold
# taken from a sample (below it, partitioning every row costs less); the ranker's
# exact head (memlab.memory.rank) cuts its head with the same sampled_cut.
SAMPLED_HEAD_ROWS = 16_384
_SAMPLE = 4096  # scores sampled to place the threshold


def sampled_cut(scores: np.ndarray, live: np.ndarray, n_live: int, want: int) -> float | None:
    """The score that a strided sample of the ``live`` rows (``n_live`` of them)
    puts about ``2 * want`` live rows above; None when the sample holds no live row.
    Used to cut the head of a large ranking without partitioning every row."""
    stride = max(1, len(scores) // _SAMPLE)
    sample = scores[::stride][live[::stride]]
    if sample.size == 0:
        return None
    k = min(sample.size, max(1, -(-2 * want * sample.size // n_live)))
    return float(np.partition(sample, sample.size - k)[sample.size - k])


def _first_head(
    scores: np.ndarray, rankable: np.ndarray, n_rankable: int, want: int
) -> tuple[np.ndarray, np.ndarray]:
    """(the rankable rows scoring at least a threshold, the other rankable rows)
    for a large ranking: the threshold is ``sampled_cut``'s. Every row at or above
    it is in the head, ties included, so the head is a prefix of the ranking,
    whatever the sample."""
    cut = sampled_cut(scores, rankable, n_rankable, want)
    if cut is None:
        return np.zeros(0, dtype=np.int64), np.flatnonzero(rankable)
    above = rankable & (scores >= cut)
    return np.flatnonzero(above), np.flatnonzero(rankable & ~above)


class Repack:
    """What a plain packing of one ranking keeps for packing it again with some
    rows taken out (their scores set to -inf, every other score unchanged): the
    recall guard's second pass. The rows left keep their order, so the batches
    the first packing sorted are read again, filtered, instead of partitioning
    every row anew. Used only when the budget, the score floor and the hit limit
    are the ones the first packing had (otherwise it ranks afresh).
    """

    def __init__(self) -> None:
        self.key: tuple[int, float, int] | None = None
        self.rankable = np.zeros(0, dtype=bool)
        self._batches: Iterator[np.ndarray] = iter(())

    def start(
        self, key: tuple[int, float, int], rankable: np.ndarray, batches: Iterator[np.ndarray]
    ) -> Iterator[np.ndarray]:
        """Keep the batches of a first packing as they are produced (yields them)."""
        self.key, self.rankable = key, rankable
        # tee keeps what the first packing read and still produces the rest lazily
        first, self._batches = itertools.tee(batches)
        return first

    def again(self, scores: np.ndarray) -> Iterator[np.ndarray]:
        """The first packing's batches without the rows now scoring -inf."""
        replay, self._batches = itertools.tee(self._batches)
        for batch in replay:
            yield batch[np.isfinite(scores[batch])]


def _pack_plain(
    scores: np.ndarray,
    tokens: np.ndarray,
    budget: int,
    min_score: float,
    limit: int,
    ids: Sequence[str] | None,
    tiebreak: np.ndarray | None,
    repack: Repack | None = None,
) -> list[int]:
    """``pack`` without neighbours or superseders, a run of rows at a time.

    The rows that fit what is left of the budget, in ranking order, are taken as
    long as their running sum fits; the first that does not is skipped, and the
    rows after it are tried against what is left. Rows skipped once never fit
    later (what is left only shrinks), so this chooses what the row-by-row loop
    chooses, with one numpy pass per run instead of a Python step per row. In a
    large ranking the first head is every row above a sampled threshold (no
    partition of all rows); the rest are ranked a head at a time as ``ranked``
    does. With ``repack`` (see ``Repack``), a first packing keeps its batches there
    and a second one with the same budget, floor and limit reads them again.
    """
    key = (budget, min_score, limit)
    # a second packing of the same ranking with the same knobs re-reads the first's
    prior = repack if repack is not None and repack.key == key else None
    if prior is not None:
        rankable = prior.rankable & np.isfinite(scores)
    else:
        rankable = _rankable_mask(scores, tokens, budget, min_score)
    n_rankable = int(np.count_nonzero(rankable))
    if not n_rankable:
        return []
    # the smallest row that could still be taken: once less than it is left, stop
    # (some row is rankable, so the initial value is never the answer; budget + 1
    # overflowed int64 for a budget of sys.maxsize, the natural "no limit")
    smallest = int(np.min(tokens, where=rankable, initial=np.iinfo(np.int64).max))
    batches: Iterator[np.ndarray]
    if prior is not None:
        batches = prior.again(scores)
    elif len(scores) >= SAMPLED_HEAD_ROWS:
        head, rest = _first_head(scores, rankable, n_rankable, _HEAD)
        batches = _chain(head, rest, scores, ids, tiebreak)
    else:
        batches = _heads(np.flatnonzero(rankable), scores, ids, tiebreak)
    if repack is not None and prior is None:
        batches = repack.start(key, rankable, batches)
    chosen: list[np.ndarray] = []
    count = 0
    remaining = budget
    for batch in batches:
        tok = tokens[batch]
        pos = 0
        while pos < batch.size and count < limit and remaining >= smallest:
            fit = pos + np.flatnonzero(tok[pos:] <= remaining)
            if not fit.size:
                break
            sums = np.cumsum(tok[fit])
            k = min(int(np.searchsorted(sums, remaining, side="right")), limit - count)
            chosen.append(batch[fit[:k]])
            count += k
            remaining -= int(sums[k - 1])
            pos = int(fit[k - 1]) + 1
        if count >= limit or remaining < smallest:
            break
    return np.concatenate(chosen).tolist() if chosen else []


def _chain(
    head: np.ndarray,
    rest: np.ndarray,
    scores: np.ndarray,
    ids: Sequence[str] | None,
    tiebreak: np.ndarray | None,
) -> Iterator[np.ndarray]:
    """``head`` (all of it scoring above ``rest``) ordered, then ``rest`` a head at a
    time."""
    if head.size > _TIED_HEAD * _HEAD:  # a huge tie above the threshold
        yield from _heads(head, scores, ids, tiebreak)
    elif head.size:
        yield _order(head, scores, ids, tiebreak)
    yield from _heads(rest, scores, ids, tiebreak)


def pack(
    scores: np.ndarray,
    tokens: np.ndarray,
    budget: int,
    *,
    ids: Sequence[str] | None = None,
    tiebreak: np.ndarray | None = None,
    max_hits: int | None = None,
    min_score: float = -np.inf,
    expand: Callable[[int], Sequence[int]] | None = None,
    expand_top: int | None = None,
    neighbor_of: dict[int, int] | None = None,
    conflict: Callable[[int], int | None] | None = None,
    repack: Repack | None = None,
) -> list[int]:
    """Choose rows by descending score until the token budget is full.

    Skip-and-continue: a row that would overflow the remaining budget is skipped
    and smaller rows further down are still tried. Ties are broken by
    ``tiebreak`` (larger first, e.g. created_at) and then by id.

    With ``expand``, right after each of the first ``expand_top`` chosen rows its
    ``expand(row)`` rows (e.g. the turns next to it) are tried too, under the same
    budget and skip rule (whatever their score, except -inf: such a row is never
    chosen); ``neighbor_of`` (if given) receives neighbour -> anchor.

    With ``conflict`` (row -> the row of the record that superseded it, or None),
    a row and the row that superseded it never both end up chosen: a superseded
    row is skipped once its superseder is chosen, and when its superseder is
    chosen after it, packing starts again without it (so the budget it held goes
    to the rows in ranking order).

    With ``repack`` (only read without ``expand`` and ``conflict``), packing the
    same ranking again with rows taken out reuses the first packing's order (see
    ``Repack``): the caller must only have set scores to -inf in between.

    Returns:
        The chosen row indices in context order; their tokens sum to at most
        ``budget``, and no row appears twice.
    """
    limit = max_hits if max_hits is not None else len(scores)
    if expand is None and conflict is None:
        return _pack_plain(scores, tokens, budget, min_score, limit, ids, tiebreak, repack)
    rows = _rankable(scores, tokens, budget, min_score)
    if not rows.size:
        return []
    # the smallest row that could still be taken: once less than it is left, stop
    # (masked rows score -inf and are never taken, so they must not set it)
    smallest = int(tokens[rows].min())
    # superseded rows whose superseder was chosen after them: packing starts again
    # without them, so the budget they held goes to the rows in ranking order (taken
    # out in place, their tokens went to whatever came next, and a better row skipped
    # while they held the budget stayed out though it fitted)
    banned: set[int] = set()
    while True:
        chosen, anchor_of, dropped = _pack_once(
            rows, scores, tokens, budget, ids, tiebreak, limit, smallest, expand, expand_top,
            conflict, banned,
        )  # fmt: skip
        if dropped is None:
            break
        banned.add(dropped)
    if neighbor_of is not None:
        neighbor_of.update(anchor_of)
    return chosen


def _pack_once(
    rows: np.ndarray,
    scores: np.ndarray,
    tokens: np.ndarray,
    budget: int,
    ids: Sequence[str] | None,
    tiebreak: np.ndarray | None,
    limit: int,
    smallest: int,
    expand: Callable[[int], Sequence[int]] | None,
    expand_top: int | None,
    conflict: Callable[[int], int | None] | None,
    banned: set[int],
) -> tuple[list[int], dict[int, int], int | None]:
    """One packing of ``pack`` with neighbours or superseders, never taking a row of
    ``banned``: (the chosen rows, neighbour -> anchor, None), or, as soon as a row
    is chosen after a chosen row it superseded, ([], {}, that superseded row)."""
    chosen: list[int] = []
    taken: set[int] = set()
    anchor_of: dict[int, int] = {}
    remaining = budget
    anchors = 0
    waiting: dict[int, list[int]] = {}  # superseder row -> chosen rows it superseded
    dropped: int | None = None

    def take(row: int) -> bool:
        nonlocal remaining, dropped
        if row in taken or row in banned or int(tokens[row]) > remaining:
            return False
        if conflict is not None:
            newer = conflict(row)
            if newer is not None:
                if newer in taken:
                    return False
                waiting.setdefault(newer, []).append(row)
        chosen.append(row)
        taken.add(row)
        remaining -= int(tokens[row])
        for older in waiting.pop(row, ()):
            if older in taken:
                dropped = older
        return True

    for row in _best_first(rows, scores, ids, tiebreak):
        if not take(row):
            continue
        if dropped is not None:
            return [], {}, dropped
        if expand is not None and (expand_top is None or anchors < expand_top):
            anchors += 1
            for nb in expand(row):
                if len(chosen) >= limit or remaining < smallest:
                    break
                # a row scored -inf is out of this packing (the recall guard left it
                # out, or it is masked): next to a hit it came back all the same
                if not np.isfinite(scores[nb]):
                    continue
                if take(nb):
                    if dropped is not None:
                        return [], {}, dropped
                    anchor_of[nb] = row
        if len(chosen) >= limit or remaining < smallest:
            break
    return chosen, anchor_of, None


def adjacent_rows(
    row: int, created_at: np.ndarray, mask: np.ndarray, *, before: int = 0, after: int = 1
) -> list[int]:
    """The ``after`` rows made just after ``row`` and the ``before`` rows just
    before it, among unmasked rows (time order; ties by row order), nearest first."""
    t = created_at[row]
    idx = np.arange(len(created_at))
    out: list[int] = []
    later = np.flatnonzero(mask & ((created_at > t) | ((created_at == t) & (idx > row))))
    for _ in range(min(after, later.size)):
        j = int(np.argmin(created_at[later]))
        out.append(int(later[j]))
        later = np.delete(later, j)
    earlier = np.flatnonzero(mask & ((created_at < t) | ((created_at == t) & (idx < row))))
    for _ in range(min(before, earlier.size)):
        j = earlier.size - 1 - int(np.argmax(created_at[earlier][::-1]))
        out.append(int(earlier[j]))
        earlier = np.delete(earlier, j)
    return out


def _order(
    rows: np.ndarray, scores: np.ndarray, ids: Sequence[str] | None, tiebreak: np.ndarray | None
) -> np.ndarray:
    """``rows`` best first: by score, then larger ``tiebreak``, then id. Ids are
    only compared inside a run of rows tied on both numbers (building a string
    key for every row of the head cost more than the rest of packing)."""
    keys: list[np.ndarray] = []
    if tiebreak is not None:
        keys.append(-tiebreak[rows])
    keys.append(-scores[rows])
    out = rows[np.lexsort(keys)]
    if ids is None or out.size < 2:
        return out
    same = scores[out[1:]] == scores[out[:-1]]
    if tiebreak is not None:
        same &= tiebreak[out[1:]] == tiebreak[out[:-1]]
    if not same.any():
        return out
    # runs of ties: sort each by id
    starts = np.flatnonzero(np.diff(np.concatenate(([False], same, [False])).astype(np.int8)))
    for a, b in zip(starts[::2], starts[1::2], strict=True):
        run = out[a : b + 1]
        out[a : b + 1] = run[np.argsort(np.array([ids[i] for i in run]), kind="stable")]
    return out
