"""The run config: schemas derived from the library and validation
(memlab.lab.config; composing with Hydra: test_compose.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from memlab.errors import ConfigError
from memlab.lab.compose import compose, config_groups
from memlab.lab.config import PLUGINS, conf_dir, plugin, plugin_schema, validate
from memlab.lab.fingerprint import flatten
from memlab.lab.replay import ReplaySettings
from memlab.lab.strategies.memory import LIBRARY_SETTINGS, MemorySettings
from memlab.memory import (
    EvictionPolicy,
    HalfLives,
    HybridRanker,
    MemoryLayer,
    NeighborPolicy,
    RankWeights,
    RecallQuery,
    SummarizePolicy,
)

ROOT = Path(__file__).resolve().parents[1]

# The lab's deliberate differences from the library's defaults (conf/config.yaml
# lists them once, with the reason); nothing else may differ.
LAB_OVERRIDES: dict[str, Any] = {
    "budget": 400,
    "memory.summarize.trigger_tokens": 250,
    "memory.summarize.chunk_tokens": 200,
    "memory.summarize.keep_recent": 4,
    "memory.neighbors.after": 0,
    # eviction: default (conf/eviction/default.yaml); the library evicts nothing
    # unless given a policy, and EvictionPolicy() defaults to no TTL and no cap.
    "memory.eviction.episodic_ttl": 720.0,
    "memory.eviction.max_records": 1000,
    "memory.eviction.cold_decay": 0.5,
    "memory.eviction.untrusted_ttl": 24.0,
}


def _fields(cls: Any) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def library_defaults() -> dict[str, Any]:
    """Every memory setting's default as the library states it."""
    import inspect

    out: dict[str, Any] = {"budget": _fields(RecallQuery)["token_budget"]}
    for key, cls in (
        ("weights", RankWeights),
        ("half_life", HalfLives),
        ("summarize", SummarizePolicy),
        ("eviction", EvictionPolicy),
        ("neighbors", NeighborPolicy),
    ):
        out.update({f"memory.{key}.{k}": v for k, v in _fields(cls).items()})
    params = {
        **inspect.signature(HybridRanker).parameters,
        **inspect.signature(MemoryLayer).parameters,
    }
    for key in ("fusion", "rrf_k", "untrusted_salience_cap", "pool"):
        out[f"memory.{key}"] = params[key].default
    for key in ("max_hits", "min_score_ratio"):
        out[f"memory.{key}"] = _fields(RecallQuery)[key]
    return out


def test_lab_defaults_are_the_librarys_except_the_named_overrides() -> None:
    lab = flatten(validate(compose([])).config)
    differ = {k: lab[k] for k, v in library_defaults().items() if k in lab and lab[k] != v}
    assert differ == LAB_OVERRIDES
    assert set(library_defaults()) <= set(lab)  # every library setting is a config key
    text = (conf_dir() / "config.yaml").read_text()
    for key in LAB_OVERRIDES:
        named = "eviction: default" if key.startswith("memory.eviction.") else key
        assert named in text, f"conf/config.yaml does not name the override {key}"


def test_memory_settings_have_every_library_field_and_only_lab_extras() -> None:
    s = MemorySettings()
    for key, cls in LIBRARY_SETTINGS.items():
        value = getattr(s, key)
        if dataclasses.is_dataclass(value):
            lib = _fields(cls)
            assert {k: v for k, v in _fields(type(value)).items() if k != "enabled"} == lib
    lab_only = {f.name for f in dataclasses.fields(MemorySettings)} - set(LIBRARY_SETTINGS)
    assert lab_only == {"rewrite", "salience", "fixed_salience", "remember_agent", "remember_tools"}
    assert _fields(type(s.summarize))["enabled"] is True  # lab-only switch


def test_run_level_defaults_come_from_replay_settings() -> None:
    from memlab.lab.config import RunConfig

    replay = _fields(ReplaySettings)
    run = RunConfig()
    assert run.budget == replay["budget"] == _fields(RecallQuery)["token_budget"]
    assert run.prompt_overhead_tokens == replay["prompt_overhead_tokens"]
    assert run.report.far_turns == replay["far_turns"]


def test_plugin_schemas_are_the_constructor_signatures() -> None:
    from memlab.memory import JsonlStore, OpenAIEmbedder

    jsonl = OmegaConf.structured(plugin_schema("store", "jsonl"))
    assert jsonl.name == "jsonl" and jsonl.drop_after is False
    assert jsonl.compact_min_lines == 1000 and OmegaConf.is_missing(jsonl, "path")
    assert set(jsonl) == {"name", "drop_after", "path", "fsync", "compact_min_lines",
                          "compact_ratio", "lock_timeout", "scan", "scan_rerank",
                          "scan_min_rows"}  # fmt: skip
    assert JsonlStore.__init__.__kwdefaults__["compact_min_lines"] == 1000
    openai = OmegaConf.structured(plugin_schema("embedder", "openai"))
    assert "client" not in openai and "transport" not in openai  # objects, not settings
    assert openai.dims == OpenAIEmbedder.__init__.__defaults__[2]
    for group, registry in PLUGINS.items():
        for name in registry.names():
            assert OmegaConf.structured(plugin_schema(group, name)).name == name


def test_every_yaml_option_of_a_plugin_group_is_registered() -> None:
    for group, registry in PLUGINS.items():
        for option in config_groups()[group]:
            assert option in registry, f"conf/{group}/{option}.yaml names no registered {group}"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["memory.weights.recency=-1"],
            "config key 'memory.weights.recency': must be a number >= 0",
        ),
        (
            [
                "memory.weights.similarity=0",
                "memory.weights.recency=0",
                "memory.weights.salience=0",
                "memory.weights.usage=0",
            ],
            "config key 'memory.weights': weights are all zero",
        ),
        (["budget=0"], "config key 'budget': must be a positive integer"),
        (["memory.pool=0"], "config key 'memory.pool': must be an integer >= 1"),
        (["memory.fusion=max"], "config key 'memory.fusion': must be one of ['weighted', 'rrf']"),
        (["memory.salience=psychic"], "config key 'memory.salience': must be one of"),
        (["memory.summarize.chunk_tokens=0"], "config key 'memory.summarize.chunk_tokens'"),
        (["memory.eviction.cold_decay=2"], "config key 'memory.eviction.cold_decay'"),
        (["memory.untrusted_salience_cap=1.5"], "config key 'memory.untrusted_salience_cap'"),
        (
            ["strategies.memory.memory.weights.usage=-2"],
            "config key 'strategies.memory.memory.weights.usage': must be a number >= 0",
        ),
        (
            ["strategies.memory_no_floor.memory.eviction.salience_floor=2"],
            "config key 'strategies.memory_no_floor.memory.eviction.salience_floor'",
        ),
        (["+memory.weigths.recency=0.3"], "config key 'memory.weigths': it does not exist"),
        (["+strategies.memory.memroy.x=1"], "config key 'strategies.memory.memroy': it does not"),
        (["+store.pth=x"], "config key 'store.pth': it does not exist"),
        (
            ["strategies.sliding_window.window_turns=0"],
            "config key 'strategies.sliding_window.window_turns': must be >= 1",
        ),
        (["strategies.memory.kind=magic"], "config key 'strategies.memory.kind': must be one of"),
        (["transcripts.name=nope"], "config key 'transcripts.name': unknown dataset 'nope'"),
        (["transcripts.limit=0"], "config key 'transcripts.limit': must be >= 1"),
        (["report.bootstrap=-1"], "config key 'report.bootstrap': must be an integer >= 0"),
        (["seed=-1"], "config key 'seed': must be an integer >= 0, got -1"),
        *(
            ([f"price_per_1k_tokens={bad}"], "config key 'price_per_1k_tokens': must be a finite")
            for bad in ("-1", "nan", "inf")
        ),
        (["embedder.dims=4"], None),  # checked when the embedder is built (see test_experiment)
        (["store=sqlite", "store.path=/tmp/x.db"], "config key 'store.path': '/tmp/x.db' lacks"),
        (["store.name=redis"], "config key 'store.name': unknown store 'redis'"),
        (["strategies=[]"], "config key 'strategies': select at least one strategy"),
        *(
            ([f"memory.{node}=null"], f"config key 'memory.{node}': must be a mapping")
            for node in ("weights", "half_life", "summarize", "eviction", "neighbors", "supersede")
        ),
        (
            ["strategies.memory.memory.weights=null"],
            "config key 'strategies.memory.memory.weights': must be a mapping",
        ),
        (["strategies.memory.memory=null"], "config key 'strategies.memory.memory': must be a"),
        (
            ["strategies=[memory_layered]", "strategies.memory_layered.layers=null"],
            "config key 'strategies.memory_layered.layers': must be a mapping",
        ),
    ],
)
def test_bad_values_name_their_key(overrides: list[str], message: str | None) -> None:
    cfg = compose(overrides)
    if message is None:
        validate(cfg)
        return
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_validated_config_records_each_strategy_with_its_kinds_keys() -> None:
    v = validate(compose(["strategies=[stuff_all,sliding_window,memory_no_floor]"]))
    entries = v.config["strategies"]
    assert entries["stuff_all"] == {"kind": "stuff_all", "context_limit": 128000}
    assert entries["sliding_window"] == {
        "kind": "sliding_window", "window_turns": 10, "window_tokens": None
    }  # fmt: skip
    assert entries["memory_no_floor"] == {
        "kind": "memory", "memory": {"eviction": {"salience_floor": None}}
    }  # fmt: skip
    parts = v.strategies["memory_no_floor"][1]
    assert parts.eviction is not None and parts.eviction.salience_floor is None
    assert parts.summarize == SummarizePolicy(trigger_tokens=250, chunk_tokens=200, keep_recent=4)
    assert plugin("store", v.config["store"]).cls.__name__ == "InMemoryStore"


def test_config_yaml_states_no_library_default() -> None:
    """conf/config.yaml sets only the named overrides and run choices, never a value
    the library already has as its default."""
    data = OmegaConf.to_container(OmegaConf.load(conf_dir() / "config.yaml"))
    assert isinstance(data, dict)
    stated = {k for k in flatten({k: v for k, v in data.items() if k != "defaults"})}
    stated = {k for k in stated if not k.startswith("hydra.")}
    assert stated == {
        "budget",
        "memory.summarize.trigger_tokens",
        "memory.summarize.chunk_tokens",
        "memory.summarize.keep_recent",
        "memory.neighbors.after",
        "price_per_1k_tokens",
    }
    assert re.search(r"price_per_1k_tokens: 0\.00015", (ROOT / "conf" / "config.yaml").read_text())


def test_the_consolidator_group_is_derived_from_rule_policy() -> None:
    import dataclasses

    from memlab.lab.experiment import instantiate
    from memlab.memory import RuleConsolidator, RulePolicy

    rules = OmegaConf.structured(plugin_schema("consolidator", "rules"))
    fields = {f.name: f.default for f in dataclasses.fields(RulePolicy)}
    assert set(rules) == {"name", *fields}
    assert rules.min_similar == fields["min_similar"]
    assert list(rules.supersede_from) == list(fields["supersede_from"])
    v = validate(compose(["consolidator.min_similar=0.6"]))
    built = instantiate(v.plugins["consolidator"])
    assert isinstance(built, RuleConsolidator) and built.policy.min_similar == 0.6
    assert validate(compose([])).plugins["consolidator"].cls is RuleConsolidator
    with pytest.raises(ConfigError, match="consolidator"):
        instantiate(
            validate(compose(["consolidator.supersede_from=[robot]"])).plugins["consolidator"]
        )


def test_memory_no_supersede_is_in_the_default_experiment() -> None:
    v = validate(compose([]))
    assert v.config["strategies"]["memory_no_supersede"] == {
        "kind": "memory", "memory": {"supersede": {"enabled": False}}
    }  # fmt: skip


def test_reference_retrievers_keep_every_turn() -> None:
    """The reference retrievers rank every turn: no summaries, no eviction and no
    supersession (a retriever that left superseded turns out would no longer be the
    plain BM25 / dense / RRF / recency baseline that published tables compare)."""
    from memlab.lab.config import conf_dir

    names = sorted(p.stem for p in (Path(conf_dir()) / "strategies").glob("retriever_*.yaml"))
    assert names == ["retriever_bm25", "retriever_dense", "retriever_recency", "retriever_rrf"]
    v = validate(compose([f"strategies=[{','.join(names)},memory]"]))
    for name in names:
        parts = v.strategies[name][1]
        assert parts.supersede is None and parts.summarize is None and parts.eviction is None
    assert v.strategies["memory"][1].supersede is not None


def test_a_negative_tune_seed_is_refused() -> None:
    from memlab.lab.config import TuneConfig

    with pytest.raises(ConfigError, match=r"config key 'tune.seed': must be an integer >= 0"):
        TuneConfig(seed=-1)


@pytest.mark.parametrize("metric", ["write_ms", "maintain_ms"])
def test_a_per_turn_tune_metric_is_refused_before_any_trial(metric: str) -> None:
    # The gain is paired by probe: a per-turn metric has no probe values, and the
    # tune failed with KeyError after every trial had run.
    with pytest.raises(ConfigError, match=r"config key 'tune.metric': must be a per-probe"):
        validate(compose([f"tune.metric={metric}"], "tune"))
    assert validate(compose(["tune.metric=recall_ms"], "tune")).run.tune.metric == "recall_ms"
