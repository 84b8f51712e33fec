"""RecallQuery and Hit (memlab/memory/query.py): validation that names the field,
layered scopes and shares, and a hit's text and score components."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memlab.errors import InputError
from memlab.memory import MemoryKind
from memlab.memory.query import Hit, RecallQuery
from tests.conftest import make_record


def test_recall_query_validation() -> None:
    q = RecallQuery("alice", "x", kinds=["episodic"])
    assert q.kinds == (MemoryKind.EPISODIC,)
    with pytest.raises(InputError):
        RecallQuery("alice", "x", token_budget=-5)
    with pytest.raises(InputError):
        RecallQuery("alice", "x", max_hits=0)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("token_budget", True, "token_budget"),
        ("token_budget", 2.0, "token_budget"),
        ("min_score", math.nan, "min_score"),
        ("min_score_ratio", 1.5, "min_score_ratio"),
        ("include_untrusted", 1, "include_untrusted"),
        ("now", "soon", "now"),
        ("as_of", math.inf, "as_of"),
        ("as_of", 1e12, "years 1..9999"),  # finite, but no datetime can show it
        ("now", -1e12, "years 1..9999"),
        ("superseded", "hide", "superseded"),
        ("kinds", "episodic", "kinds"),
        ("kinds", ["episodic", "dream"], "dream"),
        ("text", b"bytes", "query text"),
        ("text", "x\udc00", "query text"),
    ],
)
def test_a_bad_field_is_refused_by_name(field: str, value: object, named: str) -> None:
    args: dict[str, object] = {"scope": "alice", "text": "x", field: value}
    with pytest.raises(InputError, match=named):
        RecallQuery(**args)  # type: ignore[arg-type]


def test_layered_scopes_keep_their_order_and_a_single_one_is_a_string() -> None:
    assert RecallQuery(["alice"], "x").scope == "alice"
    q = RecallQuery(["alice", "team", "org"], "x", split=[2, 1, 1])
    assert q.scope == ("alice", "team", "org") and q.scopes == q.scope
    assert q.split == (0.5, 0.25, 0.25)
    assert RecallQuery("alice", "x").scopes == ("alice",)
    with pytest.raises(InputError):
        RecallQuery(["alice", "team"], "x", split=[1.0])  # one share per scope
    with pytest.raises(InputError):
        RecallQuery([], "x")


def test_numpy_numbers_are_numbers() -> None:
    # a sweep's budgets from np.arange: refused as "token_budget must be a positive
    # integer, got np.int64(800)", and np.float32 shares as "split values must be
    # numbers >= 0"
    q = RecallQuery(["alice", "team"], "x", token_budget=np.int64(800), max_hits=np.int64(3),
                    split=[np.float32(3), np.int64(1)])  # fmt: skip
    assert q.token_budget == 800 and type(q.token_budget) is int
    assert q.max_hits == 3 and type(q.max_hits) is int
    assert q.split == (0.75, 0.25)
    for bad in (np.bool_(True), np.int64(0)):
        with pytest.raises(InputError, match="token_budget must be a positive integer"):
            RecallQuery("alice", "x", token_budget=bad)
    with pytest.raises(InputError, match="split values"):
        RecallQuery(["alice", "team"], "x", split=[np.float32("nan"), 1])


def test_superseded_modes() -> None:
    for mode in ("exclude", "downweight", "include", None):
        assert RecallQuery("a", "x", superseded=mode).superseded == mode


def test_a_hit_shows_the_whole_content_unless_given_its_text() -> None:
    r = make_record(content="standup is at 9:30 now")
    comps = {"similarity": 0.8, "recency": 0.5}
    hit = Hit(r, 0.7, 0, comps, {"similarity": 0.56, "recency": 0.14})
    assert hit.text == r.content
    assert (hit.similarity, hit.recency) == (0.8, 0.5)
    assert hit.lexical == hit.time == hit.salience == hit.usage == 0.0  # not computed
    assert Hit(r, 0.7, 0, comps, {}, text="standup is at 9:30").text == "standup is at 9:30"
