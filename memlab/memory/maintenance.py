"""The layer's maintenance: fold old episodes into semantic notes, reflect, evict
(``MemoryLayer.maybe_summarize``, ``maintain`` and ``end_session`` call these)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from memlab.memory.layer_types import MaintenanceReport, MemoryInput, SummarizePolicy
from memlab.memory.rank import HOUR
from memlab.memory.records import UNTRUSTED_SOURCES, MemoryKind, MemoryRecord, Source
from memlab.memory.reflect import reflect_scope

if TYPE_CHECKING:
    from memlab.memory.layer import MemoryLayer


def summarize_scope(
    layer: MemoryLayer, scope: str, now: float, into: str | None, force: bool
) -> list[MemoryRecord]:
    """``MemoryLayer.maybe_summarize`` after its checks."""
    if layer.summarizer is None:
        return []
    policy = layer.summarize_policy
    episodes = [
        r
        for r in layer.store.list(scope, kinds=[MemoryKind.EPISODIC])
        if r.source not in UNTRUSTED_SOURCES
    ]
    total = sum(r.tokens for r in episodes)
    keep = 0 if force else policy.keep_recent
    foldable = episodes[: max(0, len(episodes) - keep)]
    made: list[MemoryRecord] = []
    while (force or total > policy.trigger_tokens) and len(foldable) >= (
        1 if force else policy.min_records
    ):
        cluster = oldest_cluster(foldable, policy)
        foldable = foldable[len(cluster) :]
        if len(cluster) < policy.min_records and not force:
            continue  # an isolated episode: leave it, try the next cluster
        total -= sum(r.tokens for r in cluster)
        note = fold(layer, scope, cluster, now, into or scope)
        if note is not None:
            made.append(note)
    return made


def fold(
    layer: MemoryLayer, scope: str, cluster: list[MemoryRecord], now: float, into: str
) -> MemoryRecord | None:
    """Fold one cluster of episodes into a semantic note in ``into``; archive the
    episodes (also when nothing in them is worth a note)."""
    summarizer = layer.summarizer
    assert summarizer is not None  # summarize_scope checked it
    # fold only what is in force: a superseded episode states nothing any more,
    # and a superseded claim is cut from the episode that made it
    in_force = [(r, r.text_at()) for r in cluster if r.invalid_at is None]
    in_force = [(r, t) for r, t in in_force if t]
    text = summarizer.summarize([t for _, t in in_force]).strip() if in_force else ""
    ids = [r.id for r in cluster]
    note = None
    if text:
        provenance: dict[str, None] = {}
        for r, _ in in_force:
            provenance.update(dict.fromkeys(r.provenance))
        sources = {r.source for r, _ in in_force}
        meta: dict[str, Any] = {
            "summary_of": ids,
            "summarizer": summarizer.name,
            "span": [cluster[0].created_at, cluster[-1].created_at],
        }
        if into != scope:
            meta["from_scope"] = scope
        note = layer._remember_many(
            [
                MemoryInput(
                    into,
                    text,
                    kind=MemoryKind.SEMANTIC,
                    salience=max(r.salience for r in cluster),
                    source=Source.USER if Source.USER in sources else Source.AGENT,
                    provenance=tuple(provenance),
                    meta=meta,
                    created_at=max(r.created_at for r in cluster),
                )
            ],
            consolidate=False,  # a note restates what is in force; it replaces nothing
        )[0]
    # Archive even when nothing was worth keeping: the episodes stay on disk.
    layer.store.mark_archived(scope, ids, now)
    return note


def maintain_scopes(
    layer: MemoryLayer, scopes: tuple[str, ...], now: float, force: bool
) -> MaintenanceReport:
    """``MemoryLayer.maintain`` / ``end_session`` after their checks."""
    report = MaintenanceReport()
    episodic = layer.layers.scope_for(MemoryKind.EPISODIC, scopes)
    semantic = layer.layers.scope_for(MemoryKind.SEMANTIC, scopes)
    if layer.reflector is not None:
        report.reflection = reflect_scope(
            layer, episodic, semantic, now, force=force, consolidator=layer.reflect_consolidator
        )
    fold_all = force and episodic != semantic
    for note in layer.maybe_summarize(episodic, now, into=semantic, force=fold_all):
        report.summaries.append(note)
        report.archived.extend(note.meta["summary_of"])
    if layer.eviction is not None:
        for scope in scopes:
            part = layer.eviction.apply(layer.store, scope, now, layer.ranker)
            ev = report.eviction
            ev.expired += part.expired
            ev.dropped += part.dropped
            ev.decayed += part.decayed
            ev.over_capacity += part.over_capacity
    return report


def oldest_cluster(episodes: list[MemoryRecord], policy: SummarizePolicy) -> list[MemoryRecord]:
    gap = policy.max_gap_hours * HOUR
    cluster = [episodes[0]]
    tokens = episodes[0].tokens
    for prev, r in itertools.pairwise(episodes):
        if r.created_at - prev.created_at > gap or tokens + r.tokens > policy.chunk_tokens:
            break
        cluster.append(r)
        tokens += r.tokens
    return cluster
