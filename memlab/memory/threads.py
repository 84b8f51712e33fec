"""The threads that share a large numpy pass over rows.

numpy releases the GIL inside its loops, so a pass over a million rows (a sparse
product, the ranking signals) split into contiguous shares runs on several cores
from one Python thread. Every row is computed by the same operations on the same
values whichever share it falls in, so a split changes no bit of the result.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


def _workers() -> int:
    """Threads for a large pass: the cores this process may use, at most 4, and at
    most ``OMP_NUM_THREADS`` when that is set (the limit a user gives numpy's BLAS
    holds here too)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = min(4, cores or 1)
    limit = os.environ.get("OMP_NUM_THREADS", "").strip()
    if limit.isdigit() and int(limit) > 0:
        n = min(n, int(limit))
    return max(1, n)


WORKERS = _workers()
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there, and a pool
    that believes they do would queue work nobody runs."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def pool() -> ThreadPoolExecutor:
    """The helper threads (``WORKERS - 1`` of them, made on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max(1, WORKERS - 1), thread_name_prefix="memlab-rows")
        return _POOL


def split_rows(n: int, step: int, part: Callable[[int, int], None], *, min_rows: int) -> None:
    """Run ``part(a, b)`` over rows ``0:n`` in contiguous shares, one per worker
    thread, each a whole number of ``step`` rows (the last may be shorter); the
    calling thread takes the first share. Below ``min_rows`` rows, or with one
    worker, ``part(0, n)`` runs alone.

    Args:
        n: rows in all.
        step: the block a share is a multiple of (``part`` may loop over such blocks).
        part: computes rows ``a:b`` (writes into arrays the caller owns).
        min_rows: the size from which a split pays for its thread hand-off.
    """
    workers = WORKERS
    if n < min_rows or workers == 1:
        part(0, n)
        return
    share = -(-n // (workers * step)) * step
    bounds = [(a, min(n, a + share)) for a in range(0, n, share)]
    helpers = pool()
    futures = [helpers.submit(part, a, b) for a, b in bounds[1:]]
    try:
        part(*bounds[0])
    finally:
        for f in futures:
            f.result()


__all__ = ["WORKERS", "pool", "split_rows"]
