"""The memory layer's inputs, policies and results (MemoryInput, SummarizePolicy,
NeighborPolicy, RecallResult, Ranking, MaintenanceReport), kept apart from
``MemoryLayer`` so the modules the layer delegates to can use them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memlab.memory.checks import check_number
from memlab.memory.evict import EvictionReport
from memlab.memory.query import Hit, RecallQuery
from memlab.memory.records import MemoryKind, MemoryRecord, ScopeArg, Source
from memlab.memory.reflection_pass import ReflectionReport
from memlab.memory.timeparse import TimeWindow

Clock = Callable[[], float]


@dataclass(frozen=True)
class MemoryInput:
    """One thing to remember (see ``MemoryLayer.remember`` for the fields).

    ``scope`` may be a list of layered scopes: the record goes to the layer the
    layer's ``LayerPolicy`` names for its kind.
    """

    scope: ScopeArg
    content: str
    kind: MemoryKind | str = MemoryKind.EPISODIC
    salience: float = 0.5
    source: Source | str = Source.USER
    provenance: Sequence[str] = ()
    meta: dict[str, Any] | None = None
    created_at: float | None = None
    id: str | None = None


@dataclass(frozen=True)
class SummarizePolicy:
    """When and how the oldest episodes of a scope are folded into a semantic note.

    Args:
        trigger_tokens: fold once the scope's active trusted episodic tokens exceed this.
        chunk_tokens: at most this many tokens of episodes go into one summary.
        keep_recent: the newest this-many episodic records are never folded.
        max_gap_hours: a cluster ends where two consecutive episodes are further
            apart than this (so one summary covers one conversation).
        min_records: a cluster needs at least this many records to be folded.
    """

    trigger_tokens: int = 1200
    chunk_tokens: int = 400
    keep_recent: int = 12
    max_gap_hours: float = 12.0
    min_records: int = 2

    def __post_init__(self) -> None:
        check_number(self.trigger_tokens, "summarize.trigger_tokens", lo=1, integer=True)
        check_number(self.chunk_tokens, "summarize.chunk_tokens", lo=1, integer=True)
        check_number(self.keep_recent, "summarize.keep_recent", lo=0, integer=True)
        check_number(self.max_gap_hours, "summarize.max_gap_hours", above=0.0)
        check_number(self.min_records, "summarize.min_records", lo=1, integer=True)


@dataclass(frozen=True)
class NeighborPolicy:
    """Pack a hit's neighbouring records (same scope, adjacent in time) right after
    it when the budget allows: the answer to a question is often in the reply
    next to the line that matched. Neighbours are turns: only an episodic hit gets
    them, and only episodic records are (a note or a reflection has none).

    Args:
        before: records made just before the hit to try.
        after: records made just after the hit to try.
        top: only the first ``top`` hits get neighbours (None: all).
        max_tokens: skip neighbours longer than this (None: any size), so a long
            reply next to a short hit does not eat the budget.
    """

    before: int = 0
    after: int = 1
    top: int | None = 5
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        check_number(self.before, "neighbors.before", lo=0, integer=True)
        check_number(self.after, "neighbors.after", lo=0, integer=True)
        check_number(self.top, "neighbors.top", lo=1, integer=True, none=True)
        check_number(self.max_tokens, "neighbors.max_tokens", lo=1, integer=True, none=True)


@dataclass
class RecallResult:
    """Ranked hits packed into the query's token budget."""

    query: RecallQuery
    hits: list[Hit]
    now: float
    considered: int  # active candidate records that were scored
    search_text: str = ""  # the query text after rewriting
    window: TimeWindow | None = None  # the period the query names, if any
    superseded: str = "exclude"  # how superseded records were treated
    # (older id, newer id, why) for each record the recall guard left out
    guarded: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(h.record.tokens for h in self.hits)

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]


@dataclass
class Ranking:
    """Every active record of a scope, best first, as the ranker scored them for a
    query: no token budget, no neighbours, no score threshold (``MemoryLayer.rank``).

    Attributes:
        query: the query.
        ids: record ids, best first.
        scores: their scores (same order).
        now: the time ranked against.
        search_text: the query text after rewriting.
    """

    query: RecallQuery
    ids: list[str]
    scores: np.ndarray
    now: float
    search_text: str = ""

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class MaintenanceReport:
    """What ``MemoryLayer.maintain`` changed in a scope (or a list of layered scopes).

    ``archived`` lists every record folding archived: the episodes it folded (also
    those that gave no note, or whose note an older note absorbed, see
    ``meta["absorbs"]``) and the older notes a new note retired (its
    ``meta["restates"]``); ``reflection`` says what
    reflection read, wrote, retired and archived (None: it did not run).
    """

    summaries: list[MemoryRecord] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    eviction: EvictionReport = field(default_factory=EvictionReport)
    reflection: ReflectionReport | None = None


def not_a_query(method: str, got: object) -> str:
    example = repr(got) if isinstance(got, str) and len(got) <= 60 else "'...'"
    return (
        f"{method}() takes a RecallQuery, not {type(got).__name__}; the scope is required, "
        f"e.g. layer.{method}(RecallQuery('alice', {example}))"
    )
