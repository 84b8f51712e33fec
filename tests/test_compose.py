"""Composing with Hydra (memlab/lab/compose.py): one config per override list,
composition errors as one line that says what to do, the groups and plug-ins a
user picks from, and the SLURM launcher's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.errors import ConfigError
from memlab.lab.compose import (
    compose,
    compose_all,
    config_groups,
    explain_compose_error,
    group_options,
    one_line,
    plugin_names,
)
from memlab.lab.config import conf_dir


def test_composition_errors_are_one_line() -> None:
    with pytest.raises(ConfigError, match=r"config key 'memory.wieghts.recency': it does not"):
        compose(["memory.wieghts.recency=1"])
    with pytest.raises(ConfigError, match="config group 'store' has no option 'nosuch'; choose"):
        compose(["store=nosuch"])


def test_slurm_launcher_config(tmp_path: Path) -> None:
    cfg = compose(
        ["hydra/launcher=slurm", "hydra.launcher.partition=cpu", f"hydra.sweep.dir={tmp_path}"],
        "config",
        with_hydra=True,
    )
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher") and launcher.partition == "cpu"
    assert (
        launcher.timeout_min == 60 and launcher.cpus_per_task == 2 and launcher.gpus_per_node == 0
    )
    assert launcher.submitit_folder == f"{tmp_path}/.submitit/%j"


def test_an_override_of_the_wrong_type_names_the_override() -> None:
    with pytest.raises(ConfigError, match=r"budget") as info:
        compose(["budget=lots"])
    assert "\n" not in str(info.value)


def test_compose_all_composes_each_variant_in_order() -> None:
    cfgs = compose_all([["seed=1"], ["seed=2"], []])
    assert [c.seed for c in cfgs] == [1, 2, compose([]).seed]
    with pytest.raises(ConfigError, match="has no option"):
        compose_all([["seed=1"], ["store=nosuch"]])


def test_group_options_are_the_yaml_files_and_groups_leave_hydra_out() -> None:
    assert group_options("store") == sorted(p.stem for p in (conf_dir() / "store").glob("*.yaml"))
    assert "memory" in group_options("store") and group_options("nosuch") == []
    groups = config_groups()
    assert "hydra" not in groups and groups["store"] == group_options("store")
    assert all(options for options in groups.values())


def test_plugin_names_come_from_the_registries() -> None:
    names = plugin_names()
    assert "memory" in names["strategy kinds"] and "sqlite" in names["stores"]
    assert names["metrics"][-1].endswith("in all)")


def test_one_line_drops_omegaconf_boilerplate() -> None:
    exc = ValueError("bad value\n    full_key: a.b\n    object_type=dict\nSet the environment")
    assert one_line(exc) == "bad value"
    assert one_line(ValueError("")) == "ValueError"


def test_an_unknown_error_is_kept_as_one_line() -> None:
    assert explain_compose_error(RuntimeError("first\nsecond")) == "first; second"


def test_a_key_under_a_null_node_names_the_key_and_what_to_do() -> None:
    """OmegaConf asserts ("Unexpected type for root: NoneType") on a key under a null
    node; the error names the key and says where it belongs instead."""
    with pytest.raises(ConfigError, match=r"config key 'tune.seed': 'tune' is null") as info:
        compose(["seed=1", "tune.seed=-1"])
    assert "memlab tune tune.seed=-1" in str(info.value)
    with pytest.raises(ConfigError, match=r"'transcripts.ids' is null.*transcripts.ids="):
        compose_all([["seed=1"], ["+transcripts.ids.x=1"]])
