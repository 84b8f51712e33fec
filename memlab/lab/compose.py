"""Composing configs with Hydra: the config ``memlab run <overrides>`` would run,
its composition errors as one line that says what to do, and the config groups
and plug-ins a user picks from (``memlab run --help``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memlab.errors import ConfigError, MemlabError
from memlab.lab.config import PLUGINS, conf_dir, register
from memlab.lab.strategies import STRATEGIES

__all__ = [
    "compose",
    "compose_all",
    "config_groups",
    "explain_compose_error",
    "group_options",
    "one_line",
    "plugin_names",
]


def one_line(exc: BaseException) -> str:
    """An exception's message as one line, without Hydra/OmegaConf boilerplate."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    lines = [
        ln
        for ln in lines
        if not ln.startswith(("Set the environment", "full_key:", "object_type", "reference_type"))
    ]
    return "; ".join(ln.split("; reference_type")[0] for ln in lines) or type(exc).__name__


def group_options(group: str) -> list[str]:
    """The options of a config group: the YAML files of conf/<group>."""
    folder = conf_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def config_groups() -> dict[str, list[str]]:
    """Every config group a user picks options from (conf/*/), with its options."""
    root = conf_dir()
    return {
        d.name: group_options(d.name)
        for d in sorted(root.iterdir())
        if d.is_dir() and d.name != "hydra" and group_options(d.name)
    }


def plugin_names() -> dict[str, list[str]]:
    """The registered plug-ins by kind (what the registries know, not the YAMLs)."""
    from memlab.lab.datasets import DATASETS
    from memlab.lab.metrics import METRICS, table_metrics

    shown = table_metrics()
    return {
        "strategy kinds": STRATEGIES.names(),
        "datasets": DATASETS.names(),
        **{f"{group}s": registry.names() for group, registry in PLUGINS.items()},
        "metrics": [*shown, f"... ({len(METRICS)} in all)"],
    }


def explain_compose_error(exc: BaseException) -> str:
    """Turn Hydra's multi-line composition errors into one line that says what to do."""
    text = str(exc)
    m = re.search(r"Could not override '([^']+)'", text)
    if m:
        key = m.group(1)
        cause = str(exc.__cause__ or "")
        detail = (
            "it does not exist"
            if "not in struct" in cause or "To append" in text
            else one_line(exc.__cause__ or exc)
        )
        return f"config key '{key}': {detail}; check the spelling (memlab run --cfg job prints every key)"
    m = re.search(r"Could not (?:find|load) '([^'/]+)/([^']+)'", text)
    if m:
        group, option = m.groups()
        options = ", ".join(group_options(group)) or "(none)"
        return f"config group '{group}' has no option '{option}'; choose one of: {options}"
    m = re.search(r"Error merging override (\S+)", text)
    if m:
        return f"config override {m.group(1)}: {one_line(exc.__cause__ or exc)}"
    return one_line(exc)


def _under_null(overrides: list[str], config_name: str) -> str | None:
    """Which override sets a key under a null node, and what to do, as one line (None
    when none does). Composes the overrides one more at a time: an error path only."""
    from hydra import compose as hydra_compose
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    for i, line in enumerate(overrides):
        try:
            hydra_compose(config_name, overrides=overrides[: i + 1])
            continue
        except AssertionError:
            pass
        except Exception:
            return None
        key = OverridesParser.create().parse_override(line).key_or_group
        before = hydra_compose(config_name, overrides=overrides[:i])
        parts = key.split(".")
        for n in range(1, len(parts)):
            parent = ".".join(parts[:n])
            if OmegaConf.select(before, parent, throw_on_missing=False) is None:
                hint = (
                    f"; tune.* keys are memlab tune's: memlab tune {line.lstrip('+~')}"
                    if parent == "tune" and config_name != "tune"
                    else f"; set {parent} itself, e.g. {parent}=..."
                )
                return f"config key '{key}': '{parent}' is null here, so it has no keys{hint}"
        return None
    return None


def compose(overrides: Sequence[str], config_name: str = "config", with_hydra: bool = False) -> Any:
    """The config that ``memlab run <overrides>`` (or ``tune``) would run."""
    return compose_all([list(overrides)], config_name, with_hydra)[0]


def compose_all(
    variants: Sequence[Sequence[str]], config_name: str = "config", with_hydra: bool = False
) -> list[Any]:
    """Compose one config per override list (one Hydra initialization for all).

    Raises:
        ConfigError: a composition error as one line; MissingExtraError for a
            launcher whose extra is not installed.
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(conf_dir()), version_base="1.3"):
            out = []
            for v in variants:
                try:
                    out.append(
                        hydra_compose(
                            config_name, overrides=list(v), return_hydra_config=with_hydra
                        )
                    )
                except AssertionError as exc:
                    # OmegaConf asserts (no message naming the key) when an override sets
                    # a key under a node that is null, e.g. `memlab run tune.seed=1`.
                    raise ConfigError(_under_null(list(v), config_name) or one_line(exc)) from None
            return out
    except MemlabError:
        raise
    except Exception as exc:  # Hydra/OmegaConf composition errors
        if "submitit" in str(exc):
            from memlab.errors import require

            require(
                "hydra_plugins.hydra_submitit_launcher",
                feature="the submitit/SLURM launcher",
                extra="cluster",
            )
        raise ConfigError(explain_compose_error(exc)) from None
    finally:
        GlobalHydra.instance().clear()
