"""The tuning / held-apart split of the transcripts."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from memlab.errors import ConfigError


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


def split(transcripts: Sequence[Any], tc: Any) -> tuple[list[str], list[str]]:
    """(tuning ids, held-apart ids) of loaded transcripts under a ``tune`` config."""
    return split_ids(
        [x.id for x in transcripts],
        holdout_fraction=tc.holdout_fraction,
        seed=tc.split_seed,
        tuning_ids=list(tc.tuning_ids) if tc.tuning_ids is not None else None,
        holdout_ids=list(tc.holdout_ids) if tc.holdout_ids is not None else None,
    )
