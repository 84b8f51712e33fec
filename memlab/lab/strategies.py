"""Memory strategies the lab compares.

A Strategy sees a transcript one turn at a time: ``context(probe, budget)``
before a probe turn (what it would put in the prompt), ``observe(turn)`` after
every turn, ``maintain(turn)`` after observing. Time always comes from the
transcript, never the wall clock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from memlab.lab.transcripts import Turn
from memlab.memory import (
    EvictionPolicy,
    HalfLives,
    HybridRanker,
    MemoryLayer,
    NeighborPolicy,
    QueryRewriter,
    RankWeights,
    RecallQuery,
    SummarizePolicy,
    estimate_salience,
    estimate_tokens,
)
from memlab.memory.models.embedder import Embedder
from memlab.memory.models.summarizer import Summarizer
from memlab.memory.stores.base import MemoryStore


@dataclass(frozen=True)
class ContextItem:
    """One thing a strategy puts into the prompt, in rank order."""

    text: str
    tokens: int
    kind: str
    scope: str
    source: str
    provenance: tuple[str, ...]
    score: float | None = None


@dataclass
class Context:
    items: list[ContextItem] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(i.tokens for i in self.items)


@dataclass(frozen=True)
class StoreStats:
    """Size of what a strategy keeps, after a turn."""

    records: int  # active records (or kept turns)
    archived: int
    tokens: int  # tokens of the active records
    bytes: int  # bytes on disk (file stores) or of the kept text


@runtime_checkable
class Strategy(Protocol):
    name: str

    def observe(self, turn: Turn) -> None: ...

    def context(self, probe: Turn, budget: int) -> Context: ...

    def maintain(self, turn: Turn) -> None: ...

    def stats(self) -> StoreStats: ...

    def close(self) -> None: ...


def _turn_item(turn: Turn) -> ContextItem:
    return ContextItem(
        text=turn.text,
        tokens=estimate_tokens(turn.text),
        kind="turn",
        scope=turn.scope,
        source=turn.source,
        provenance=(turn.id,),
    )


class _TurnLog:
    """Keeps every observed turn per scope (the baselines' whole state)."""

    def __init__(self) -> None:
        self.turns: dict[str, list[ContextItem]] = defaultdict(list)

    def observe(self, turn: Turn) -> None:
        self.turns[turn.scope].append(_turn_item(turn))

    def maintain(self, turn: Turn) -> None:
        pass

    def stats(self) -> StoreStats:
        items = [i for items in self.turns.values() for i in items]
        return StoreStats(
            records=len(items),
            archived=0,
            tokens=sum(i.tokens for i in items),
            bytes=sum(len(i.text.encode()) for i in items),
        )

    def close(self) -> None:
        pass


class StuffAll(_TurnLog):
    """Every earlier turn of the probe's scope, oldest first, up to a context limit
    (the oldest turns are dropped once the limit is reached). Ignores the budget."""

    def __init__(self, name: str = "stuff_all", context_limit: int = 128_000) -> None:
        super().__init__()
        self.name = name
        self.context_limit = context_limit

    def context(self, probe: Turn, budget: int) -> Context:
        kept: list[ContextItem] = []
        total = 0
        for item in reversed(self.turns[probe.scope]):
            if total + item.tokens > self.context_limit:
                break
            kept.append(item)
            total += item.tokens
        return Context(kept[::-1])


class SlidingWindow(_TurnLog):
    """The last ``window_turns`` turns of the probe's scope, optionally cut to the
    last ``window_tokens`` tokens. Ignores the budget."""

    def __init__(
        self,
        name: str = "sliding_window",
        window_turns: int | None = 10,
        window_tokens: int | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.window_turns = window_turns
        self.window_tokens = window_tokens

    def context(self, probe: Turn, budget: int) -> Context:
        recent = self.turns[probe.scope]
        if self.window_turns is not None:
            recent = recent[-self.window_turns :]
        if self.window_tokens is not None:
            kept: list[ContextItem] = []
            total = 0
            for item in reversed(recent):
                if total + item.tokens > self.window_tokens:
                    break
                kept.append(item)
                total += item.tokens
            recent = kept[::-1]
        return Context(list(recent))


SalienceFn = Callable[[Turn], float]


def salience_function(mode: str, fixed: float = 0.5) -> SalienceFn:
    """How a memory strategy rates a turn's importance.

    ``heuristic``: ``estimate_salience`` on the text (cue phrases; see
    memlab.memory.salience). ``oracle``: the transcript's ``salience_hint`` (an
    upper-bound ablation; falls back to the heuristic where a turn has none).
    ``fixed``: the same value for every turn.
    """
    if mode == "heuristic":
        return lambda t: estimate_salience(t.text)
    if mode == "oracle":
        return lambda t: (
            t.salience_hint if t.salience_hint is not None else estimate_salience(t.text)
        )
    if mode == "fixed":
        return lambda t: fixed
    raise ValueError(f"unknown salience mode {mode!r}")


class MemoryStrategy:
    """The memory layer: remembers every turn as an episodic record, recalls into
    the budget, and runs summarization and eviction after each turn.

    Args:
        name: the strategy's name in results.
        store: a fresh store for this replay.
        embedder: shared embedder.
        weights, half_life: ranking.
        summarizer, summarize: folding old episodes (None: off).
        eviction: forgetting (None: off).
        salience: rates each turn (see ``salience_function``).
        untrusted_salience_cap: cap for tool/web records.
        pool: candidate pool for approximate stores.
        remember_agent, remember_tools: also store agent replies / tool output.
        max_hits, min_score_ratio: stop packing after this many hits / below this
            share of the best score (see RecallQuery).
        fusion, rrf_k: how similarity and lexical combine (see HybridRanker).
        rewriter: rewrites queries about memory before recall.
        neighbors: packs hits' adjacent records (see NeighborPolicy).
        drop_store: on close, delete the store's data if it can (``store.drop()``,
            e.g. a pgvector table made for this replay only).
    """

    def __init__(
        self,
        name: str,
        store: MemoryStore,
        embedder: Embedder,
        *,
        weights: RankWeights | None = None,
        half_life: HalfLives | None = None,
        summarizer: Summarizer | None = None,
        summarize: SummarizePolicy | None = None,
        eviction: EvictionPolicy | None = None,
        salience: SalienceFn | None = None,
        untrusted_salience_cap: float = 0.3,
        pool: int = 200,
        remember_agent: bool = True,
        remember_tools: bool = True,
        max_hits: int | None = None,
        min_score_ratio: float = 0.0,
        fusion: str = "weighted",
        rrf_k: float = 60.0,
        rewriter: QueryRewriter | None = None,
        neighbors: NeighborPolicy | None = None,
        drop_store: bool = False,
    ) -> None:
        self.name = name
        self.drop_store = drop_store
        self.max_hits = max_hits
        self.min_score_ratio = min_score_ratio
        self.now = 0.0
        self.layer = MemoryLayer(
            store,
            embedder,
            ranker=HybridRanker(weights, half_life, fusion=fusion, rrf_k=rrf_k),
            clock=lambda: self.now,
            summarizer=summarizer,
            summarize=summarize,
            eviction=eviction,
            untrusted_salience_cap=untrusted_salience_cap,
            pool=pool,
            rewriter=rewriter,
            neighbors=neighbors,
        )
        self.salience = salience or salience_function("heuristic")
        self.remember_agent = remember_agent
        self.remember_tools = remember_tools

    def observe(self, turn: Turn) -> None:
        self.now = max(self.now, turn.time)
        if turn.role == "agent" and not self.remember_agent:
            return
        if turn.role == "tool" and not self.remember_tools:
            return
        meta = {"role": turn.role}
        if turn.session is not None:
            meta["session"] = turn.session
        self.layer.remember(
            turn.scope,
            turn.text,
            salience=min(1.0, max(0.0, float(self.salience(turn)))),
            source=turn.source,
            provenance=(turn.id,),
            meta=meta,
            created_at=turn.time,
        )

    def context(self, probe: Turn, budget: int) -> Context:
        self.now = max(self.now, probe.time)
        result = self.layer.recall(
            RecallQuery(
                probe.scope,
                probe.text,
                token_budget=budget,
                now=self.now,
                max_hits=self.max_hits,
                min_score_ratio=self.min_score_ratio,
            )
        )
        return Context(
            [
                ContextItem(
                    text=h.record.content,
                    tokens=h.record.tokens,
                    kind=h.record.kind.value,
                    scope=h.record.scope,
                    source=h.record.source.value,
                    provenance=h.record.provenance,
                    score=h.score,
                )
                for h in result.hits
            ]
        )

    def maintain(self, turn: Turn) -> None:
        self.layer.maintain(turn.scope, now=self.now)

    def stats(self) -> StoreStats:
        store = self.layer.store
        records = tokens = 0
        for scope in store.scopes():
            cands = store.candidates(scope)  # column views: no record is copied
            records += cands.n_active
            tokens += int(cands.tokens[cands.mask].sum())
        return StoreStats(
            records=records,
            archived=store.count(None, include_archived=True) - store.count(None),
            tokens=tokens,
            bytes=store.size_bytes(),
        )

    def close(self) -> None:
        drop = getattr(self.layer.store, "drop", None)
        if self.drop_store and drop is not None:
            drop()
        else:
            self.layer.store.close()
