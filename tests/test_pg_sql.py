"""memlab.memory.stores.pg.sql: lossless text escaping and the approximate stage's arithmetic
(no server needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlab.errors import InputError
from memlab.memory import MemoryKind
from memlab.memory.stores.pg import sql as pgmod
from memlab.memory.stores.pg.sql import escape_text, unescape_text


# -- lossless text ------------------------------------------------------------------
@given(st.text())
def test_escape_is_lossless_and_nul_free(s: str) -> None:
    e = escape_text(s)
    assert "\x00" not in e
    assert unescape_text(e) == s


@given(st.text(), st.text())
def test_escape_is_injective(a: str, b: str) -> None:
    if a != b:
        assert escape_text(a) != escape_text(b)


# -- the approximate stage's arithmetic (no server) -----------------------------------
def test_allocate_splits_the_pool_evenly_and_passes_on_what_a_kind_cannot_use() -> None:
    E, S, P = MemoryKind.EPISODIC, MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL
    assert pgmod.allocate(150, {E: 151, S: 20, P: 0}) == {E: 130, S: 20, P: 0}
    assert pgmod.allocate(90, {E: 500, S: 500, P: 500}) == {E: 30, S: 30, P: 30}
    assert pgmod.allocate(10, {E: 500, S: 500, P: 500}) == {E: 4, S: 3, P: 3}
    assert pgmod.allocate(50, {E: 3}) == {E: 3}


@given(
    pool=st.integers(1, 500),
    counts=st.lists(st.integers(0, 600), min_size=1, max_size=3),
)
def test_allocate_never_exceeds_the_pool_or_a_kind(pool: int, counts: list[int]) -> None:
    kinds = list(MemoryKind)[: len(counts)]
    got = pgmod.allocate(pool, dict(zip(kinds, counts, strict=True)))
    assert sum(got.values()) == min(pool, sum(counts))
    assert all(0 <= got[k] <= c for k, c in zip(kinds, counts, strict=True))


def test_augmented_inner_product_is_the_weighted_similarity_plus_salience() -> None:
    rng = np.random.default_rng(0)
    v = rng.standard_normal(8).astype(np.float32)
    v /= np.linalg.norm(v)
    q = rng.standard_normal(8).astype(np.float32)
    q /= np.linalg.norm(q)
    s = 0.7
    stored = np.concatenate([v, [s, np.sqrt(1 - s * s)]])
    assert float(np.linalg.norm(stored)) == pytest.approx(np.sqrt(2), rel=1e-6)
    w_sim, w_sal = pgmod.ann_weights({"similarity": 0.6, "salience": 0.2, "recency": 0.3})
    assert (w_sim, w_sal) == (0.6, 0.2)
    got = float(stored @ pgmod.aug_query(q, w_sim, w_sal))
    assert got == pytest.approx(0.6 * float(v @ q) + 0.2 * s, abs=1e-6)
    assert pgmod.ann_weights(None) == (1.0, 0.0)
    with pytest.raises(InputError):
        pgmod.ann_weights({"similarity": -1.0})


def test_window_exact_scans_a_window_smaller_than_the_graph_search_would_visit() -> None:
    assert pgmod.window_exact(10, 16, 1_000_000)  # fewer rows than asked: all of them
    assert pgmod.window_exact(6_456, 16, 224_048)  # 4.2e7 < 30 * 16 * 224,048
    assert not pgmod.window_exact(8_670, 16, 71_600)  # 7.5e7 > 3.4e7: the graph
    assert not pgmod.window_exact(500, 16, -1)  # never counted: the window is the graph


def test_windows_apply_from_a_table_size_and_never_to_an_unanalyzed_table() -> None:
    assert pgmod.windows_on(1_500_000, 500_000)
    assert pgmod.windows_on(500_000, 500_000)
    assert not pgmod.windows_on(150_000, 500_000)
    assert not pgmod.windows_on(-1, 500_000)  # never analyzed
    assert pgmod.windows_on(-1, 0) and pgmod.windows_on(0, 0)  # 0: always


def test_split_windows_gives_half_a_share_to_a_kind_with_old_and_recent_rows() -> None:
    ep, sem, proc = MemoryKind.EPISODIC, MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL
    limits = {ep: 34, sem: 33, proc: 1}
    since = {ep: 100.0, sem: 50.0, proc: 10.0}
    # (window rows, older rows, graph rows) per kind
    counts = [*(40, 1, 1e6), *(0, 1, 1e5), *(5, 1, 10)]
    out, windows = pgmod.split_windows(limits, since, counts)
    assert out == {ep: 17, sem: 33, proc: 1} and limits[ep] == 34  # a copy
    assert windows == {ep: (100.0, 17, True)}  # 40 rows: scanned, not searched
    # A young kind (no older rows) keeps its share: its own search covers the window.
    out, windows = pgmod.split_windows({ep: 34}, {ep: 1.0}, [pgmod.WINDOW_COUNT, 0, 1e6])
    assert out == {ep: 34} and windows == {}
    # A window too big to count is searched in the graph.
    _, windows = pgmod.split_windows({ep: 34}, {ep: 1.0}, [pgmod.WINDOW_COUNT, 1, 1e6])
    assert windows == {ep: (1.0, 17, False)}


def test_pool_sql_adds_one_search_per_window() -> None:
    q = np.ones(6, dtype=np.float32)
    windows = {MemoryKind.SEMANTIC: (5.0, 7, True), MemoryKind.EPISODIC: (9.0, 3, False)}
    text, params = pgmod.pool_sql("w", 4, "id", q, {MemoryKind.SEMANTIC: 8}, 0, 0, windows)
    assert text.count("UNION ALL") == 2 and text.count("created_at >=") == 2
    assert params["since_semantic"] == 5.0 and params["w_semantic"] == 7
    assert params["w_episodic"] == 3 and params["qv"].shape == (4,)
    assert "embedding <#> %(qv)s::vector(4)" in text  # the scanned window: float32
