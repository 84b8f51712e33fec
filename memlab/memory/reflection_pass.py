"""Running a reflection pass (``MemoryLayer.reflect`` and maintenance): show a
scope's unreflected episodes to the reflector, check and embed what it proposes,
keep the value in force among reflections, top up the newest bundle, write it all in
one batch, then archive what was retired or covered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from memlab.errors import InputError
from memlab.memory.consolidate import Consolidator, ScopeReader, Supersession
from memlab.memory.models.embedder import check_embeddings
from memlab.memory.records import (
    UNTRUSTED_SOURCES,
    MemoryKind,
    MemoryRecord,
    Source,
    Superseded,
    new_id,
)
from memlab.memory.reflect import (
    META_KEY,
    Reflection,
    Reflections,
    ReflectorError,
    is_reflection,
)
from memlab.memory.reflect_sentences import ended

if TYPE_CHECKING:
    from memlab.memory.layer import MemoryLayer


@dataclass
class ReflectionReport:
    """What one reflection pass did.

    Attributes:
        read: ids of the episodes the reflector was shown.
        written: the new reflection records.
        retired: ids of earlier reflections archived (restated or superseded).
        archived: ids of episodes archived because the reflections cover them.
        dropped: proposals dropped (no valid source, superseded within the pass).
    """

    read: list[str] = field(default_factory=list)
    written: list[MemoryRecord] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    dropped: int = 0


def reflect_scope(
    layer: MemoryLayer,
    source_scope: str,
    target_scope: str,
    now: float,
    *,
    force: bool = False,
    consolidator: Consolidator | None = None,
) -> ReflectionReport:
    """One reflection pass over ``source_scope``'s unreflected episodes, writing to
    ``target_scope`` (the same scope, or the semantic layer of a layered scope).

    Runs when ``layer.reflect_policy`` says it is due, or always with ``force``.
    Everything is decided before anything is written: the reflections are embedded
    and checked, then written in one batch, then retired reflections and covered
    episodes are archived.
    """
    report = ReflectionReport()
    reflector, policy = layer.reflector, layer.reflect_policy
    if reflector is None:
        return report
    since = layer.reflected_until(source_scope, target_scope)
    episodes = [
        r
        for r in layer.store.list(source_scope, kinds=[MemoryKind.EPISODIC])
        if (r.created_at, r.id) > since
    ]
    if not force and not policy.due(episodes):
        return report
    if not episodes:
        return report
    # only what is in force is shown, as a fold folds only that: an episode a
    # correction superseded whole states nothing any more (reflecting it made the old
    # value a trusted fact again), and a superseded claim is cut from its episode
    shown = [
        _in_force(r)
        for r in episodes
        if (policy.read_untrusted or r.source not in UNTRUSTED_SOURCES)
        and r.invalid_at is None
        and r.text_at()
    ]
    known = [
        r for r in layer.store.list(target_scope, kinds=[MemoryKind.SEMANTIC]) if is_reflection(r)
    ]
    answer = _checked(reflector.reflect(shown, known), reflector) if shown else Reflections()
    report.read = [r.id for r in shown]
    by_id = {r.id: r for r in shown}
    known_by_id = {r.id: r for r in known}
    until = (episodes[-1].created_at, episodes[-1].id)
    proposals = []
    for item in answer.items:
        sources = [by_id[i] for i in item.sources if i in by_id]
        if not sources:
            report.dropped += 1  # a reflection must cite what it came from
            continue
        if any(r.source in UNTRUSTED_SOURCES for r in sources):
            # untrusted never supersedes: a reflection of a tool's words that names a
            # trusted reflection in ``replaces`` would archive what the user said
            keep = tuple(i for i in item.replaces if i in known_by_id
                         and known_by_id[i].source in UNTRUSTED_SOURCES)  # fmt: skip
            if keep != item.replaces:
                item = replace(item, replaces=keep)
        proposals.append((item, sources))
    records = _records(
        layer, proposals, known_by_id, reflector.name, source_scope, target_scope, until, by_id
    )
    parts_of = {r.id: item.parts for r, (item, _) in zip(records, proposals, strict=True)}
    retired: dict[str, None] = {}
    for item, _ in proposals:
        retired.update(dict.fromkeys(i for i in item.replaces if i in known_by_id))
    marked: list[MemoryRecord] = []
    if policy.supersede and consolidator is not None and records:
        records, superseded, dropped, marked = _value_in_force(
            layer, consolidator, target_scope, records, known_by_id, retired
        )
        retired.update(dict.fromkeys(superseded))
        report.dropped += dropped
    limit = getattr(reflector, "bundle_words", 0)
    if limit and records:
        records, marked = _top_up(
            layer, records, known_by_id, marked, retired, limit, parts_of, by_id
        )
    if records or marked:
        layer.store.put_many(records + marked)
    report.written = records
    if retired:
        layer.store.mark_archived(target_scope, list(retired), now)
        report.retired = list(retired)
    if policy.archive != "none":
        trusted = {r.id for r in shown if r.source not in UNTRUSTED_SOURCES}
        if policy.archive == "all":
            archive = [i for i in report.read if i in trusted]
        else:
            archive = [i for i in answer.covered if i in trusted]
        if archive:
            layer.store.mark_archived(source_scope, archive, now)
            report.archived = archive
    layer.mark_reflected(source_scope, target_scope, until)
    return report


def _checked(answer: object, reflector: object) -> Reflections:
    """``answer`` if it is a ``Reflections`` of ``Reflection`` items and id strings.

    Raises:
        ReflectorError: naming the reflector and what it returned; nothing of the
            pass is written (a None or a list was a bare AttributeError).
    """
    who = getattr(reflector, "name", type(reflector).__name__)
    if not isinstance(answer, Reflections):
        raise ReflectorError(
            f"reflector {who} returned {type(answer).__name__}, not Reflections; its "
            "reflect() must return Reflections(items=[Reflection(...)], covered=(...))"
        )
    items = _listed(answer.items)  # listed once: a generator is read only once
    covered = _listed(answer.covered)
    if items is None or not all(isinstance(i, Reflection) for i in items):
        raise ReflectorError(
            f"reflector {who} returned items that are not a list of Reflection: "
            f"{answer.items!r:.80}"
        )
    if covered is None or not all(isinstance(i, str) for i in covered):
        raise ReflectorError(
            f"reflector {who} returned covered that is not a list of episode ids: "
            f"{answer.covered!r:.80}"
        )
    return Reflections(
        [i for i in items if isinstance(i, Reflection)],
        tuple(i for i in covered if isinstance(i, str)),
    )  # the same lists, narrowed for the type checker


def _listed(value: object) -> list[object] | None:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        return None
    return list(value)


def _in_force(episode: MemoryRecord) -> MemoryRecord:
    """``episode`` as a reflector may read it: without its stale claims."""
    if not episode.stale_spans:
        return episode
    return episode.copy(content=episode.text_at(), superseded=())


def _records(
    layer: MemoryLayer,
    proposals: list[tuple[Reflection, list[MemoryRecord]]],
    known: dict[str, MemoryRecord],
    reflector: str,
    source_scope: str,
    target_scope: str,
    until: tuple[float, str],
    shown: dict[str, MemoryRecord],
) -> list[MemoryRecord]:
    if not proposals:
        return []
    texts = [item.content.strip() for item, _ in proposals]
    emb = layer.embedder
    vectors = check_embeddings(emb.embed(texts), len(texts), emb.dims, emb.name)
    out = []
    for i, (item, sources) in enumerate(proposals):
        untrusted = [r.source for r in sources if r.source in UNTRUSTED_SOURCES]
        if untrusted:
            source = Source.WEB if Source.WEB in untrusted else Source.TOOL
        elif all(r.source is Source.USER for r in sources):
            source = Source.USER
        else:
            source = Source.AGENT
        salience = float(item.salience)
        if untrusted:
            salience = min(salience, layer.untrusted_salience_cap)
        provenance: dict[str, None] = {}
        for old_id in item.replaces:
            if old_id in known:
                provenance.update(dict.fromkeys(known[old_id].provenance))
        _cite(provenance, sources, item.covers, shown)
        created = max(r.created_at for r in sources)
        out.append(
            MemoryRecord(
                id=new_id(),
                content=texts[i],
                embedding=vectors[i],
                kind=MemoryKind.SEMANTIC,
                scope=target_scope,
                salience=salience,
                tokens=layer.count_tokens(texts[i]),
                created_at=created,
                last_accessed_at=created,
                source=source,
                provenance=tuple(provenance),
                meta={
                    META_KEY: {
                        "reflector": reflector,
                        "label": item.label,
                        "count": item.count,
                        "sources": [r.id for r in sources],
                        "from_scope": source_scope,
                        "until": list(until),
                    }
                },
            ).validate()
        )
    return out


def _cite(
    provenance: dict[str, None], sources: Sequence[MemoryRecord], covers: Sequence[str],
    shown: dict[str, MemoryRecord],
) -> dict[str, None]:  # fmt: skip
    """``provenance`` with what ``sources`` cite added, and what the echoes
    ``covers`` names (ids among ``shown``) cite: an echo archived with a reflection
    is cited, not trusted from, so an untrusted one adds nothing."""
    for r in sources:
        provenance.update(dict.fromkeys(r.provenance))
    for cid in covers:
        echo = shown.get(cid)
        if echo is not None and echo.source not in UNTRUSTED_SOURCES:
            provenance.update(dict.fromkeys(echo.provenance))
    return provenance


def _value_in_force(
    layer: MemoryLayer,
    consolidator: Consolidator,
    scope: str,
    records: list[MemoryRecord],
    known: dict[str, MemoryRecord],
    retired: dict[str, None],
) -> tuple[list[MemoryRecord], list[str], int, list[MemoryRecord]]:
    """Keep the value in force: a new reflection that supersedes a known one retires
    it; one that supersedes an earlier proposal of the same pass drops it; one that
    supersedes a single statement of a bundle marks that statement stale (a stale
    span; the bundle's other statements stay in force). Only a reflection of the
    same label (fact, preference) is ever superseded, and only reflections (the
    consolidator may name other semantic records: they stay).

    A record that retires known reflections names them in its
    ``meta["reflection"]["supersedes"]`` (so ``forget`` can put them back in force,
    as it lifts any other supersession); one dropped for a later proposal of the
    pass hands its names to that one.

    Returns the records to write, the known ids to retire, how many proposals were
    dropped, and the known reflections given stale spans (to write back)."""
    keep: list[MemoryRecord] = []
    superseded: list[str] = []
    dropped: set[str] = set()
    marked: dict[str, MemoryRecord] = {}
    retired_by: dict[str, list[str]] = {}
    for rec in records:
        if rec.source in UNTRUSTED_SOURCES:
            keep.append(rec)  # an untrusted record never supersedes anything
            continue
        reader = ScopeReader(layer.store, scope, pending=[*keep, *marked.values()],
                             pool=layer.pool, weights=layer.ranker.weights.as_dict())  # fmt: skip
        label = _label(rec)
        for s in consolidator.decide(rec, reader):
            in_pass = next((i for i, k in enumerate(keep) if k.id == s.old_id), None)
            old = marked.get(s.old_id) or known.get(s.old_id)
            if in_pass is not None:
                old = keep[in_pass]
            if old is None or _label(old) != label or s.old_id in retired:
                # a preference is only ever replaced by a preference, a fact by a fact:
                # "we prefer to deploy on Tuesdays" is not the value of "we deploy on X"
                continue
            if s.partial and s.span is not None:
                stale = _with_stale(old, rec, s)
                if stale is None:
                    continue
                if in_pass is not None:
                    keep[in_pass] = stale
                else:
                    marked[old.id] = stale
            elif in_pass is not None:
                dropped.add(s.old_id)
                retired_by.setdefault(rec.id, []).extend(retired_by.pop(s.old_id, []))
            elif s.old_id not in superseded:
                superseded.append(s.old_id)
                marked.pop(s.old_id, None)
                retired_by.setdefault(rec.id, []).append(s.old_id)
        keep.append(rec)
    kept = [_naming(r, retired_by.get(r.id)) for r in keep if r.id not in dropped]
    return kept, superseded, len(dropped), list(marked.values())


def _naming(record: MemoryRecord, retired: list[str] | None) -> MemoryRecord:
    """``record`` naming the known reflections it retired (``superseded_reflections``)."""
    if not retired:
        return record
    data = {**record.meta[META_KEY], "supersedes": list(dict.fromkeys(retired))}
    return record.copy(meta={**record.meta, META_KEY: data})


def _top_up(
    layer: MemoryLayer,
    records: list[MemoryRecord],
    known: dict[str, MemoryRecord],
    marked: list[MemoryRecord],
    retired: dict[str, None],
    limit: int,
    parts_of: dict[str, tuple[Reflection, ...]],
    shown: dict[str, MemoryRecord],
) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
    """A bundling reflector's newest earlier bundle takes the pass's facts while it
    has room, so bundles fill up across passes instead of leaving a part-filled
    one behind each pass.

    - The longest fact record of the pass that fits whole joins it (one record fewer).
    - Otherwise the pass's first bundle gives it its first statements (``parts_of``:
      the one-statement reflections each new bundle joins), each with its own
      sources and citations, and keeps the rest.

    The old bundle is rewritten with what it still says (its stale statements cut)
    and the new facts, and retired (added to ``retired``). Runs after the value in
    force was kept, so a carried statement a new fact supersedes is already cut.
    """
    now = {r.id: r for r in marked}
    # a bundle a correction superseded whole states nothing in force: topping it up
    # would copy its stale text into the new record (text_at() cuts only spans)
    facts = [
        now.get(k.id, k) for k in known.values()
        if k.id not in retired and k.source.trusted and _label(k) == "fact"
        and k.invalid_at is None
    ]  # fmt: skip
    if not facts:
        return records, marked
    old = max(facts, key=lambda k: (k.created_at, k.id))
    kept = old.text_at()
    if not kept:
        return records, marked
    room = limit - len(kept.split())
    movable = [
        (i, r) for i, r in enumerate(records)
        if _label(r) == "fact" and not r.superseded and r.source.trusted
    ]  # fmt: skip
    fits = [(len(r.content.split()), -i) for i, r in movable if len(r.content.split()) <= room]
    if fits:
        at = -max(fits)[1]  # the longest that fits; the first of equals
        moved, rest = records[at], None
    else:
        split = next(
            ((i, r, parts_of[r.id]) for i, r in movable if len(parts_of.get(r.id, ())) > 1), None
        )
        if split is None:
            return records, marked
        at, new, parts = split
        take, words = 0, 0  # the most first statements that fit, one left for the rest
        while take < len(parts) - 1 and words + len(parts[take].content.split()) <= room:
            words += len(parts[take].content.split())
            take += 1
        if not take:
            return records, marked
        moved = _piece(layer, new, parts[:take], shown, new_id())
        rest = _piece(layer, new, parts[take:], shown, new.id)
    text = f"{ended(kept)} {moved.content}"
    data = dict(moved.meta[META_KEY])
    data["count"] = int(old.meta.get(META_KEY, {}).get("count", 1)) + int(data.get("count", 1))
    merged = moved.copy(
        content=text,
        tokens=layer.count_tokens(text),
        salience=max(float(old.salience), float(moved.salience)),
        provenance=tuple(dict.fromkeys((*old.provenance, *moved.provenance))),
        meta={**moved.meta, META_KEY: data},
    )
    pieces = [merged] if rest is None else [merged, rest]
    vectors = check_embeddings(layer.embedder.embed([r.content for r in pieces]), len(pieces),
                               layer.embedder.dims, layer.embedder.name)  # fmt: skip
    pieces = [r.copy(embedding=v) for r, v in zip(pieces, vectors, strict=True)]
    retired[old.id] = None  # archived after the write; a stale span on it is kept as history
    return [*records[:at], *pieces, *records[at + 1 :]], marked


def _piece(
    layer: MemoryLayer, bundle: MemoryRecord, parts: tuple[Reflection, ...],
    shown: dict[str, MemoryRecord], record_id: str,
) -> MemoryRecord:  # fmt: skip
    """The record of some of a new bundle's statements: ``bundle`` with their text,
    sources, citations, count and salience (its embedding is set by the caller)."""
    sources = [shown[i] for p in parts for i in p.sources if i in shown]
    provenance = _cite({}, sources, [c for p in parts for c in p.covers], shown)
    text = " ".join(ended(p.content) for p in parts)
    data = dict(bundle.meta[META_KEY])
    data["count"] = sum(p.count for p in parts)
    data["sources"] = list(dict.fromkeys(r.id for r in sources))
    created = max((r.created_at for r in sources), default=bundle.created_at)
    return bundle.copy(
        id=record_id,
        content=text,
        tokens=layer.count_tokens(text),
        salience=min(bundle.salience, max(p.salience for p in parts)),
        created_at=created,
        last_accessed_at=created,
        provenance=tuple(provenance),
        meta={**bundle.meta, META_KEY: data},
    )


def _with_stale(old: MemoryRecord, new: MemoryRecord, s: Supersession) -> MemoryRecord | None:
    """``old`` with the spans ``s`` names marked stale by ``new`` (None when the
    decision cannot be applied: a span outside the text)."""
    spans = list(dict.fromkeys((s.span, *s.more_spans)))
    entries = [
        Superseded(by=new.id, at=new.created_at, span=span, reason=s.reason,
                   confidence=float(s.confidence), detail=s.detail)
        for span in spans
    ]  # fmt: skip
    changed = old.copy(superseded=(*old.superseded, *entries))
    try:
        for entry in entries:
            entry.check(changed)
    except InputError:
        return None
    return changed


def _label(record: MemoryRecord) -> str | None:
    data = record.meta.get(META_KEY)
    return data.get("label") if isinstance(data, dict) else None


__all__ = ["ReflectionReport", "reflect_scope"]
