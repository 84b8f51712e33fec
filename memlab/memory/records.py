"""Memory records: kinds, sources, ids, scopes, supersession entries and their checks
(what a recall asks and returns: ``memlab.memory.query``)."""

from __future__ import annotations

import functools
import math
import numbers
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np

from memlab.errors import InputError
from memlab.memory.checks import (
    MAX_COUNT,
    check_id,
    check_meta,
    check_number,
    check_strings,
    check_text,
    check_time,
    check_unicode,
)


class MemoryKind(StrEnum):
    """What a memory is: an event, a durable fact, or a how-to."""

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


class Source(StrEnum):
    """Where a memory came from. ``tool`` and ``web`` are untrusted."""

    USER = "user"
    AGENT = "agent"
    TOOL = "tool"
    WEB = "web"

    @property
    def trusted(self) -> bool:
        return self not in UNTRUSTED_SOURCES


UNTRUSTED_SOURCES = frozenset({Source.TOOL, Source.WEB})
KIND_CODES: dict[MemoryKind, int] = {k: i for i, k in enumerate(MemoryKind)}
SOURCE_CODES: dict[Source, int] = {s: i for i, s in enumerate(Source)}
#: The ``SOURCE_CODES`` of untrusted sources, for masks over a store's ``source`` column.
UNTRUSTED_CODES = np.array(sorted(SOURCE_CODES[s] for s in UNTRUSTED_SOURCES), dtype=np.int8)
# code -> untrusted, for every int8 code: one gather instead of np.isin's sort
# (a recall of two 10k-row layers spent 0.3 ms in np.isin)
_UNTRUSTED_TABLE = np.zeros(256, dtype=bool)
_UNTRUSTED_TABLE[UNTRUSTED_CODES.astype(np.uint8)] = True


def untrusted_mask(source: np.ndarray) -> np.ndarray:
    """Which rows of a store's int8 ``source`` column hold an untrusted source
    (the same as ``np.isin(source, UNTRUSTED_CODES)``)."""
    return _UNTRUSTED_TABLE[np.asarray(source, dtype=np.int8).view(np.uint8)]


@functools.lru_cache(maxsize=64)
def _kinds_table(kinds: frozenset[MemoryKind]) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[[KIND_CODES[k] for k in kinds]] = True
    return table


def kinds_mask(kind: np.ndarray, kinds: frozenset[MemoryKind]) -> np.ndarray:
    """Which rows of a store's int8 ``kind`` column hold one of ``kinds`` (the same
    as ``np.isin(kind, codes)``, one gather instead of its sort: maintenance asks
    for the episodic rows of a scope at every turn)."""
    return _kinds_table(kinds)[np.asarray(kind, dtype=np.int8).view(np.uint8)]


_ID_LOCK = threading.Lock()
_ID_LAST = [0, 0]  # the last id's milliseconds and counter


def new_id() -> str:
    """A fresh record id (32 hex characters) that sorts after every id this process
    made before: 12 hex digits of milliseconds since the epoch (never going back),
    then an 80-bit counter that starts at a random value each millisecond.

    Records that share a ``created_at`` (a note or a reflection and its newest
    source) are ordered by ``(created_at, id)`` in folds, reflection cursors, "the
    newest bundle" and the ranking's ties. With random ids those ties broke at
    random: a replay of the same LongMemEval questions gave different figures from
    run to run, and an episode written at the same time as the last one reflected
    could be skipped. With these they break by write order, the same in every run.
    Ids from several processes stay unique (the random start), like UUIDs.
    """
    with _ID_LOCK:
        ms = max(time.time_ns() // 1_000_000, _ID_LAST[0])
        # a random start with room to count up within the millisecond
        count = _ID_LAST[1] + 1 if ms == _ID_LAST[0] else secrets.randbits(79)
        if count >= 1 << 80:  # about 2**79 ids in one millisecond: take the next one
            ms, count = ms + 1, secrets.randbits(79)
        _ID_LAST[0], _ID_LAST[1] = ms, count
    return f"{ms:012x}{count:020x}"


def check_scope(scope: object) -> str:
    """Validate a scope string and return it unchanged.

    A scope is any non-empty string that can be encoded as UTF-8 (quotes, ``%``,
    ``_``, NUL and any unicode are fine; lone surrogates are not). It is matched
    exactly, byte for byte, on every store.

    Raises:
        InputError: if the scope is not a non-empty, UTF-8 encodable string.
    """
    if not isinstance(scope, str) or not scope:
        shown = repr(scope) if len(repr(scope)) <= 80 else repr(scope)[:77] + "..."
        raise InputError(f"scope must be a non-empty string, got {shown}")
    return check_unicode(scope, "scope")


ScopeArg = str | Sequence[str]
"""One scope, or an ordered list of layered scopes (narrowest first; see
memlab.memory.scopes)."""


def check_scopes(scope: object) -> tuple[str, ...]:
    """One scope or a list of scopes, checked, as a tuple (narrowest first).

    Raises:
        InputError: an empty list, a scope that is not a non-empty string, or a
            scope listed twice.
    """
    if isinstance(scope, str):
        return (check_scope(scope),)
    if isinstance(scope, bytes | bytearray) or not isinstance(scope, Sequence):
        raise InputError(f"scope must be a string or a list of strings, got {type(scope).__name__}")
    scopes = tuple(check_scope(s) for s in scope)
    if not scopes:
        raise InputError("the list of scopes is empty; give at least one scope")
    if len(set(scopes)) != len(scopes):
        dup = next(s for s in scopes if scopes.count(s) > 1)
        raise InputError(f"scope {dup!r} is listed twice; list each layer once")
    return scopes


def check_split(split: object, n_layers: int) -> tuple[float, ...] | None:
    """Budget shares per layer, normalized to sum to 1 (None: a shared ranking).

    Raises:
        InputError: not one non-negative number per layer, or all zero.
    """
    if split is None:
        return None
    if isinstance(split, str) or not isinstance(split, Sequence):
        raise InputError(f"split must be a list of numbers, one per scope, got {split!r}")
    values = []
    for v in split:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0:
            raise InputError(f"split values must be numbers >= 0, got {v!r}")
        values.append(float(v))
    if len(values) != n_layers:
        raise InputError(
            f"split has {len(values)} shares for {n_layers} scope(s); give one share per scope"
        )
    top = max(values, default=0.0)
    if top <= 0:
        raise InputError("split shares are all 0; give at least one layer a share of the budget")
    # Scaled by the largest share first: the sum of two shares near 1e308 is
    # inf, which made every share 0 and the recall empty.
    values = [v / top for v in values]
    total = sum(values)
    return tuple(v / total for v in values)


def as_kind(value: MemoryKind | str) -> MemoryKind:
    try:
        return MemoryKind(value)
    except (ValueError, TypeError):
        raise InputError(
            f"unknown memory kind {value!r}; use one of {[k.value for k in MemoryKind]}"
        ) from None


def as_source(value: Source | str) -> Source:
    try:
        return Source(value)
    except (ValueError, TypeError):
        raise InputError(
            f"unknown memory source {value!r}; use one of {[s.value for s in Source]}"
        ) from None


@dataclass(frozen=True)
class Superseded:
    """A newer record superseded this record, or one claim in it.

    Kept on the old record (which is never deleted by supersession) so recall can
    leave it out, ``RecallQuery(as_of=t)`` can travel back to when it was valid,
    and ``explain()`` can say why.

    Attributes:
        by: the id of the newer record (same scope).
        at: epoch seconds from which the old claim is no longer in force (the newer
            record's ``created_at``): the record is valid over ``[created_at, at)``.
        span: ``(start, end)`` character offsets of the superseded claim in the
            record's content when only that claim is stale (a multi-fact message, a
            summary note); None: the whole record.
        reason: why (a consolidator's reason code, e.g. ``explicit-old-value``).
        confidence: in [0, 1].
        detail: a human-readable explanation (which words fired).
    """

    by: str
    at: float
    span: tuple[int, int] | None = None
    reason: str = ""
    confidence: float = 1.0
    detail: str = ""

    @property
    def whole(self) -> bool:
        return self.span is None

    def check(self, record: MemoryRecord) -> None:
        """Raises InputError naming the record and what is wrong with this entry."""
        where = f"record {record.id}: superseded entry"
        if not isinstance(self.by, str) or not self.by:
            raise InputError(f"{where}: 'by' must be the id of the newer record, got {self.by!r}")
        if self.by == record.id:
            raise InputError(f"{where}: a record cannot supersede itself")
        if check_time(self.at, f"{where}: 'at'") < record.created_at:
            raise InputError(
                f"{where}: 'at' {self.at!r} must not be before the record's "
                f"created_at {record.created_at!r}"
            )
        if self.span is not None:
            ok = (
                isinstance(self.span, tuple)
                and len(self.span) == 2
                and all(isinstance(i, int) and not isinstance(i, bool) for i in self.span)
                and 0 <= self.span[0] < self.span[1] <= len(record.content)
            )
            if not ok:
                raise InputError(
                    f"{where}: span {self.span!r} must be (start, end) offsets inside the "
                    f"content (0 <= start < end <= {len(record.content)})"
                )
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, int | float) or not 0.0 <= c <= 1.0:
            raise InputError(f"{where}: confidence {c!r} is outside 0..1")
        if not isinstance(self.reason, str) or not isinstance(self.detail, str):
            raise InputError(f"{where}: reason and detail must be strings")
        # a lone surrogate cannot be encoded as UTF-8 by the JSONL and SQLite stores
        check_unicode(self.by, f"{where}: 'by'")
        check_unicode(self.reason, f"{where}: reason")
        check_unicode(self.detail, f"{where}: detail")

    def explain(self) -> str:
        """One line: ``superseded by r2 at 2026-...Z (explicit-old-value, 0.90): ...``."""
        what = (
            "superseded"
            if self.span is None
            else f"claim {self.span[0]}..{self.span[1]} superseded"
        )
        how = f" ({self.reason}, {self.confidence:.2f})" if self.reason else ""
        return f"{what} by {self.by} at {_iso(self.at)}{how}" + (
            f": {self.detail}" if self.detail else ""
        )


def _iso(ts: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(eq=False)
class MemoryRecord:
    """One memory.

    Attributes:
        id: unique id within the store.
        content: the text that is recalled into a prompt.
        embedding: float32 vector (1-D) of the embedder's dimensions.
        kind: episodic | semantic | procedural.
        scope: who the memory belongs to (e.g. ``"alice:support"``); exact match.
        salience: importance in [0, 1].
        tokens: estimated prompt tokens of ``content``.
        created_at: epoch seconds (UTC) when the memory was formed.
        last_accessed_at: epoch seconds of the last recall that returned it.
        access_count: how many recalls returned it.
        archived_at: epoch seconds when it was archived (folded into a summary), or None.
        source: user | agent | tool | web (tool and web are untrusted).
        provenance: ids of the transcript turns or records it came from.
        meta: free-form JSON-serializable metadata.
        superseded: what newer records superseded in it (see ``Superseded``), in
            the order it happened. A record is valid from ``created_at`` until the
            first entry without a span (``invalid_at``); entries with a span mark a
            stale claim inside a record that stays valid (``stale_spans``).
    """

    id: str
    content: str
    embedding: np.ndarray
    kind: MemoryKind
    scope: str
    salience: float
    tokens: int
    created_at: float
    last_accessed_at: float
    access_count: int = 0
    archived_at: float | None = None
    source: Source = Source.USER
    provenance: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    superseded: tuple[Superseded, ...] = ()

    def __post_init__(self) -> None:
        self.kind = as_kind(self.kind)
        self.source = as_source(self.source)
        if type(self.provenance) is not tuple:
            self.provenance = tuple(check_strings(self.provenance, f"record {self.id}: provenance"))
        if type(self.superseded) is not tuple:
            if isinstance(self.superseded, str | bytes | Superseded):
                raise InputError(
                    f"record {self.id}: superseded must be a list of Superseded entries"
                )
            try:
                self.superseded = tuple(self.superseded)
            except TypeError:
                raise InputError(
                    f"record {self.id}: superseded must be a list of Superseded entries, "
                    f"got {type(self.superseded).__name__}"
                ) from None
        try:
            emb = np.asarray(self.embedding, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"record {self.id}: embedding must be a 1-D vector of numbers ({exc})"
            ) from None
        if emb.ndim != 1 or emb.size == 0:
            raise InputError(
                f"record {self.id}: embedding must be a non-empty 1-D vector, got shape {emb.shape}"
            )
        self.embedding = emb

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    @property
    def invalid_at(self) -> float | None:
        """When the whole record stopped being in force (None: it still is)."""
        whole = [s.at for s in self.superseded if s.span is None]
        return min(whole) if whole else None

    @property
    def superseded_by(self) -> str | None:
        """The id of the record that superseded this whole record (the earliest)."""
        whole = [s for s in self.superseded if s.span is None]
        return min(whole, key=lambda s: s.at).by if whole else None

    @property
    def stale_spans(self) -> tuple[Superseded, ...]:
        """The entries that mark a stale claim inside the record."""
        return tuple(s for s in self.superseded if s.span is not None)

    def valid_at(self, t: float) -> bool:
        """Whether the record was in force at ``t``: made at or before ``t`` and not
        wholly superseded by then (archiving is a separate matter)."""
        invalid = self.invalid_at
        return self.created_at <= t and (invalid is None or t < invalid)

    def text_at(self, t: float | None = None) -> str:
        """The content without the claims superseded at or before ``t`` (None: any
        time), with whitespace tidied where a claim was cut out."""
        if not self.superseded:  # most records: nothing to cut (read for every hit)
            return self.content
        cuts = sorted(
            s.span for s in self.superseded if s.span is not None and (t is None or s.at <= t)
        )
        if not cuts:
            return self.content
        parts, pos = [], 0
        for start, end in cuts:
            if start > pos:
                parts.append(self.content[pos:start])
            pos = max(pos, end)
        parts.append(self.content[pos:])
        return " ".join(" ".join(p.split()) for p in parts if p.strip())

    def validate(self) -> MemoryRecord:
        """Check every field a store relies on; return self.

        Raises:
            InputError: naming the record id and the field that is wrong.
        """
        check_id(self.id)
        where = f"record {self.id}"
        if isinstance(self.content, str) and not self.content.strip():
            raise InputError(f"{where}: content is empty; there is nothing to remember")
        check_text(self.content, f"{where}: content")
        check_scope(self.scope)
        check_number(self.salience, f"{where}: salience", lo=0.0, hi=1.0)
        check_number(self.tokens, f"{where}: tokens", lo=0, hi=MAX_COUNT, integer=True)
        check_number(self.access_count, f"{where}: access_count", lo=0, hi=MAX_COUNT, integer=True)
        check_time(self.created_at, f"{where}: created_at")
        check_time(self.last_accessed_at, f"{where}: last_accessed_at")
        # NaN would read back as NULL from SQLite: an archived record active again.
        check_time(self.archived_at, f"{where}: archived_at", none=True)
        check_strings(self.provenance, f"{where}: provenance")
        check_meta(self.meta, f"{where}: meta")
        # the constructor makes the embedding a 1-D float32 array; one assigned
        # later is checked here, before a store indexes or writes it (a store keeps
        # a copy, which converts a float64 vector to float32)
        emb = self.embedding
        if not (
            type(emb) is np.ndarray and emb.ndim == 1 and emb.size > 0 and emb.dtype.kind in "fiu"
        ):
            got = f"shape {emb.shape}, {emb.dtype}" if isinstance(emb, np.ndarray) else type(emb)
            raise InputError(
                f"record {self.id}: embedding must be a non-empty 1-D vector of numbers, got "
                f"{got}; build the record anew or use record.copy(embedding=...)"
            )
        # float32 values cannot overflow a float64 sum, and NaN or inf make it
        # non-finite: one pass, exact; another dtype is checked as float32 holds it
        if emb.dtype != np.float32:
            with np.errstate(over="ignore"):
                emb = emb.astype(np.float32)
        if not math.isfinite(float(emb.sum(dtype=np.float64))):
            raise InputError(
                f"record {self.id}: embedding holds NaN or infinite values (as float32)"
            )
        for s in self.superseded:
            if not isinstance(s, Superseded):
                raise InputError(
                    f"record {self.id}: superseded holds a {type(s).__name__}, not Superseded"
                )
            s.check(self)
        return self

    def copy(self, **changes: Any) -> MemoryRecord:
        """A shallow copy with some fields changed (embedding and meta are copied)."""
        if not changes and self._normalized():
            # Stores copy every record they return (list() at every maintenance
            # pass): skip dataclasses.replace, whose __post_init__ would only
            # re-coerce fields that are already in normal form.
            # (a copied __dict__ assigned whole: half the cost of updating the new
            # instance's empty one field by field)
            fields = self.__dict__.copy()
            fields["embedding"] = self.embedding.copy()
            fields["meta"] = dict(self.meta)
            new = object.__new__(MemoryRecord)
            new.__dict__ = fields
            return new
        changes.setdefault("embedding", self.embedding.copy())
        changes.setdefault("meta", dict(self.meta))
        return replace(self, **changes)

    def _normalized(self) -> bool:
        """Whether __post_init__ would leave every field unchanged."""
        emb = self.embedding
        return (
            type(self.kind) is MemoryKind
            and type(self.source) is Source
            and type(self.provenance) is tuple
            and type(self.superseded) is tuple
            and type(emb) is np.ndarray
            and emb.dtype == np.float32
            and emb.ndim == 1
            and emb.size > 0
        )

    def same_as(self, other: MemoryRecord) -> bool:
        """Field-by-field equality, comparing embeddings exactly."""
        return (
            self.id == other.id
            and self.content == other.content
            and self.kind == other.kind
            and self.scope == other.scope
            and self.salience == other.salience
            and self.tokens == other.tokens
            and self.created_at == other.created_at
            and self.last_accessed_at == other.last_accessed_at
            and self.access_count == other.access_count
            and self.archived_at == other.archived_at
            and self.source == other.source
            and self.provenance == other.provenance
            and self.meta == other.meta
            and self.superseded == other.superseded
            and self.embedding.shape == other.embedding.shape
            and bool(np.array_equal(self.embedding, other.embedding))
        )


#: The ``meta`` key naming the person who said a record, where a conversation has
#: several (a group chat; LoCoMo's two speakers). Consolidators never let one
#: speaker's statement supersede another's.
SPEAKER_KEY = "speaker"


def id_list(value: object) -> list[str]:
    """``value`` if it is a list of record ids (non-empty strings), else none.

    The note marks (``meta["summary_of"]``, ``meta["absorbs"]``) of a record
    remembered with other values there (5, "ab", [1]) mark nothing: they made every
    later fold or correction of its scope fail with a bare TypeError, or were
    spliced in letter by letter."""
    if isinstance(value, list) and all(isinstance(i, str) and i for i in value):
        return value
    return []


def speaker_of(record: MemoryRecord) -> str | None:
    """The record's ``meta["speaker"]``, if it names one."""
    name = record.meta.get(SPEAKER_KEY)
    return name if isinstance(name, str) and name.strip() else None


def same_speaker(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Whether two records may be by the same person: True unless both name a
    speaker (``meta["speaker"]``) and the names differ (case-insensitively)."""
    x, y = speaker_of(a), speaker_of(b)
    if x is None or y is None:
        return True
    return x.strip().casefold() == y.strip().casefold()


#: how recall treats superseded records (RecallQuery.superseded, SupersedePolicy.recall)
SUPERSEDED_MODES = ("exclude", "downweight", "include")


def check_kinds(kinds: object, name: str) -> tuple[MemoryKind, ...]:
    """A list of memory kinds (a bare string is refused: it is not a list)."""
    if isinstance(kinds, MemoryKind):
        raise InputError(f"{name} must be a list of kinds, e.g. [{kinds.value!r}]")
    if isinstance(kinds, str | bytes):
        raise InputError(f"{name} must be a list of kinds, e.g. [{kinds!r}], not a string")
    try:
        items = list(kinds)  # type: ignore[call-overload]
    except TypeError:
        raise InputError(f"{name} must be a list of kinds, got {type(kinds).__name__}") from None
    return tuple(as_kind(k) for k in items)
