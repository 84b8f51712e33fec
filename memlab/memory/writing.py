"""The records a write makes: each ``MemoryInput`` checked (scope, kind, source,
salience, provenance, meta, id, time) and every content embedded in one batched
call, before anything is stored (``MemoryLayer.remember_many``; maintenance
decides what a note replaces first)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from memlab.errors import InputError
from memlab.memory.checks import (
    check_id,
    check_meta,
    check_number,
    check_strings,
    check_text,
    check_time,
)
from memlab.memory.evict import DECAYED_KEY, REVIEWED_KEY, WRITTEN_KEY
from memlab.memory.layer_types import MemoryInput
from memlab.memory.models.embedder import check_embeddings
from memlab.memory.procedural import META_KEY as PROCEDURE_KEY
from memlab.memory.procedural import Procedure
from memlab.memory.records import (
    UNTRUSTED_SOURCES,
    MemoryKind,
    MemoryRecord,
    Source,
    as_kind,
    as_source,
    new_id,
)
from memlab.memory.reflect import META_KEY as REFLECTION_KEY

if TYPE_CHECKING:
    from memlab.memory.layer import MemoryLayer

#: Meta keys only the layer writes: the salience a record was written with before
#: decay, when decay last ran, who approved it (``MemoryLayer.approve``), and the
#: mark of a reflection pass (which episodes it read up to: a record carrying a
#: forged one stopped reflection of the scope for good).
LAYER_META_KEYS = frozenset({WRITTEN_KEY, DECAYED_KEY, REVIEWED_KEY, REFLECTION_KEY})


def new_records(layer: MemoryLayer, items: Sequence[MemoryInput]) -> list[MemoryRecord]:
    """The records ``items`` make, checked and embedded in one batched call, not
    stored. The caller checked that the layer is open.

    Raises:
        InputError: a bad item (nothing is embedded after it).
    """
    if isinstance(items, MemoryInput) or not isinstance(items, Sequence | Iterable):
        raise InputError(f"remember_many takes a list of MemoryInput, got {type(items).__name__}")
    items = list(items)
    if not items:
        return []
    now = check_time(layer.clock(), "the layer's clock()")
    prepared = [_prepare(layer, item, now) for item in items]
    texts = [p[2] for p in prepared]
    vectors = check_embeddings(
        layer.embedder.embed(texts), len(texts), layer.embedder.dims, layer.embedder.name
    )
    return [
        MemoryRecord(
            id=item.id or new_id(),
            content=text,
            embedding=vectors[i],
            kind=kind,
            scope=scope,
            salience=salience,
            tokens=layer.count_tokens(text),
            created_at=created,
            last_accessed_at=created,
            source=source,
            provenance=tuple(item.provenance),
            meta=dict(item.meta or {}),
        )
        for i, (item, scope, text, kind, source, salience, created) in enumerate(prepared)
    ]


def _prepare(
    layer: MemoryLayer, item: MemoryInput, now: float
) -> tuple[MemoryInput, str, str, MemoryKind, Source, float, float]:
    if not isinstance(item, MemoryInput):
        raise InputError(
            f"remember_many takes MemoryInput items, got {type(item).__name__}; "
            "e.g. MemoryInput('alice', 'We deploy on GKE.')"
        )
    kind = as_kind(item.kind)
    scope = layer.layers.scope_for(kind, item.scope)
    if not isinstance(item.content, str) or not item.content.strip():
        raise InputError(f"cannot remember empty content in scope {scope!r}")
    check_text(item.content, "content")
    source = as_source(item.source)
    salience = check_number(item.salience, "salience", lo=0.0, hi=1.0)
    if source in UNTRUSTED_SOURCES:
        salience = min(salience, layer.untrusted_salience_cap)
    check_strings(item.provenance, "provenance")
    if item.meta is not None:
        check_meta(item.meta)
        owned = sorted(LAYER_META_KEYS.intersection(item.meta))
        if owned:
            # the layer writes these (decay, approval, reflection); a caller's value
            # would buy eviction protection or a review the record never had, or
            # mark the scope's episodes as reflected
            raise InputError(
                f"meta keys {owned} are the layer's own bookkeeping (written salience, "
                "decay, review, reflection) and cannot be given to remember(); drop "
                "them, and use approve() to review a record"
            )
        proc = item.meta.get(PROCEDURE_KEY)
        if kind is MemoryKind.PROCEDURAL and isinstance(proc, Mapping):
            # read back by every later remember_procedure of the scope: a malformed
            # one made each of them fail with "not a procedure"
            try:
                Procedure.from_meta(proc)
            except InputError as exc:
                raise InputError(
                    f"{exc}; write procedures with remember_procedure(), or give "
                    "meta['procedure'] a task and steps as Procedure.to_meta() writes them"
                ) from None
    if item.id is not None:
        check_id(item.id, "id")
    created = check_time(item.created_at, "created_at", none=True)
    return (
        item,
        scope,
        item.content.strip(),
        kind,
        source,
        salience,
        now if created is None else created,
    )
