"""JSON encoding of memory records, shared by the file-backed stores."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from memlab.memory.records import MemoryRecord, Superseded


def encode_embedding(vec: np.ndarray) -> str:
    """float32 little-endian bytes as base64: exact and ~3x smaller than a float list."""
    return base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")


def decode_embedding(text: str) -> np.ndarray:
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 4:
        raise ValueError(f"embedding has {len(raw)} bytes, not a multiple of 4")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def superseded_to_list(entries: tuple[Superseded, ...]) -> list[dict[str, Any]]:
    """``MemoryRecord.superseded`` as JSON data (the fields that are set)."""
    out = []
    for s in entries:
        d: dict[str, Any] = {"by": s.by, "at": float(s.at)}
        if s.span is not None:
            d["span"] = [int(s.span[0]), int(s.span[1])]
        if s.reason:
            d["reason"] = s.reason
        if s.confidence != 1.0:
            d["confidence"] = float(s.confidence)
        if s.detail:
            d["detail"] = s.detail
        out.append(d)
    return out


def superseded_from_list(data: Any) -> tuple[Superseded, ...]:
    """Decode ``superseded_to_list``'s output; raises KeyError/ValueError/TypeError."""
    if not isinstance(data, list):
        raise TypeError(f"superseded must be a list, got {type(data).__name__}")
    out = []
    for d in data:
        if not isinstance(d, dict):
            raise TypeError(f"a superseded entry must be an object, got {type(d).__name__}")
        span = d.get("span")
        if span is not None and (not isinstance(span, list) or len(span) != 2):
            raise ValueError(f"a superseded span must be [start, end], got {span!r}")
        out.append(
            Superseded(
                by=str(d["by"]),
                at=float(d["at"]),
                span=None if span is None else (int(span[0]), int(span[1])),
                reason=str(d.get("reason", "")),
                confidence=float(d.get("confidence", 1.0)),
                detail=str(d.get("detail", "")),
            )
        )
    return tuple(out)


def record_to_dict(r: MemoryRecord) -> dict[str, Any]:
    """A record as JSON data. ``superseded`` is written only when set, so records
    without supersession encode exactly as before it existed."""
    d: dict[str, Any] = {
        "id": r.id,
        "content": r.content,
        "e": encode_embedding(r.embedding),
        "kind": r.kind.value,
        "scope": r.scope,
        "salience": float(r.salience),
        "tokens": int(r.tokens),
        "created_at": float(r.created_at),
        "last_accessed_at": float(r.last_accessed_at),
        "access_count": int(r.access_count),
        "archived_at": None if r.archived_at is None else float(r.archived_at),
        "source": r.source.value,
        "provenance": list(r.provenance),
        "meta": r.meta,
    }
    if r.superseded:
        d["superseded"] = superseded_to_list(r.superseded)
    return d


def record_from_dict(d: dict[str, Any]) -> MemoryRecord:
    """Decode a record; raises KeyError/ValueError/TypeError on malformed input."""
    return MemoryRecord(
        id=str(d["id"]),
        content=d["content"],
        embedding=decode_embedding(d["e"]),
        kind=d["kind"],
        scope=d["scope"],
        salience=float(d["salience"]),
        tokens=int(d["tokens"]),
        created_at=float(d["created_at"]),
        last_accessed_at=float(d["last_accessed_at"]),
        access_count=int(d["access_count"]),
        archived_at=None if d["archived_at"] is None else float(d["archived_at"]),
        source=d["source"],
        provenance=tuple(str(p) for p in d["provenance"]),
        meta=dict(d["meta"]),
        superseded=superseded_from_list(d.get("superseded", [])),
    )
