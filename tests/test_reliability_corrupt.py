"""The corruption matrix: every kind is reported and the file left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.reliability import corrupt


def test_the_matrix_has_30_kinds_per_store() -> None:
    assert len(corrupt.JSONL_DAMAGE) >= 30 and len(corrupt.SQLITE_DAMAGE) >= 30


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_every_kind_of_damage_is_reported(tmp_path: Path, kind: str) -> None:
    (row,) = corrupt.run(tmp_path, stores=(kind,))
    assert row.failures == 0, row.detail
    assert row.trials >= 30


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_undamaged_files_are_not_called_corrupt(tmp_path: Path, kind: str) -> None:
    """The check can fail: a file that was not damaged opens and reads fine."""
    got = corrupt.check(kind, "none", lambda p: None, tmp_path)
    assert got is not None and got.startswith("the damage went unnoticed")
