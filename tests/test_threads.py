"""memlab.memory.threads: shares of a row pass across worker threads."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

from memlab.memory import threads


def test_the_thread_count_honours_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads._workers() == 1
    for unset in ("", "0", "two"):
        monkeypatch.setenv("OMP_NUM_THREADS", unset)
        assert 1 <= threads._workers() <= 4


@pytest.mark.parametrize(("n", "workers"), [(10, 3), (1000, 3), (1001, 2), (4096, 4), (1, 2)])
def test_shares_cover_every_row_once_in_whole_steps(
    n: int, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threads, "WORKERS", workers)
    seen: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def part(a: int, b: int) -> None:
        with lock:
            seen.append((a, b, threading.current_thread().name))

    threads.split_rows(n, 64, part, min_rows=0)
    spans = sorted((a, b) for a, b, _ in seen)
    assert spans[0][0] == 0 and spans[-1][1] == n
    assert all(b == a2 for (_, b), (a2, _) in itertools.pairwise(spans))
    assert all(a % 64 == 0 for a, _ in spans)
    assert len(spans) <= workers
    # the caller takes the first share itself
    first = next(name for a, _, name in seen if a == 0)
    assert first == threading.current_thread().name
    if n > 64:
        assert len(spans) > 1


def test_below_min_rows_or_with_one_worker_one_call_does_it_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(threads, "WORKERS", 4)
    threads.split_rows(500, 64, lambda a, b: calls.append((a, b)), min_rows=501)
    monkeypatch.setattr(threads, "WORKERS", 1)
    threads.split_rows(5000, 64, lambda a, b: calls.append((a, b)), min_rows=0)
    assert calls == [(0, 500), (0, 5000)]


def test_an_error_in_a_helpers_share_reaches_the_caller_after_every_share_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threads, "WORKERS", 2)
    out = np.zeros(256)

    def part(a: int, b: int) -> None:
        out[a:b] = 1.0
        if a:
            raise ValueError("share two")

    with pytest.raises(ValueError, match="share two"):
        threads.split_rows(256, 64, part, min_rows=0)
    assert out.all()
