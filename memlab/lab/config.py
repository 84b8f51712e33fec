"""The run config: its schema and checking it (composing it with Hydra: ``compose``).

The schema of the ``memory`` node comes from the library (see
``memlab.lab.strategies.memory``); the schemas of the ``store``, ``embedder``
and ``summarizer`` nodes are the constructor signatures of the registered
plug-ins (``STORES``, ``EMBEDDERS``, ``SUMMARIZERS``), stored in Hydra's
ConfigStore as ``schema/<group>/<name>`` for conf/<group>/<name>.yaml to extend.
Only the lab's own settings are declared here. ``validate`` checks a composed
config before anything runs and raises a one-line ConfigError naming the key;
library code never sees a config.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

import memlab
from memlab.errors import ConfigError
from memlab.lab.answering import AnswerSettings
from memlab.lab.judges import JUDGES
from memlab.lab.metrics import bootstrap_problem, seed_problem
from memlab.lab.readers import NO_READER, READERS
from memlab.lab.replay import ReplaySettings
from memlab.lab.schema import (
    as_dict,
    build,
    config_error,
    default_of,
    fields_schema,
    omegaconf_error,
    set_values,
    signature_schema,
    structured,
)
from memlab.lab.strategies import STRATEGIES, Kind
from memlab.lab.strategies.memory import MemoryParts, MemorySettings, memory_settings
from memlab.memory import CONSOLIDATORS, EMBEDDERS, STORES, SUMMARIZERS, RecallQuery
from memlab.registry import Registry


def conf_dir() -> Path:
    """conf/ of a source checkout, or memlab/conf inside an installed wheel."""
    package = Path(memlab.__file__).resolve().parent
    for c in (package / "conf", package.parent / "conf"):
        if (c / "config.yaml").exists():
            return c
    raise ConfigError("memlab's config folder is missing; reinstall memlab")


def _check(ok: bool, key: str, problem: str) -> None:
    if not ok:
        raise ConfigError(f"config key '{key}': {problem}")


def _check_problem(problem: str | None, key: str) -> None:
    if problem is not None:
        raise ConfigError(f"config key '{key}': {problem}")


# -- the lab's own settings ---------------------------------------------------------
@dataclass
class TranscriptsConfig:
    """Which transcripts to replay (``name``: a dataset in ``DATASETS``), and an
    errata file to apply to them (``errata``: see ``memlab.lab.errata``)."""

    name: str = "synthetic"
    path: str | None = None
    limit: int | None = None
    ids: list[str] | None = None
    errata: str | None = None

    def __post_init__(self) -> None:
        _check(
            self.limit is None or self.limit >= 1,
            "transcripts.limit",
            f"must be >= 1 or null, got {self.limit}",
        )


@dataclass
class CacheConfig:
    """The persistent model cache (embeddings, LLM summaries, reader and judge
    answers, LLM consolidation decisions) shared by all runs."""

    embeddings: bool = True
    summaries: bool = True
    answers: bool = True
    decisions: bool = True  # an LLM consolidator's decisions (consolidator=openai)
    # null: embeddings.sqlite in $MEMLAB_CACHE_DIR, $XDG_CACHE_HOME/memlab or ~/.cache/memlab
    path: str | None = None


@dataclass
class ReportConfig:
    """How a run is scored and reported (the run-level ``report`` node).

    ``benchmark_metrics``: the ranked retrieval families (``haystack_*``,
    ``context_*``) and the abstention proxies; null computes them for transcripts
    from a benchmark adapter (LoCoMo, LongMemEval). ``abstain_below``: the
    question coverage under which a context counts as "would abstain"
    (``abstention_proxy``; chosen on LoCoMo conv-26, see docs/trust.md).
    """

    charts: bool = True
    bootstrap: int = 1000
    far_turns: int = default_of(ReplaySettings, "far_turns")
    benchmark_metrics: bool | None = default_of(ReplaySettings, "benchmark_metrics")
    abstain_below: float = default_of(ReplaySettings, "abstain_below")

    def __post_init__(self) -> None:
        _check_problem(bootstrap_problem(self.bootstrap), "report.bootstrap")
        _check(self.far_turns >= 1, "report.far_turns", f"must be >= 1, got {self.far_turns}")
        _check(
            0.0 <= self.abstain_below <= 1.0,
            "report.abstain_below",
            f"must be in 0..1, got {self.abstain_below}",
        )


PRUNERS = ("median", "none")


@dataclass
class TuneConfig:
    """``memlab tune``: what to optimize, over which space, on which transcripts,
    and where the Optuna study lives (conf/tune.yaml documents every key)."""

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
    params: dict[str, str] = field(default_factory=dict)
    multi_objective: bool = False
    pruner: str = "median"
    workers: int = 1
    out: str | None = None
    storage: str | None = None
    study: str = "memlab"
    level: float = 0.95

    def __post_init__(self) -> None:
        _check(
            self.max_prompt_tokens is None or self.max_prompt_tokens > 0,
            "tune.max_prompt_tokens",
            f"must be > 0 or null, got {self.max_prompt_tokens}",
        )
        _check(self.penalty >= 0, "tune.penalty", f"must be >= 0, got {self.penalty}")
        _check(self.n_trials >= 1, "tune.n_trials", f"must be >= 1, got {self.n_trials}")
        _check_problem(seed_problem(self.seed), "tune.seed")  # numpy-seeded TPE sampler
        _check(
            0 < self.holdout_fraction < 1,
            "tune.holdout_fraction",
            f"must be in (0, 1), got {self.holdout_fraction}",
        )
        _check(
            bool(self.preset) and all(c.isalnum() or c in "-_" for c in self.preset),
            "tune.preset",
            f"must be a file name of letters, digits, - and _; got {self.preset!r}",
        )
        _check(
            self.pruner in PRUNERS,
            "tune.pruner",
            f"must be one of {list(PRUNERS)}, got {self.pruner!r}",
        )
        _check(self.workers >= 1, "tune.workers", f"must be >= 1, got {self.workers}")
        _check(
            bool(self.study) and "\n" not in self.study,
            "tune.study",
            f"must be a study name, got {self.study!r}",
        )
        _check(0 < self.level < 1, "tune.level", f"must be in (0, 1), got {self.level}")


@dataclass
class RunConfig:
    """The whole run config (conf/config.yaml)."""

    budget: int = default_of(ReplaySettings, "budget")
    seed: int = 0
    prompt_overhead_tokens: int = default_of(ReplaySettings, "prompt_overhead_tokens")
    price_per_1k_tokens: float = default_of(ReplaySettings, "price_per_1k_tokens")
    progress: bool = True  # bars on a terminal only; false: never
    strategies: dict[str, Any] = field(default_factory=dict)
    memory: MemorySettings = field(default_factory=MemorySettings)
    transcripts: TranscriptsConfig = field(default_factory=TranscriptsConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    store: Any = None
    embedder: Any = None
    summarizer: Any = None
    consolidator: Any = None
    reader: Any = None
    judge: Any = None
    tune: TuneConfig | None = None

    def __post_init__(self) -> None:
        _check_problem(seed_problem(self.seed), "seed")
        _check(
            self.prompt_overhead_tokens >= 0,
            "prompt_overhead_tokens",
            f"must be >= 0, got {self.prompt_overhead_tokens}",
        )
        _check(
            math.isfinite(self.price_per_1k_tokens) and self.price_per_1k_tokens >= 0,
            "price_per_1k_tokens",
            f"must be a finite number >= 0, got {self.price_per_1k_tokens}",
        )


# -- plug-ins: store, embedder, summarizer ------------------------------------------
PLUGINS: dict[str, Registry[type]] = {
    "store": STORES,
    "embedder": EMBEDDERS,
    "summarizer": SUMMARIZERS,
    "consolidator": CONSOLIDATORS,
    "reader": READERS,
    "judge": JUDGES,
}
"""Config groups whose options are plug-ins (the memory library's, and the lab's
readers and judges), and their registries."""

PLUGIN_DEFAULTS: dict[str, str] = {"reader": NO_READER, "judge": "exact", "consolidator": "rules"}
"""The option of a plug-in group that a config without its node gets."""


def _fields(cls: type) -> tuple[tuple[str, Any, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name], f.default) for f in dataclasses.fields(cls))


LAB_KEYS: dict[str, tuple[tuple[str, Any, Any], ...]] = {
    "store": (("drop_after", bool, False),),
    "reader": _fields(AnswerSettings),
}
"""Keys of a plug-in node that the lab reads itself (not constructor arguments).
``store.drop_after``: delete each replay's store data when the replay ends
(stores that can, e.g. pgvector's per-replay tables). ``reader.concurrency``,
``reader.max_usd``, ``reader.dry_run``, ``reader.preflight``: how the lab asks
(``memlab.lab.answering.AnswerSettings``; not for ``reader=none``)."""


LAB_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "store": ("create_dirs",),
    "reader": ("cache",),
    "judge": ("cache",),
    "consolidator": ("cache",),
}
"""Constructor arguments the lab passes itself (not config keys): a replay's file
store lives in a fresh subfolder, so the lab lets the store create it; readers
and judges get the run's model cache (``cache.answers``)."""


def plugin_schema(group: str, name: str) -> type:
    """The schema of ``<group>=<name>``: ``name``, the lab's keys, and the
    parameters of the registered class's constructor, or the fields of its
    ``settings`` dataclass when it has one (``RuleConsolidator``: ``RulePolicy``)."""
    cls = PLUGINS[group].get(name)
    lab_keys = () if (group, name) == ("reader", NO_READER) else LAB_KEYS.get(group, ())
    extra = (("name", str, name), *lab_keys)
    settings = getattr(cls, "settings", None)
    if isinstance(settings, type) and dataclasses.is_dataclass(settings):
        return fields_schema(
            settings, name=f"{group}_{name}", extra=extra, doc=f"{settings.__doc__}"
        )
    exclude = LAB_ARGUMENTS.get(group, ())
    return signature_schema(cls, name=f"{group}_{name}", extra=extra, exclude=exclude)


def strategy_schema(name: str, kind: Kind) -> type:
    """The schema of a ``strategies`` entry of kind ``name``: ``kind`` and the
    kind's own keys (conf/strategies/*.yaml extend it)."""
    return fields_schema(
        kind.schema, name=f"strategy_{name}", extra=[("kind", str, name)], doc=kind.schema.__doc__
    )


def register() -> None:
    """Store the schemas in Hydra's ConfigStore: ``run_schema`` (config.yaml's base),
    ``schema/<group>/<name>`` for every registered plug-in and
    ``schema/strategy/<kind>`` for every strategy kind."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)
    for group, registry in PLUGINS.items():
        for name in registry.names():
            cs.store(group=f"schema/{group}", name=name, node=plugin_schema(group, name))
    for name, kind in STRATEGIES.items():
        cs.store(group="schema/strategy", name=name, node=strategy_schema(name, kind))


# -- validation -------------------------------------------------------------------------
STORE_PLACEHOLDERS = ("{run_dir}", "{strategy}", "{transcript}")


@dataclass(frozen=True)
class Plugin:
    """A checked plug-in node: the registered class, its constructor arguments,
    and the lab's own keys."""

    group: str
    name: str
    cls: type
    kwargs: dict[str, Any]
    lab: dict[str, Any]


@dataclass(frozen=True)
class Validated:
    """A composed config, checked, as typed settings.

    Attributes:
        run: the run-level settings.
        strategies: each strategy's kind and checked settings, by name.
        plugins: the ``store``, ``embedder`` and ``summarizer`` nodes.
        config: the effective config as a plain dict (every strategy entry with
            its kind's defaults filled in): what config.yaml and the
            fingerprint record.
    """

    run: RunConfig
    strategies: dict[str, tuple[Kind, Any]]
    plugins: dict[str, Plugin]
    config: dict[str, Any]


def plugin(group: str, node: Any) -> Plugin:
    """Check a ``store``/``embedder``/``summarizer`` node against its class's signature.

    Raises:
        ConfigError: no such plug-in, unknown keys, wrong types, naming the key.
    """
    plain = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if plain is None and group in PLUGIN_DEFAULTS:
        plain = {"name": PLUGIN_DEFAULTS[group]}
    if not isinstance(plain, Mapping) or not plain.get("name"):
        raise ConfigError(
            f"config key '{group}': choose one, e.g. {group}={PLUGINS[group].names()[0]}"
        )
    name = str(plain["name"])
    if name not in PLUGINS[group]:
        raise ConfigError(
            f"config key '{group}.name': unknown {group} {name!r}; "
            f"choose one of: {', '.join(PLUGINS[group].names())}"
        )
    values = as_dict(structured(plugin_schema(group, name), plain, group))
    lab_keys = {k for k, _, _ in LAB_KEYS.get(group, ())} | {"name"}
    kwargs = {k: v for k, v in values.items() if k not in lab_keys}
    lab = {k: v for k, v in values.items() if k in lab_keys}
    return Plugin(group, name, PLUGINS[group].get(name), kwargs, lab)


def answer_settings(reader: Plugin) -> AnswerSettings:
    """The ``reader`` node's lab keys (concurrency, max_usd, dry_run, preflight), checked.

    Raises:
        ConfigError: naming ``reader.<key>``.
    """
    lab = {k: v for k, v in reader.lab.items() if k != "name"}
    return build(AnswerSettings, lab, "reader")


def check_store_path(store: Plugin) -> None:
    """A file store's path must hold {run_dir}, {strategy} and {transcript}, so every
    replay, and every job of a sweep running in parallel, gets a fresh file.

    Raises:
        ConfigError: naming store.path and the missing placeholders.
    """
    path = store.kwargs.get("path")
    if path is None:
        return
    missing = [p for p in STORE_PLACEHOLDERS if p not in str(path)]
    if missing:
        raise ConfigError(
            f"config key 'store.path': {path!r} lacks {', '.join(missing)}; every replay "
            "(and every job of a sweep) needs its own fresh store file, e.g. "
            "'{run_dir}/stores/{strategy}/{transcript}.db'"
        )


def strategy_entry(name: str, raw: Any) -> tuple[str, Kind, dict[str, Any]]:
    """A ``strategies`` entry's kind name, kind and keys (without ``kind``).

    Raises:
        ConfigError: a missing or unknown kind.
    """
    plain = OmegaConf.to_container(raw, resolve=True) if OmegaConf.is_config(raw) else raw
    if not isinstance(plain, Mapping) or "kind" not in plain:
        raise ConfigError(
            f"config key 'strategies.{name}.kind': missing; one of {STRATEGIES.names()}"
        )
    kind_name = str(plain["kind"])
    if kind_name not in STRATEGIES:
        raise ConfigError(
            f"config key 'strategies.{name}.kind': must be one of {STRATEGIES.names()}, "
            f"got {kind_name!r}"
        )
    rest = {str(k): v for k, v in plain.items() if k != "kind"}
    return kind_name, STRATEGIES.get(kind_name), rest


def validate(cfg: DictConfig | Mapping[str, Any]) -> Validated:
    """Check a composed run config; return it as typed settings.

    Every check that the library makes is made by building its objects
    (RankWeights, SummarizePolicy, ...); their errors come back naming the key.

    Raises:
        ConfigError: one line naming the key and what is wrong.
    """
    plain = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)
    if not isinstance(plain, dict):
        raise ConfigError(f"a run config is a mapping of keys, got {type(plain).__name__}")
    # Strategy entries may leave override keys unset (``???``): they are not settings.
    plain["strategies"] = set_values(plain.get("strategies") or {})
    # A plain dict merged over the schema: an unknown key is an error even when it
    # was added with `+` (Hydra lets `+memory.weigths.recency=0.3` through). The
    # memory node is checked on its own so that its errors name their keys.
    run: RunConfig = structured(RunConfig, {k: v for k, v in plain.items() if k != "memory"})
    run.memory = memory_settings(plain.get("memory") or {}, where="memory")
    query = {"scope": "check", "text": "", "token_budget": run.budget}
    build(RecallQuery, query, "budget", names=())
    MemoryParts.build(run.memory, "memory")
    _check(
        bool(run.strategies), "strategies", "select at least one strategy, e.g. strategies=[memory]"
    )
    strategies: dict[str, tuple[Kind, Any]] = {}
    effective = dict(plain)
    effective["strategies"] = {}
    for name, raw in run.strategies.items():
        kind_name, kind, rest = strategy_entry(name, raw)
        effective["strategies"][name] = {"kind": kind_name, **kind.entry(name, rest)}
        strategies[name] = (kind, kind.settings(name, rest, effective))
    from memlab.lab.datasets import DATASETS

    _check(
        run.transcripts.name in DATASETS,
        "transcripts.name",
        f"unknown dataset {run.transcripts.name!r}; choose one of: {', '.join(DATASETS.names())}",
    )
    plugins = {group: plugin(group, plain.get(group)) for group in PLUGINS}
    check_store_path(plugins["store"])
    if plugins["reader"].name == NO_READER:
        # No reader: nothing is answered or judged, and the run is what it was before
        # readers existed (same config.yaml, same fingerprint).
        _check(
            plugins["judge"].name == PLUGIN_DEFAULTS["judge"],
            "judge",
            f"judge={plugins['judge'].name} grades a reader's answers, but reader=none; "
            "add reader=openai (and its base_url/model), or drop the judge",
        )
        effective.pop("reader", None)
        effective.pop("judge", None)
    else:
        answer_settings(plugins["reader"])
    if run.tune is not None:
        validate_tune(run.tune, run)
    return Validated(run=run, strategies=strategies, plugins=plugins, config=effective)


def validate_tune(tune: TuneConfig, run: RunConfig) -> None:
    """Check the ``tune`` node against the run config; raise ConfigError naming the key."""
    from memlab.lab.metrics import metrics

    # Per probe only: the gain over the default is paired by probe, and a per-turn
    # metric (write_ms) has no probe values, so it failed after every trial had run.
    choices = sorted(m.name for m in metrics("probe") if m.direction != 0)
    _check(
        tune.metric in choices,
        "tune.metric",
        f"must be a per-probe metric with a direction, one of {choices}; got {tune.metric!r}",
    )
    _check(
        tune.strategy in run.strategies,
        "tune.strategy",
        f"must be one of the selected strategies {sorted(run.strategies)}; got {tune.strategy!r}",
    )


__all__ = [
    "CacheConfig",
    "Plugin",
    "ReportConfig",
    "RunConfig",
    "TranscriptsConfig",
    "TuneConfig",
    "Validated",
    "conf_dir",
    "config_error",
    "omegaconf_error",
    "register",
    "validate",
]
