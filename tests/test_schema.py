"""Config schemas derived from the library, and library errors as config errors
(memlab.lab.schema)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from memlab.errors import ConfigError, InputError
from memlab.lab.schema import (
    build,
    config_error,
    config_value_type,
    default_of,
    fields_schema,
    partial_schema,
    set_values,
    signature_schema,
    structured,
)
from memlab.memory import EvictionPolicy, NeighborPolicy, RankWeights, SummarizePolicy


def test_fields_schema_copies_names_types_and_defaults() -> None:
    schema = fields_schema(SummarizePolicy, extra=[("enabled", bool, True)])
    node = OmegaConf.structured(schema)
    assert list(node) == ["enabled", *(f.name for f in dataclasses.fields(SummarizePolicy))]
    assert {k: node[k] for k in node if k != "enabled"} == dataclasses.asdict(SummarizePolicy())
    with pytest.raises(Exception, match="could not be converted to Integer"):
        OmegaConf.merge(node, {"chunk_tokens": "many"})
    with pytest.raises(Exception, match="not in"):
        OmegaConf.merge(node, {"chunk_tokenz": 3})
    optional = OmegaConf.structured(fields_schema(EvictionPolicy))
    OmegaConf.merge(optional, {"max_records": None})  # `int | None` stays optional


def test_signature_schema_keeps_config_values_and_drops_objects() -> None:
    def make(
        path: str | Path,
        *,
        size: int = 3,
        name: str | None = None,
        client: object | None = None,
        on_event: Any = None,
    ) -> None: ...

    node = OmegaConf.structured(signature_schema(make, extra=[("kind", str, "x")]))
    assert list(node) == ["kind", "path", "size", "name", "on_event"]
    assert OmegaConf.is_missing(node, "path") and node.size == 3 and node.name is None
    assert config_value_type(str | Path) is str and config_value_type(int | None) == int | None
    assert config_value_type(object) is None
    assert default_of(make, "size") == 3 and default_of(RankWeights, "similarity") == 0.6
    with pytest.raises(TypeError, match="has no default"):
        default_of(make, "path")


def test_partial_schema_leaves_unset_keys_unset() -> None:
    @dataclasses.dataclass
    class Outer:
        weights: Any = dataclasses.field(default_factory=fields_schema(RankWeights))
        pool: int = 200

    node = OmegaConf.merge(OmegaConf.structured(partial_schema(Outer)), {"weights": {"time": 0.5}})
    assert set_values(OmegaConf.to_container(node)) == {"weights": {"time": 0.5}}
    assert set_values(OmegaConf.to_container(OmegaConf.structured(partial_schema(Outer)))) == {}
    with pytest.raises(Exception, match="not in"):
        OmegaConf.merge(node, {"weights": {"tmie": 0.5}})


def test_library_errors_name_the_config_key() -> None:
    with pytest.raises(ConfigError, match=r"^config key 'memory.weights.recency': must be"):
        build(RankWeights, {"recency": -1.0}, "memory.weights")
    with pytest.raises(ConfigError, match=r"^config key 'memory.neighbors.before': must be"):
        build(NeighborPolicy, {"before": -1}, "memory.neighbors")
    with pytest.raises(ConfigError, match=r"^config key 'budget': must be a positive integer"):
        raise config_error(InputError("token_budget must be a positive integer, got 0"), "budget")
    already = ConfigError("config key 'x.y': bad")
    assert str(config_error(already, "z")) == "config key 'x.y': bad"


def test_structured_checks_values_and_names_keys() -> None:
    @dataclasses.dataclass
    class Settings:
        n: int = 1

        def __post_init__(self) -> None:
            if self.n < 1:
                raise InputError(f"n must be >= 1, got {self.n}")

    assert structured(Settings, {"n": 3}, "s").n == 3
    with pytest.raises(ConfigError, match=r"config key 's.n': must be >= 1, got 0"):
        structured(Settings, {"n": 0}, "s")
    with pytest.raises(ConfigError, match=r"config key 's.m': it does not exist"):
        structured(Settings, {"m": 0}, "s")
    with pytest.raises(ConfigError, match=r"config key 's.n': Value 'x'"):
        structured(Settings, {"n": "x"}, "s")


def test_a_null_nested_node_names_its_key() -> None:
    inner = fields_schema(RankWeights, name="Inner")

    @dataclasses.dataclass
    class Outer:
        node: Any = dataclasses.field(default_factory=inner)

    @dataclasses.dataclass
    class Top:
        outer: Any = dataclasses.field(default_factory=Outer)

    assert structured(Top, {"outer": {"node": {"recency": 0.5}}}, "t").outer.node.recency == 0.5
    for values, key in (({"outer": None}, "t.outer"), ({"outer": {"node": None}}, "t.outer.node")):
        with pytest.raises(ConfigError, match=rf"config key '{key}': must be a mapping"):
            structured(Top, values, "t")
