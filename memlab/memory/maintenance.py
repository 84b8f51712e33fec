"""The layer's maintenance: fold old episodes into semantic notes, reflect, evict
(``MemoryLayer.maybe_summarize``, ``maintain`` and ``end_session`` call these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memlab.errors import InputError, SummarizerError
from memlab.memory.checks import check_unicode
from memlab.memory.evict import DECAYED_KEY, WRITTEN_KEY, written_salience
from memlab.memory.layer_types import MaintenanceReport, MemoryInput, SummarizePolicy
from memlab.memory.rank import HOUR
from memlab.memory.records import MemoryKind, MemoryRecord, Source, id_list, untrusted_mask
from memlab.memory.reflect_sentences import sentences
from memlab.memory.reflection_pass import reflect_scope
from memlab.memory.stores.base import scope_columns
from memlab.memory.writing import new_records

if TYPE_CHECKING:
    from memlab.memory.layer import MemoryLayer
    from memlab.memory.models.summarizer import Summarizer


def summarize_scope(
    layer: MemoryLayer,
    scope: str,
    now: float,
    into: str,
    force: bool,
    archived: list[str] | None = None,
) -> list[MemoryRecord]:
    """``MemoryLayer.maybe_summarize`` after its checks; the ids of every record it
    archives are appended to ``archived`` (when given) as each fold is stored.

    Runs at every turn, so it decides from the scope's column arrays (tokens,
    times, sources) and loads only the episodes of a cluster it folds: listing
    the scope each turn made a long replay quadratic.
    """
    if layer.summarizer is None:
        return []
    policy = layer.summarize_policy
    cols = scope_columns(layer.store, scope, kinds=[MemoryKind.EPISODIC])
    rows = np.flatnonzero(cols.mask & ~untrusted_mask(cols.source))
    total = int(cols.tokens[rows].sum())
    if not force and total <= policy.trigger_tokens:
        return []
    created = cols.created_at[rows]
    # store.list()'s order (time, then id); a replay writes in time order, so the ids
    # are only read (and sorted as strings) when two episodes share a time or the
    # rows are out of order
    if len(rows) > 1 and not bool(np.all(created[1:] > created[:-1])):
        ids = np.array([cols.ids[i] for i in rows], dtype=object)
        order = np.lexsort((ids.astype(str), created))
        rows = rows[order]
        created = created[order]
    tokens = cols.tokens[rows]
    keep = 0 if force else policy.keep_recent
    start, stop = 0, max(0, len(rows) - keep)
    skip = not force and policy.min_records >= 2
    starts = fold_starts(created[:stop], tokens[:stop], policy) if skip else None
    made: list[MemoryRecord] = []
    while (force or total > policy.trigger_tokens) and stop - start >= (
        1 if force else policy.min_records
    ):
        if starts is not None:  # pass over episodes that cannot start a fold
            at = int(np.searchsorted(starts, start))
            if at == len(starts):
                break
            start = int(starts[at])
        begin, start = start, cluster_end(created, tokens, start, stop, policy)
        if start - begin < policy.min_records and not force:
            continue  # an isolated episode: leave it, try the next cluster
        total -= int(tokens[begin:start].sum())
        cluster = sorted(
            layer.store.get_many(scope, [cols.ids[i] for i in rows[begin:start]]),
            key=lambda r: (r.created_at, r.id),
        )
        if not cluster:
            continue  # deleted meanwhile (another writer)
        note = fold(layer, scope, cluster, now, into, archived)
        if note is not None:
            made.append(note)
    return made


def fold(
    layer: MemoryLayer,
    scope: str,
    cluster: list[MemoryRecord],
    now: float,
    into: str,
    archived: list[str] | None = None,
) -> MemoryRecord | None:
    """Fold one cluster of episodes into a semantic note in ``into``; archive the
    episodes (also when nothing in them is worth a note) and append the ids of
    everything archived (the episodes, the older notes the new one retires) to
    ``archived``."""
    done = [] if archived is None else archived
    summarizer = layer.summarizer
    assert summarizer is not None  # summarize_scope checked it
    # fold only what is in force: a superseded episode states nothing any more,
    # and a superseded claim is cut from the episode that made it
    in_force = [(r, r.text_at()) for r in cluster if r.invalid_at is None]
    in_force = [(r, t) for r, t in in_force if t]
    text = _summary(summarizer, [t for _, t in in_force]) if in_force else ""
    ids = [r.id for r in cluster]
    note = None
    if text:
        provenance: dict[str, None] = {}
        for r, _ in in_force:
            provenance.update(dict.fromkeys(r.provenance))
        sources = {r.source for r, _ in in_force}
        if Source.USER in sources and _only_agent_words(text, in_force):
            sources = {Source.AGENT}
        meta: dict[str, Any] = {
            "summary_of": ids,
            "summarizer": summarizer.name,
            "span": [cluster[0].created_at, cluster[-1].created_at],
        }
        if into != scope:
            meta["from_scope"] = scope
        # checked and embedded, not stored yet; a note restates what is in force and
        # supersedes nothing, so no consolidator sees it
        note = new_records(
            layer,
            [
                MemoryInput(
                    into,
                    text,
                    kind=MemoryKind.SEMANTIC,
                    # of what it folds: an episode a correction superseded whole
                    # gave its salience (and its floor's protection) to a note
                    # that does not state it
                    salience=max(r.salience for r, _ in in_force),
                    source=Source.USER if Source.USER in sources else Source.AGENT,
                    provenance=tuple(provenance),
                    meta=meta,
                    created_at=max(r.created_at for r in cluster),
                )
            ],
        )[0]
        note = _keeps_protection(note, [r for r, _ in in_force])
        found = restated(layer, note, into)
        if found.absorbed_by:  # every sentence of it is in notes kept: they cite its sources
            layer.store.put_many([_absorbs_protection(r, note) for r in found.absorbed_by])
            note = None
        else:
            note = found.note
            layer.store.put_many([note])
            if found.retired:
                retired = [r.id for r in found.retired]
                layer.store.mark_archived(into, retired, now)
                done.extend(retired)
    # Archive even when nothing was worth keeping: the episodes stay on disk.
    layer.store.mark_archived(scope, ids, now)
    done.extend(ids)
    return note


def _summary(summarizer: Summarizer, texts: list[str]) -> str:
    """The summarizer's note for ``texts``, stripped.

    Raises:
        SummarizerError: it returned something that is not text (None, bytes, a
            number) or text that is not valid unicode; nothing is folded. Such a
            reply was a bare AttributeError or TypeError, or an InputError that
            blamed the note's "content" as if the caller had written it.
    """
    text = summarizer.summarize(texts)
    who = getattr(summarizer, "name", type(summarizer).__name__)
    if not isinstance(text, str):
        raise SummarizerError(
            f"summarizer {who} returned {type(text).__name__} {text!r:.60}, not a string; "
            "summarize() must return the note's text, or '' when nothing is worth keeping"
        )
    try:
        check_unicode(text, "note")
    except InputError:
        raise SummarizerError(
            f"summarizer {who} returned a note that is not valid unicode (a lone "
            "surrogate); it must decode what its model answered properly"
        ) from None
    return text.strip()


def _keeps_protection(note: MemoryRecord, cluster: list[MemoryRecord]) -> MemoryRecord:
    """``note`` with the written salience and decay clock (last recall, last
    decay) of what it folds.

    A note has the max *current* salience of its sources; an episode written at or
    above the salience floor and decayed since gave a note below the floor, which
    capacity then dropped in the same maintain (the episodes archived, what they
    said gone from recall). The note keeps the sources' max written salience, as
    decay keeps it (``meta["salience_written"]``), and their latest decay time, so
    the decay already in its salience is not applied a second time from the note's
    (old) created_at.
    """
    # cold decay counts a record's idle time from its last recall: a note that
    # kept its own (its old created_at) lost, in the maintain that folded it,
    # every period since its episodes were written, though a recall returned
    # them an hour before (0.6 -> 0.001 over ten daily periods)
    recalled = max(r.last_accessed_at for r in cluster)
    if recalled > note.last_accessed_at:
        note = note.copy(last_accessed_at=recalled)
    if not any(DECAYED_KEY in r.meta or WRITTEN_KEY in r.meta for r in cluster):
        return note
    meta = dict(note.meta)
    written = max(written_salience(r) for r in cluster)
    if written > note.salience:
        meta[WRITTEN_KEY] = written
    clocks = [float(r.meta[DECAYED_KEY]) for r in cluster if DECAYED_KEY in r.meta]
    if clocks:
        meta[DECAYED_KEY] = max(clocks)
    return note.copy(meta=meta)


def _absorbs_protection(holder: MemoryRecord, note: MemoryRecord) -> MemoryRecord:
    """``holder`` (an older note absorbing ``note``) protected as ``note`` was: it
    takes the higher written salience of the two when that is above its salience."""
    written = max(written_salience(holder), written_salience(note))
    if written <= holder.salience:
        return holder
    return holder.copy(meta={**holder.meta, WRITTEN_KEY: written})


def _only_agent_words(text: str, in_force: list[tuple[MemoryRecord, str]]) -> bool:
    """Whether every sentence of a note is an agent's, word for word, and none a
    user's: the summarizer kept only what the agent said, so the note is the
    agent's (it then weighs as the agent's, e.g. when notes restate each other).
    An abstractive summary matches nobody's words and keeps the cluster's source."""
    keys = _sentence_keys(text)
    said: dict[Source, set[str]] = {}
    for r, t in in_force:
        said.setdefault(r.source, set()).update(_sentence_keys(t))
    return (
        bool(keys)
        and keys <= said.get(Source.AGENT, set())
        and not (keys & said.get(Source.USER, set()))
    )


RESTATED_NEIGHBOURS = 8  # older notes compared with a new one (its nearest by embedding)


def _sentence_keys(text: str) -> set[str]:
    return {" ".join(s.lower().rstrip(".!?").split()) for s in sentences(text)} - {""}


@dataclass
class Restated:
    """What a new note restates (``restated``): ``note`` as it is to be stored,
    the older notes it retires, or the older notes that absorb it instead."""

    note: MemoryRecord
    retired: list[MemoryRecord] = field(default_factory=list)
    absorbed_by: list[MemoryRecord] = field(default_factory=list)


def _citing(note: MemoryRecord, others: list[MemoryRecord], **meta: list[str]) -> MemoryRecord:
    """``note`` citing what ``others`` cited too, with ``meta`` entries set."""
    provenance = dict.fromkeys(note.provenance)
    for r in others:
        provenance.update(dict.fromkeys(r.provenance))
    return note.copy(provenance=tuple(provenance), meta={**note.meta, **meta})


def _may_hold(holder: MemoryRecord, other: MemoryRecord) -> bool:
    """Whether ``holder`` may stand for ``other``'s sentences: a user's note only
    for a user's, any note for an agent's."""
    return holder.source is other.source or holder.source is Source.USER


def restated(layer: MemoryLayer, note: MemoryRecord, scope: str) -> Restated:
    """Which older notes of ``scope`` a new ``note`` (not stored yet) makes
    redundant, or which make it redundant. Reads only; the caller writes.

    - An older note whose every sentence in force ``note`` (or a newer note kept
      beside it) states again is retired: an agent that gives the same advice in
      five sessions left five notes of it. ``note`` takes over its provenance and
      names it in ``meta["restates"]``.
    - Otherwise, when every sentence of ``note`` is already stated by the older
      notes, ``note`` is not kept: for each of its sentences the newest older note
      stating it takes over ``note``'s provenance and salience (if higher), and
      names the episodes ``note`` folded in ``meta["absorbs"]`` (those are
      archived all the same).

    Only the new note's ``RESTATED_NEIGHBOURS`` nearest notes by embedding are
    read, and a user's note is never retired or absorbed by an agent's: what a
    user said stays in a user's note.
    """
    keys = _sentence_keys(note.content)
    if not keys:
        return Restated(note)
    cols = layer.store.candidates(scope, note.embedding, kinds=[MemoryKind.SEMANTIC],
                                  pool=layer.pool, valid_at=float("inf"))  # fmt: skip
    rows = np.flatnonzero(cols.mask)
    if not rows.size:
        return Restated(note)
    sim = cols.embeddings[rows] @ note.embedding
    near = rows[np.argsort(-sim, kind="stable")[:RESTATED_NEIGHBOURS]]
    olds = sorted(
        (
            (r, _sentence_keys(r.text_at()))
            for r in layer.store.get_many(scope, [cols.ids[i] for i in near])
            if r.scope == scope and id_list(r.meta.get("summary_of"))
            and (r.created_at, r.id) < (note.created_at, note.id)
        ),
        key=lambda rk: (rk[0].created_at, rk[0].id),
        reverse=True,
    )  # fmt: skip
    # newest first: a note is restated when the new note and the newer notes kept
    # beside it state every sentence of it
    held = set(keys)  # by the new note and the newer notes kept, and by the users'
    held_user = set(keys) if note.source is Source.USER else set()
    gone = []
    for r, k in olds:
        if not _may_hold(note, r):
            continue
        if k and k <= (held_user if r.source is Source.USER else held):
            gone.append(r)
        else:
            held |= k
            if r.source is Source.USER:
                held_user |= k
    if gone:
        restates = [*note.meta.get("restates", []), *(r.id for r in gone)]
        return Restated(_citing(note, gone, restates=restates), retired=gone)
    cover: dict[str, MemoryRecord] = {}
    for key in keys:
        taker = next((r for r, k in olds if key in k and _may_hold(r, note)), None)
        if taker is None:
            return Restated(note)
        cover[taker.id] = taker
    episodes = list(note.meta.get("summary_of", []))
    return Restated(
        note,
        absorbed_by=[
            # a fold repeated after a crash (episodes not yet archived) names them once
            _citing(
                r, [note], absorbs=list(dict.fromkeys([*id_list(r.meta.get("absorbs")), *episodes]))
            ).copy(
                salience=max(r.salience, note.salience)  # a note has its sources' max
            )
            for r in cover.values()
        ],
    )


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
    if layer.summarizer is not None:
        # every record a fold archives, not only a new note's summary_of: a cluster
        # with nothing worth a note, or whose note an older note absorbed, was
        # archived unreported, and so were the older notes a new note retired
        report.summaries = summarize_scope(
            layer, episodic, now, semantic, fold_all, archived=report.archived
        )
    if layer.eviction is not None:
        for scope in scopes:
            part = layer.eviction.apply(layer.store, scope, now, layer.ranker)
            ev = report.eviction
            ev.expired += part.expired
            ev.dropped += part.dropped
            ev.decayed += part.decayed
            ev.over_capacity += part.over_capacity
    return report


def fold_starts(created: np.ndarray, tokens: np.ndarray, policy: SummarizePolicy) -> np.ndarray:
    """The indices where a cluster of at least ``min_records`` (>= 2) episodes can
    start, in order: the next episode is within ``max_gap_hours``, the two fit in
    ``chunk_tokens``, and the run of episodes without a longer gap has at least
    ``min_records`` left from there.

    Folding visits clusters oldest first, and a start that fails the first two
    tests makes a cluster of one (skipped), so the next cluster starts right after
    it; a run with too few episodes left cannot fold at all. So the next cluster
    that folds starts at the first of these at or after the current start, and the
    episodes before it can be passed over without a loop.
    """
    n = len(created)
    cuts = np.flatnonzero(np.diff(created) > policy.max_gap_hours * HOUR) + 1
    bounds = np.concatenate((cuts, [n])).astype(np.int64)
    run_end = np.repeat(bounds, np.diff(np.concatenate(([0], bounds))))
    left = run_end - np.arange(n)
    pair = np.full(n, np.iinfo(np.int64).max)
    pair[:-1] = tokens[:-1].astype(np.int64) + tokens[1:]
    need = max(2, policy.min_records)
    return np.flatnonzero((left >= need) & (pair <= policy.chunk_tokens))


def cluster_end(
    created: np.ndarray, tokens: np.ndarray, start: int, stop: int, policy: SummarizePolicy
) -> int:
    """The end (exclusive) of the oldest cluster of episodes ``start:stop`` (times
    and token counts in time order): it grows while the gap between neighbours is
    at most ``max_gap_hours`` and its tokens stay within ``chunk_tokens``."""
    gap = policy.max_gap_hours * HOUR
    total = int(tokens[start])
    end = start + 1
    while end < stop:
        if created[end] - created[end - 1] > gap or total + int(tokens[end]) > policy.chunk_tokens:
            break
        total += int(tokens[end])
        end += 1
    return end
