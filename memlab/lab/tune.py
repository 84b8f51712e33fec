"""Tuning helpers: the tuning/held-apart split, the constrained objective, the
preset file for the best trial, and the gain table.

``memlab tune`` (cli.py) drives Hydra's Optuna sweeper; each trial replays the
tuning transcripts and returns ``objective(...)``. Everything here takes plain
values.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pandas as pd

from memlab.errors import ConfigError

WEIGHTS = "memory.weights."


def split_ids(
    ids: Sequence[str],
    *,
    holdout_fraction: float = 0.3,
    seed: int = 0,
    tuning_ids: Sequence[str] | None = None,
    holdout_ids: Sequence[str] | None = None,
) -> tuple[list[str], list[str]]:
    """Split transcript ids into a tuning set and a held-apart set.

    With explicit ``tuning_ids`` and/or ``holdout_ids`` those are used (a side
    not given is every other id). Otherwise the ids are sorted, shuffled with
    ``random.Random(seed)`` and ``round(n * holdout_fraction)`` of them (at
    least 1, at most n - 1) are held apart, so the split depends only on the
    set of ids and the seed.

    Returns:
        (tuning ids, held-apart ids), each in the order of ``ids``.

    Raises:
        ConfigError: fewer than 2 transcripts, unknown or overlapping ids, an empty side.
    """
    known = list(dict.fromkeys(ids))
    if len(known) < 2:
        raise ConfigError(
            f"tuning needs at least 2 transcripts (one to tune on, one held apart); got {len(known)}"
        )
    for key, given in (("tune.tuning_ids", tuning_ids), ("tune.holdout_ids", holdout_ids)):
        unknown = [i for i in given or [] if i not in known]
        if unknown:
            raise ConfigError(f"config key '{key}': {unknown} are not among the transcripts")
    if tuning_ids is not None or holdout_ids is not None:
        hold = set(holdout_ids or [i for i in known if i not in set(tuning_ids or [])])
        tune = set(tuning_ids or [i for i in known if i not in hold])
        both = sorted(hold & tune)
        if both:
            raise ConfigError(
                f"config keys 'tune.tuning_ids' and 'tune.holdout_ids' share {both}; "
                "a held-apart transcript must never be tuned on"
            )
    else:
        if not 0 < holdout_fraction < 1:
            raise ConfigError(
                f"config key 'tune.holdout_fraction': must be in (0, 1), got {holdout_fraction}"
            )
        order = sorted(known)
        random.Random(seed).shuffle(order)
        k = min(len(order) - 1, max(1, round(len(order) * holdout_fraction)))
        hold = set(order[:k])
        tune = set(order[k:])
    if not tune or not hold:
        side = "tuning" if not tune else "held-apart"
        raise ConfigError(f"the {side} set is empty; give tune.tuning_ids and tune.holdout_ids")
    return [i for i in known if i in tune], [i for i in known if i in hold]


def objective(
    value: float,
    prompt_tokens: float,
    *,
    direction: int,
    max_prompt_tokens: float | None,
    penalty: float = 1.0,
) -> float:
    """The number a trial returns to the (maximizing) sweeper.

    Formula: ``s = direction * value``; when ``max_prompt_tokens`` is set and the
    mean prompt tokens exceed it, the trial is infeasible and scores
    ``s - penalty * (1 + excess / max_prompt_tokens)``, so with the default
    penalty 1 an infeasible trial ranks below every feasible one for metrics in
    0..1. A NaN value (nothing scored) gives -inf.
    """
    if math.isnan(value):
        return -math.inf
    s = direction * value
    if max_prompt_tokens is not None and prompt_tokens > max_prompt_tokens:
        s -= penalty * (1.0 + (prompt_tokens - max_prompt_tokens) / max_prompt_tokens)
    return float(s)


def _round(v: float, digits: int = 4) -> float:
    if v == 0 or not math.isfinite(v):
        return float(v)
    return float(round(v, max(0, digits - 1 - math.floor(math.log10(abs(v))))))


def best_overrides(
    params: Mapping[str, Any], weights: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The best trial's parameters as the values a preset writes.

    Numbers are rounded to 4 significant digits (integers stay integers). When
    ranking weights were tuned and ``weights`` (the config's own weights, by
    signal name) is given, the whole weight vector, tuned and fixed weights
    alike, is rescaled to sum to 1 and written: scaling every weight by one
    factor never changes a ranking. The written preset is what is evaluated, so
    the reported scores are the preset's own.
    """
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, float):
            out[k] = _round(v)
        else:
            out[k] = v
    if weights is not None and any(k.startswith(WEIGHTS) for k in params):
        full = {f"{WEIGHTS}{name}": float(w) for name, w in weights.items()}
        full.update({k: float(v) for k, v in params.items() if k.startswith(WEIGHTS)})
        total = sum(full.values())
        if total > 0:
            for k in list(out):
                if k.startswith(WEIGHTS):
                    del out[k]
            out.update({k: round(v / total, 4) for k, v in full.items()})
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


def gain_table(rows: Sequence[Mapping[str, Any]], metric: str) -> pd.DataFrame:
    """Default vs tuned per set: one row per set with both scores and the gain.

    ``rows`` hold ``set``, ``config`` (default | tuned), ``transcripts``,
    ``value``, ``ci_low``, ``ci_high``, ``prompt_tokens`` and optionally
    ``feasible`` (within the prompt-token constraint). Gain is tuned - default
    (absolute) and relative to default (NaN when default is 0).
    """
    df = pd.DataFrame(rows)
    out = []
    for s in dict.fromkeys(df["set"]):
        d = df[(df["set"] == s) & (df["config"] == "default")].iloc[0]
        t = df[(df["set"] == s) & (df["config"] == "tuned")].iloc[0]
        gain = t["value"] - d["value"]
        out.append(
            {
                "set": s,
                "transcripts": int(d["transcripts"]),
                f"default_{metric}": d["value"],
                f"default_{metric}_ci": f"[{d['ci_low']:.3f}, {d['ci_high']:.3f}]",
                f"tuned_{metric}": t["value"],
                f"tuned_{metric}_ci": f"[{t['ci_low']:.3f}, {t['ci_high']:.3f}]",
                "gain": gain,
                "gain_relative": gain / d["value"] if d["value"] else math.nan,
                "default_prompt_tokens": d["prompt_tokens"],
                "tuned_prompt_tokens": t["prompt_tokens"],
            }
        )
        if "feasible" in df:
            out[-1]["default_feasible"] = bool(d["feasible"])
            out[-1]["tuned_feasible"] = bool(t["feasible"])
    return pd.DataFrame(out)


def warm_tpe(warm_start: Mapping[str, Any] | None = None, **tpe_kwargs: Any) -> Any:
    """Optuna's TPE sampler whose first trial takes ``warm_start`` values.

    conf/tune.yaml passes the config's own values (the default weights and
    half-lives), so trial 0 scores the default config and the best trial is
    never worse than it on the tuning set. A parameter without a warm value, or
    whose warm value lies outside its search range, is sampled by TPE. Every
    other trial is plain TPE with ``tpe_kwargs`` (``seed``, ...).
    """
    from memlab.errors import require

    optuna = require("optuna", feature="memlab tune", extra="tune")
    warm = dict(warm_start or {})

    class WarmStartTPESampler(optuna.samplers.TPESampler):  # type: ignore[name-defined]
        def sample_independent(
            self, study: Any, trial: Any, param_name: str, param_distribution: Any
        ) -> Any:
            if trial.number == 0 and param_name in warm:
                value = warm[param_name]
                internal = param_distribution.to_internal_repr(value)
                if param_distribution._contains(internal):
                    return value
            return super().sample_independent(study, trial, param_name, param_distribution)

    return WarmStartTPESampler(**tpe_kwargs)
