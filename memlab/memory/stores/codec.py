"""JSON encoding of memory records, shared by the file-backed stores."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from memlab.memory.records import MemoryRecord


def encode_embedding(vec: np.ndarray) -> str:
    """float32 little-endian bytes as base64: exact and ~3x smaller than a float list."""
    return base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")


def decode_embedding(text: str) -> np.ndarray:
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 4:
        raise ValueError(f"embedding has {len(raw)} bytes, not a multiple of 4")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def record_to_dict(r: MemoryRecord) -> dict[str, Any]:
    return {
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
    )
