"""MemoryLayer: remember, recall (ranked and packed into a token budget), explain,
summarize and evict, over any MemoryStore and Embedder."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memlab.errors import DimensionMismatch, InputError, StoreError
from memlab.memory.evict import WRITTEN_KEY, EvictionPolicy, EvictionReport
from memlab.memory.models.embedder import Embedder, check_embeddings
from memlab.memory.models.summarizer import Summarizer
from memlab.memory.rank import HOUR, HalfLives, HybridRanker, RankWeights, adjacent_rows, pack
from memlab.memory.records import (
    SOURCE_CODES,
    UNTRUSTED_SOURCES,
    Hit,
    MemoryKind,
    MemoryRecord,
    RecallQuery,
    Source,
    as_kind,
    as_source,
    check_scope,
    new_id,
)
from memlab.memory.rewrite import QueryRewriter
from memlab.memory.stores.base import MemoryStore
from memlab.memory.text import TokenCounter, estimate_tokens
from memlab.memory.timeparse import TimeWindow, parse_time

Clock = Callable[[], float]


@dataclass(frozen=True)
class MemoryInput:
    """One thing to remember (see ``MemoryLayer.remember`` for the fields)."""

    scope: str
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
        if self.trigger_tokens <= 0:
            raise InputError(f"summarize.trigger_tokens must be > 0, got {self.trigger_tokens}")
        if self.chunk_tokens <= 0:
            raise InputError(f"summarize.chunk_tokens must be > 0, got {self.chunk_tokens}")
        if self.keep_recent < 0:
            raise InputError(f"summarize.keep_recent must be >= 0, got {self.keep_recent}")
        if self.max_gap_hours <= 0:
            raise InputError(f"summarize.max_gap_hours must be > 0, got {self.max_gap_hours}")
        if self.min_records < 1:
            raise InputError(f"summarize.min_records must be >= 1, got {self.min_records}")


@dataclass(frozen=True)
class NeighborPolicy:
    """Pack a hit's neighbouring records (same scope, adjacent in time) right after
    it when the budget allows: the answer to a question is often in the reply
    next to the line that matched.

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
        if self.before < 0 or self.after < 0:
            raise InputError(f"neighbors.before/after must be >= 0, got {self.before}/{self.after}")
        if self.top is not None and self.top < 1:
            raise InputError(f"neighbors.top must be >= 1 or None, got {self.top}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise InputError(f"neighbors.max_tokens must be >= 1 or None, got {self.max_tokens}")


@dataclass
class RecallResult:
    """Ranked hits packed into the query's token budget."""

    query: RecallQuery
    hits: list[Hit]
    now: float
    considered: int  # active candidate records that were scored
    search_text: str = ""  # the query text after rewriting
    window: TimeWindow | None = None  # the period the query names, if any

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
class MaintenanceReport:
    """What ``MemoryLayer.maintain`` changed in a scope."""

    summaries: list[MemoryRecord] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    eviction: EvictionReport = field(default_factory=EvictionReport)


class MemoryLayer:
    """Typed, scoped, ranked memory for an agent.

    Args:
        store: where records live (any MemoryStore).
        embedder: turns text into vectors (one batched call per remember_many).
        weights: hybrid score weights (similarity, recency, salience, usage).
        half_life: recency half-life per kind, in hours.
        clock: returns "now" in epoch seconds; replays pass transcript time.
        summarizer: folds old episodes; None disables summarization.
        summarize: when to fold (SummarizePolicy).
        eviction: when to forget (EvictionPolicy); None disables eviction.
        untrusted_salience_cap: tool/web memories never get salience above this
            unless ``approve`` is called for them.
        token_counter: estimates the tokens of a text.
        ranker: replaces the hybrid ranker (weights/half_life are then ignored).
        pool: candidate pool size passed to approximate stores.
        rewriter: turns "what did I tell you about X?" into "X" before recall
            (None: the query is used as is).
        neighbors: pack hits' neighbouring records too (None: off).

    A layer owns what it is given: ``close()`` (or leaving a ``with`` block)
    closes the store, and the embedder and summarizer when they have a
    ``close()``. A closed layer raises ``StoreError``; closing twice is harmless.
    Share a model between layers by closing the layers' stores yourself instead.

        with MemoryLayer(SqliteStore("memory.db"), HashEmbedder()) as layer:
            layer.remember("alice", "We deploy on GKE.")
            hits = layer.recall(RecallQuery("alice", "where do we deploy?"))
    """

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        *,
        weights: RankWeights | None = None,
        half_life: HalfLives | None = None,
        clock: Clock | None = None,
        summarizer: Summarizer | None = None,
        summarize: SummarizePolicy | None = None,
        eviction: EvictionPolicy | None = None,
        untrusted_salience_cap: float = 0.3,
        token_counter: TokenCounter = estimate_tokens,
        ranker: HybridRanker | None = None,
        pool: int = 200,
        rewriter: QueryRewriter | None = None,
        neighbors: NeighborPolicy | None = None,
    ) -> None:
        if not 0.0 <= untrusted_salience_cap <= 1.0:
            raise InputError(
                f"untrusted_salience_cap must be in 0..1, got {untrusted_salience_cap}"
            )
        if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
            raise InputError(f"pool must be an integer >= 1, got {pool!r}")
        self.store = store
        self.embedder = embedder
        self.ranker = ranker or HybridRanker(weights or RankWeights(), half_life or HalfLives())
        self.clock: Clock = clock or time.time
        self.summarizer = summarizer
        self.summarize_policy = summarize or SummarizePolicy()
        self.eviction = eviction
        self.untrusted_salience_cap = untrusted_salience_cap
        self.count_tokens = token_counter
        self.pool = pool
        self.rewriter = rewriter
        self.neighbors = neighbors
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._closed = False
        dims = store.dims
        if dims is not None and dims != embedder.dims:
            raise DimensionMismatch(
                dims,
                embedder.dims,
                f"embedder {embedder.name} for a store created with {dims} dims",
            )

    @property
    def weights(self) -> RankWeights:
        return self.ranker.weights

    # -- life cycle ---------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the store, then the embedder and summarizer if they have ``close()``.

        Idempotent. Every part is closed even if an earlier one fails; the first
        failure is raised after.
        """
        if self._closed:
            return
        self._closed = True
        self._query_cache.clear()
        error: BaseException | None = None
        for part in (self.store, self.embedder, self.summarizer):
            close = getattr(part, "close", None)
            if close is None:
                continue
            try:
                close()
            except BaseException as exc:  # close the rest, then report the first
                error = error or exc
        if error is not None:
            raise error

    def __enter__(self) -> MemoryLayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this MemoryLayer is closed (and its store); open a new one")

    # -- writing ------------------------------------------------------------------
    def remember(
        self,
        scope: str,
        content: str,
        *,
        kind: MemoryKind | str = MemoryKind.EPISODIC,
        salience: float = 0.5,
        source: Source | str = Source.USER,
        provenance: Sequence[str] = (),
        meta: dict[str, Any] | None = None,
        created_at: float | None = None,
        id: str | None = None,
    ) -> MemoryRecord:
        """Embed and store one memory; return the stored record.

        Untrusted sources (tool, web) get their salience capped at
        ``untrusted_salience_cap``.

        Raises:
            InputError: on empty content, a bad scope, kind, source or salience.
        """
        return self.remember_many(
            [MemoryInput(scope, content, kind, salience, source, provenance, meta, created_at, id)]
        )[0]

    def remember_many(self, items: Sequence[MemoryInput]) -> list[MemoryRecord]:
        """Embed all contents in one batched call and store them in one write.

        If embedding fails nothing is stored.
        """
        self._check_open()
        if not items:
            return []
        now = self.clock()
        prepared = [self._prepare(item, now) for item in items]
        texts = [p[1] for p in prepared]
        vectors = check_embeddings(
            self.embedder.embed(texts), len(texts), self.embedder.dims, self.embedder.name
        )
        records = [
            MemoryRecord(
                id=item.id or new_id(),
                content=text,
                embedding=vectors[i],
                kind=kind,
                scope=item.scope,
                salience=salience,
                tokens=self.count_tokens(text),
                created_at=created,
                last_accessed_at=created,
                source=source,
                provenance=tuple(item.provenance),
                meta=dict(item.meta or {}),
            )
            for i, (item, text, kind, source, salience, created) in enumerate(prepared)
        ]
        self.store.put_many(records)
        return records

    def _prepare(
        self, item: MemoryInput, now: float
    ) -> tuple[MemoryInput, str, MemoryKind, Source, float, float]:
        check_scope(item.scope)
        if not isinstance(item.content, str) or not item.content.strip():
            raise InputError(f"cannot remember empty content in scope {item.scope!r}")
        kind = as_kind(item.kind)
        source = as_source(item.source)
        salience = float(item.salience)
        if not 0.0 <= salience <= 1.0:
            raise InputError(f"salience must be in 0..1, got {item.salience!r}")
        if source in UNTRUSTED_SOURCES:
            salience = min(salience, self.untrusted_salience_cap)
        created = float(item.created_at) if item.created_at is not None else now
        return item, item.content.strip(), kind, source, salience, created

    def approve(
        self, scope: str, record_id: str, *, salience: float, reviewer: str
    ) -> MemoryRecord:
        """Lift an untrusted memory's salience after a human or policy reviewed it.

        This is the only way a tool/web memory gets above the cap; the reviewer is
        kept in ``meta['reviewed_by']``.

        Raises:
            InputError: no record with this id in ``scope`` (another scope's record
                is never found), or a bad salience or reviewer.
        """
        self._check_open()
        record = self.store.get(scope, record_id)
        if record is None:
            raise InputError(f"no memory with id {record_id!r} in scope {scope!r} to approve")
        if not 0.0 <= salience <= 1.0:
            raise InputError(f"salience must be in 0..1, got {salience!r}")
        if not reviewer:
            raise InputError("approve() needs the reviewer's name")
        updated = record.copy(salience=float(salience))
        updated.meta["reviewed_by"] = reviewer
        # An approval is a new written salience: the salience floor protects (or
        # stops protecting) the record by this value from now on.
        updated.meta.pop(WRITTEN_KEY, None)
        self.store.put(updated)
        return updated

    def forget(self, scope: str, ids: str | Sequence[str]) -> int:
        """Delete the scope's records with these ids; return how many existed
        (ids of other scopes are never touched)."""
        self._check_open()
        return self.store.delete(scope, ids)

    # -- recall -------------------------------------------------------------------
    def embed_query(self, text: str) -> np.ndarray:
        cached = self._query_cache.get(text)
        if cached is not None:
            self._query_cache.move_to_end(text)
            return cached
        vec = check_embeddings(
            self.embedder.embed([text]), 1, self.embedder.dims, self.embedder.name
        )[0]
        self._query_cache[text] = vec
        if len(self._query_cache) > 1024:
            self._query_cache.popitem(last=False)
        return vec

    def recall(self, query: RecallQuery, *, touch: bool = True) -> RecallResult:
        """Rank the scope's active records and pack the best into the token budget.

        The query text is rewritten first (if a rewriter is set); a period it names
        ("last week") feeds the time signal when ``weights.time`` > 0; the lexical
        signal is computed when ``weights.lexical`` > 0. Only records of
        ``query.scope`` are ever considered. Returned records are touched (access
        count and last access) unless ``touch=False``.

        Raises:
            InputError: ``query`` is not a RecallQuery (a bare string has no scope,
                and scope is never guessed).
        """
        if not isinstance(query, RecallQuery):
            raise InputError(_not_a_query("recall", query))
        self._check_open()
        now = float(query.now) if query.now is not None else self.clock()
        text = self.rewriter.rewrite(query.text) if self.rewriter is not None else query.text
        window = parse_time(query.text, now) if self.ranker.weights.time > 0 else None
        qvec = self.embed_query(text)
        cands = self.store.candidates(
            query.scope,
            qvec,
            kinds=query.kinds,
            include_archived=False,
            pool=self.pool,
            text=text if self.ranker.uses_lexical else None,
            weights=self.ranker.weights.as_dict(),
        )
        if len(cands) == 0:
            return RecallResult(query, [], now, 0, text, window)
        mask = cands.mask
        if not query.include_untrusted:
            untrusted = np.isin(cands.source, [SOURCE_CODES[s] for s in UNTRUSTED_SOURCES])
            mask = mask & ~untrusted
            cands = dataclasses.replace(cands, mask=mask)
        scored = self.ranker.score(cands, qvec, now, window=window)
        scores = scored.scores
        neighbor_rows: dict[int, int] = {}
        expand = None
        policy = self.neighbors
        if policy is not None and (policy.before or policy.after):
            near = mask
            if policy.max_tokens is not None:
                near = mask & (cands.tokens <= policy.max_tokens)
            expand = lambda row: adjacent_rows(  # noqa: E731
                row, cands.created_at, near, before=policy.before, after=policy.after
            )
        rows = pack(
            scores,
            cands.tokens,
            query.token_budget,
            ids=cands.ids,
            tiebreak=cands.created_at,
            max_hits=query.max_hits,
            min_score=_threshold(scores, query),
            expand=expand,
            expand_top=policy.top if policy is not None else None,
            neighbor_of=neighbor_rows,
        )
        ids = [cands.ids[r] for r in rows]
        records = {r.id: r for r in self.store.get_many(query.scope, ids)}
        weights = scored.weights
        hits: list[Hit] = []
        for row in rows:
            record = records.get(cands.ids[row])
            if record is None or record.scope != query.scope:  # vanished meanwhile
                continue
            components = {name: float(arr[row]) for name, arr in scored.components.items()}
            contributions = {
                name: weights.get(name, 0.0) * value for name, value in components.items()
            }
            anchor = neighbor_rows.get(row)
            hits.append(
                Hit(
                    record,
                    float(scores[row]),
                    len(hits) + 1,
                    components,
                    contributions,
                    neighbor_of=cands.ids[anchor] if anchor is not None else None,
                )
            )
        if touch and hits:
            self.store.touch(query.scope, [h.record.id for h in hits], now)
        return RecallResult(query, hits, now, cands.n_active, text, window)

    def explain(self, result: RecallResult | RecallQuery, *, width: int = 60) -> str:
        """A table of why each record was chosen: its score and each signal's share.

        Columns show the signals this recall used (sim, lex, rec or time, sal, use);
        'why' names the largest weighted term, or the hit a neighbour was packed
        next to. Given a query, recalls without touching anything.
        """
        if isinstance(result, RecallQuery):
            result = self.recall(result, touch=False)
        elif not isinstance(result, RecallResult):
            raise InputError(_not_a_query("explain", result))
        q = result.query
        signals = [("similarity", "sim"), ("lexical", "lex"), ("recency", "rec"), ("time", "time"),
                   ("salience", "sal"), ("usage", "use")]  # fmt: skip
        shown = [
            (name, label)
            for name, label in signals
            if any(name in h.components for h in result.hits)
            or name in ("similarity", "recency", "salience", "usage")
        ]
        rank_of = {h.record.id: h.rank for h in result.hits}
        lines = [
            f"recall scope={q.scope!r} budget={q.token_budget} tokens "
            f"considered={result.considered} chosen={len(result.hits)} used={result.tokens} tokens",
            f"query: {q.text!r}",
        ]
        if result.search_text and result.search_text != q.text:
            lines.append(f"rewritten to: {result.search_text!r}")
        if result.window is not None:
            lines.append(
                f"time: {result.window.expression!r} -> {iso(result.window.start)} .. "
                f"{iso(result.window.end)} (replaces recency for this query)"
            )
        header = f"{'#':>2} {'score':>6} " + " ".join(f"{label:>6}" for _, label in shown)
        lines.append(header + f" {'tok':>4} {'kind':<10} {'source':<6} {'why':<10} content")
        for h in result.hits:
            if h.neighbor_of is not None:
                why = f"next to #{rank_of.get(h.neighbor_of, '?')}"
            else:
                why = max(h.contributions, key=lambda k: h.contributions[k])
            text = h.record.content.replace("\n", " ")
            if len(text) > width:
                text = text[: width - 1] + "…"
            values = " ".join(f"{h.components.get(name, 0.0):6.3f}" for name, _ in shown)
            lines.append(
                f"{h.rank:>2} {h.score:6.3f} {values} {h.record.tokens:>4} "
                f"{h.record.kind.value:<10} {h.record.source.value:<6} {why:<10} {text}"
            )
        w = self.ranker.weights.as_dict()
        lines.append(
            "weights: "
            + ", ".join(
                f"{k}={v:g}"
                for k, v in w.items()
                if v or k in ("similarity", "recency", "salience", "usage")
            )
            + (f" (fusion {self.ranker.fusion})" if self.ranker.fusion != "weighted" else "")
            + " (score = sum of weight x signal; 'why' is the largest term)"
        )
        return "\n".join(lines)

    # -- maintenance --------------------------------------------------------------
    def maybe_summarize(self, scope: str, now: float | None = None) -> list[MemoryRecord]:
        """Fold the oldest episodic clusters into semantic notes while the scope's
        trusted episodic tokens exceed ``summarize.trigger_tokens``.

        Each note has the max salience of its sources and the union of their
        provenance (plus the source ids); sources are archived, not deleted.
        Untrusted (tool/web) records are never folded. Returns the new notes.
        """
        self._check_open()
        if self.summarizer is None:
            return []
        policy = self.summarize_policy
        now = self.clock() if now is None else now
        episodes = [
            r
            for r in self.store.list(scope, kinds=[MemoryKind.EPISODIC])
            if r.source not in UNTRUSTED_SOURCES
        ]
        total = sum(r.tokens for r in episodes)
        foldable = episodes[: max(0, len(episodes) - policy.keep_recent)]
        made: list[MemoryRecord] = []
        while total > policy.trigger_tokens and len(foldable) >= policy.min_records:
            cluster = _oldest_cluster(foldable, policy)
            foldable = foldable[len(cluster) :]
            if len(cluster) < policy.min_records:
                continue  # an isolated episode: leave it, try the next cluster
            total -= sum(r.tokens for r in cluster)
            note = self._fold(scope, cluster, now)
            if note is not None:
                made.append(note)
        return made

    def _fold(self, scope: str, cluster: list[MemoryRecord], now: float) -> MemoryRecord | None:
        assert self.summarizer is not None
        text = self.summarizer.summarize([r.content for r in cluster]).strip()
        ids = [r.id for r in cluster]
        note = None
        if text:
            provenance: dict[str, None] = {}
            for r in cluster:
                provenance.update(dict.fromkeys(r.provenance))
            sources = {r.source for r in cluster}
            note = self.remember_many(
                [
                    MemoryInput(
                        scope,
                        text,
                        kind=MemoryKind.SEMANTIC,
                        salience=max(r.salience for r in cluster),
                        source=Source.USER if Source.USER in sources else Source.AGENT,
                        provenance=tuple(provenance),
                        meta={
                            "summary_of": ids,
                            "summarizer": self.summarizer.name,
                            "span": [cluster[0].created_at, cluster[-1].created_at],
                        },
                        created_at=max(r.created_at for r in cluster),
                    )
                ]
            )[0]
        # Archive even when nothing was worth keeping: the episodes stay on disk.
        self.store.mark_archived(scope, ids, now)
        return note

    def maintain(self, scope: str, now: float | None = None) -> MaintenanceReport:
        """Summarize, then evict, one scope."""
        self._check_open()
        now = self.clock() if now is None else now
        report = MaintenanceReport()
        for note in self.maybe_summarize(scope, now):
            report.summaries.append(note)
            report.archived.extend(note.meta["summary_of"])
        if self.eviction is not None:
            report.eviction = self.eviction.apply(self.store, scope, now, self.ranker)
        return report


def _not_a_query(method: str, got: object) -> str:
    example = repr(got) if isinstance(got, str) and len(got) <= 60 else "'...'"
    return (
        f"{method}() takes a RecallQuery, not {type(got).__name__}; the scope is required, "
        f"e.g. layer.{method}(RecallQuery('alice', {example}))"
    )


def _threshold(scores: np.ndarray, query: RecallQuery) -> float:
    """The lowest score a hit may have: ``min_score``, raised to ``min_score_ratio``
    of the best finite score."""
    if query.min_score_ratio <= 0:
        return query.min_score
    finite = scores[np.isfinite(scores)]
    best = float(finite.max()) if finite.size else 0.0
    return max(query.min_score, query.min_score_ratio * best)


def _oldest_cluster(episodes: list[MemoryRecord], policy: SummarizePolicy) -> list[MemoryRecord]:
    gap = policy.max_gap_hours * HOUR
    cluster = [episodes[0]]
    tokens = episodes[0].tokens
    for prev, r in itertools.pairwise(episodes):
        if r.created_at - prev.created_at > gap or tokens + r.tokens > policy.chunk_tokens:
            break
        cluster.append(r)
        tokens += r.tokens
    return cluster


def iso(ts: float) -> str:
    """Epoch seconds as an ISO-8601 UTC string."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
