"""Memory records, recall queries and scored hits."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np

from memlab.errors import InputError
from memlab.memory.checks import (
    check_id,
    check_meta,
    check_number,
    check_strings,
    check_text,
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


def new_id() -> str:
    """A fresh random record id (32 hex characters)."""
    return uuid.uuid4().hex


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
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise InputError(f"split values must be numbers >= 0, got {v!r}")
        values.append(float(v))
    if len(values) != n_layers:
        raise InputError(
            f"split has {len(values)} shares for {n_layers} scope(s); give one share per scope"
        )
    total = sum(values)
    if total <= 0:
        raise InputError("split shares are all 0; give at least one layer a share of the budget")
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

    def __post_init__(self) -> None:
        self.kind = as_kind(self.kind)
        self.source = as_source(self.source)
        if type(self.provenance) is not tuple:
            self.provenance = tuple(check_strings(self.provenance, f"record {self.id}: provenance"))
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
        check_number(self.tokens, f"{where}: tokens", lo=0, integer=True)
        check_number(self.access_count, f"{where}: access_count", lo=0, integer=True)
        check_number(self.created_at, f"{where}: created_at")
        check_number(self.last_accessed_at, f"{where}: last_accessed_at")
        # NaN would read back as NULL from SQLite: an archived record active again.
        check_number(self.archived_at, f"{where}: archived_at", none=True)
        check_strings(self.provenance, f"{where}: provenance")
        check_meta(self.meta, f"{where}: meta")
        # float32 values cannot overflow a float64 sum, and NaN or inf make it
        # non-finite: one pass, exact.
        if not math.isfinite(float(self.embedding.sum(dtype=np.float64))):
            raise InputError(f"record {self.id}: embedding holds NaN or infinite values")
        return self

    def copy(self, **changes: Any) -> MemoryRecord:
        """A shallow copy with some fields changed (embedding and meta are copied)."""
        if not changes and self._normalized():
            # Stores copy every record they return (list() at every maintenance
            # pass): skip dataclasses.replace, whose __post_init__ would only
            # re-coerce fields that are already in normal form.
            new = object.__new__(MemoryRecord)
            new.__dict__.update(self.__dict__)
            new.embedding = self.embedding.copy()
            new.meta = dict(self.meta)
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
            and self.embedding.shape == other.embedding.shape
            and bool(np.array_equal(self.embedding, other.embedding))
        )


@dataclass(frozen=True)
class RecallQuery:
    """What to recall.

    Attributes:
        scope: whose memory to search (exact match), or an ordered list of
            layered scopes, narrowest first (each matched exactly; see
            memlab.memory.scopes). Kept as given: a string, or a tuple of strings.
        text: the query text (usually the user's message).
        token_budget: the packed hits' tokens never exceed this.
        max_hits: at most this many hits (None: as many as fit).
        kinds: restrict to these kinds (None: all).
        min_score: drop candidates scoring below this.
        min_score_ratio: drop candidates scoring below this share of the best
            candidate's score (0 keeps everything; 0.6 keeps only close seconds),
            so a budget is not filled with memories that merely exist.
        include_untrusted: include tool/web memories (always delimited as data).
        now: epoch seconds to rank against; None uses the layer's clock.
        split: with several scopes: None ranks all their records together (a
            shared ranking); a list of shares, one per scope, gives each layer
            that share of ``token_budget`` (unused tokens flow on to the next).
    """

    scope: str | tuple[str, ...]
    text: str
    token_budget: int = 800
    max_hits: int | None = None
    kinds: Sequence[MemoryKind | str] | None = None
    min_score: float = 0.0
    min_score_ratio: float = 0.0
    include_untrusted: bool = True
    now: float | None = None
    split: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        scopes = check_scopes(self.scope)
        object.__setattr__(self, "scope", scopes[0] if len(scopes) == 1 else scopes)
        object.__setattr__(self, "split", check_split(self.split, len(scopes)))
        if not isinstance(self.text, str):
            raise InputError(f"query text must be a string, got {type(self.text).__name__}")
        check_unicode(self.text, "query text")
        budget = self.token_budget
        if type(budget) is not int or budget < 1:
            raise InputError(f"token_budget must be a positive integer, got {budget!r}")
        check_number(self.max_hits, "max_hits", lo=1, integer=True, none=True)
        check_number(self.min_score, "min_score")
        check_number(self.min_score_ratio, "min_score_ratio", lo=0.0, hi=1.0)
        if not isinstance(self.include_untrusted, bool):
            raise InputError(
                f"include_untrusted must be True or False, got {self.include_untrusted!r}"
            )
        check_number(self.now, "now", none=True)
        if self.kinds is not None:
            kinds = check_kinds(self.kinds, "kinds")
            object.__setattr__(self, "kinds", kinds)

    @property
    def scopes(self) -> tuple[str, ...]:
        """The scopes to search, narrowest first (one for a single scope)."""
        return (self.scope,) if isinstance(self.scope, str) else self.scope


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


@dataclass(frozen=True)
class Hit:
    """A recalled record with its score breakdown.

    ``components`` holds each signal's raw value in [0, 1] (``similarity``,
    ``lexical``, ``recency``, ``time``, ``salience``, ``usage``: whichever the
    ranker computed); ``contributions`` holds weight x value, which sum to
    ``score``. ``neighbor_of`` is the id of the hit this one was packed next to
    (neighbour packing), else None.
    """

    record: MemoryRecord
    score: float
    rank: int
    components: Mapping[str, float]
    contributions: Mapping[str, float]
    neighbor_of: str | None = None

    @property
    def lexical(self) -> float:
        return self.components.get("lexical", 0.0)

    @property
    def time(self) -> float:
        return self.components.get("time", 0.0)

    @property
    def similarity(self) -> float:
        return self.components.get("similarity", 0.0)

    @property
    def recency(self) -> float:
        return self.components.get("recency", 0.0)

    @property
    def salience(self) -> float:
        return self.components.get("salience", 0.0)

    @property
    def usage(self) -> float:
        return self.components.get("usage", 0.0)
