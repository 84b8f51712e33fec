"""Dataclass schemas for every config group, registered in Hydra's ConfigStore.

Hydra checks types and unknown keys when it composes the config; ``validate``
checks values (weights >= 0, budget > 0, ...) at start-up and raises a one-line
ConfigError naming the key. Library code never sees these objects: cli.py turns
them into plain arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from memlab.errors import ConfigError

STRATEGY_KINDS = ("memory", "sliding_window", "stuff_all")
FUSIONS = ("weighted", "rrf")
REWRITERS = ("none", "memory_question")
SIGNALS = ("similarity", "recency", "salience", "usage", "lexical", "time")
SALIENCE_MODES = ("heuristic", "oracle", "fixed")


@dataclass
class WeightsConfig:
    similarity: float = 0.6
    recency: float = 0.15
    salience: float = 0.2
    usage: float = 0.05
    lexical: float = 0.0
    time: float = 0.0


@dataclass
class NeighborsConfig:
    """Pack a hit's adjacent records (before/after) for the first ``top`` hits."""

    before: int = 0
    after: int = 0
    top: int | None = 5
    max_tokens: int | None = None


@dataclass
class HalfLifeConfig:
    """Recency half-life per memory kind, in hours."""

    episodic: float = 72.0
    semantic: float = 2160.0
    procedural: float = 8760.0


@dataclass
class SummarizeConfig:
    enabled: bool = True
    trigger_tokens: int = 250
    chunk_tokens: int = 200
    keep_recent: int = 4
    max_gap_hours: float = 12.0
    min_records: int = 2


@dataclass
class EvictionConfig:
    enabled: bool = True
    episodic_ttl: float | None = None
    max_records: int | None = None
    salience_floor: float | None = 0.8
    cold_decay: float | None = None
    cold_after: float = 720.0
    untrusted_ttl: float | None = None


@dataclass
class MemoryConfig:
    """The memory layer as the `memory` strategies use it."""

    weights: WeightsConfig = field(default_factory=WeightsConfig)
    half_life: HalfLifeConfig = field(default_factory=HalfLifeConfig)
    summarize: SummarizeConfig = field(default_factory=SummarizeConfig)
    eviction: EvictionConfig = field(default_factory=EvictionConfig)
    fusion: str = "weighted"  # weighted | rrf
    rrf_k: float = 60.0
    neighbors: NeighborsConfig = field(default_factory=NeighborsConfig)
    rewrite: str = "none"  # none | memory_question
    salience: str = "heuristic"  # heuristic | oracle | fixed
    fixed_salience: float = 0.5
    untrusted_salience_cap: float = 0.3
    pool: int = 200
    max_hits: int | None = None
    min_score_ratio: float = 0.0
    remember_agent: bool = True
    remember_tools: bool = True


@dataclass
class StrategyConfig:
    """One entry of ``strategies``.

    ``memory`` holds overrides merged on top of the top-level ``memory`` config
    (how the ablation presets differ from the default layer).
    """

    kind: str = "memory"
    window_turns: int | None = 10
    window_tokens: int | None = None
    context_limit: int = 128_000
    memory: dict[str, Any] = field(default_factory=dict)


@dataclass
class TranscriptsConfig:
    name: str = "synthetic"
    path: str | None = None
    limit: int | None = None
    ids: list[str] | None = None


@dataclass
class CacheConfig:
    """The persistent model cache (embeddings and LLM summaries) shared by all runs."""

    embeddings: bool = True
    summaries: bool = True
    path: str | None = None  # null: $MEMLAB_CACHE_DIR, $XDG_CACHE_HOME/memlab or ~/.cache/memlab


@dataclass
class ReportConfig:
    charts: bool = True
    bootstrap: int = 1000
    far_turns: int = 10


@dataclass
class TuneConfig:
    """``memlab tune``: what to maximize, under which constraint, on which transcripts.

    The search space, trial count and sampler seed live in ``hydra.sweeper``
    (conf/tune.yaml sets ``n_trials`` and ``seed`` from here).
    """

    metric: str = "fact_recall"
    strategy: str = "memory"
    group: str = "all"
    max_prompt_tokens: float | None = None
    penalty: float = 1.0
    n_trials: int = 30
    seed: int = 0
    holdout_fraction: float = 0.3
    split_seed: int = 0
    tuning_ids: list[str] | None = None
    holdout_ids: list[str] | None = None
    preset: str = "tuned"


@dataclass
class RunConfig:
    budget: int = 400
    seed: int = 0
    prompt_overhead_tokens: int = 60
    price_per_1k_tokens: float = 0.00015
    progress: bool = True
    strategies: dict[str, StrategyConfig] = field(default_factory=dict)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    transcripts: TranscriptsConfig = field(default_factory=TranscriptsConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    store: Any = None
    embedder: Any = None
    summarizer: Any = None
    tune: TuneConfig | None = None


# -- plug-in schemas: one per YAML in conf/store, conf/embedder, conf/summarizer ----
@dataclass
class InMemoryStoreConf:
    _target_: str = "memlab.memory.InMemoryStore"


@dataclass
class JsonlStoreConf:
    _target_: str = "memlab.memory.JsonlStore"
    path: str = "{run_dir}/stores/{strategy}/{transcript}.jsonl"
    fsync: bool = False
    compact_min_lines: int = 1000
    compact_ratio: float = 2.0
    lock_timeout: float = 30.0


@dataclass
class SqliteStoreConf:
    _target_: str = "memlab.memory.SqliteStore"
    path: str = "{run_dir}/stores/{strategy}/{transcript}.db"
    timeout: float = 30.0


@dataclass
class PgVectorStoreConf:
    _target_: str = "memlab.memory.PgVectorStore"
    dsn: str | None = None  # null: $MEMLAB_PG_DSN, else the embedded server
    schema: str | None = "memlab_{run_key}"
    table: str = "{strategy:.24}_{key}"
    dims: int | None = None  # null: the embedder's
    pool: int = 200
    ef_search: int | None = None
    salient: int = 50
    recent: int = 50
    max_scan_tuples: int = 20_000
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    data_dir: str | None = None
    database: str = "memlab"
    keep_running: bool = False
    connect_timeout: float = 10.0
    drop_after: bool = True  # drop each replay's table when the replay ends


@dataclass
class HashEmbedderConf:
    _target_: str = "memlab.memory.HashEmbedder"
    dims: int = 384


@dataclass
class MiniLMEmbedderConf:
    _target_: str = "memlab.memory.MiniLMEmbedder"
    model_path: str | None = None  # any local sentence-transformers folder; null: bundled MiniLM
    batch_size: int = 64
    device: str = "cpu"
    threads: int | None = None
    max_seq_length: int | None = None


@dataclass
class OpenAIEmbedderConf:
    _target_: str = "memlab.memory.OpenAIEmbedder"
    base_url: str = "https://api.openai.com/v1"
    model: str = "text-embedding-3-small"
    dims: int = 1536
    api_key_env: str | None = "OPENAI_API_KEY"
    max_batch: int = 128
    send_dims: bool = False
    timeout: float = 30.0
    max_retries: int = 5
    backoff: float = 0.5
    max_delay: float = 60.0


@dataclass
class OpenAISummarizerConf:
    _target_: str = "memlab.memory.OpenAISummarizer"
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    max_words: int = 120
    api_key_env: str | None = "OPENAI_API_KEY"
    max_tokens: int | None = None
    timeout: float = 60.0
    max_retries: int = 5
    backoff: float = 0.5
    max_delay: float = 60.0


@dataclass
class ExtractiveSummarizerConf:
    _target_: str = "memlab.memory.ExtractiveSummarizer"
    max_words: int = 120


SCHEMAS: dict[tuple[str | None, str], type] = {
    (None, "run_schema"): RunConfig,
    ("transcripts", "transcripts_schema"): TranscriptsConfig,
    ("store", "store_memory_schema"): InMemoryStoreConf,
    ("store", "store_jsonl_schema"): JsonlStoreConf,
    ("store", "store_sqlite_schema"): SqliteStoreConf,
    ("store", "store_pgvector_schema"): PgVectorStoreConf,
    ("embedder", "embedder_hash_schema"): HashEmbedderConf,
    ("embedder", "embedder_minilm_schema"): MiniLMEmbedderConf,
    ("embedder", "embedder_openai_schema"): OpenAIEmbedderConf,
    ("summarizer", "summarizer_extractive_schema"): ExtractiveSummarizerConf,
    ("summarizer", "summarizer_openai_schema"): OpenAISummarizerConf,
}


def register() -> None:
    """Register the schemas so the YAML files can name them in their defaults."""
    cs = ConfigStore.instance()
    for (group, name), node in SCHEMAS.items():
        cs.store(group=group, name=name, node=node)
    _register_tune_sampler(cs)


def _register_tune_sampler(cs: ConfigStore) -> None:
    """``hydra/sweeper/sampler=warm_tpe`` (memlab tune), when the ``tune`` extra is installed."""
    try:
        from hydra_plugins.hydra_optuna_sweeper.config import TPESamplerConfig
    except ImportError:
        return

    @dataclass
    class WarmTPESamplerConfig(TPESamplerConfig):
        _target_: str = "memlab.lab.tune.warm_tpe"
        warm_start: dict[str, Any] = field(default_factory=dict)

    cs.store(group="hydra/sweeper/sampler", name="warm_tpe", node=WarmTPESamplerConfig)


def _check(ok: bool, key: str, problem: str) -> None:
    if not ok:
        raise ConfigError(f"config key '{key}': {problem}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def validate_memory(m: MemoryConfig, where: str = "memory") -> None:
    """Check the values of a memory config; raise ConfigError naming the key."""
    w = m.weights
    for name in SIGNALS:
        v = getattr(w, name)
        _check(
            _number(v) and v >= 0, f"{where}.weights.{name}", f"must be a number >= 0, got {v!r}"
        )
    _check(
        sum(getattr(w, n) for n in SIGNALS) > 0,
        f"{where}.weights",
        "all weights are 0; give at least one signal a positive weight",
    )
    for name in ("episodic", "semantic", "procedural"):
        v = getattr(m.half_life, name)
        _check(_number(v) and v > 0, f"{where}.half_life.{name}", f"must be hours > 0, got {v!r}")
    s = m.summarize
    _check(
        s.trigger_tokens > 0,
        f"{where}.summarize.trigger_tokens",
        f"must be > 0, got {s.trigger_tokens}",
    )
    _check(
        s.chunk_tokens > 0, f"{where}.summarize.chunk_tokens", f"must be > 0, got {s.chunk_tokens}"
    )
    _check(
        s.keep_recent >= 0, f"{where}.summarize.keep_recent", f"must be >= 0, got {s.keep_recent}"
    )
    _check(
        s.max_gap_hours > 0,
        f"{where}.summarize.max_gap_hours",
        f"must be > 0, got {s.max_gap_hours}",
    )
    _check(
        s.min_records >= 1, f"{where}.summarize.min_records", f"must be >= 1, got {s.min_records}"
    )
    e = m.eviction
    _check(
        e.episodic_ttl is None or e.episodic_ttl > 0,
        f"{where}.eviction.episodic_ttl",
        f"must be hours > 0 or null, got {e.episodic_ttl}",
    )
    _check(
        e.max_records is None or e.max_records >= 1,
        f"{where}.eviction.max_records",
        f"must be >= 1 or null, got {e.max_records}",
    )
    _check(
        e.salience_floor is None or 0 <= e.salience_floor <= 1,
        f"{where}.eviction.salience_floor",
        f"must be in 0..1 or null, got {e.salience_floor}",
    )
    _check(
        e.cold_decay is None or 0 < e.cold_decay <= 1,
        f"{where}.eviction.cold_decay",
        f"must be in (0, 1] or null, got {e.cold_decay}",
    )
    _check(
        e.cold_after > 0, f"{where}.eviction.cold_after", f"must be hours > 0, got {e.cold_after}"
    )
    _check(
        m.salience in SALIENCE_MODES,
        f"{where}.salience",
        f"must be one of {list(SALIENCE_MODES)}, got {m.salience!r}",
    )
    _check(0 <= m.fixed_salience <= 1, f"{where}.fixed_salience", "must be in 0..1")
    _check(
        0 <= m.untrusted_salience_cap <= 1,
        f"{where}.untrusted_salience_cap",
        f"must be in 0..1, got {m.untrusted_salience_cap}",
    )
    _check(m.pool >= 1, f"{where}.pool", f"must be >= 1, got {m.pool}")
    _check(
        m.fusion in FUSIONS, f"{where}.fusion", f"must be one of {list(FUSIONS)}, got {m.fusion!r}"
    )
    _check(m.rrf_k > 0, f"{where}.rrf_k", f"must be > 0, got {m.rrf_k}")
    _check(
        m.rewrite in REWRITERS,
        f"{where}.rewrite",
        f"must be one of {list(REWRITERS)}, got {m.rewrite!r}",
    )
    n = m.neighbors
    _check(n.before >= 0, f"{where}.neighbors.before", f"must be >= 0, got {n.before}")
    _check(n.after >= 0, f"{where}.neighbors.after", f"must be >= 0, got {n.after}")
    _check(
        n.top is None or n.top >= 1, f"{where}.neighbors.top", f"must be >= 1 or null, got {n.top}"
    )
    _check(
        m.max_hits is None or m.max_hits >= 1,
        f"{where}.max_hits",
        f"must be >= 1 or null, got {m.max_hits}",
    )
    _check(
        0 <= m.min_score_ratio <= 1,
        f"{where}.min_score_ratio",
        f"must be in 0..1, got {m.min_score_ratio}",
    )


def strategy_memory(cfg: DictConfig, name: str) -> MemoryConfig:
    """The memory config of one strategy: top-level ``memory`` + its overrides."""
    base = OmegaConf.structured(MemoryConfig)
    try:
        merged = OmegaConf.merge(base, cfg.memory, cfg.strategies[name].get("memory") or {})
    except Exception as exc:  # omegaconf reports unknown keys and bad types
        raise ConfigError(f"config key 'strategies.{name}.memory': {_first_line(exc)}") from None
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def validate(cfg: DictConfig) -> RunConfig:
    """Validate a composed run config; return it as typed objects.

    Raises:
        ConfigError: one line naming the key and what is wrong.
    """
    try:
        typed = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg)
    except Exception as exc:
        raise ConfigError(_first_line(exc)) from None
    run: RunConfig = OmegaConf.to_object(typed)  # type: ignore[assignment]
    _check(
        isinstance(run.budget, int) and run.budget > 0,
        "budget",
        f"must be a positive integer, got {run.budget!r}",
    )
    _check(run.prompt_overhead_tokens >= 0, "prompt_overhead_tokens", "must be >= 0")
    _check(run.price_per_1k_tokens >= 0, "price_per_1k_tokens", "must be >= 0")
    _check(
        bool(run.strategies), "strategies", "select at least one strategy, e.g. strategies=[memory]"
    )
    validate_memory(run.memory)
    for name, s in run.strategies.items():
        _check(
            s.kind in STRATEGY_KINDS,
            f"strategies.{name}.kind",
            f"must be one of {list(STRATEGY_KINDS)}, got {s.kind!r}",
        )
        _check(
            s.window_turns is None or s.window_turns >= 1,
            f"strategies.{name}.window_turns",
            f"must be >= 1 or null, got {s.window_turns}",
        )
        _check(
            s.window_tokens is None or s.window_tokens >= 1,
            f"strategies.{name}.window_tokens",
            f"must be >= 1 or null, got {s.window_tokens}",
        )
        _check(s.context_limit >= 1, f"strategies.{name}.context_limit", "must be >= 1")
        if s.kind == "memory":
            validate_memory(strategy_memory(cfg, name), f"strategies.{name}.memory")
    t = run.transcripts
    _check(
        t.limit is None or t.limit >= 1, "transcripts.limit", f"must be >= 1 or null, got {t.limit}"
    )
    _check(run.report.bootstrap >= 0, "report.bootstrap", "must be >= 0")
    _check(run.report.far_turns >= 1, "report.far_turns", "must be >= 1")
    if run.tune is not None:
        validate_tune(run.tune, run)
    return run


def validate_tune(tune: TuneConfig, run: RunConfig) -> None:
    """Check the ``tune`` node against the run config; raise ConfigError naming the key."""
    from memlab.lab.metrics import METRICS

    choices = sorted(m for m, info in METRICS.items() if info.direction != 0)
    _check(
        tune.metric in METRICS and METRICS[tune.metric].direction != 0,
        "tune.metric",
        f"must be a metric with a direction, one of {choices}; got {tune.metric!r}",
    )
    _check(
        tune.strategy in run.strategies,
        "tune.strategy",
        f"must be one of the selected strategies {sorted(run.strategies)}; got {tune.strategy!r}",
    )
    _check(
        tune.max_prompt_tokens is None or tune.max_prompt_tokens > 0,
        "tune.max_prompt_tokens",
        f"must be > 0 or null, got {tune.max_prompt_tokens}",
    )
    _check(tune.penalty >= 0, "tune.penalty", f"must be >= 0, got {tune.penalty}")
    _check(tune.n_trials >= 1, "tune.n_trials", f"must be >= 1, got {tune.n_trials}")
    _check(
        0 < tune.holdout_fraction < 1,
        "tune.holdout_fraction",
        f"must be in (0, 1), got {tune.holdout_fraction}",
    )
    _check(
        bool(tune.preset) and all(c.isalnum() or c in "-_" for c in tune.preset),
        "tune.preset",
        f"must be a file name of letters, digits, - and _; got {tune.preset!r}",
    )


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
