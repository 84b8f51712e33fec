"""Writer processes with a compacting process: nothing lost, no spurious errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.reliability import concurrency


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_writers_and_a_compactor(tmp_path: Path, kind: str) -> None:
    row = concurrency.trial(kind, tmp_path, writers=2, per_writer=150)
    assert row.failures == 0, row.detail
    assert row.operations == 300
