"""JSON encoding of memory records, shared by the file-backed stores."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from memlab.memory.records import MemoryRecord, Superseded, as_kind, as_source


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
    """Decode ``superseded_to_list``'s output, taking each value only in the JSON type
    that function writes (see ``record_from_dict``).

    Raises:
        KeyError, ValueError, TypeError: the data is malformed.
    """
    if not isinstance(data, list):
        raise TypeError(f"superseded must be a list, got {_kind_of(data)}")
    out = []
    for d in data:
        if not isinstance(d, dict):
            raise TypeError(f"a superseded entry must be an object, got {_kind_of(d)}")
        span = d.get("span")
        if span is not None and (
            not isinstance(span, list) or len(span) != 2 or not all(_is_int(v) for v in span)
        ):
            raise ValueError(f"a superseded span must be [start, end] integers, got {span!r}")
        out.append(
            Superseded(
                by=_string(d, "by", "a superseded entry's by"),
                at=_number(d, "at", "a superseded entry's at"),
                span=None if span is None else (span[0], span[1]),
                reason=_string(d, "reason", "a superseded entry's reason", default=""),
                confidence=_number(d, "confidence", "a superseded entry's confidence", default=1.0),
                detail=_string(d, "detail", "a superseded entry's detail", default=""),
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
    """Decode a record, taking each field only in the JSON type ``record_to_dict``
    writes: a string for the text fields, an integer (not a boolean) for ``tokens``
    and ``access_count``, a number (an integer too: an older writer's ``1000`` for
    ``1000.0``) for the scores and times, a list of strings for ``provenance`` and
    an object for ``meta``. A value of another type is damage, never converted
    (``"5"`` tokens, ``"abc"`` provenance, a list of pairs for ``meta``).

    Raises:
        KeyError, ValueError, TypeError: the data is malformed (the message names
            the record and the field, and quotes no text).
    """
    if not isinstance(d, dict):
        raise TypeError(f"a record must be an object, got {_kind_of(d)}")
    rid = _string(d, "id", "the id")
    try:
        provenance = d["provenance"]
        if not isinstance(provenance, list):
            raise TypeError(f"provenance is {_kind_of(provenance)}, not a list of strings")
        for p in provenance:
            if not isinstance(p, str):
                raise TypeError(f"provenance holds {_kind_of(p)}, not only strings")
        meta = d["meta"]
        if not isinstance(meta, dict):
            raise TypeError(f"meta is {_kind_of(meta)}, not an object")
        archived_at = d["archived_at"]
        return MemoryRecord(
            id=rid,
            content=_string(d, "content"),
            embedding=decode_embedding(_string(d, "e", "the embedding")),
            kind=as_kind(_string(d, "kind")),
            scope=_string(d, "scope"),
            salience=_number(d, "salience"),
            tokens=_integer(d, "tokens"),
            created_at=_number(d, "created_at"),
            last_accessed_at=_number(d, "last_accessed_at"),
            access_count=_integer(d, "access_count"),
            archived_at=None if archived_at is None else _number(d, "archived_at"),
            source=as_source(_string(d, "source")),
            provenance=tuple(provenance),
            meta=meta,
            superseded=superseded_from_list(d.get("superseded", [])),
        )
    except (KeyError, ValueError, TypeError) as exc:
        if isinstance(exc, KeyError):
            raise ValueError(f"record {rid[:80]!r}: the field {exc.args[0]!r} is missing") from None
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"record {rid[:80]!r}: {exc}") from None


_MISSING = object()


def _kind_of(value: Any) -> str:
    """What a JSON value is, for a message; numbers are shown, text never is (it
    may be the user's stored data)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _get(d: dict[str, Any], key: str, default: Any) -> Any:
    return d[key] if default is _MISSING else d.get(key, default)


def _string(d: dict[str, Any], key: str, name: str = "", *, default: Any = _MISSING) -> str:
    value = _get(d, key, default)
    if not isinstance(value, str):
        raise TypeError(f"{name or key} is {_kind_of(value)}, not a string")
    return value


def _integer(d: dict[str, Any], key: str) -> int:
    value = d[key]
    if not _is_int(value):
        raise TypeError(f"{key} is {_kind_of(value)}, not an integer")
    return int(value)


def _number(d: dict[str, Any], key: str, name: str = "", *, default: Any = _MISSING) -> float:
    value = _get(d, key, default)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{name or key} is {_kind_of(value)}, not a number")
    return float(value)
