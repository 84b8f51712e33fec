"""The search space of ``memlab tune``, and the values a trial runs with.

The space is written in Hydra's sweep grammar, in ``tune.params`` (conf/tune.yaml)
or as sweep overrides on the command line:

- ``interval(a, b)``: a float in [a, b]; ``int(interval(a, b))``: an integer;
  ``tag(log, interval(a, b))``: on a log scale;
- ``range(a, b[, step])``: a, a+step, ... below b (Python's ``range``);
- ``choice(x, y, ...)`` or ``x,y,...``: one of the values (a config group's
  options too: ``eviction=choice(default,ttl)``).

A plain value on the command line (``memory.weights.usage=0.05``) takes a key out
of the space. What a trial runs with is what a preset would write
(``trial_values``): ranking weights rescaled to sum to 1 and every number rounded
to 4 significant digits, so the tuning report shows one set of weights.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlab.errors import ConfigError

WEIGHTS = "memory.weights."


def _key(override: Any) -> str:
    return str(override.get_key_element()).lstrip("+~")


def distribution(key: str, override: Any) -> Any:
    """The Optuna distribution of one parsed sweep override.

    Raises:
        ConfigError: an empty or reversed range, a log scale over values <= 0.
    """
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    value = override.value()
    where = f"search range of '{key}'"
    try:
        if isinstance(value, IntervalSweep):
            lo, hi, log = value.start, value.end, "log" in value.tags
            if lo is None or hi is None or not lo < hi:
                raise ConfigError(f"{where}: interval({lo}, {hi}) is empty")
            if isinstance(lo, int) and isinstance(hi, int):
                return IntDistribution(int(lo), int(hi), log=log)
            return FloatDistribution(float(lo), float(hi), log=log)
        if isinstance(value, RangeSweep):
            start, stop, step = value.start, value.stop, value.step
            values = list(override.sweep_iterator())
            if not values:
                raise ConfigError(f"{where}: range({start}, {stop}, {step}) is empty")
            if all(isinstance(x, int) for x in (start, stop, step)):
                return IntDistribution(int(values[0]), int(values[-1]), step=int(step))
            return CategoricalDistribution([float(x) for x in values])
        if isinstance(value, ChoiceSweep):
            choices = list(override.sweep_iterator())
            if not choices:
                raise ConfigError(f"{where}: choice() is empty")
            return CategoricalDistribution(choices)
    except ValueError as exc:  # optuna's own checks (log scale over 0, ...)
        raise ConfigError(f"{where}: {exc}") from None
    raise ConfigError(
        f"{where}: {override.input_line!r} is not a search range; use interval(a,b), "
        "int(interval(a,b)), tag(log, interval(a,b)), range(a,b) or choice(x,y)"
    )


@dataclass(frozen=True)
class SearchSpace:
    """The searched keys and their distributions, and the fixed overrides.

    Attributes:
        params: dotted key (or config group) -> Optuna distribution, in order.
        spec: the same keys -> the sweep text they came from (for the report).
        fixed: the command line's plain overrides (the trials' common config).
    """

    params: dict[str, Any]
    spec: dict[str, str]
    fixed: list[str] = field(default_factory=list)

    def suggest(self, trial: Any) -> dict[str, Any]:
        """Ask an Optuna trial for every parameter; return the raw values."""
        from optuna.distributions import CategoricalDistribution, IntDistribution

        out: dict[str, Any] = {}
        for key, d in self.params.items():
            if isinstance(d, CategoricalDistribution):
                out[key] = trial.suggest_categorical(key, d.choices)
            elif isinstance(d, IntDistribution):
                out[key] = trial.suggest_int(key, d.low, d.high, step=d.step, log=d.log)
            else:
                out[key] = trial.suggest_float(key, d.low, d.high, step=d.step, log=d.log)
        return out

    def contains(self, key: str, value: Any) -> bool:
        """Whether ``value`` lies in the range of ``key``."""
        d = self.params[key]
        try:
            return bool(d._contains(d.to_internal_repr(value)))
        except (TypeError, ValueError):
            return False


def parse(overrides: Sequence[str]) -> list[Any]:
    """Hydra's parsed overrides.

    Raises:
        ConfigError: an override that does not parse, as one line.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from memlab.lab.compose import one_line

    try:
        return list(OverridesParser.create().parse_overrides(list(overrides)))
    except Exception as exc:  # the override grammar's parse errors
        raise ConfigError(
            f"cannot parse the overrides: {one_line(exc).split('; See https')[0]} "
            "(quote values with special characters: key='value')"
        ) from None


def fixed_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides that are not search ranges (the config every trial shares)."""
    return [
        a for a, o in zip(overrides, parse(overrides), strict=True) if not o.is_sweep_override()
    ]


def search_space(overrides: Sequence[str], params: Mapping[str, str]) -> SearchSpace:
    """Split a ``memlab tune`` command line into the search space and the fixed overrides.

    ``params`` is ``tune.params`` (key -> sweep text); the command line's sweep
    overrides add keys or replace their ranges, and its plain overrides of a
    key in ``params`` fix that key (it leaves the space).

    Raises:
        ConfigError: an override that does not parse, or an empty space.
    """
    given = parse(overrides)
    listed = parse([f"{k}={v}" for k, v in params.items()])
    space: dict[str, Any] = {}
    for o in listed:
        if not o.is_sweep_override():
            raise ConfigError(
                f"config key 'tune.params': {o.input_line!r} is not a search range; use "
                "interval(a,b), int(interval(a,b)), tag(log, interval(a,b)), range(a,b) or choice(x,y)"
            )
        space[_key(o)] = o
    fixed: list[str] = []
    for o in given:
        if o.is_sweep_override():
            space[_key(o)] = o
        else:
            space.pop(_key(o), None)
            fixed.append(o.input_line or f"{o.get_key_element()}={o.get_value_element_as_str()}")
    if not space:
        raise ConfigError(
            "the search space is empty: every key of tune.params is fixed on the command "
            "line; search at least one, e.g. 'memory.weights.recency=interval(0,1)'"
        )
    dists = {k: distribution(k, o) for k, o in space.items()}
    texts = {k: str(o.input_line or "").partition("=")[2] for k, o in space.items()}
    return SearchSpace(dists, texts, fixed)


def _round(v: float, digits: int = 4) -> float:
    if v == 0 or not math.isfinite(v):
        return float(v)
    return float(round(v, max(0, digits - 1 - math.floor(math.log10(abs(v))))))


def trial_values(params: Mapping[str, Any], weights: Mapping[str, float] | None) -> dict[str, Any]:
    """The values a trial runs with, which are also what its preset writes.

    Floats are rounded to 4 significant digits (integers and choices stay as
    they are). When ranking weights are searched and ``weights`` (the config's
    own weights by signal name) is given, the whole weight vector, searched and
    fixed weights alike, is rescaled to sum to 1 (rounded to 4 decimals):
    scaling every weight by one factor never changes a ranking, and a single
    set of numbers is what the report, the trial's config.yaml and the preset
    show. An all-zero weight vector is left as sampled (the config check then
    rejects it).
    """
    out: dict[str, Any] = {k: _round(v) if isinstance(v, float) else v for k, v in params.items()}
    if weights is None or not any(k.startswith(WEIGHTS) for k in params):
        return out
    full = {f"{WEIGHTS}{name}": float(w) for name, w in weights.items()}
    full.update({k: float(v) for k, v in params.items() if k.startswith(WEIGHTS)})
    total = sum(full.values())
    if total <= 0:
        return out
    for k in [k for k in out if k.startswith(WEIGHTS)]:
        del out[k]
    out.update({k: round(v / total, 4) for k, v in full.items()})
    return out


def as_overrides(values: Mapping[str, Any]) -> list[str]:
    """``key=value`` overrides that set ``values`` (strings quoted when needed)."""
    out = []
    for k, v in values.items():
        if isinstance(v, str) and not all(c.isalnum() or c in "_-./:" for c in v):
            v = "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        elif isinstance(v, bool):
            v = str(v).lower()
        out.append(f"{k}={v}")
    return out


def preset_yaml(values: Mapping[str, Any], groups: Collection[str] = (), header: str = "") -> str:
    """An experiment preset (``# @package _global_``) that sets ``values``.

    Dotted keys become nested mappings; keys naming a config group (``groups``,
    e.g. ``eviction``) become ``override /group: option`` entries of the
    defaults list.
    """
    import yaml

    tree: dict[str, Any] = {}
    defaults = []
    for key, value in values.items():
        if key in groups:
            defaults.append({f"override /{key}": value})
            continue
        node = tree
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    body: dict[str, Any] = {}
    if defaults:
        body["defaults"] = defaults
    body.update(tree)
    lines = ["# @package _global_"] + [f"# {h}" if h else "#" for h in header.splitlines()]
    return "\n".join(lines) + "\n" + yaml.safe_dump(body, sort_keys=False)
