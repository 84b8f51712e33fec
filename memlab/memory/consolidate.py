"""Consolidation: which earlier records a new record supersedes.

When a user corrects a fact ("we moved off Heroku to Fly.io", "standup is at
9:30 now"), the record that states the old value must stop competing with the
new one. A ``Consolidator`` decides, for one new trusted record, which earlier
active records of the same scope it supersedes; the layer then marks them
(never deletes them) so recall can leave them out.

The interface is built for write time:

- ``decide(new, reader)`` gets the new record (its embedding is already
  computed) and a ``ScopeReader``: a read-only view of the new record's scope
  only. The reader exposes the store's column arrays (``candidates``: one
  vectorized similarity and one BM25 pass over the scope) and ``get_many`` for
  the few records a consolidator wants to read in full. A consolidator never
  sees another scope: the reader is bound to one and filters what the store
  returns.
- The answer is a list of ``Supersession``s: the old record's id, a reason
  code, a confidence, and a detail string that ``explain()`` can show.

Trust (see ``RuleConsolidator``): a record from an untrusted source (tool, web)
never supersedes anything, and by default a trusted record does not supersede
untrusted ones either. A tool output is evidence of what that tool said when it
ran; if a user's statement contradicts it, that disagreement is worth seeing,
not hiding, and untrusted records are already delimited and capped in salience.
``RulePolicy.supersede_untrusted`` turns the second rule off.

``memlab.memory.rule_consolidator.RuleConsolidator`` (registered as ``rules``) is
the LLM-free default;
``memlab.memory.models.openai_consolidator.OpenAIConsolidator`` (``openai``) asks a
chat model for mem0-style decisions; ``NoConsolidator`` (``none``) supersedes nothing
(the ``memory_no_supersede`` ablation).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from memlab.errors import InputError, MemlabError
from memlab.memory.records import (
    SOURCE_CODES,
    UNTRUSTED_SOURCES,
    MemoryRecord,
    check_scope,
)
from memlab.memory.stores.base import Candidates, MemoryStore, dot_rows
from memlab.registry import Registry


class ConsolidatorError(MemlabError):
    """A consolidator failed or returned something unusable (a model's answer that is
    not the JSON it was asked for, an endpoint that keeps failing)."""


CONSOLIDATORS: Registry[type] = Registry("consolidator", "memlab.memory.models", error=InputError)
"""Consolidators by name (``rules``, ``none`` here; ``openai`` in
``memlab.memory.models.openai_consolidator``, found by importing the models package on
first lookup); each class registers itself with ``@CONSOLIDATORS.register("name")``."""

#: Reason codes of a Supersession (``detail`` says which words fired).
EXPLICIT = "explicit-old-value"  # the new record names the old value as old
CUE_DIFF = "cue+value-diff"  # a change cue, and the same statement with another value
VALUE_DIFF = "value-diff"  # no cue, but the same statement with another value
CUE_SIMILAR = "cue+similar"  # a change cue, and the nearest statement by embedding
ECHO = "echo"  # repeats a superseded value (an agent's "Noted: Heroku.", an answer)
LLM_UPDATE = "llm-update"  # a model said UPDATE
LLM_DELETE = "llm-delete"  # a model said DELETE
REASONS = (EXPLICIT, CUE_DIFF, VALUE_DIFF, CUE_SIMILAR, ECHO, LLM_UPDATE, LLM_DELETE)


@dataclass(frozen=True)
class Supersession:
    """One decision: the new record supersedes an old one.

    Attributes:
        old_id: the superseded record.
        new_id: the record that supersedes it.
        reason: one of ``REASONS``.
        confidence: in [0, 1]; how sure the rule or model is.
        detail: a human-readable explanation (which cue, which values).
        old_value: the value the old record stated, as the rule read it ("" if unknown).
        new_value: the value the new record states instead ("" if unknown or removed).
        partial: the old record also states other things the new one does not
            replace (a multi-fact message, a summary note): a layer may want to
            keep it recallable for those, or re-fold it.
        span: ``(start, end)`` character offsets of the replaced claim in the old
            record's content, when a rule located it.
        more_spans: other claims of the old record that state the replaced value
            (a note that folded a statement and its acknowledgement holds the value
            twice); with ``partial``, each is marked stale like ``span``.
    """

    old_id: str
    new_id: str
    reason: str
    confidence: float
    detail: str = ""
    old_value: str = ""
    new_value: str = ""
    partial: bool = False
    span: tuple[int, int] | None = None
    more_spans: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise InputError(f"unknown supersession reason {self.reason!r}; use one of {REASONS}")
        if not 0.0 <= self.confidence <= 1.0 or math.isnan(self.confidence):
            raise InputError(f"supersession confidence {self.confidence!r} is outside 0..1")
        if self.old_id == self.new_id:
            raise InputError(f"record {self.old_id} cannot supersede itself")

    def explain(self) -> str:
        """One line: ``superseded by <id> (<reason>, 0.90): <detail>``."""
        return f"superseded by {self.new_id} ({self.reason}, {self.confidence:.2f})" + (
            f": {self.detail}" if self.detail else ""
        )


class ScopeReader:
    """A read-only view of one scope of a store, for a consolidator.

    Args:
        store: any MemoryStore.
        scope: the only scope this reader reads.
        pending: records not yet in the store that count as earlier than the one
            being decided (the earlier items of a ``remember_many`` batch); they
            must belong to ``scope``. A pending record with the id of a stored one
            stands for it (a stored record superseded earlier in the batch).
        pool: candidate pool size passed to approximate stores.
        weights: ranking weights passed to approximate stores (their pool hint).
    """

    def __init__(
        self,
        store: MemoryStore,
        scope: str,
        *,
        pending: Sequence[MemoryRecord] = (),
        pool: int | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        self.store = store
        self.scope = check_scope(scope)
        for r in pending:
            if r.scope != scope:
                raise InputError(
                    f"pending record {r.id} is in scope {r.scope!r}, not {scope!r}; a "
                    "consolidator only reads the scope of the record it decides on"
                )
        self.pending = list(pending)
        self._pending_by_id = {r.id: r for r in self.pending}
        self._stands_for: set[str] | None = None
        self.pool = pool
        self.weights = dict(weights) if weights is not None else None
        self.reads = 0  # records read in full (get_many), for cost accounting

    def candidates(self, query: np.ndarray | None = None, *, text: str | None = None) -> Candidates:
        """Column arrays of the scope's records in force (not archived, not wholly
        superseded), pending ones appended (their ``lexical`` is 0: they are not
        indexed yet)."""
        cands = self.store.candidates(
            self.scope,
            query,
            include_archived=False,
            pool=self.pool,
            text=text,
            weights=self.weights,
            valid_at=math.inf,
        )
        if not self.pending:
            return cands
        if self._stands_for is None:
            self._stands_for = {r.id for r in self.pending}
        stored = [i for i, rid in enumerate(cands.ids) if rid in self._stands_for]
        if stored:  # pending versions replace these rows (nothing else may change)
            mask = cands.mask.copy()
            mask[stored] = False
            cands = dataclasses.replace(cands, mask=mask)
        extra = Candidates.from_records(
            self.pending, cands.embeddings.shape[1] or len(self.pending[0].embedding)
        )
        extra.mask = ~extra.superseded & np.isinf(extra.archived_at)
        lexical = None
        if text is not None:
            base = cands.lexical if cands.lexical is not None else np.zeros(len(cands))
            lexical = np.concatenate([base, np.zeros(len(extra))])
        if len(cands) == 0:
            extra.lexical = lexical
            return extra
        return Candidates(
            ids=list(cands.ids) + extra.ids,
            embeddings=np.concatenate([cands.embeddings, extra.embeddings]),
            created_at=np.concatenate([cands.created_at, extra.created_at]),
            last_accessed_at=np.concatenate([cands.last_accessed_at, extra.last_accessed_at]),
            salience=np.concatenate([cands.salience, extra.salience]),
            access_count=np.concatenate([cands.access_count, extra.access_count]),
            tokens=np.concatenate([cands.tokens, extra.tokens]),
            kind=np.concatenate([cands.kind, extra.kind]),
            source=np.concatenate([cands.source, extra.source]),
            mask=np.concatenate([cands.mask, extra.mask]),
            lexical=lexical,
            invalid_at=np.concatenate([cands.invalid_at, extra.invalid_at]),
            archived_at=np.concatenate([cands.archived_at, extra.archived_at]),
        )

    def get_many(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """The records with these ids that belong to this scope, in the given order."""
        wanted = [i for i in ids if i not in self._pending_by_id]
        found = {r.id: r for r in self.store.get_many(self.scope, wanted) if r.scope == self.scope}
        out = []
        for i in ids:
            r = self._pending_by_id.get(i) or found.get(i)
            if r is not None:
                out.append(r)
        self.reads += len(out)
        return out


@runtime_checkable
class Consolidator(Protocol):
    """Decides which earlier active records of the same scope a new record supersedes.

    ``name`` identifies the consolidator and its settings (it keys caches).
    ``decide`` must only read through ``reader`` (one scope), must not write,
    and returns each superseded record at most once.
    """

    @property
    def name(self) -> str: ...

    def decide(self, new: MemoryRecord, reader: ScopeReader) -> list[Supersession]: ...


@CONSOLIDATORS.register("none")
class NoConsolidator:
    """Supersedes nothing: the layer without supersession (an ablation)."""

    name = "none"

    def decide(self, new: MemoryRecord, reader: ScopeReader) -> list[Supersession]:
        return []


def eligible_rows(cands: Candidates, new: MemoryRecord, *, untrusted: bool = False) -> np.ndarray:
    """Rows ``new`` may supersede: unmasked, made no later than it, and trusted
    (unless ``untrusted``)."""
    eligible = cands.mask & (cands.created_at <= new.created_at)
    if not untrusted:
        eligible &= _TRUSTED_BY_CODE[cands.source]
    return eligible


def neighbour_rows(
    cands: Candidates,
    eligible: np.ndarray,
    new: MemoryRecord,
    *,
    similar: int,
    lexical: int,
    min_similarity: float = -1.0,
    scan_rows: int | None = None,
) -> dict[int, float]:
    """The rows worth reading for ``new``: the ``similar`` eligible rows nearest by
    cosine (at least ``min_similarity``, among the last ``scan_rows`` rows), and the
    ``lexical`` best by BM25 (``cands.lexical``). Returns row -> cosine.

    One matrix-vector product over a view of the store's columns (no copy) and two
    partial sorts; 0 for ``similar`` skips the scan.
    """
    n = len(cands)
    out: dict[int, float] = {}
    # stores append rows in write order: the last scan_rows rows are the newest
    start = n if similar <= 0 else 0 if scan_rows is None else max(0, n - scan_rows)
    sims = dot_rows(cands.embeddings[start:], new.embedding)
    sims = np.where(eligible[start:], sims, -np.inf)
    k = min(similar, sims.size)
    if k > 0:
        top = np.argpartition(-sims, k - 1)[:k] if sims.size > k else np.arange(sims.size)
        for i in top:
            if sims[i] >= min_similarity:
                out[start + int(i)] = float(sims[i])
    if cands.lexical is not None and lexical > 0:
        lex = np.where(eligible, cands.lexical, 0.0)
        hits = np.flatnonzero(lex > 0)
        k = min(lexical, hits.size)
        if k:
            top = hits[np.argpartition(-lex[hits], k - 1)[:k]] if hits.size > k else hits
            for row in top:
                if int(row) not in out:
                    out[int(row)] = float(cands.embeddings[row] @ new.embedding)
    return out


# source code -> trusted (a lookup table: faster than np.isin on every write)
_TRUSTED_BY_CODE = np.zeros(256, dtype=bool)
for _source, _code in SOURCE_CODES.items():
    _TRUSTED_BY_CODE[_code] = _source not in UNTRUSTED_SOURCES


__all__ = [
    "CONSOLIDATORS",
    "CUE_DIFF",
    "CUE_SIMILAR",
    "ECHO",
    "EXPLICIT",
    "LLM_DELETE",
    "LLM_UPDATE",
    "REASONS",
    "VALUE_DIFF",
    "Consolidator",
    "ConsolidatorError",
    "NoConsolidator",
    "ScopeReader",
    "Supersession",
    "eligible_rows",
    "neighbour_rows",
]

# The default registers itself as "rules" on import; importing it here makes the
# name known wherever the registry is (a module-level cycle Python resolves: the
# rule module only needs the names defined above).
from memlab.memory import rule_consolidator as _rules  # noqa: E402

_ = _rules
