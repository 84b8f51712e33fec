"""memlab's reliability suite: fault injection and adversarial checks it ships.

``python -m memlab.reliability`` (``make reliability``) runs every check and
prints a table of trials, operations and failures; it writes
``results/reliability/summary.csv``. The checks, one module each:

- ``kill``: SIGKILL of a writing process at random and at targeted points
  (inside a compaction, in the middle of a batch's line, inside a SQLite
  transaction), with acknowledged-write accounting;
- ``corrupt``: a matrix of damage to JSONL and SQLite files, each to be reported
  as StoreCorrupted with the file left byte-identical;
- ``concurrency``: 2 and 4 writer processes with a compacting process;
- ``scopes``: 10,000 adversarial scopes on every store, through every public
  method, with attempts to take over another scope's ids;
- ``injection``: breakout attempts against the prompt's memory block;
- ``badargs``: bad arguments to the public API;
- ``diskfull``: a writer whose file size is capped (``RLIMIT_FSIZE``);
- ``laundering``: injected tool output quoted by the agent's reply, counted in
  the summaries it could reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memlab.memory.records import MemoryKind, MemoryRecord


@dataclass
class Row:
    """One line of the suite's table.

    Attributes:
        check: what was tried, e.g. ``"kill: random points"``.
        store: the store backend, or ``"-"`` when none is involved.
        trials: independent trials (processes killed, files damaged, scopes, ...).
        operations: operations the trials performed (acknowledged writes, calls, ...).
        failures: trials or operations that missed the target (the target is 0).
        detail: how the failures break down, or what was counted.
        seconds: wall time of the check.
        guarded: whether the row has a target of 0 failures; a row that only
            measures a known limit (e.g. paraphrased injections) does not.
    """

    check: str
    store: str
    trials: int
    operations: int
    failures: int
    detail: str = ""
    seconds: float = 0.0
    guarded: bool = True


def make_record(
    rid: str,
    content: str,
    scope: str,
    embedding: np.ndarray,
    *,
    at: float = 0.0,
    kind: MemoryKind = MemoryKind.EPISODIC,
    **fields: Any,
) -> MemoryRecord:
    """A record for a check: salience 0.5, 10 tokens, made and last used at ``at``."""
    return MemoryRecord(
        id=rid,
        content=content,
        embedding=np.asarray(embedding, dtype=np.float32),
        kind=kind,
        scope=scope,
        salience=fields.pop("salience", 0.5),
        tokens=fields.pop("tokens", 10),
        created_at=at,
        last_accessed_at=at,
        **fields,
    )


__all__ = ["Row", "make_record"]
