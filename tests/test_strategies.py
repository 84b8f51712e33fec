"""Each strategy on the hand-written transcript with known answers."""

from __future__ import annotations

import pytest

from memlab.lab.strategies import (
    MemoryStrategy,
    RanksHaystack,
    SlidingWindow,
    Strategy,
    StuffAll,
    salience_function,
)
from memlab.lab.transcripts import Transcript, Turn, load
from memlab.memory import ExtractiveSummarizer, HashEmbedder, InMemoryStore, SummarizePolicy
from tests.conftest import FIXTURES


@pytest.fixture
def t() -> Transcript:
    return load(FIXTURES / "handmade.json")


def feed(strategy: Strategy, t: Transcript, until: str) -> Turn:
    for turn in t.turns:
        if turn.id == until:
            return turn
        strategy.observe(turn)
        strategy.maintain(turn)
    raise AssertionError(until)


def ids(ctx) -> list[str]:  # type: ignore[no-untyped-def]
    return [p for i in ctx.items for p in i.provenance]


def test_stuff_all_keeps_every_earlier_turn_of_the_scope(t: Transcript) -> None:
    s = StuffAll()
    probe = feed(s, t, "t9")
    assert ids(s.context(probe, 10)) == ["t0", "t1", "t2", "t4", "t5", "t6", "t7", "t8"]
    small = StuffAll(context_limit=25)
    feed(small, t, "t9")
    assert ids(small.context(probe, 800)) == ["t7", "t8"]  # the oldest are dropped


def test_sliding_window(t: Transcript) -> None:
    s = SlidingWindow(window_turns=3)
    probe = feed(s, t, "t9")
    assert ids(s.context(probe, 800)) == ["t6", "t7", "t8"]
    by_tokens = SlidingWindow(window_turns=None, window_tokens=18)
    feed(by_tokens, t, "t9")
    assert ids(by_tokens.context(probe, 800)) == ["t7", "t8"]
    stats = s.stats()
    items = [i for items in s.turns.values() for i in items]
    assert stats.records == len(items) == 9
    assert stats.tokens == sum(i.tokens for i in items) > 0
    assert stats.bytes == sum(len(i.text.encode()) for i in items)


def memory(name: str = "memory", **kw) -> MemoryStrategy:  # type: ignore[no-untyped-def]
    return MemoryStrategy(name, InMemoryStore(), HashEmbedder(), **kw)


def test_memory_recalls_the_correction_first_and_stays_in_scope(t: Transcript) -> None:
    s = memory()
    probe = feed(s, t, "t9")
    ctx = s.context(probe, 40)
    assert ctx.tokens <= 40
    assert ids(ctx)[0] == "t7"  # "everything now runs on Nomad"
    assert all(i.scope == "alice:support" for i in ctx.items)
    full = s.context(probe, 800)
    assert "t3" not in ids(full)  # bob's turn never appears
    s.observe(probe)
    bob_probe = t.turns[t.index["t10"]]
    bob = s.context(bob_probe, 800)
    assert ids(bob) == ["t3"]


def test_memory_uses_transcript_time_not_the_wall_clock(t: Transcript) -> None:
    s = memory()
    feed(s, t, "t9")
    rec = s.layer.store.list("alice:support")[0]
    assert rec.created_at == t.turns[0].time
    assert s.now == t.turns[t.index["t8"]].time


def test_untrusted_tool_output_is_capped(t: Transcript) -> None:
    s = memory(salience=salience_function("fixed", 1.0))
    feed(s, t, "t9")
    tool = [r for r in s.layer.store.list("alice:support") if r.source.value == "tool"]
    assert len(tool) == 1 and tool[0].salience == 0.3
    others = [r for r in s.layer.store.list("alice:support") if r.source.value != "tool"]
    assert all(r.salience == 1.0 for r in others)


def test_salience_modes(t: Transcript) -> None:
    oracle = salience_function("oracle")
    heuristic = salience_function("heuristic")
    assert oracle(t.turns[2]) == 1.0  # the hint
    assert oracle(t.turns[1]) == heuristic(t.turns[1])  # no hint: falls back
    assert salience_function("fixed", 0.4)(t.turns[0]) == 0.4
    with pytest.raises(ValueError):
        salience_function("psychic")


def test_summarization_inside_the_strategy(t: Transcript) -> None:
    s = memory(
        summarizer=ExtractiveSummarizer(),
        summarize=SummarizePolicy(
            trigger_tokens=20, chunk_tokens=40, keep_recent=2, max_gap_hours=48
        ),
    )
    probe = feed(s, t, "t9")
    stats = s.stats()
    assert stats.archived > 0
    store = s.layer.store
    # read off the columns, equal to what the store counts record by record
    assert stats.archived == store.count(None, include_archived=True) - store.count(None)
    assert stats.records == store.count(None)
    assert stats.tokens == sum(r.tokens for sc in store.scopes() for r in store.list(sc))
    notes = s.layer.store.list("alice:support", kinds=["semantic"])
    assert notes and "t0" in notes[0].provenance
    ctx = s.context(probe, 800)
    assert "GKE" in " ".join(i.text for i in ctx.items)


def test_skipping_agent_and_tool_turns(t: Transcript) -> None:
    s = memory(remember_agent=False, remember_tools=False)
    feed(s, t, "t9")
    roles = {r.meta["role"] for r in s.layer.store.list("alice:support")}
    assert roles == {"user"}


# -- full rankings (the haystack_* metrics) ----------------------------------------------
def test_baselines_rank_every_kept_turn_newest_first(t: Transcript) -> None:
    for s in (StuffAll(context_limit=25), SlidingWindow(window_turns=3)):
        assert isinstance(s, RanksHaystack)
        probe = feed(s, t, "t9")
        full = [p for prov in s.ranking(probe) for p in prov]
        assert full == ["t8", "t7", "t6", "t5", "t4", "t2", "t1", "t0"]  # not cut at all
        assert full[: len(ids(s.context(probe, 800)))] == ids(s.context(probe, 800))[::-1]


def test_memory_ranking_is_the_layers_full_ranking_with_provenance(t: Transcript) -> None:
    s = memory(
        summarizer=ExtractiveSummarizer(),
        summarize=SummarizePolicy(
            trigger_tokens=20, chunk_tokens=40, keep_recent=2, max_gap_hours=48
        ),
    )
    assert isinstance(s, RanksHaystack)
    probe = feed(s, t, "t9")
    before = {r.id: r.access_count for r in s.layer.store.list("alice:support")}
    full = s.ranking(probe)
    # Every active record (a summary carries every turn it folded), none touched.
    assert len(full) == s.layer.store.count("alice:support")
    assert any(len(p) > 1 for p in full) and "t0" in {x for p in full for x in p}
    assert {r.id: r.access_count for r in s.layer.store.list("alice:support")} == before
    # The context is packed from that ranking (skip-and-continue: in its order).
    ctx = s.context(probe, 30)
    packed = [i.provenance for i in ctx.items]
    assert packed and packed == [p for p in full if p in packed]
    assert len(packed) < len(full)
    # Records made behind the strategy's back are still ranked with their provenance.
    s.layer.remember("alice:support", "We deploy on GKE, said the ops log.", provenance=["x1"])
    assert ("x1",) in s.ranking(probe)


def test_memory_keeps_the_speaker_of_a_group_chat_turn() -> None:
    s = memory()
    said = Turn("d1", "2024-01-01T00:00:00Z", 1.7e9, "chat", "user", "user",
                "Caroline: My office is in Porto.", meta={"speaker": "Caroline"})  # fmt: skip
    plain = Turn("d2", "2024-01-01T00:01:00Z", 1.7e9 + 60, "chat", "user", "user",
                 "Our CDN is Fastly.")  # fmt: skip
    s.observe(said)
    s.observe(plain)
    by_id = {r.provenance[0]: r for r in s.layer.store.list("chat")}
    assert by_id["d1"].meta["speaker"] == "Caroline"
    assert "speaker" not in by_id["d2"].meta
