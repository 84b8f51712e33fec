"""memlab.memory.packing: which ranked rows of layered scopes go into the budget."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.memory.packing import pack_rows
from memlab.memory.query import RecallQuery
from memlab.memory.scopes import Layered
from memlab.memory.stores.base import Candidates
from tests.conftest import make_record


def layered(sizes: list[int], seed: int, ties: bool) -> tuple[Layered, np.ndarray]:
    """Layers of records with random tokens and times, and random scores (a few
    levels when ``ties``, some rows masked)."""
    rng = np.random.default_rng(seed)
    parts = []
    for li, n in enumerate(sizes):
        recs = [
            make_record(
                f"s{li}",
                "x" * int(rng.integers(4, 200)),
                id=f"r{li}-{i:04d}",
                created_at=float(rng.integers(0, 5 if ties else 10**6)),
            )
            for i in range(n)
        ]
        parts.append(Candidates.from_records(recs, 16) if recs else Candidates.empty(16))
    scopes = tuple(f"s{i}" for i in range(len(sizes)))
    cands = Layered.of(scopes, parts)
    scores = rng.random(len(cands))
    if ties:
        scores = np.round(scores * 4) / 4
    scores[rng.random(len(cands)) < 0.15] = -np.inf
    return cands, scores


@settings(max_examples=120, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 400), min_size=2, max_size=3),
    seed=st.integers(0, 2**16),
    ties=st.booleans(),
    budget=st.integers(1, 3000),
    max_hits=st.one_of(st.none(), st.integers(1, 30)),
)
def test_a_split_budget_packs_each_layers_slice_as_the_masked_ranking_does(
    sizes: list[int], seed: int, ties: bool, budget: int, max_hits: int | None
) -> None:
    cands, scores = layered(sizes, seed, ties)
    split = [1.0] * len(sizes)
    query = RecallQuery(list(cands.scopes), "x", token_budget=budget, split=split,
                        max_hits=max_hits)  # fmt: skip
    sliced = pack_rows(query, cands, scores, None, None, {}, None)
    # a superseder check that finds none takes the path that masks the other layers
    masked = pack_rows(query, cands, scores, None, None, {}, lambda row: None)
    assert sliced == masked
    assert int(cands.tokens[sliced].sum()) <= budget and len(set(sliced)) == len(sliced)
    if max_hits is not None:
        assert len(sliced) <= max_hits
