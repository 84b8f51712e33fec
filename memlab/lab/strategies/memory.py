"""``kind: memory``: the memory layer as a strategy, and its settings.

A ``memory`` strategy starts from the run's ``memory`` settings and applies its
entry's ``memory`` overrides (how the ablations differ from the default layer).
The settings mirror the library: ``weights``, ``half_life``, ``summarize``,
``eviction`` and ``neighbors`` have exactly the fields (and defaults) of
``RankWeights``, ``HalfLives``, ``SummarizePolicy``, ``EvictionPolicy`` and
``NeighborPolicy``; ``fusion``/``rrf_k`` are ``HybridRanker``'s,
``untrusted_salience_cap``/``pool`` are ``MemoryLayer``'s and
``max_hits``/``min_score_ratio`` are ``RecallQuery``'s. Only the lab's own
settings are declared here: ``summarize.enabled``, ``eviction.enabled``,
``rewrite``, ``salience``, ``fixed_salience``, ``remember_agent`` and
``remember_tools``. The library objects check every value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from memlab.errors import InputError
from memlab.lab.schema import (
    as_dict,
    build,
    check_nodes,
    default_of,
    fields_schema,
    omegaconf_error,
    partial_schema,
    set_values,
    structured,
)
from memlab.lab.strategies.base import (
    STRATEGIES,
    Components,
    Context,
    ContextItem,
    StoreStats,
    StrategyFactory,
)
from memlab.lab.transcripts import Turn
from memlab.memory import (
    SPEAKER_KEY,
    Embedder,
    EvictionPolicy,
    HalfLives,
    HashEmbedder,
    Hit,
    HybridRanker,
    InMemoryStore,
    MemoryLayer,
    MemoryQuestionRewriter,
    MemoryStore,
    NeighborPolicy,
    QueryRewriter,
    RankWeights,
    RecallQuery,
    SummarizePolicy,
    SupersedePolicy,
    estimate_salience,
)
from memlab.memory.stores.base import scope_columns

SalienceFn = Callable[[Turn], float]
SALIENCE_MODES = ("heuristic", "oracle", "fixed")
REWRITERS: dict[str, type[QueryRewriter] | None] = {
    "none": None,
    "memory_question": MemoryQuestionRewriter,
}


def salience_function(mode: str, fixed: float = 0.5) -> SalienceFn:
    """How a memory strategy rates a turn's importance.

    ``heuristic``: ``estimate_salience`` on the text (cue phrases; see
    memlab.memory.salience). ``oracle``: the transcript's ``salience_hint`` (an
    upper-bound ablation; falls back to the heuristic where a turn has none).
    ``fixed``: the same value for every turn.

    Raises:
        InputError: an unknown mode.
    """
    if mode == "heuristic":
        return lambda t: estimate_salience(t.text)
    if mode == "oracle":
        return lambda t: (
            t.salience_hint if t.salience_hint is not None else estimate_salience(t.text)
        )
    if mode == "fixed":
        return lambda t: fixed
    raise InputError(f"salience must be one of {list(SALIENCE_MODES)}, got {mode!r}")


class MemoryStrategy:
    """The memory layer: remembers every turn as an episodic record, recalls into
    the budget, and runs summarization and eviction after each turn.

    Args:
        name: the strategy's name in results.
        store: a fresh store for this replay.
        embedder: shared embedder.
        salience: rates each turn (see ``salience_function``; default heuristic).
        remember_agent: also store agent replies.
        remember_tools: also store tool output.
        query: extra ``RecallQuery`` fields for every recall (``max_hits``,
            ``min_score_ratio``, ...).
        drop_store: on close, delete the store's data if it can (``store.drop()``,
            e.g. a pgvector table made for this replay only).
        **layer: ``MemoryLayer`` keyword arguments (``ranker`` or
            ``weights``/``half_life``, ``summarizer``, ``summarize``, ``eviction``,
            ``untrusted_salience_cap``, ``pool``, ``rewriter``, ``neighbors``);
            the clock is the transcript's.
    """

    def __init__(
        self,
        name: str,
        store: MemoryStore,
        embedder: Embedder,
        *,
        salience: SalienceFn | None = None,
        remember_agent: bool = True,
        remember_tools: bool = True,
        query: Mapping[str, Any] | None = None,
        drop_store: bool = False,
        **layer: Any,
    ) -> None:
        self.name = name
        self.drop_store = drop_store
        self.query = dict(query or {})
        self.now = 0.0
        self.layer = MemoryLayer(store, embedder, clock=lambda: self.now, **layer)
        self.salience = salience or salience_function("heuristic")
        self.remember_agent = remember_agent
        self.remember_tools = remember_tools
        self._provenance: dict[str, tuple[str, ...]] = {}  # record id -> turn ids

    def observe(self, turn: Turn) -> None:
        self.now = max(self.now, turn.time)
        if turn.role == "agent" and not self.remember_agent:
            return
        if turn.role == "tool" and not self.remember_tools:
            return
        meta = {"role": turn.role}
        if turn.session is not None:
            meta["session"] = turn.session
        speaker = (turn.meta or {}).get(SPEAKER_KEY)
        if isinstance(speaker, str) and speaker.strip():
            meta[SPEAKER_KEY] = speaker  # a group chat: whose statement it is
        record = self.layer.remember(
            self.scope_of(turn),
            turn.text,
            salience=min(1.0, max(0.0, float(self.salience(turn)))),
            source=turn.source,
            provenance=(turn.id,),
            meta=meta,
            created_at=turn.time,
        )
        self._provenance[record.id] = record.provenance

    def context(self, probe: Turn, budget: int) -> Context:
        self.now = max(self.now, probe.time)
        result = self.layer.recall(
            RecallQuery(
                self.scope_of(probe), probe.text, token_budget=budget, now=self.now, **self.query
            )
        )
        return Context([self.item(h) for h in result.hits])

    def item(self, hit: Hit) -> ContextItem:
        """A recalled record as a context item: the text recall shows (stale claims
        of a partly superseded record cut out), its tokens."""
        r = hit.record
        return ContextItem(
            text=hit.text,
            tokens=r.tokens if hit.text == r.content else self.layer.count_tokens(hit.text),
            kind=r.kind.value,
            scope=r.scope,
            source=r.source.value,
            provenance=r.provenance,
            score=hit.score,
            created_at=r.created_at,
        )

    def ranking(self, probe: Turn) -> list[tuple[str, ...]]:
        """The layer's full ranking of the scope (``MemoryLayer.rank``): every active
        record, as recall scores them, before packing; each record's provenance."""
        self.now = max(self.now, probe.time)
        scopes = self.scope_of(probe)
        ranked = self.layer.rank(RecallQuery(scopes, probe.text, now=self.now))
        missing = [i for i in ranked.ids if i not in self._provenance]
        # records this strategy did not see made (reflections, procedures)
        for scope in (scopes,) if isinstance(scopes, str) else scopes:
            if not missing:
                break
            for record in self.layer.store.get_many(scope, missing):
                self._provenance[record.id] = record.provenance
            missing = [i for i in missing if i not in self._provenance]
        return [self._provenance[i] for i in ranked.ids if i in self._provenance]

    def maintain(self, turn: Turn) -> None:
        report = self.layer.maintain(self.scope_of(turn), now=self.now)
        for note in report.summaries:
            self._provenance[note.id] = note.provenance

    def scope_of(self, turn: Turn) -> str | tuple[str, ...]:
        """The scope (or layered scopes) a turn is remembered in and recalled from."""
        return turn.scope

    def stats(self) -> StoreStats:
        store = self.layer.store
        records = archived = tokens = 0
        for scope in store.scopes():
            # column views, archived rows included: no record is copied, and no
            # count() that walks every record in Python at every turn
            cands = scope_columns(store, scope, include_archived=True)
            is_archived = np.isfinite(cands.archived_at)
            active = cands.mask & ~is_archived
            records += int(active.sum())
            archived += int((cands.mask & is_archived).sum())
            tokens += int(cands.tokens[active].sum())
        return StoreStats(
            records=records, archived=archived, tokens=tokens, bytes=store.size_bytes()
        )

    def close(self) -> None:
        drop = getattr(self.layer.store, "drop", None)
        if self.drop_store and drop is not None:
            drop()
        else:
            self.layer.store.close()


# -- settings -----------------------------------------------------------------------
ENABLED = ("enabled", bool, True)
WeightsSettings = fields_schema(RankWeights, name="WeightsSettings")
HalfLifeSettings = fields_schema(HalfLives, name="HalfLifeSettings")
SummarizeSettings = fields_schema(
    SummarizePolicy,
    name="SummarizeSettings",
    extra=[ENABLED],
    doc="SummarizePolicy's fields, and enabled (false: never fold episodes).",
)
EvictionSettings = fields_schema(
    EvictionPolicy,
    name="EvictionSettings",
    extra=[ENABLED],
    doc="EvictionPolicy's fields, and enabled (false: never forget).",
)
NeighborsSettings = fields_schema(NeighborPolicy, name="NeighborsSettings")
SupersedeSettings = fields_schema(
    SupersedePolicy,
    name="SupersedeSettings",
    extra=[ENABLED],
    doc="SupersedePolicy's fields, and enabled (false: the run's consolidator is not used, "
    "nothing is superseded and the recall guard is off: the memory_no_supersede ablation).",
)


@dataclass
class MemorySettings:
    """The run's ``memory`` node (and what a strategy's ``memory`` overrides).

    Every default is the library's; the lab's own settings are the last five.
    ``neighbors`` with ``before`` and ``after`` both 0 packs no neighbours.
    """

    weights: Any = field(default_factory=WeightsSettings)
    half_life: Any = field(default_factory=HalfLifeSettings)
    summarize: Any = field(default_factory=SummarizeSettings)
    eviction: Any = field(default_factory=EvictionSettings)
    neighbors: Any = field(default_factory=NeighborsSettings)
    supersede: Any = field(default_factory=SupersedeSettings)
    fusion: str = default_of(HybridRanker, "fusion")
    rrf_k: float = default_of(HybridRanker, "rrf_k")
    untrusted_salience_cap: float = default_of(MemoryLayer, "untrusted_salience_cap")
    pool: int = default_of(MemoryLayer, "pool")
    max_hits: int | None = default_of(RecallQuery, "max_hits")
    min_score_ratio: float = default_of(RecallQuery, "min_score_ratio")
    # The lab's own settings:
    rewrite: str = "none"  # none | memory_question ("what did I tell you about X?" -> "X")
    salience: str = "heuristic"  # heuristic | oracle (the transcript's hints) | fixed
    fixed_salience: float = 0.5
    remember_agent: bool = default_of(MemoryStrategy, "remember_agent")
    remember_tools: bool = default_of(MemoryStrategy, "remember_tools")

    def __post_init__(self) -> None:
        if self.rewrite not in REWRITERS:
            raise InputError(f"rewrite must be one of {list(REWRITERS)}, got {self.rewrite!r}")
        salience_function(self.salience)
        if not 0.0 <= self.fixed_salience <= 1.0:
            raise InputError(f"fixed_salience must be in 0..1, got {self.fixed_salience}")


LIBRARY_SETTINGS: dict[str, Any] = {
    "weights": RankWeights,
    "half_life": HalfLives,
    "summarize": SummarizePolicy,
    "eviction": EvictionPolicy,
    "neighbors": NeighborPolicy,
    "supersede": SupersedePolicy,
    "fusion": HybridRanker,
    "rrf_k": HybridRanker,
    "untrusted_salience_cap": MemoryLayer,
    "pool": MemoryLayer,
    "max_hits": RecallQuery,
    "min_score_ratio": RecallQuery,
}
"""Which library class owns each key of MemorySettings (the rest are the lab's)."""


@dataclass(frozen=True)
class MemoryParts:
    """Checked library objects for one memory strategy (shared by its replays)."""

    weights: RankWeights
    half_life: HalfLives
    fusion: str
    rrf_k: float
    summarize: SummarizePolicy | None
    eviction: EvictionPolicy | None
    neighbors: NeighborPolicy | None
    supersede: SupersedePolicy | None
    layer: dict[str, Any]
    query: dict[str, Any]
    rewriter: type[QueryRewriter] | None
    salience: SalienceFn
    remember_agent: bool
    remember_tools: bool

    @classmethod
    def build(cls, s: MemorySettings, where: str = "memory") -> MemoryParts:
        """Build (and so check) the library objects of settings ``s``.

        Raises:
            ConfigError: naming the key under ``where``.
        """

        def policy(key: str, factory: Any) -> Any:
            values = {k: v for k, v in as_dict(getattr(s, key)).items() if k != "enabled"}
            return build(factory, values, f"{where}.{key}")

        weights = policy("weights", RankWeights)
        half_life = policy("half_life", HalfLives)
        build(
            HybridRanker,
            {"weights": weights, "half_life": half_life, "fusion": s.fusion, "rrf_k": s.rrf_k},
            where,
        )
        summarize = policy("summarize", SummarizePolicy)
        eviction = policy("eviction", EvictionPolicy)
        neighbors = policy("neighbors", NeighborPolicy)
        supersede = policy("supersede", SupersedePolicy)
        query = {"max_hits": s.max_hits, "min_score_ratio": s.min_score_ratio}
        build(RecallQuery, {"scope": "check", "text": "", **query}, where)
        layer = {"untrusted_salience_cap": s.untrusted_salience_cap, "pool": s.pool}
        # The layer checks its own options; an empty store and a tiny embedder
        # make it without touching anything.
        build(MemoryLayer, {"store": InMemoryStore(), "embedder": HashEmbedder(8), **layer}, where)
        return cls(
            weights=weights,
            half_life=half_life,
            fusion=s.fusion,
            rrf_k=s.rrf_k,
            summarize=summarize if s.summarize.enabled else None,
            eviction=eviction if s.eviction.enabled else None,
            neighbors=neighbors if (neighbors.before or neighbors.after) else None,
            supersede=supersede if s.supersede.enabled else None,
            layer=layer,
            query=query,
            rewriter=REWRITERS[s.rewrite],
            salience=salience_function(s.salience, s.fixed_salience),
            remember_agent=s.remember_agent,
            remember_tools=s.remember_tools,
        )

    def strategy(
        self,
        name: str,
        store: MemoryStore,
        parts: Components,
        *,
        drop_store: bool = False,
        cls: type[MemoryStrategy] | None = None,
        **extra: Any,
    ) -> MemoryStrategy:
        """A MemoryStrategy (or ``cls``, given ``extra`` keyword arguments) over a
        fresh ``store``."""
        return (cls or MemoryStrategy)(
            name,
            store,
            parts.embedder,
            ranker=HybridRanker(self.weights, self.half_life, fusion=self.fusion, rrf_k=self.rrf_k),
            summarizer=parts.summarizer if self.summarize is not None else None,
            summarize=self.summarize,
            eviction=self.eviction,
            rewriter=self.rewriter() if self.rewriter is not None else None,
            neighbors=self.neighbors,
            consolidator=parts.consolidator if self.supersede is not None else None,
            supersede=self.supersede or SupersedePolicy(guard=False),
            salience=self.salience,
            remember_agent=self.remember_agent,
            remember_tools=self.remember_tools,
            query=self.query,
            drop_store=drop_store,
            **self.layer,
            **extra,
        )


def memory_settings(*nodes: Any, where: str = "memory") -> MemorySettings:
    """MemorySettings from config nodes merged in order (later ones win).

    Raises:
        ConfigError: unknown keys, wrong types or bad values, naming the key.
    """
    plain = [
        OmegaConf.to_container(n, resolve=True) if OmegaConf.is_config(n) else n for n in nodes
    ]
    try:
        merged: Any = OmegaConf.merge(*[p or {} for p in plain]) if plain else {}
    except Exception as exc:
        raise omegaconf_error(exc, where) from None
    settings: MemorySettings = structured(MemorySettings, merged, where)
    return settings


MemoryOverrides = partial_schema(MemorySettings, name="MemoryOverrides")


@dataclass
class MemoryEntry:
    """A ``strategies`` entry of kind ``memory``: ``memory`` overrides the run's
    ``memory`` settings (any of its keys; the others keep the run's values)."""

    memory: Any = field(default_factory=MemoryOverrides)


class MemoryKind:
    """The ``memory`` kind: settings = the run's ``memory`` + the entry's overrides."""

    schema: type = MemoryEntry

    def entry(self, name: str, raw: Mapping[str, Any]) -> dict[str, Any]:
        return {"memory": merged_entry(MemoryEntry, name, raw)["memory"]}

    def settings(self, name: str, raw: Mapping[str, Any], run: Mapping[str, Any]) -> MemoryParts:
        overrides = self.entry(name, raw)["memory"]
        where = f"strategies.{name}.memory" if overrides else "memory"
        settings = memory_settings(run.get("memory") or {}, overrides, where=where)
        return MemoryParts.build(settings, where)

    def factory(self, name: str, settings: Any, parts: Components) -> StrategyFactory:
        def make(transcript: Any) -> MemoryStrategy:
            store = parts.open_store(name, transcript.id)
            return settings.strategy(name, store, parts, drop_store=parts.drop_store)

        return make


def merged_entry(schema: type, name: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """A strategy entry merged into its kind's ``schema`` and resolved, with its
    ``memory`` keys reduced to the ones the entry set (``set_values``).

    Raises:
        ConfigError: an unknown key or a value of the wrong type, naming
            ``strategies.<name>``.
    """
    key = f"strategies.{name}"
    plain = OmegaConf.to_container(raw, resolve=True) if OmegaConf.is_config(raw) else raw
    check_nodes(schema, plain, key)
    try:
        node = OmegaConf.merge(OmegaConf.structured(schema), plain or {})
    except Exception as exc:
        raise omegaconf_error(exc, key) from None
    values: Any = OmegaConf.to_container(node, resolve=True)
    values["memory"] = set_values(values["memory"])
    return dict(values)


STRATEGIES.register("memory", MemoryKind())
