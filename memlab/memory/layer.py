"""MemoryLayer: remember, recall (ranked and packed into a token budget), explain,
summarize and evict, over any MemoryStore and Embedder."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memlab.errors import DimensionMismatch, InputError, StoreError
from memlab.memory.checks import (
    check_bool,
    check_callable,
    check_instance,
    check_number,
    check_text,
    check_time,
    check_unicode,
)
from memlab.memory.consolidate import Consolidator
from memlab.memory.evict import DECAYED_KEY, REVIEWED_KEY, WRITTEN_KEY, EvictionPolicy
from memlab.memory.explain import explain as explain_recall
from memlab.memory.explain import iso
from memlab.memory.layer_types import (
    Clock,
    MaintenanceReport,
    MemoryInput,
    NeighborPolicy,
    Ranking,
    RecallResult,
    SummarizePolicy,
    not_a_query,
)
from memlab.memory.maintenance import maintain_scopes, summarize_scope
from memlab.memory.models.embedder import Embedder, check_embeddings
from memlab.memory.models.summarizer import Summarizer
from memlab.memory.procedural import ProcedurePolicy, ToolCall, remember_procedure
from memlab.memory.query import RecallQuery
from memlab.memory.rank import (
    HalfLives,
    HybridRanker,
    RankWeights,
)
from memlab.memory.recall import rank as rank_query
from memlab.memory.recall import recall as recall_query
from memlab.memory.records import (
    MemoryKind,
    MemoryRecord,
    ScopeArg,
    Source,
    check_scope,
    check_scopes,
)
from memlab.memory.reflect import (
    META_KEY as REFLECTION_KEY,
)
from memlab.memory.reflect import (
    Reflector,
    ReflectPolicy,
    is_reflection,
    superseded_reflections,
)
from memlab.memory.reflection_pass import ReflectionReport, reflect_scope
from memlab.memory.rewrite import QueryRewriter
from memlab.memory.scopes import LayerPolicy
from memlab.memory.stores.base import MemoryStore, scoped_ids
from memlab.memory.supersede import (
    SupersedePolicy,
    lift,
)
from memlab.memory.supersede import consolidate as supersede_batch
from memlab.memory.text import TokenCounter, estimate_tokens
from memlab.memory.writing import new_records

if TYPE_CHECKING:
    from memlab.memory.recall_guard import RecallGuard

__all__ = [
    "Clock",
    "MaintenanceReport",
    "MemoryInput",
    "MemoryLayer",
    "NeighborPolicy",
    "Ranking",
    "RecallResult",
    "SummarizePolicy",
    "iso",
]


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
        layers: which layer of a list of scopes each kind is written to
            (LayerPolicy; default episodes to the first, the rest to the last).
        procedures: how procedures are merged and rated (ProcedurePolicy).
        reflector: derives semantic records from episodes during maintenance
            (None: no reflection).
        reflect: when reflection runs and what it archives (ReflectPolicy).
        reflect_consolidator: keeps the value in force among reflections (default:
            the rule consolidator).
        consolidator: decides, for each new trusted record, which earlier records
            of its scope it supersedes (``memlab.memory.consolidate``; e.g.
            ``RuleConsolidator()``); None: nothing is superseded at write time.
        supersede: how superseded records are recalled (SupersedePolicy; by
            default they are left out, and a consolidator that can judge given
            records, such as ``RuleConsolidator``, also checks the packed hits).

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
        layers: LayerPolicy | None = None,
        procedures: ProcedurePolicy | None = None,
        reflector: Reflector | None = None,
        reflect: ReflectPolicy | None = None,
        reflect_consolidator: Consolidator | None = None,
        consolidator: Consolidator | None = None,
        supersede: SupersedePolicy | None = None,
    ) -> None:
        if not isinstance(store, MemoryStore):
            raise InputError(
                f"store must be a MemoryStore (e.g. InMemoryStore(), SqliteStore(path)), "
                f"got {type(store).__name__}"
            )
        if not isinstance(getattr(embedder, "dims", None), int) or not callable(
            getattr(embedder, "embed", None)
        ):
            raise InputError(
                f"embedder must be an Embedder (with dims and embed()), e.g. HashEmbedder(), "
                f"got {type(embedder).__name__}"
            )
        untrusted_salience_cap = check_number(
            untrusted_salience_cap, "untrusted_salience_cap", lo=0.0, hi=1.0
        )
        check_number(pool, "pool", lo=1, integer=True)
        check_instance(weights, RankWeights, "weights")
        check_instance(half_life, HalfLives, "half_life")
        check_instance(ranker, HybridRanker, "ranker")
        check_instance(summarize, SummarizePolicy, "summarize")
        check_instance(eviction, EvictionPolicy, "eviction")
        check_instance(neighbors, NeighborPolicy, "neighbors")
        if clock is not None:
            check_callable(clock, "clock", "a function returning epoch seconds")
        check_callable(token_counter, "token_counter", "a function of a text returning tokens")
        if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
            raise InputError(f"summarizer must be a Summarizer, got {type(summarizer).__name__}")
        if rewriter is not None and not callable(getattr(rewriter, "rewrite", None)):
            raise InputError(f"rewriter must be a QueryRewriter, got {type(rewriter).__name__}")
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
        self.layers = layers or LayerPolicy()
        self.procedures = procedures or ProcedurePolicy()
        self.reflector = reflector
        self.reflect_policy = reflect or ReflectPolicy()
        if reflect_consolidator is None and reflector is not None:
            from memlab.memory.rule_consolidator import RuleConsolidator

            reflect_consolidator = RuleConsolidator()
        self.reflect_consolidator = reflect_consolidator
        self._reflected: dict[tuple[str, str], tuple[float, str]] = {}
        self.consolidator = consolidator
        self.supersede = supersede or SupersedePolicy()
        # the recall guard (checks packed hits against each other), if the
        # consolidator can judge given records and the policy asks for it
        self.guard: RecallGuard | None = None
        if self.supersede.guard and callable(getattr(consolidator, "judge", None)):
            from memlab.memory.recall_guard import RecallGuard

            self.guard = RecallGuard(consolidator)  # type: ignore[arg-type]
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
        for part in (self.store, self.embedder, self.summarizer, self.reflector):
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
        scope: ScopeArg,
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
        ``untrusted_salience_cap``. ``scope`` may be a list of layered scopes
        (narrowest first): the record goes to the layer ``self.layers`` names for
        its kind.

        Raises:
            InputError: on empty content, a bad scope, kind, source or salience.
        """
        return self.remember_many(
            [MemoryInput(scope, content, kind, salience, source, provenance, meta, created_at, id)]
        )[0]

    def remember_many(self, items: Sequence[MemoryInput]) -> list[MemoryRecord]:
        """Embed all contents in one batched call and store them in one write.

        With a consolidator, each new trusted record is checked, in order, against
        the records of its scope in force (and the batch's earlier items); the
        records it supersedes are rewritten with a ``Superseded`` entry in the same
        atomic write. If embedding or a decision fails nothing is stored.

        Raises:
            InputError: a bad item (nothing stored).
            ConsolidatorError: the consolidator failed or made an unusable decision.
        """
        self._check_open()
        records = new_records(self, items)
        if not records:
            return []
        updated: list[MemoryRecord] = []
        if self.consolidator is not None:
            done = supersede_batch(
                self.store,
                self.consolidator,
                records,
                min_confidence=self.supersede.min_confidence,
                pool=self.pool,
            )
            records, updated = done.records, done.updated
        self.store.put_many(records + updated)
        return records

    def write_scope(self, scope: ScopeArg, kind: MemoryKind | str) -> str:
        """The scope a record of ``kind`` is written to, given one scope or a list
        of layered scopes (see ``LayerPolicy``)."""
        return self.layers.scope_for(kind, scope)

    def remember_procedure(
        self,
        scope: ScopeArg,
        task: str,
        steps: Sequence[ToolCall] | Sequence[Any],
        *,
        success: bool = True,
        outcome: str = "ok",
        provenance: Sequence[str] = (),
        source: Source | str = Source.AGENT,
        created_at: float | None = None,
    ) -> MemoryRecord:
        """Store a procedure that worked (or count a failure); see
        ``memlab.memory.procedural.remember_procedure``.

        Raises:
            InputError: an empty task, no steps, a bad scope or source.
        """
        self._check_open()
        return remember_procedure(
            self, scope, task, steps, success=success, outcome=outcome,
            provenance=provenance, source=source, created_at=created_at,
        )  # fmt: skip

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
        check_scope(scope)
        salience = check_number(salience, "salience", lo=0.0, hi=1.0)
        if not isinstance(reviewer, str) or not reviewer.strip():
            raise InputError(f"approve() needs the reviewer's name, got reviewer={reviewer!r}")
        check_text(reviewer, "reviewer")
        record = self.store.get(scope, record_id)
        if record is None:
            raise InputError(f"no memory with id {record_id!r} in scope {scope!r} to approve")
        updated = record.copy(salience=float(salience))
        updated.meta[REVIEWED_KEY] = reviewer
        # An approval is a new written salience: the salience floor protects (or
        # stops protecting) the record by this value from now on.
        updated.meta.pop(WRITTEN_KEY, None)
        # ...and cold decay counts idle time from the approval: counted from the
        # record's last recall (or last decay), the next maintain cut an approval of
        # a record idle for months to a fraction of what the reviewer gave it.
        updated.meta[DECAYED_KEY] = float(self.clock())
        self.store.put(updated)
        return updated

    def forget(self, scope: str, ids: str | Sequence[str]) -> int:
        """Delete the scope's records with these ids; return how many existed
        (ids of other scopes are never touched). What the forgotten records
        superseded is in force again (their entries are lifted, and the earlier
        reflections a forgotten reflection in force superseded are unarchived); an
        id that names no record of the scope lifts nothing, as forgetting it alone
        does (a correction eviction deleted keeps what it superseded superseded)."""
        self._check_open()
        wanted = scoped_ids(scope, ids)  # checked before anything is deleted
        # Only the ids deleted now lift: lifting by every id given brought a stale
        # value back whenever the id of a correction deleted earlier came in one
        # call with an id that did exist.
        found = self.store.get_many(scope, wanted) if wanted else []
        present = {r.id for r in found}
        # a reflection pass archives the reflection a new one supersedes instead of
        # marking it, so lifting entries alone left neither value in force; an
        # archived reflection was itself retired, and what it retired stays retired
        retired = {
            i for r in found if r.archived_at is None for i in superseded_reflections(r)
        } - present
        n = self.store.delete(scope, wanted)
        if n and present:
            self._lift(scope, present)
            back = [
                r.copy(archived_at=None)
                for r in self.store.get_many(scope, sorted(retired))
                if r.archived_at is not None and is_reflection(r)
            ]
            if back:
                self.store.put_many(back)
        return n

    def reinstate(self, scope: str, record_id: str) -> MemoryRecord:
        """Undo every supersession of a record (after a review found it wrong): its
        entries are lifted, and a reflection that a reflection pass archived because
        a newer reflection superseded it is unarchived (and no longer named by it).

        Raises:
            InputError: no record with this id in ``scope``.
        """
        self._check_open()
        record = self.store.get(scope, record_id)
        if record is None:
            raise InputError(f"no memory with id {record_id!r} in scope {scope!r} to reinstate")
        back = lift(record) or record
        namers: list[MemoryRecord] = []
        if record.archived_at is not None and is_reflection(record):
            # returned unchanged before: the pass archives what a correction
            # supersedes rather than marking it, so there was no entry to lift
            for r in self.store.list(scope, kinds=[MemoryKind.SEMANTIC]):
                ids = superseded_reflections(r)
                if record_id in ids:
                    # so a later forget of it cannot unarchive this record again
                    # after another correction retired it
                    data = dict(r.meta[REFLECTION_KEY])
                    data["supersedes"] = [i for i in ids if i != record_id]
                    namers.append(r.copy(meta={**r.meta, REFLECTION_KEY: data}))
            if namers:
                back = back.copy(archived_at=None)
        if back is record:
            return record
        self.store.put_many([back, *namers])
        return back

    def _lift(self, scope: str, by: set[str]) -> None:
        changed = [
            r
            for r in (lift(rec, by) for rec in self.store.superseded_by(scope, sorted(by)))
            if r is not None
        ]
        if changed:
            self.store.put_many(changed)

    # -- recall -------------------------------------------------------------------
    def embed_query(self, text: str) -> np.ndarray:
        """The embedding of a query text (cached for the last 1,024 texts)."""
        check_text(text, "query text", empty=True)
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
        signal is computed when ``weights.lexical`` > 0. Only records of the
        query's scopes are ever considered (each matched exactly). With several
        scopes the records of all of them are ranked together, or each layer
        fills its share of the budget (``query.split``). Superseded records are
        left out, down-weighted or included as ``query.superseded`` (or the layer's
        SupersedePolicy) says; ``query.as_of`` recalls what the memory held at
        that time. Returned records are touched (access count and last access)
        unless ``touch=False`` or the query travels in time.

        Raises:
            InputError: ``query`` is not a RecallQuery (a bare string has no scope,
                and scope is never guessed).
        """
        if not isinstance(query, RecallQuery):
            raise InputError(not_a_query("recall", query))
        check_bool(touch, "touch")
        self._check_open()
        return recall_query(self, query, touch)

    def rank(self, query: RecallQuery) -> Ranking:
        """Every active record of ``query.scope`` ranked best first, as ``recall``
        scores them, without packing: no token budget, no ``max_hits``, no
        ``min_score``/``min_score_ratio`` cut and no neighbour expansion (those
        choose what fits a prompt; this is the ranking they choose from). Ties are
        broken as packing breaks them (newer first, then id). Nothing is touched.

        ``query.kinds`` and ``query.include_untrusted`` filter as in ``recall``;
        ``token_budget`` is ignored. An approximate store ranks its candidate pool
        (``pool`` records per scope), as ``recall`` does. Superseded records are
        left out, down-weighted or included, and ``as_of`` travels in time, as in
        ``recall`` (the recall guard, which compares packed hits, does not run).

        Raises:
            InputError: ``query`` is not a RecallQuery.
        """
        if not isinstance(query, RecallQuery):
            raise InputError(not_a_query("rank", query))
        self._check_open()
        return rank_query(self, query)

    def explain(self, result: RecallResult | RecallQuery, *, width: int = 60) -> str:
        """A table of why each record was chosen: its score and each signal's share.

        Columns show the signals this recall used (sim, lex, rec or time, sal, use);
        'why' names the largest weighted term, or the hit a neighbour was packed
        next to. Supersession is shown under the hits it concerns (who superseded
        a record or one of its claims, when and why), then the records the recall
        guard left out; the header names the recall mode and ``as_of``. Given a
        query, recalls without touching anything.
        """
        return explain_recall(self, result, width=width)

    # -- maintenance --------------------------------------------------------------
    def maybe_summarize(
        self, scope: str, now: float | None = None, *, into: str | None = None, force: bool = False
    ) -> list[MemoryRecord]:
        """Fold the oldest episodic clusters into semantic notes while the scope's
        trusted episodic tokens exceed ``summarize.trigger_tokens``.

        Each note has the max salience of the sources it folds (those in force: an
        episode a correction superseded whole is archived with them but states
        nothing) and the union of their provenance (plus the source ids); sources
        are archived, not deleted.
        Untrusted (tool/web) records are never folded. Returns the new notes.

        Args:
            scope: whose episodes to fold.
            now: the time of the fold (default: the layer's clock).
            into: the scope the notes are written to (default ``scope``; a layered
                scope's semantic layer).
            force: fold every cluster, ignoring the trigger and ``keep_recent``
                (a session that ended).

        Raises:
            InputError: a bad ``scope``, ``into`` (an empty string included: only
                None means "the scope itself") or ``force``; nothing is folded.
        """
        self._check_open()
        check_scope(scope)
        if into is not None:
            # Checked before anything is folded; "" used to fall back to ``scope``
            # quietly, writing the notes somewhere the caller did not name.
            if not isinstance(into, str) or not into:
                raise InputError(
                    f"maybe_summarize: into must be a non-empty scope, or None to write the "
                    f"notes to {scope!r} itself; got {into!r:.60}"
                )
            check_unicode(into, "maybe_summarize: into")
        check_bool(force, "force")
        now = self.clock() if check_time(now, "now", none=True) is None else float(now)  # type: ignore[arg-type]
        return summarize_scope(self, scope, now, scope if into is None else into, force)

    def reflect(
        self, scope: ScopeArg, now: float | None = None, *, force: bool = True
    ) -> ReflectionReport:
        """Run reflection now (``force``) or only when ``reflect`` policy says it is
        due, reading the episodic layer of ``scope`` and writing to its semantic
        layer (the same scope when a single one is given).

        Raises:
            InputError: a bad scope.
        """
        self._check_open()
        scopes = check_scopes(scope)
        now = self.clock() if check_time(now, "now", none=True) is None else float(now)  # type: ignore[arg-type]
        check_bool(force, "force")
        if self.reflector is None:
            return ReflectionReport()
        return reflect_scope(
            self,
            self.layers.scope_for(MemoryKind.EPISODIC, scopes),
            self.layers.scope_for(MemoryKind.SEMANTIC, scopes),
            now,
            force=force,
            consolidator=self.reflect_consolidator,
        )

    def reflected_until(self, source: str, target: str) -> tuple[float, str]:
        """(created_at, id) of the last episode of ``source`` reflected into
        ``target``; episodes after it are unreflected. Read once from the target's
        reflections, then kept in memory."""
        key = (source, target)
        if key not in self._reflected:
            until = (-float("inf"), "")
            for r in self.store.list(target, kinds=[MemoryKind.SEMANTIC]):
                info = r.meta.get(REFLECTION_KEY) if is_reflection(r) else None
                if info and info.get("from_scope") == source:
                    mark = _mark(info.get("until"))
                    if mark is not None:
                        until = max(until, mark)
            self._reflected[key] = until
        return self._reflected[key]

    def mark_reflected(self, source: str, target: str, until: tuple[float, str]) -> None:
        """Record that ``source``'s episodes up to ``until`` were reflected into ``target``.

        Raises:
            InputError: a bad scope, or ``until`` not a (created_at, id) pair.
        """
        check_scope(source)
        check_scope(target)
        if not (isinstance(until, tuple) and len(until) == 2 and isinstance(until[1], str)):
            raise InputError(
                f"mark_reflected: until must be a (created_at, record id) pair, got {until!r}"
            )
        mark = (check_time(until[0], "mark_reflected: until's created_at"), until[1])
        self._reflected[(source, target)] = max(self.reflected_until(source, target), mark)

    def maintain(self, scope: ScopeArg, now: float | None = None) -> MaintenanceReport:
        """Reflect (if a reflector is set and it is due), summarize, then evict.

        ``scope`` may be a list of layered scopes: the episodic layer's episodes are
        reflected and folded into the semantic layer, and every listed scope is
        evicted.
        """
        self._check_open()
        now = self.clock() if check_time(now, "now", none=True) is None else float(now)  # type: ignore[arg-type]
        return maintain_scopes(self, check_scopes(scope), now, force=False)

    def end_session(self, scope: ScopeArg, now: float | None = None) -> MaintenanceReport:
        """A conversation ended: reflect on everything unreflected (with a
        reflector) and, for a layered scope and a layer with a summarizer, fold the
        rest of the session's trusted episodes into the semantic layer (so the next
        session finds it there), then evict.

        With a single scope only reflection is forced (its episodes stay where
        they are). A layer with neither a reflector nor a summarizer only evicts.
        """
        self._check_open()
        now = self.clock() if check_time(now, "now", none=True) is None else float(now)  # type: ignore[arg-type]
        return maintain_scopes(self, check_scopes(scope), now, force=True)


def _mark(until: object) -> tuple[float, str] | None:
    """A reflection's ``until`` as (created_at, id), or None when it is not one (a
    record put into the store by hand: it marks nothing, rather than failing every
    later pass with a bare ValueError)."""
    if not isinstance(until, list | tuple) or len(until) != 2 or not isinstance(until[1], str):
        return None
    at = until[0]
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        return None
    return float(at), until[1]
