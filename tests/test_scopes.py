"""Layered scopes: layers_of, LayerPolicy, budget splits, checks of scope lists."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlab.errors import InputError
from memlab.memory import LayerPolicy, RecallQuery, layers_of
from memlab.memory.records import check_scopes, check_split
from memlab.memory.scopes import split_budgets


def test_layers_of_builds_narrowest_first() -> None:
    assert layers_of("alice:support:s7") == ("alice:support:s7", "alice:support")
    assert layers_of("alice:support:s7", depth=3) == ("alice:support:s7", "alice:support", "alice")
    assert layers_of("alice") == ("alice",)
    assert layers_of("a/b", separator="/") == ("a/b", "a")
    with pytest.raises(InputError, match="depth"):
        layers_of("a", depth=0)
    with pytest.raises(InputError, match="separator"):
        layers_of("a", separator="")
    # neither was an InputError: str.split raised a bare TypeError, and True was depth 1
    for separator in (5, b":", None):
        with pytest.raises(InputError, match="separator"):
            layers_of("a:b", separator=separator)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="depth"):
        layers_of("a:b", depth=True)


def test_layer_policy_routes_each_kind() -> None:
    policy = LayerPolicy()
    assert policy.scope_for("episodic", ["s", "u"]) == "s"
    assert policy.scope_for("semantic", ["s", "u"]) == "u"
    assert policy.scope_for("procedural", ["s", "m", "u"]) == "u"
    assert policy.scope_for("semantic", "only") == "only"
    far = LayerPolicy(episodic=5, semantic=-9)
    assert far.scope_for("episodic", ["s", "u"]) == "u"
    assert far.scope_for("semantic", ["s", "u"]) == "s"
    with pytest.raises(InputError, match="layer index"):
        LayerPolicy(episodic=True)


def test_scope_lists_are_checked() -> None:
    assert check_scopes("a") == ("a",)
    assert check_scopes(["a", "b"]) == ("a", "b")
    for bad, match in (([], "empty"), (["a", "a"], "twice"), (["a", ""], "non-empty"),
                       (b"a", "string"), (3, "string")):  # fmt: skip
        with pytest.raises(InputError, match=match):
            check_scopes(bad)
    assert check_split([3, 1], 2) == (0.75, 0.25)
    for bad, match in (([1], "one share"), ([0, 0], "all 0"), ([-1, 1], ">= 0"), ("1", "list")):
        with pytest.raises(InputError, match=match):
            check_split(bad, 2)
    q = RecallQuery(["s", "u"], "x", split=[1, 1])
    assert q.scopes == ("s", "u") and q.split == (0.5, 0.5)
    assert RecallQuery(["u"], "x").scope == "u"


@given(
    budget=st.integers(0, 10_000),
    shares=st.lists(st.floats(0.0, 10.0), min_size=1, max_size=5).filter(lambda s: sum(s) > 0),
)
def test_split_budgets_add_up(budget: int, shares: list[float]) -> None:
    norm = check_split(shares, len(shares))
    assert norm is not None
    out = split_budgets(budget, norm)
    assert sum(out) == budget and all(b >= 0 for b in out)
    assert all(abs(b - budget * s) < 1 for b, s in zip(out, norm, strict=True))


def test_chained_ids_read_the_parts_in_place() -> None:
    from memlab.memory.scopes import ChainedIds

    ids = ChainedIds([["a", "b", "dead"], [], ["c"]], [2, 0, 1])  # a part's list may run long
    assert len(ids) == 3 and list(ids) == ["a", "b", "c"]
    assert [ids[i] for i in range(3)] == ["a", "b", "c"] and ids[-1] == "c"
    assert ids[1:] == ["b", "c"] and dict(enumerate(ids)) == {0: "a", 1: "b", 2: "c"}
    with pytest.raises(IndexError):
        ids[3]
    assert ids[np.int64(2)] == "c"


def test_layered_keys_name_each_rows_scope_and_id() -> None:
    from memlab.memory import HashEmbedder, InMemoryStore, MemoryLayer
    from memlab.memory.scopes import Layered

    store = InMemoryStore()
    layer = MemoryLayer(store, HashEmbedder(16))
    for scope, n in (("a:s", 3), ("a", 2), ("b", 4)):
        for i in range(n):
            layer.remember(scope, f"{scope} record {i}", id=f"{scope.replace(':', '')}-{i}")
    parts = [store.candidates(s, include_archived=False) for s in ("a:s", "a")]
    cands = Layered.of(("a:s", "a"), parts)
    rows = list(range(len(cands)))[::-1]
    assert cands.keys(rows) == [(cands.scope_of(r), cands.ids[r]) for r in rows]
    assert {k for k in cands.keys(rows)} == {("a:s", f"as-{i}") for i in range(3)} | {
        ("a", f"a-{i}") for i in range(2)
    }
    one = Layered.of(("b",), [store.candidates("b", include_archived=False)])
    assert one.keys([3, 0]) == [("b", one.ids[3]), ("b", one.ids[0])]
    assert cands.keys([]) == []


def test_huge_split_shares_keep_their_proportions() -> None:
    # Their sum overflowed to inf, so every share was 0 and a layered recall
    # returned nothing.
    assert check_split([1e308, 1e308], 2) == (0.5, 0.5)
    assert check_split([1.5e308, 5e307, 0], 3) == pytest.approx((0.75, 0.25, 0.0))
