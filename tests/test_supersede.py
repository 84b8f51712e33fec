"""memlab.memory.supersede through the layer: a consolidator's decisions applied
atomically at write time, recall modes, as_of, packing, explain, forget/reinstate,
and summaries that fold only what is in force. Runs on every store."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.errors import InputError
from memlab.memory import (
    ConsolidatorError,
    HashEmbedder,
    InMemoryStore,
    MemoryInput,
    MemoryLayer,
    MemoryRecord,
    RecallQuery,
    RuleConsolidator,
    ScopeReader,
    SupersedePolicy,
    Supersession,
)
from memlab.memory.consolidate import EXPLICIT
from memlab.memory.stores.base import MemoryStore

T0 = 1_000_000.0


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        self.t += 60.0
        return self.t


class Scripted:
    """Supersedes what ``plan(new, reader)`` names (ids of records in force)."""

    name = "scripted"

    def __init__(self, plan: Callable[[MemoryRecord, ScopeReader], list[str]]) -> None:
        self.plan = plan
        self.calls = 0

    def decide(self, new: MemoryRecord, reader: ScopeReader) -> list[Supersession]:
        self.calls += 1
        return [
            Supersession(old, new.id, EXPLICIT, 0.9, "scripted") for old in self.plan(new, reader)
        ]


def by_content(mapping: dict[str, str]) -> Scripted:
    """A new record whose content is a key supersedes the record whose content is
    the value (found among the records in force)."""

    def plan(new: MemoryRecord, reader: ScopeReader) -> list[str]:
        target = mapping.get(new.content)
        if target is None:
            return []
        c = reader.candidates()
        ids = [i for i, m in zip(c.ids, c.mask, strict=True) if m]
        return [r.id for r in reader.get_many(ids) if r.content == target]

    return Scripted(plan)


def make_layer(store: MemoryStore, consolidator: object = None, **kw: object) -> MemoryLayer:
    return MemoryLayer(store, HashEmbedder(64), clock=Clock(), consolidator=consolidator, **kw)  # type: ignore[arg-type]


def recalled(layer: MemoryLayer, text: str, **kw: object) -> list[str]:
    return [h.record.content for h in layer.recall(RecallQuery("alice", text, **kw), touch=False)]  # type: ignore[arg-type]


OLD = "the standup meeting is at 9:00 every morning"
NEW = "actually the standup meeting moved to 9:30 every morning"


def test_a_correction_retires_the_old_record_and_keeps_it_on_disk(store: MemoryStore) -> None:
    layer = make_layer(store, RuleConsolidator())
    old = layer.remember("alice", OLD)
    new = layer.remember("alice", NEW, kind="semantic")
    kept = store.get("alice", old.id)
    assert kept is not None and kept.superseded_by == new.id and kept.invalid_at == new.created_at
    assert kept.content == OLD  # never deleted, never rewritten
    assert recalled(layer, "when is the standup meeting") == [NEW]
    # include: ranked as if nothing happened, but never packed with its superseder
    assert recalled(layer, "when is the standup meeting", superseded="include") == [NEW]
    only_old = recalled(layer, "standup meeting", superseded="include", kinds=["episodic"])
    assert only_old == [OLD]
    assert recalled(layer, "standup meeting", kinds=["episodic"]) == []
    down = layer.recall(
        RecallQuery("alice", "when is the standup meeting", superseded="downweight"), touch=False
    )
    assert down.hits[0].record.content == NEW
    # as_of: before the correction the old value was in force, the new one unknown
    assert recalled(layer, "when is the standup meeting", as_of=new.created_at - 1) == [OLD]
    assert recalled(layer, "when is the standup meeting", as_of=new.created_at) == [NEW]
    assert recalled(layer, "when is the standup meeting", as_of=old.created_at - 1) == []
    text = layer.explain(
        RecallQuery("alice", "standup meeting", superseded="include", kinds=["episodic"])
    )
    assert f"superseded by {new.id}" in text and "superseded records: include" in text


def test_untrusted_records_never_supersede_trusted_ones(store: MemoryStore) -> None:
    eager = Scripted(
        lambda new, reader: [r.id for r in reader.get_many(list(reader.candidates().ids))]
    )
    layer = make_layer(store, eager)
    old = layer.remember("alice", OLD)
    for source in ("tool", "web"):
        layer.remember("alice", NEW, source=source)
    assert eager.calls == 1  # the consolidator is not even asked about untrusted records
    got = store.get("alice", old.id)
    assert got is not None and got.superseded == ()
    # and the default rules never let a tool output retire what the user said
    rules = make_layer(InMemoryStore(), RuleConsolidator())
    first = rules.remember("alice", "invoices go to billing@acme.example")
    rules.remember("alice", "invoices now go to ap@acme.example", source="tool")
    assert rules.store.get("alice", first.id).superseded == ()  # type: ignore[union-attr]


def test_a_failing_or_broken_consolidator_writes_nothing(store: MemoryStore) -> None:
    def boom(new: MemoryRecord, reader: ScopeReader) -> list[str]:
        raise ConsolidatorError("model down")

    layer = make_layer(store, Scripted(boom))
    with pytest.raises(ConsolidatorError, match="model down"):
        layer.remember("alice", OLD)
    assert store.count("alice") == 0
    ok = make_layer(store).remember("alice", OLD)
    for plan, match in [
        (lambda n, r: ["no-such-id"], "not an active record"),
        (lambda n, r: [ok.id, ok.id], "at most once"),
    ]:
        layer = make_layer(store, Scripted(plan))
        with pytest.raises(ConsolidatorError, match=match):
            layer.remember_many([MemoryInput("alice", NEW), MemoryInput("alice", "more")])
        assert store.count("alice") == 1 and store.get("alice", ok.id).superseded == ()  # type: ignore[union-attr]
    with pytest.raises(InputError):  # bad input is refused before the consolidator runs
        make_layer(store, Scripted(boom)).remember_many(
            [MemoryInput("alice", NEW), MemoryInput("alice", "")]
        )
    assert store.count("alice") == 1


def test_a_later_item_of_a_batch_supersedes_an_earlier_one(store: MemoryStore) -> None:
    layer = make_layer(store, by_content({NEW: OLD}))
    old, new = layer.remember_many([MemoryInput("alice", OLD), MemoryInput("alice", NEW)])
    got = store.get("alice", old.id)
    assert got is not None and got.superseded_by == new.id
    assert recalled(layer, "standup meeting") == [NEW]


def test_a_chain_keeps_only_the_last_value_and_forget_lifts(store: MemoryStore) -> None:
    a, b, c = "office is in Lisbon", "office moved to Porto", "office moved to Faro"
    layer = make_layer(store, by_content({b: a, c: b}))
    ra, rb, rc = (layer.remember("alice", t) for t in (a, b, c))
    assert recalled(layer, "where is the office") == [c]
    assert recalled(layer, "where is the office", as_of=rb.created_at) == [b]
    assert layer.forget("alice", rc.id) == 1  # the correction was wrong: b is back
    assert recalled(layer, "where is the office") == [b]
    assert layer.reinstate("alice", ra.id).superseded == ()
    assert set(recalled(layer, "where is the office")) == {a, b}


def test_forget_reads_only_what_the_forgotten_records_superseded() -> None:
    from memlab.memory import InMemoryStore

    class Counting(InMemoryStore):
        listed = 0
        lifted = 0

        def list(self, *a, **kw):  # type: ignore[no-untyped-def]
            out = super().list(*a, **kw)
            self.listed += len(out)
            return out

        def superseded_by(self, scope, ids):  # type: ignore[no-untyped-def]
            out = super().superseded_by(scope, ids)
            self.lifted += len(out)
            return out

    store = Counting()
    a, b = "office is in Lisbon", "office moved to Porto"
    layer = make_layer(store, by_content({b: a}))
    ra = layer.remember("alice", a)
    for i in range(50):
        layer.remember("alice", f"unrelated note {i}")
    rb = layer.remember("alice", b)
    assert a not in recalled(layer, "where is the office")
    store.listed = 0
    assert layer.forget("alice", rb.id) == 1
    assert (store.listed, store.lifted) == (0, 1)  # ra alone, not the 51 others
    got = store.get("alice", ra.id)
    assert got is not None and got.superseded == ()
    assert a in recalled(layer, "where is the office")


def test_a_stale_claim_is_cut_from_a_multi_fact_record(store: MemoryStore) -> None:
    multi = "The standup is at 9:00. Invoices go to ap@acme.example."

    def plan(new: MemoryRecord, reader: ScopeReader) -> list[str]:
        return []

    class Partial(Scripted):
        def decide(self, new: MemoryRecord, reader: ScopeReader) -> list[Supersession]:
            if "9:30" not in new.content:
                return []
            (old,) = reader.get_many([i for i in reader.candidates().ids if i != new.id])
            return [Supersession(old.id, new.id, EXPLICIT, 0.9, partial=True, span=(0, 23))]

    layer = make_layer(store, Partial(plan))
    old = layer.remember("alice", multi)
    layer.remember("alice", "standup moved to 9:30")
    hits = layer.recall(RecallQuery("alice", "invoices ap acme"), touch=False)
    mine = [h for h in hits if h.record.id == old.id]
    assert mine and mine[0].text == "Invoices go to ap@acme.example."
    assert "9:00" not in mine[0].text and mine[0].record.content == multi
    everything = layer.recall(
        RecallQuery("alice", "invoices ap acme", superseded="include"), touch=False
    )
    assert [h.text for h in everything if h.record.id == old.id] == [multi]
    # explain shows what the recall gave: the whole content put the stale 9:00 in the
    # row of a chosen hit, and the claim line under it does not repeat the value
    shown = layer.explain(hits, width=200)
    assert "Invoices go to ap@acme.example." in shown and "9:00" not in shown
    assert "claim 0..23 superseded" in shown
    assert "9:00" in layer.explain(everything, width=200)


def test_a_record_with_every_claim_superseded_spends_no_budget(store: MemoryStore) -> None:
    multi = "The standup is at 9:00. Invoices go to ap@acme.example."
    spans = {"standup moved to 9:30": (0, 23), "invoices go to billing@acme": (24, 55)}

    class Claims(Scripted):
        def decide(self, new: MemoryRecord, reader: ScopeReader) -> list[Supersession]:
            span = spans.get(new.content)
            if span is None:
                return []
            (old,) = [
                r for r in reader.get_many(list(reader.candidates().ids)) if r.content == multi
            ]
            return [Supersession(old.id, new.id, EXPLICIT, 0.9, partial=True, span=span)]

    layer = make_layer(store, Claims(lambda new, reader: []))
    old = layer.remember("alice", multi, salience=1.0, created_at=T0)
    layer.remember("alice", "standup moved to 9:30", salience=0.0, created_at=T0 + 1)
    layer.remember("alice", "invoices go to billing@acme", salience=0.0, created_at=T0 + 2)
    kept = store.get("alice", old.id)
    assert kept is not None and kept.invalid_at is None and kept.text_at() == ""
    budget = old.tokens  # the multi-fact record alone, or both corrections
    for mode in ("exclude", "downweight"):
        got = recalled(layer, "standup invoices", token_budget=budget, superseded=mode)
        # before, the record with nothing in force was packed first, then dropped
        # from the hits: the recall came back empty
        assert sorted(got) == ["invoices go to billing@acme", "standup moved to 9:30"]
    assert recalled(layer, "standup invoices", token_budget=budget, superseded="include") == [multi]
    # as of a time when one claim was still in force, the record gives that claim
    then = layer.recall(
        RecallQuery("alice", "standup invoices", token_budget=budget, as_of=T0 + 1.5),
        touch=False,
    )
    assert [h.text for h in then if h.record.id == old.id] == ["Invoices go to ap@acme.example."]


def test_packing_never_puts_a_record_next_to_its_superseder(store: MemoryStore) -> None:
    layer = make_layer(
        store, by_content({NEW: OLD}), supersede=SupersedePolicy(recall="downweight", factor=1.0)
    )
    layer.remember("alice", OLD)
    layer.remember("alice", NEW)
    assert recalled(layer, "standup meeting") == [NEW]  # same score, the newer one wins
    assert recalled(layer, "standup meeting", superseded="include") == [NEW]
    for mode in ("exclude", "downweight", "include"):
        layer.supersede = SupersedePolicy(recall=mode, guard=False)
        assert recalled(layer, "standup meeting 9:00 every morning", token_budget=400) == [NEW]


def test_the_policy_and_queries_are_checked() -> None:
    with pytest.raises(InputError, match="supersede.recall"):
        SupersedePolicy(recall="hide")
    with pytest.raises(InputError, match="factor"):
        SupersedePolicy(factor=2.0)
    with pytest.raises(InputError, match="superseded must be one of"):
        RecallQuery("alice", "x", superseded="drop")
    with pytest.raises(InputError, match="as_of"):
        RecallQuery("alice", "x", as_of=float("nan"))


def test_summaries_fold_only_what_is_in_force() -> None:
    from memlab.memory import ExtractiveSummarizer, SummarizePolicy

    store = InMemoryStore()
    layer = make_layer(
        store,
        by_content({NEW: OLD}),
        summarize=SummarizePolicy(trigger_tokens=1, keep_recent=0, min_records=2),
        summarizer=ExtractiveSummarizer(),
    )
    layer.remember("alice", OLD)
    layer.remember("alice", NEW)
    layer.remember("alice", "the standup meeting is in room 4")
    notes = layer.maybe_summarize("alice", now=T0 + 10 * 86400)
    assert notes, "nothing was folded"
    folded = " ".join(n.content for n in notes)
    assert "9:30" in folded and "9:00" not in folded


def test_as_of_before_a_fold_gives_the_episodes_not_the_note(store: MemoryStore) -> None:
    from memlab.memory import ExtractiveSummarizer, SummarizePolicy

    layer = make_layer(
        store,
        summarize=SummarizePolicy(trigger_tokens=1, keep_recent=0, min_records=2),
        summarizer=ExtractiveSummarizer(),
    )
    layer.remember("alice", "Our office is in Oslo.", created_at=T0)
    layer.remember("alice", "We deploy on GKE.", created_at=T0 + 60)
    (note,) = layer.maybe_summarize("alice", now=T0 + 86400)
    assert note.created_at == T0 + 60  # dated by its newest episode, written a day later

    def at(t: float, **kw: object) -> list[str]:
        res = layer.recall(RecallQuery("alice", "office deploy", as_of=t, **kw), touch=False)  # type: ignore[arg-type]
        return sorted(h.record.kind.value for h in res)

    # before, the note (not written yet) came back beside the two episodes it repeats
    assert at(T0 + 3600) == ["episodic", "episodic"]
    assert at(T0 + 3600, kinds=["semantic"]) == []
    assert at(T0 + 86400) == at(T0 + 2 * 86400) == ["semantic"]
    assert at(T0 + 86400, kinds=["semantic"]) == ["semantic"]


# -- property: default recall never returns a superseded record -----------------------
WORDS = ["standup", "office", "invoices", "deploy", "lisbon", "porto", "9:00", "9:30", "vendor"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
        min_size=1,
        max_size=12,
    ),
    picks=st.lists(st.lists(st.integers(0, 11), max_size=3), min_size=12, max_size=12),
    batch=st.integers(1, 4),
    query=st.sampled_from(WORDS),
    budget=st.integers(5, 200),
    max_hits=st.none() | st.integers(1, 5),
)
def test_default_recall_never_returns_a_superseded_record(
    texts: list[str],
    picks: list[list[int]],
    batch: int,
    query: str,
    budget: int,
    max_hits: int | None,
) -> None:
    """Whatever a consolidator supersedes (here: arbitrary earlier records in force,
    in batches), a default recall never returns a wholly superseded record, and
    every hit's text is the record minus its stale claims."""
    order: list[str] = []

    def plan(new: MemoryRecord, reader: ScopeReader) -> list[str]:
        c = reader.candidates()
        alive = {i for i, m in zip(c.ids, c.mask, strict=True) if m and i != new.id}
        wanted = {order[p] for p in picks[len(order)] if p < len(order)} & alive
        order.append(new.id)
        return sorted(wanted)

    store = InMemoryStore()
    layer = make_layer(store, Scripted(plan))
    for i in range(0, len(texts), batch):
        layer.remember_many([MemoryInput("alice", t) for t in texts[i : i + batch]])
    result = layer.recall(RecallQuery("alice", query, token_budget=budget, max_hits=max_hits))
    for h in result.hits:
        stored = store.get("alice", h.record.id)
        assert stored is not None and stored.invalid_at is None
    superseded = {r.id for r in store.list("alice") if r.invalid_at is not None}
    assert not superseded & {h.record.id for h in result.hits}


def test_forget_checks_its_ids_before_anything_changes() -> None:
    store = InMemoryStore()
    layer = make_layer(store, by_content({NEW: OLD}))
    layer.remember("alice", OLD)
    layer.remember("alice", NEW)
    with pytest.raises(InputError):
        layer.forget("alice", 42)  # type: ignore[arg-type]
    assert store.count("alice") == 2
    assert recalled(layer, "standup meeting") == [NEW]
