"""A capped file size: refused writes are MemlabErrors, no phantoms, nothing lost."""

from __future__ import annotations

from pathlib import Path

from memlab.reliability import diskfull


def test_a_full_disk_on_both_durable_stores(tmp_path: Path) -> None:
    rows = diskfull.run(tmp_path, trials=1)
    assert [r.failures for r in rows] == [0, 0], [r.detail for r in rows]
    assert all("refused writes 0" not in r.detail for r in rows)  # the cap was reached
