"""Timing helpers shared by the benchmarks (the workloads come from memlab.bench.workload)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    """Wall-clock seconds of each of ``repeat`` calls."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))
