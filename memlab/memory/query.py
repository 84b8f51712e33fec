"""What a recall asks (``RecallQuery``) and what it returns (``Hit``)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memlab.errors import InputError
from memlab.memory.checks import check_number, check_time, check_unicode
from memlab.memory.records import (
    SUPERSEDED_MODES,
    MemoryKind,
    MemoryRecord,
    check_kinds,
    check_scopes,
    check_split,
)

__all__ = ["Hit", "RecallQuery"]


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
        now: epoch seconds to rank against; None uses the layer's clock (or
            ``as_of``).
        as_of: answer from what the memory held at this time (epoch seconds):
            records made by then, not superseded or archived by then, with the
            claims superseded by then cut out. Such a recall touches nothing.
            None: now.
        superseded: how superseded records are treated: ``exclude`` them,
            ``downweight`` them (scores times the layer's factor) or ``include``
            them as they are; None: the layer's setting (``SupersedePolicy.recall``).
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
    as_of: float | None = None
    superseded: str | None = None
    split: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        scopes = check_scopes(self.scope)
        object.__setattr__(self, "scope", scopes[0] if len(scopes) == 1 else scopes)
        object.__setattr__(self, "split", check_split(self.split, len(scopes)))
        if not isinstance(self.text, str):
            raise InputError(f"query text must be a string, got {type(self.text).__name__}")
        check_unicode(self.text, "query text")
        budget = self.token_budget
        # a numpy integer (a sweep over np.arange budgets) is an integer too; it was
        # refused as "must be a positive integer, got np.int64(800)"
        if isinstance(budget, numbers.Integral) and not isinstance(budget, int | bool):
            budget = int(budget)
            object.__setattr__(self, "token_budget", budget)
        if type(budget) is not int or budget < 1:
            raise InputError(f"token_budget must be a positive integer, got {budget!r}")
        max_hits = check_number(self.max_hits, "max_hits", lo=1, integer=True, none=True)
        object.__setattr__(self, "max_hits", max_hits)
        check_number(self.min_score, "min_score")
        check_number(self.min_score_ratio, "min_score_ratio", lo=0.0, hi=1.0)
        if not isinstance(self.include_untrusted, bool):
            raise InputError(
                f"include_untrusted must be True or False, got {self.include_untrusted!r}"
            )
        check_time(self.now, "now", none=True)
        if self.kinds is not None:
            kinds = check_kinds(self.kinds, "kinds")
            object.__setattr__(self, "kinds", kinds)
        check_time(self.as_of, "as_of", none=True)
        if self.superseded is not None and self.superseded not in SUPERSEDED_MODES:
            raise InputError(
                f"superseded must be one of {list(SUPERSEDED_MODES)} or None, "
                f"got {self.superseded!r}"
            )

    @property
    def scopes(self) -> tuple[str, ...]:
        """The scopes to search, narrowest first (one for a single scope)."""
        return (self.scope,) if isinstance(self.scope, str) else self.scope


@dataclass(frozen=True)
class Hit:
    """A recalled record with its score breakdown.

    ``components`` holds each signal's raw value in [0, 1] (``similarity``,
    ``lexical``, ``recency``, ``time``, ``salience``, ``usage``: whichever the
    ranker computed); ``contributions`` holds weight x value, which sum to
    ``score``. ``neighbor_of`` is the id of the hit this one was packed next to
    (neighbour packing), else None. ``text`` is what goes into a prompt: the
    record's content without its superseded claims (``MemoryRecord.text_at``);
    it defaults to the whole content.
    """

    record: MemoryRecord
    score: float
    rank: int
    components: Mapping[str, float]
    contributions: Mapping[str, float]
    neighbor_of: str | None = None
    text: str = ""

    def __post_init__(self) -> None:
        if not self.text:
            object.__setattr__(self, "text", self.record.content)

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
