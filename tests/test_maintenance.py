"""The layer's maintenance (memlab.memory.maintenance): folding decided from the
scope's columns, with the same clusters the record-by-record rule makes, and no
listing of the scope at a turn where nothing is due."""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.errors import SummarizerError
from memlab.memory import (
    EvictionPolicy,
    ExtractiveSummarizer,
    HashEmbedder,
    InMemoryStore,
    MemoryLayer,
    RecallQuery,
    RuleConsolidator,
    SummarizePolicy,
)
from memlab.memory.maintenance import _sentence_keys, cluster_end, fold_starts
from memlab.memory.rank import HOUR
from memlab.memory.records import UNTRUSTED_SOURCES, MemoryKind, MemoryRecord
from tests.conftest import Clock


class Joiner:
    """A summarizer that keeps everything, so every folded cluster makes a note."""

    name = "join"

    def summarize(self, texts: Sequence[str]) -> str:
        return " / ".join(texts)


class CountingStore(InMemoryStore):
    """An InMemoryStore that counts how many records list() and get_many() return."""

    def __init__(self) -> None:
        super().__init__()
        self.listed = 0
        self.loaded = 0

    def list(self, scope: str, kinds: Iterable[Any] | None = None, include_archived: bool = False) -> builtins.list[MemoryRecord]:  # fmt: skip
        out = super().list(scope, kinds, include_archived)
        self.listed += len(out)
        return out

    def get_many(self, scope: str, ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        out = super().get_many(scope, ids)
        self.loaded += len(out)
        return out


def reference_clusters(
    episodes: list[MemoryRecord], policy: SummarizePolicy, force: bool
) -> list[list[str]]:
    """The folding rule written record by record (how the layer did it before it
    read columns): the clusters, as id lists, that a pass folds."""
    episodes = [r for r in episodes if r.source not in UNTRUSTED_SOURCES]
    total = sum(r.tokens for r in episodes)
    keep = 0 if force else policy.keep_recent
    foldable = episodes[: max(0, len(episodes) - keep)]
    out = []
    while (force or total > policy.trigger_tokens) and len(foldable) >= (
        1 if force else policy.min_records
    ):
        cluster = [foldable[0]]
        tokens = foldable[0].tokens
        for prev, r in itertools.pairwise(foldable):
            gap = r.created_at - prev.created_at > policy.max_gap_hours * HOUR
            if gap or tokens + r.tokens > policy.chunk_tokens:
                break
            cluster.append(r)
            tokens += r.tokens
        foldable = foldable[len(cluster) :]
        if len(cluster) < policy.min_records and not force:
            continue
        total -= sum(r.tokens for r in cluster)
        out.append([r.id for r in cluster])
    return out


episode = st.tuples(
    st.floats(0.0, 30.0),  # hours after the previous episode
    st.integers(1, 60),  # words
    st.sampled_from(["user", "user", "agent", "tool"]),
)


@settings(max_examples=80, deadline=None)
@given(
    eps=st.lists(episode, min_size=0, max_size=40),
    trigger=st.integers(1, 300),
    chunk=st.integers(1, 200),
    keep=st.integers(0, 6),
    gap=st.floats(0.5, 24.0),
    min_records=st.integers(1, 4),
    force=st.booleans(),
)
def test_folds_the_clusters_the_record_by_record_rule_folds(
    eps: list[tuple[float, int, str]],
    trigger: int,
    chunk: int,
    keep: int,
    gap: float,
    min_records: int,
    force: bool,
) -> None:
    policy = SummarizePolicy(trigger, chunk, keep, gap, min_records)
    clock = Clock(0.0)
    store = InMemoryStore()
    layer = MemoryLayer(store, HashEmbedder(16), clock=clock, summarizer=Joiner(), summarize=policy)
    t = 0.0
    for i, (dt, n, source) in enumerate(eps):
        t += dt * HOUR
        clock.t = t
        layer.remember("s", " ".join(f"w{i}x{j}" for j in range(n)), source=source)
    expected = reference_clusters(store.list("s", kinds=["episodic"]), policy, force)
    made = layer.maybe_summarize("s", t + HOUR, force=force)
    assert [note.meta["summary_of"] for note in made] == expected


@settings(max_examples=40, deadline=None)
@given(
    hours=st.lists(st.integers(0, 12), min_size=0, max_size=30),
    ids=st.randoms(use_true_random=False),
    force=st.booleans(),
)
def test_folds_in_time_then_id_order_whatever_order_the_episodes_were_written(
    hours: list[int], ids: Any, force: bool
) -> None:
    # records written out of time order (an import) and sharing times: the columns'
    # row order is the write order, the fold's is store.list()'s (time, then id)
    policy = SummarizePolicy(30, 40, 2, 6.0, 2)
    store = InMemoryStore()
    layer = MemoryLayer(store, HashEmbedder(16), summarizer=Joiner(), summarize=policy)
    names = [f"e{ids.randrange(10**6):06d}-{i}" for i in range(len(hours))]
    for i, h in enumerate(hours):
        layer.remember("s", f"w{i} x y z", id=names[i], created_at=h * HOUR)
    expected = reference_clusters(store.list("s", kinds=["episodic"]), policy, force)
    made = layer.maybe_summarize("s", 20 * HOUR, force=force)
    assert [note.meta["summary_of"] for note in made] == expected


def test_a_turn_with_nothing_due_lists_and_loads_nothing() -> None:
    clock = Clock(0.0)
    store = CountingStore()
    layer = MemoryLayer(
        store,
        HashEmbedder(16),
        clock=clock,
        summarizer=Joiner(),
        summarize=SummarizePolicy(trigger_tokens=100_000),
        eviction=EvictionPolicy(episodic_ttl=1000.0, max_records=500, cold_decay=0.5),
    )
    for i in range(200):
        clock.t = i * 60.0
        layer.remember("s", f"turn {i} about topic {i % 7}")
        layer.maintain("s")
    assert store.listed == 0 and store.loaded == 0


def test_isolated_episodes_are_skipped_without_loading_them() -> None:
    # every episode a day apart: over the trigger, but no cluster reaches two records
    clock = Clock(0.0)
    store = CountingStore()
    policy = SummarizePolicy(trigger_tokens=10, keep_recent=0, max_gap_hours=1.0)
    layer = MemoryLayer(store, HashEmbedder(16), clock=clock, summarizer=Joiner(), summarize=policy)
    for i in range(50):
        clock.t = i * 24 * HOUR
        layer.remember("s", f"a longer statement number {i} with several words in it")
    assert layer.maybe_summarize("s") == []
    assert store.listed == 0 and store.loaded == 0
    assert len(store.list("s", kinds=[MemoryKind.EPISODIC])) == 50


def test_fold_starts_and_cluster_end() -> None:
    policy = SummarizePolicy(chunk_tokens=10, max_gap_hours=1.0, min_records=3)
    h = HOUR
    created = np.array([0, 5 * h, 10 * h, 10.5 * h, 11 * h, 11.2 * h, 30 * h])
    tokens = np.array([1, 1, 4, 4, 4, 1, 1])
    # 2..5 is the only run of >= 3; 4 and 5 have too few left in it
    assert fold_starts(created, tokens, policy).tolist() == [2, 3]
    heavy = np.array([1, 1, 9, 4, 4, 1, 1])  # 9 + 4 > 10: a cluster of one
    assert fold_starts(created, heavy, policy).tolist() == [3]
    assert fold_starts(created[:4], tokens[:4], policy).tolist() == []  # cut at 4
    assert fold_starts(created[:0], tokens[:0], policy).tolist() == []
    assert cluster_end(created, tokens, 2, len(created), policy) == 4  # 4 + 4, then 12 > 10
    assert cluster_end(created, tokens, 4, len(created), policy) == 6  # the gap ends it


class Sentences:
    """A summarizer that keeps every text as one sentence."""

    name = "sentences"

    def summarize(self, texts: Sequence[str]) -> str:
        return " ".join(t.rstrip(".") + "." for t in texts)


def folding_layer(clock: Clock) -> MemoryLayer:
    policy = SummarizePolicy(trigger_tokens=1, chunk_tokens=1000, keep_recent=0, min_records=1)
    return MemoryLayer(InMemoryStore(), HashEmbedder(256), clock=clock, summarizer=Sentences(),
                       summarize=policy)  # fmt: skip


def fold_now(layer: MemoryLayer, clock: Clock, texts: list[tuple[str, str]]) -> MemoryRecord:
    (note,) = fold_all(layer, clock, texts)
    return note


def fold_all(layer: MemoryLayer, clock: Clock, texts: list[tuple[str, str]]) -> list[MemoryRecord]:
    """Remember ``texts`` and fold them: the new notes."""
    for source, text in texts:
        clock.t += 60
        layer.remember("alice", text, source=source, provenance=[f"t{clock.t:.0f}"])
    clock.t += 60
    return layer.maybe_summarize("alice", force=True)


def notes(layer: MemoryLayer) -> list[MemoryRecord]:
    return layer.store.list("alice", kinds=[MemoryKind.SEMANTIC])


def test_a_note_restated_by_newer_notes_is_retired_and_its_provenance_carried() -> None:
    clock = Clock()
    layer = folding_layer(clock)
    advice = "The assertion is missing the email attribute"
    first = fold_now(layer, clock, [("agent", advice), ("agent", "Turn it on under security")])
    second = fold_now(layer, clock, [("agent", "Turn it on under security"), ("agent", "Retry it")])
    assert {n.id for n in notes(layer)} == {first.id, second.id}  # one sentence is new
    third = fold_now(layer, clock, [("agent", advice), ("agent", "Attach the request ids")])
    # every sentence of the first note is stated by the third or the second: retired
    assert {n.id for n in notes(layer)} == {second.id, third.id}
    kept = layer.store.get("alice", third.id)
    assert kept is not None and kept.meta["restates"] == [first.id]
    assert set(first.provenance) <= set(kept.provenance)
    old = layer.store.get("alice", first.id)
    assert old is not None and old.archived_at is not None  # archived, never deleted


def test_an_agent_note_never_retires_or_absorbs_a_users_note() -> None:
    clock = Clock()
    layer = folding_layer(clock)
    agent = fold_now(layer, clock, [("agent", "We deploy on Fly.io")])
    # the user's words are kept though the agent's note states them: the user's
    # note restates the agent's, which is retired
    user = fold_now(layer, clock, [("user", "We deploy on Fly.io")])
    assert {n.id for n in notes(layer)} == {user.id}
    assert user.meta["restates"] == [agent.id]
    # an agent's note that states the user's note again and more retires nothing
    more = fold_now(layer, clock, [("agent", "We deploy on Fly.io"), ("agent", "Retry it")])
    assert {n.id for n in notes(layer)} == {user.id, more.id}


def test_a_note_every_sentence_of_which_is_kept_is_absorbed() -> None:
    clock = Clock()
    layer = folding_layer(clock)
    a = fold_now(layer, clock, [("user", "We deploy on Fly.io"), ("user", "Builds run on Tekton")])
    b = fold_now(layer, clock, [("agent", "Retry the upload"), ("agent", "Attach the ids")])
    episodes_before = {r.id for r in layer.store.list("alice", kinds=[MemoryKind.EPISODIC])}
    assert episodes_before == set()  # folded into a and b
    # every sentence is in a or b: no note is written; each sentence's note cites it
    made = fold_all(
        layer, clock, [("agent", "Builds run on Tekton"), ("agent", "Retry the upload")]
    )
    assert made == []
    held = {n.id: n for n in notes(layer)}
    assert set(held) == {a.id, b.id}
    folded = [r for r in layer.store.list("alice", kinds=[MemoryKind.EPISODIC],
                                           include_archived=True)
              if r.content in ("Builds run on Tekton", "Retry the upload")
              and r.created_at > b.created_at]  # fmt: skip
    assert len(folded) == 2 and all(r.archived_at is not None for r in folded)
    for note in held.values():
        assert note.meta["absorbs"] == [r.id for r in folded]
        assert {p for r in folded for p in r.provenance} <= set(note.provenance)
    # a user's note is absorbed only by user notes: b is the agent's
    fold_now(layer, clock, [("user", "Retry the upload")])
    assert len(notes(layer)) == 3


SAID = [
    f"Statement number {w} about the {t}" for w in ("one", "two", "three") for t in ("cdn", "ci")
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from(["user", "agent"]), st.sampled_from(SAID)),
                 min_size=1, max_size=4),
        min_size=1, max_size=8,
    )
)  # fmt: skip
def test_restated_and_absorbed_notes_lose_no_sentence_and_no_citation(
    folds: list[list[tuple[str, str]]],
) -> None:
    clock = Clock()
    layer = folding_layer(clock)
    said: set[str] = set()
    cited: set[str] = set()
    user_said: set[str] = set()
    for texts in folds:
        fold_all(layer, clock, texts)
        said |= {t.lower() for _, t in texts}
        user_said |= {t.lower() for s, t in texts if s == "user"}
        cited |= {f"t{clock.t - 60 * (len(texts) - i):.0f}" for i in range(len(texts))}
        kept = notes(layer)
        # every sentence folded so far is in a note kept, and every turn is cited
        assert said <= {k for n in kept for k in _sentence_keys(n.content)}
        assert cited <= {p for n in kept for p in n.provenance}
        # what a user said stays in a user's note
        users = {k for n in kept if n.source.value == "user" for k in _sentence_keys(n.content)}
        assert user_said <= users


class KeepAgent:
    """An extractive summarizer that keeps only what the agent said (the texts
    starting with "Agent")."""

    name = "keep-agent"

    def summarize(self, texts: Sequence[str]) -> str:
        return " ".join(t.rstrip(".") + "." for t in texts if t.startswith("Agent"))


def test_a_note_of_the_agents_words_only_is_the_agents() -> None:
    clock = Clock()
    policy = SummarizePolicy(trigger_tokens=1, chunk_tokens=1000, keep_recent=0, min_records=1)
    layer = MemoryLayer(InMemoryStore(), HashEmbedder(256), clock=clock, summarizer=KeepAgent(),
                        summarize=policy)  # fmt: skip
    (note,) = fold_all(layer, clock, [("user", "thanks a lot"), ("agent", "Agent advice one")])
    assert note.source.value == "agent"
    # a user who said the same words keeps the note the user's
    (both,) = fold_all(layer, clock, [("user", "Agent advice two"), ("agent", "Agent advice two")])
    assert both.source.value == "user"


def test_an_abstractive_note_keeps_the_clusters_source() -> None:
    clock = Clock()
    policy = SummarizePolicy(trigger_tokens=1, chunk_tokens=1000, keep_recent=0, min_records=1)

    class Paraphrase:
        name = "paraphrase"

        def summarize(self, texts: Sequence[str]) -> str:
            return "The customer and the agent talked about webhooks."

    layer = MemoryLayer(InMemoryStore(), HashEmbedder(256), clock=clock, summarizer=Paraphrase(),
                        summarize=policy)  # fmt: skip
    (note,) = fold_all(layer, clock, [("user", "webhooks fail"), ("agent", "Agent retries")])
    assert note.source.value == "user"


def decayed_then_folded(
    clock: Clock, first: list[tuple[str, float]], then: list[tuple[str, float]]
) -> tuple[MemoryLayer, list[MemoryRecord]]:
    """A layer that folds ``first`` (text, salience) at once, then lets ``then``
    decay for ten idle days (one maintain, nothing due to fold), then folds it."""
    day = 24 * HOUR
    layer = MemoryLayer(InMemoryStore(), HashEmbedder(256), clock=clock, summarizer=Joiner(),
                        summarize=SummarizePolicy(trigger_tokens=1, keep_recent=0, min_records=1),
                        eviction=EvictionPolicy(cold_decay=0.5, cold_after=24,
                                                salience_floor=0.8))  # fmt: skip
    for text, salience in first:
        clock.t += 60
        layer.remember("alice", text, salience=salience)
    layer.maintain("alice")
    layer.summarize_policy = SummarizePolicy(trigger_tokens=10_000)
    for text, salience in then:
        clock.t += 60
        layer.remember("alice", text, salience=salience)
    clock.t += 10 * day
    layer.maintain("alice")  # decay only
    layer.summarize_policy = SummarizePolicy(trigger_tokens=1, keep_recent=0, min_records=1)
    layer.eviction = EvictionPolicy(cold_decay=0.5, cold_after=24, salience_floor=0.8,
                                    max_records=1)  # fmt: skip
    layer.remember("alice", "filler about lunch", kind="semantic", salience=0.5)
    made = layer.maintain("alice").summaries
    return layer, made


def test_a_note_of_protected_decayed_episodes_stays_protected() -> None:
    # the note took its sources' decayed salience (0.0018) and no written salience,
    # so capacity dropped it in the same maintain: the vital rules left recall
    clock = Clock(0.0)
    layer, made = decayed_then_folded(clock, [], [
        ("The database password rotates every Monday.", 0.9),
        ("Never deploy on Fridays.", 0.9),
    ])  # fmt: skip
    (note,) = made
    kept = layer.store.get("alice", note.id)
    assert kept is not None and kept.archived_at is None
    assert kept.salience < 0.01 and kept.meta["salience_written"] == 0.9
    # the decay already in its salience is not applied again from its old created_at
    layer.maintain("alice")
    again = layer.store.get("alice", note.id)
    assert again is not None and again.salience == kept.salience
    # a note absorbed by an older one hands that one its protection
    clock = Clock(0.0)
    layer, made = decayed_then_folded(
        clock,
        [("We deploy on Fly.io. Builds run on Tekton.", 0.3)],
        [("We deploy on Fly.io.", 0.9)],
    )
    assert made == []
    (holder,) = [r for r in notes(layer) if "absorbs" in r.meta]
    assert holder.meta["salience_written"] == 0.9


def test_note_marks_that_are_no_lists_of_ids_are_ignored() -> None:
    """A record remembered with ``absorbs`` (or ``summary_of``) that is not a list of
    ids: a fold that the older note absorbs starts its list afresh (``absorbs=5``
    made every fold of the scope a bare TypeError, ``"ab"`` was spliced in as "a",
    "b"), and a record with ``summary_of=5`` is no note, so it absorbs nothing."""
    for meta, absorbed in (
        ({"summary_of": ["x"], "absorbs": 5}, True),
        ({"summary_of": ["x"], "absorbs": "ab"}, True),
        ({"summary_of": 5}, False),
    ):
        layer = MemoryLayer(
            InMemoryStore(), HashEmbedder(64), clock=Clock(2e9),
            summarizer=ExtractiveSummarizer(),
            summarize=SummarizePolicy(trigger_tokens=5, chunk_tokens=200, keep_recent=0),
        )  # fmt: skip
        old = layer.remember(
            "a", "We deploy on GKE. We like tea.", kind="semantic", created_at=1.0, meta=meta
        )
        eps = [layer.remember("a", "We deploy on GKE.", created_at=t) for t in (2.0, 3.0)]
        notes = layer.maybe_summarize("a", force=True)
        held = layer.store.get("a", old.id)
        assert held is not None
        if absorbed:
            assert notes == [] and held.meta["absorbs"] == [r.id for r in eps]
        else:
            assert len(notes) == 1 and "absorbs" not in held.meta


class Replies:
    """A summarizer that answers each fold with the next of ``replies``."""

    name = "replies"

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)

    def summarize(self, texts: Sequence[str]) -> str:
        return self.replies.pop(0)


def test_maintenance_report_lists_everything_folding_archived() -> None:
    """``MaintenanceReport.archived`` names every record a fold archived: before, it
    held only a new note's ``summary_of``, so the episodes of a cluster with nothing
    worth a note, or whose note an older note absorbed, were archived unreported
    (``archived == []``), and so was an older note a new note retired."""
    policy = SummarizePolicy(trigger_tokens=1, chunk_tokens=400, keep_recent=0)
    layer = MemoryLayer(
        InMemoryStore(), HashEmbedder(64), clock=Clock(2e9), summarize=policy,
        summarizer=Replies("", "We deploy on GKE. We like tea.", "We deploy on GKE.",
                           "We deploy on GKE. We like tea."),
    )  # fmt: skip

    def session(start: float) -> list[str]:
        return [layer.remember("a", f"turn {start + i}", created_at=start + i).id for i in (0, 1)]

    def archived() -> set[str]:
        return {r.id for r in layer.store.list("a", include_archived=True) if r.archived}

    for start in (1e6, 2e6, 3e6, 4e6):  # nothing worth a note, a note, absorbed, restated
        before = archived()
        eps = session(start)
        report = layer.maintain("a")
        assert set(report.archived) == archived() - before
        assert set(eps) <= set(report.archived)
    held = layer.store.list("a", kinds=[MemoryKind.SEMANTIC], include_archived=True)
    first_note = next(r for r in held if r.archived)
    assert first_note.id in report.archived  # retired by the last note, which restates it


def test_a_summarizer_that_returns_no_text_is_a_summarizer_error() -> None:
    """A summarizer whose summarize() returns None, bytes, a number or text with a
    lone surrogate raises SummarizerError naming it, and nothing is folded; before,
    it was a bare AttributeError ('NoneType' object has no attribute 'strip'), a
    TypeError, or an InputError that blamed the note's "content"."""
    policy = SummarizePolicy(trigger_tokens=1, chunk_tokens=400, keep_recent=0)
    for reply in (None, 5, b"We deploy on GKE.", "We deploy on GKE \ud83d."):
        layer = MemoryLayer(
            InMemoryStore(), HashEmbedder(64), clock=Clock(2e9), summarize=policy,
            summarizer=Replies(reply),  # type: ignore[arg-type]
        )  # fmt: skip
        for t in (1.0, 2.0):
            layer.remember("a", "We deploy on GKE.", created_at=t)
        with pytest.raises(SummarizerError, match="summarizer replies returned"):
            layer.maintain("a")
        held = layer.store.list("a", include_archived=True)
        assert len(held) == 2 and not any(r.archived for r in held)


def test_a_note_keeps_the_last_recall_of_what_it_folds() -> None:
    """Cold decay counts a note's idle time from the last recall of the episodes it
    folds: a note kept its own last_accessed_at (its old created_at), so episodes
    recalled every day for ten days and folded an hour after the last recall gave a
    note decayed by nine periods in the same maintain (0.6 -> 0.001)."""
    clock = Clock(1e6)
    layer = MemoryLayer(
        InMemoryStore(), HashEmbedder(64), clock=clock,
        summarize=SummarizePolicy(trigger_tokens=1, chunk_tokens=400, keep_recent=0),
        eviction=EvictionPolicy(cold_decay=0.5, cold_after=24, salience_floor=None),
    )  # fmt: skip
    start = clock.t
    for t, text in ((start, "We deploy on GKE."), (start + 60, "Our office is in Oslo.")):
        layer.remember("a", text, created_at=t, salience=0.6)
    for day in range(1, 11):
        clock.t = start + day * 24 * HOUR - HOUR
        layer.recall(RecallQuery("a", "where do we deploy, where is the office"))
        layer.maintain("a")
    layer.summarizer = Joiner()
    clock.t = start + 10 * 24 * HOUR
    (note,) = layer.maintain("a").summaries
    held = layer.store.get("a", note.id)
    assert held is not None and held.salience == 0.6
    assert held.last_accessed_at == start + 10 * 24 * HOUR - HOUR


def test_a_wholly_superseded_episode_gives_the_note_no_salience() -> None:
    """A note has the max salience of what it folds, and a wholly superseded
    episode is not folded: before, its salience went to the note all the same, so
    'We deploy on GKE.' at 0.95, corrected at 0.4, gave 'We moved off GKE, we deploy
    on AWS now. I like tea.' salience 0.95, above the floor for good."""
    layer = MemoryLayer(
        InMemoryStore(), HashEmbedder(64), clock=Clock(2e9), summarizer=Joiner(),
        summarize=SummarizePolicy(trigger_tokens=1, chunk_tokens=400, keep_recent=0),
        consolidator=RuleConsolidator(), eviction=EvictionPolicy(),
    )  # fmt: skip
    stale = layer.remember("a", "We deploy on GKE.", created_at=1e6, salience=0.95)
    layer.remember(
        "a", "We moved off GKE, we deploy on AWS now.", created_at=1e6 + 60, salience=0.4
    )
    layer.remember("a", "I like tea.", created_at=1e6 + 120, salience=0.3)
    held = layer.store.get("a", stale.id)
    assert held is not None and held.invalid_at is not None  # superseded whole
    (note,) = layer.maintain("a").summaries
    assert "GKE." not in note.content
    assert note.salience == 0.4
    assert layer.eviction is not None and not layer.eviction.protects(note)
