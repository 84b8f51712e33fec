"""The honest part of ``memlab tune``: the gain of the tuned config over the default
as a paired bootstrap interval over probes, and the decision to write a preset.

Both configs answer the same probes, so the gain is measured on the per-probe
differences (tuned - default): their mean, and a seeded percentile bootstrap
interval of that mean (``bootstrap_ci`` over the differences, which is the
paired bootstrap). Gains are signed so that positive is better: for a
lower-is-better metric (``stale_rate``) the difference is negated.

The rule (``decide``): a preset is written only when the held-apart gain's
interval lies above 0 (and, with ``tune.max_prompt_tokens``, the tuned config
stays within it on the held-apart set). Anything else is reported as "no
configuration beat the default beyond noise"; ``--force`` writes the preset anyway.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import pandas as pd

from memlab.errors import MemlabError
from memlab.lab.metrics import bootstrap_ci
from memlab.lab.summary import probe_groups

SETS = ("tuning", "held-apart")


@dataclass(frozen=True)
class Gain:
    """Default vs tuned on one set of transcripts, paired by probe.

    Attributes:
        set: ``tuning`` or ``held-apart``.
        transcripts, probes: what was scored (probes of the tuned group).
        metric, direction: the tuned metric and +1 (higher is better) or -1.
        default, tuned: the metric's means.
        gain, ci_low, ci_high: ``direction * (tuned - default)`` per probe, its
            mean and the bootstrap interval at ``level``.
        default_tokens, tuned_tokens: mean prompt tokens.
        tokens_change, tokens_ci_low, tokens_ci_high: tuned - default prompt
            tokens per probe, its mean and interval.
        level: the interval's confidence level.
    """

    set: str
    transcripts: int
    probes: int
    metric: str
    direction: int
    default: float
    tuned: float
    gain: float
    ci_low: float
    ci_high: float
    default_tokens: float
    tuned_tokens: float
    tokens_change: float
    tokens_ci_low: float
    tokens_ci_high: float
    level: float

    @property
    def beats(self) -> bool:
        """The interval lies above 0: better beyond noise."""
        return bool(self.ci_low > 0)

    def interval(self) -> str:
        return f"{self.gain:+.4f} [{self.ci_low:+.4f}, {self.ci_high:+.4f}]"


def paired_gain(
    default: pd.DataFrame,
    tuned: pd.DataFrame,
    *,
    set_name: str,
    metric: str,
    direction: int,
    strategy: str,
    group: str,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Gain:
    """The paired gain of ``tuned`` over ``default`` (two runs' probes.csv rows).

    Probes are matched by (transcript, probe) within ``strategy`` and probe
    group ``group`` (as in summary.csv). A probe whose metric is NaN in either
    run is left out. No probes: every number is NaN (and the gain does not beat 0).

    Raises:
        MemlabError: the two runs did not answer the same probes.
    """
    keys = ["transcript", "probe"]

    def pick(rows: pd.DataFrame) -> pd.DataFrame:
        mine = rows[rows["strategy"] == strategy]
        mask = probe_groups(mine).get(group)
        chosen = mine[mask] if mask is not None else mine.iloc[0:0]
        return chosen[[*keys, metric, "prompt_tokens"]].set_index(keys)

    d, t = pick(default), pick(tuned)
    if set(d.index) != set(t.index):
        raise MemlabError(
            f"the default and the tuned run on the {set_name} set answered different probes "
            f"({len(d)} vs {len(t)}); please report"
        )
    both = d.add_suffix("_d").join(t.add_suffix("_t"))
    diff = (both[f"{metric}_t"] - both[f"{metric}_d"]) * direction
    diff = diff[diff.notna()]
    gain, lo, hi, n = bootstrap_ci(diff.to_numpy(), n_boot, seed, level)
    tokens = both["prompt_tokens_t"] - both["prompt_tokens_d"]
    tchange, tlo, thi, _ = bootstrap_ci(tokens.to_numpy(dtype=float), n_boot, seed, level)
    scored = both.loc[diff.index]
    return Gain(
        set=set_name,
        transcripts=int(both.index.get_level_values(0).nunique()),
        probes=n,
        metric=metric,
        direction=direction,
        default=float(scored[f"{metric}_d"].mean()) if n else math.nan,
        tuned=float(scored[f"{metric}_t"].mean()) if n else math.nan,
        gain=gain,
        ci_low=lo,
        ci_high=hi,
        default_tokens=float(both["prompt_tokens_d"].mean()) if len(both) else math.nan,
        tuned_tokens=float(both["prompt_tokens_t"].mean()) if len(both) else math.nan,
        tokens_change=tchange,
        tokens_ci_low=tlo,
        tokens_ci_high=thi,
        level=level,
    )


@dataclass(frozen=True)
class Decision:
    """Whether the tuned config beat the default, whether a preset is written, and why."""

    beats: bool
    write: bool
    line: str


def decide(
    gains: Mapping[str, Gain],
    *,
    same_as_default: bool = False,
    max_prompt_tokens: float | None = None,
    force: bool = False,
) -> Decision:
    """Write a preset only when the held-apart gain's interval excludes 0 upwards.

    Args:
        gains: by set name; ``held-apart`` decides.
        same_as_default: the best trial is the default config itself.
        max_prompt_tokens: the tuned config must stay within it on the held-apart set.
        force: write the preset even when it did not beat the default.

    Returns:
        The decision and its one-line explanation.
    """
    held = gains["held-apart"]
    pct = f"{held.level:.0%}"
    within = max_prompt_tokens is None or held.tuned_tokens <= max_prompt_tokens
    if same_as_default:
        beats, why = False, "the best trial is the default config itself"
    elif not held.beats:
        beats = False
        why = (
            f"held-apart gain in {held.metric} {held.interval()} ({pct} paired bootstrap "
            f"over {held.probes} probes) does not exclude 0"
        )
    elif not within:
        beats = False
        why = (
            f"on the held-apart set the tuned config needs {held.tuned_tokens:.0f} prompt "
            f"tokens, over tune.max_prompt_tokens={max_prompt_tokens:g}"
        )
    else:
        beats = True
        why = (
            f"held-apart gain in {held.metric} {held.interval()} ({pct} paired bootstrap "
            f"over {held.probes} probes) excludes 0"
        )
    if beats:
        return Decision(True, True, f"the tuned config beat the default: {why}")
    line = f"no configuration beat the default beyond noise: {why}"
    return Decision(False, force, line)


def gain_table(gains: Mapping[str, Gain]) -> pd.DataFrame:
    """One row per set (tuning, held-apart): every field of ``Gain``."""
    return pd.DataFrame([asdict(gains[s]) for s in SETS if s in gains])
