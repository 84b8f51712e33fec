"""Adversarial scopes through every public method, with takeover attempts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memlab.memory import InMemoryStore, JsonlStore, SqliteStore
from memlab.memory.stores.base import Candidates
from memlab.reliability import scopes


def test_the_scopes_are_distinct_near_neighbours() -> None:
    got = scopes.adversarial_scopes(2000)
    assert len(got) == len(set(got)) == 2000
    assert any("\x00" in s for s in got) and any(len(s.encode()) > 3000 for s in got)
    assert "alice0" not in got or "ALICE0" in got


def test_every_store_keeps_every_scope_apart(tmp_path: Path) -> None:
    rows = scopes.run(
        {
            "memory": InMemoryStore,
            "jsonl": lambda: JsonlStore(tmp_path / "m.jsonl"),
            "sqlite": lambda: SqliteStore(tmp_path / "m.db"),
        },
        n=300,
    )
    assert [r.failures for r in rows] == [0, 0, 0], [r.detail for r in rows]


class LeakyStore(InMemoryStore):
    """Matches scopes case-insensitively: the check must notice."""

    def candidates(self, scope, query=None, **kw):  # type: ignore[no-untyped-def]
        merged = [
            super(LeakyStore, self).candidates(s, query, **kw)
            for s in self.scopes()
            if s.lower() == scope.lower()
        ]
        ids = [i for c in merged for i in c.ids]
        if not ids:
            return Candidates.empty(self.dims or 0)
        return Candidates(
            ids,
            *(
                np.concatenate([getattr(c, f) for c in merged])
                for f in (
                    "embeddings",
                    "created_at",
                    "last_accessed_at",
                    "salience",
                    "access_count",
                    "tokens",
                    "kind",
                    "source",
                    "mask",
                )
            ),
        )


def test_a_leaky_store_fails_the_check() -> None:
    _, failures, examples = scopes.check_store(
        LeakyStore(), scopes.adversarial_scopes(120), layer_recall=False
    )
    assert failures > 0 and any("candidates" in e for e in examples)


class CaseBlindSupersededStore(InMemoryStore):
    """superseded_by matches scopes case-insensitively: the check must notice."""

    def superseded_by(self, scope, ids):  # type: ignore[no-untyped-def]
        out = [
            r
            for s in self.scopes()
            if s.lower() == scope.lower()
            for r in super(CaseBlindSupersededStore, self).superseded_by(s, ids)
        ]
        return sorted(out, key=lambda r: (r.created_at, r.id))


def test_a_store_whose_superseded_by_leaks_fails_the_check() -> None:
    _, failures, examples = scopes.check_store(
        CaseBlindSupersededStore(), scopes.adversarial_scopes(120), layer_recall=False
    )
    assert failures > 0 and all("superseded_by" in e for e in examples)
