"""memlab.memory.recall_guard and how recall applies it: the guard checks the best
packed hits against each other, and what it leaves out never reaches the hits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest

from memlab.memory import (
    HashEmbedder,
    InMemoryStore,
    MemoryLayer,
    MemoryRecord,
    NeighborPolicy,
    RecallQuery,
    ScopeReader,
    SupersedePolicy,
    Supersession,
)
from memlab.memory.consolidate import VALUE_DIFF
from memlab.memory.recall import GUARD_PASSES
from memlab.memory.recall_guard import RecallGuard

T0 = 1_000_000.0


class FirstWord:
    """Decides nothing at write time; at recall a record supersedes every older one
    whose content starts with the same word (``partial`` for words in ``partial``)."""

    name = "first-word"

    def __init__(self, partial: frozenset[str] = frozenset()) -> None:
        self.partial = partial
        self.judged = 0

    def decide(self, new: MemoryRecord, reader: ScopeReader) -> list[Supersession]:
        return []

    def judge(self, new: MemoryRecord, olds: Sequence[MemoryRecord]) -> list[Supersession]:
        self.judged += 1
        word = new.content.split()[0]
        return [
            Supersession(o.id, new.id, VALUE_DIFF, 0.9, "same word", partial=word in self.partial)
            for o in olds
            if o.scope == new.scope and o.content.split()[0] == word
        ]


def record(rid: str, text: str, t: float, scope: str = "alice") -> MemoryRecord:
    emb = HashEmbedder(64)
    return MemoryRecord(rid, text, emb.embed([text])[0], "semantic", scope, 0.5, 8, t, t)


def test_conflicts_newest_first_and_a_retired_record_retires_nothing() -> None:
    guard = RecallGuard(FirstWord())
    recs = [record(f"r{i}", f"office v{i}", T0 + i) for i in range(3)]
    recs.append(record("other", "lunch at noon", T0 + 9))
    out = guard.conflicts(recs[::-1])  # the order given does not matter
    # r2 (the newest) leaves r1 and r0 out; r1, itself left out, decides nothing
    assert sorted((o, n) for o, n, _ in out) == [("r0", "r2"), ("r1", "r2")]
    assert all(why.startswith(f"{VALUE_DIFF}: ") for _, _, why in out)


def test_conflicts_keep_a_record_that_is_only_partly_superseded() -> None:
    guard = RecallGuard(FirstWord(partial=frozenset({"office"})))
    recs = [record("a", "office in Oslo", T0), record("b", "office in Rome", T0 + 1)]
    assert guard.conflicts(recs) == []


def chain_layer(versions: int, mode: str) -> tuple[MemoryLayer, FirstWord]:
    """A scope holding ``versions`` records of one fact (the newest last) and ten
    unrelated ones, written without detection, so only the guard can find that
    the fact's old values are out of force."""
    store = InMemoryStore()
    recs = [record(f"v{i:02d}", f"office value {i}", T0 + 60.0 * i) for i in range(versions)]
    recs += [record(f"u{i}", f"lunch note {i}", T0 + 60.0 * i + 1) for i in range(10)]
    store.put_many(recs)
    judge = FirstWord()
    layer = MemoryLayer(
        store,
        HashEmbedder(64),
        clock=lambda: T0 + 60.0 * versions,
        consolidator=judge,  # type: ignore[arg-type]
        supersede=SupersedePolicy(recall=mode),  # type: ignore[arg-type]
    )
    return layer, judge


def test_what_the_last_check_leaves_out_is_not_among_the_hits() -> None:
    # each check sees 6 hits and leaves out the 5 older values among them, so 20
    # versions need more checks than a recall makes: the packing after the last
    # check must still apply what it found
    layer, judge = chain_layer(20, "exclude")
    res = layer.recall(RecallQuery("alice", "office value", token_budget=400), touch=False)
    assert judge.judged > 0
    left_out = {old for old, _, _ in res.guarded}
    assert len(left_out) == len(res.guarded) == 5 * GUARD_PASSES
    ids = [h.record.id for h in res.hits]
    assert not left_out & set(ids)
    assert "v19" in ids  # the value in force
    assert all(np.isfinite(h.score) for h in res.hits)
    assert [h.rank for h in res.hits] == list(range(1, len(res.hits) + 1))


def test_a_down_weighted_record_is_weighed_down_once_and_hits_stay_in_score_order() -> None:
    layer, _ = chain_layer(20, "downweight")
    res = layer.recall(RecallQuery("alice", "office value", token_budget=400), touch=False)
    counts = Counter(old for old, _, _ in res.guarded)
    assert counts and max(counts.values()) == 1
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores, reverse=True)
    by_id = {h.record.id: h for h in res.hits}
    for old in counts:  # a down-weighted hit carries its weighed-down score
        if old in by_id:
            h = by_id[old]
            assert h.score == pytest.approx(0.25 * sum(h.contributions.values()))


def test_what_the_guard_leaves_out_is_not_packed_back_as_a_neighbour() -> None:
    layer = MemoryLayer(
        InMemoryStore(), HashEmbedder(), clock=lambda: T0 + 100, consolidator=FirstWord(),
        neighbors=NeighborPolicy(after=1),
    )  # fmt: skip
    layer.remember("alice", "lunch office question: where is the office now?", created_at=T0,
                   id="q", salience=0.9)  # fmt: skip
    layer.remember("alice", "office in Oslo", created_at=T0 + 1, id="old")  # q's next turn
    layer.remember("alice", "office in Rome", created_at=T0 + 2, id="new")
    res = layer.recall(RecallQuery("alice", "office", token_budget=200), touch=False)
    assert [old for old, _, _ in res.guarded] == ["old"]
    # before, "old" came back as q's neighbour, with score -inf, beside "new"
    assert [h.record.id for h in res.hits] == ["q", "new"]
    assert all(np.isfinite(h.score) for h in res.hits)


class AnyScopeFirstWord(FirstWord):
    """FirstWord without its own scope check: the guard alone picks what is compared."""

    def judge(self, new: MemoryRecord, olds: Sequence[MemoryRecord]) -> list[Supersession]:
        word = new.content.split()[0]
        return [
            Supersession(o.id, new.id, VALUE_DIFF, 0.9, "same word")
            for o in olds
            if o.content.split()[0] == word
        ]


def test_conflicts_reach_from_a_layer_to_the_broader_layers_only() -> None:
    guard = RecallGuard(AnyScopeFirstWord())
    user = record("u", "office in Oslo", T0, scope="alice")
    session = record("s", "office in Rome", T0 + 1, scope="alice:s1")
    later_user = record("u2", "office in Lima", T0 + 2, scope="alice")
    layers = ["alice:s1", "alice"]
    # the session's newer statement beats the user layer's older one ...
    assert [(o, n) for o, n, _ in guard.conflicts([user, session], None, layers)] == [("u", "s")]
    # ... a broader layer's newer record never leaves a narrower layer's out
    out = guard.conflicts([session, later_user], None, layers)
    assert out == []
    # without layers (or for a scope the recall did not name) only one scope's records
    assert guard.conflicts([user, session]) == []
    assert guard.conflicts([user, session], None, ["alice:s9", "alice"]) == []


def test_a_session_correction_beats_the_users_stale_fact_in_layered_recall() -> None:
    """Before, the guard compared only records of one scope: with scopes
    [alice:s1, alice], the session's "Azure now" and the user layer's older "AWS"
    both came back. The stored records are not changed."""
    from memlab.memory import MemoryKind, RuleConsolidator

    t = [T0]

    def clock() -> float:
        t[0] += 60.0
        return t[0]

    layer = MemoryLayer(InMemoryStore(), HashEmbedder(256), clock=clock,
                        consolidator=RuleConsolidator())  # fmt: skip
    old = layer.remember("alice", "We host everything on AWS.", kind=MemoryKind.SEMANTIC)
    new = layer.remember(["alice:s1", "alice"], "Actually we host everything on Azure now.")
    result = layer.recall(RecallQuery(["alice:s1", "alice"], "where do we host everything?"))
    assert [h.record.id for h in result.hits] == [new.id]
    assert [g[0] for g in result.guarded] == [old.id]
    assert layer.store.get("alice", old.id).invalid_at is None  # type: ignore[union-attr]
    # the user layer alone still holds what it held
    alone = layer.recall(RecallQuery("alice", "where do we host everything?"))
    assert [h.record.id for h in alone.hits] == [old.id]
