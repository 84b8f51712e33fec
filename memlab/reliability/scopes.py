"""10,000 adversarial scopes on every store, through every public method.

The scopes come in families of near neighbours (case, white space, SQL
wildcards and quotes, backslashes, NUL, unicode normalization forms, look-alike
letters, zero-width and direction marks, prefixes and extensions of each other,
and long random texts past PostgreSQL's index entry size). Every scope gets its
own records; then, for every scope, each public method is called with it and
must see exactly that scope's records: ``list``, ``count``, ``candidates``,
``get``/``get_many`` (own and a neighbour's ids), ``superseded_by`` (an id every
scope's record names), ``touch``/``mark_archived``/
``delete`` of a neighbour's ids (must change nothing), a ``put`` that reuses a
neighbour's id (must be refused), and ``MemoryLayer.recall``. At the end every
record must be exactly as written, and ``scopes()`` must list every scope once.
"""

from __future__ import annotations

import random
import time
import unicodedata
from collections.abc import Callable

import numpy as np

from memlab.errors import InputError
from memlab.memory import MemoryLayer, MemoryRecord, RecallQuery, Superseded
from memlab.memory.models.embedder import HashEmbedder
from memlab.memory.stores.base import MemoryStore
from memlab.reliability import Row, make_record

DIMS = 16
_BASES = ["alice", "bob", "Alice:support", "tenant-1/user", "o'brien", "100%", "a_b", "émile"]
_VARIANTS: list[Callable[[str], str]] = [
    lambda s: s,
    str.upper,
    str.lower,
    lambda s: s + " ",
    lambda s: " " + s,
    lambda s: s + "\t",
    lambda s: s + "%",
    lambda s: s.replace("a", "_", 1),
    lambda s: "%" + s,
    lambda s: s + "'",
    lambda s: s + "';--",
    lambda s: s + '"',
    lambda s: s + "\\",
    lambda s: s + "\\%",
    lambda s: s + "\x00",
    lambda s: s.replace("e", "\x00", 1) or "\x00",
    lambda s: unicodedata.normalize("NFD", s),
    lambda s: unicodedata.normalize("NFKD", s.upper()),
    lambda s: s.replace("a", "\u0430"),  # Cyrillic a
    lambda s: s.replace("o", "\u03bf"),  # Greek omicron
    lambda s: s + "\u200b",
    lambda s: "\u202e" + s,
    lambda s: s + "\ufeff",
    lambda s: s + ":",
    lambda s: s + ":support",
    lambda s: s[:-1] or "z",
    lambda s: s + s,
    lambda s: s + "🙂",
    lambda s: "../" + s,
    lambda s: s + "*",
]


def adversarial_scopes(n: int, seed: int = 13) -> list[str]:
    """``n`` distinct scopes in families of near neighbours (deterministic)."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    family = 0
    while len(out) < n:
        base = f"{rng.choice(_BASES)}{family}"
        for variant in _VARIANTS:
            scope = variant(base)
            if scope:
                out[scope] = None
        if family % 50 == 0:  # long scopes that do not compress
            out["".join(chr(0x4E00 + rng.randrange(20000)) for _ in range(1200)) + str(family)] = (
                None
            )
            out["x" * 4000 + str(family)] = None
        family += 1
    return list(out)[:n]


CORRECTOR = "corrector"  # the id every record names as having superseded a stale claim


def _record(i: int, scope: str) -> MemoryRecord:
    vec = np.random.default_rng(i).standard_normal(DIMS).astype(np.float32)
    content = f"secret {i} of its scope"
    # a stale-claim entry (the record stays in force) shared by every scope, so that
    # superseded_by(scope, [CORRECTOR]) must tell the scopes apart
    stale = Superseded(by=CORRECTOR, at=1.785e9, span=(len(content) - 5, len(content)))
    return make_record(
        f"rec-{i}", content, scope, vec / np.linalg.norm(vec), at=1.78e9 + i, superseded=(stale,)
    )


def check_store(
    store: MemoryStore, scopes: list[str], layer_recall: bool = True
) -> tuple[int, int, list[str]]:
    """Run every method for every scope; return (operations, failures, examples)."""
    records = {s: _record(i, s) for i, s in enumerate(scopes)}
    batch = list(records.values())
    for i in range(0, len(batch), 500):
        store.put_many(batch[i : i + 500])
    layer = MemoryLayer(store, HashEmbedder(DIMS), clock=lambda: 1.78e9 + 10**6)
    ops = len(batch) // 500 + 1
    failures: list[str] = []

    def fail(scope: str, what: str) -> None:
        failures.append(f"{what} for scope {scope[:30]!r}")

    query = np.ones(DIMS, dtype=np.float32) / np.sqrt(DIMS)
    for i, scope in enumerate(scopes):
        mine = records[scope]
        other = records[scopes[(i + 1) % len(scopes)]]  # a near neighbour
        if [r.id for r in store.list(scope, include_archived=True)] != [mine.id]:
            fail(scope, "list")
        if store.count(scope, include_archived=True) != 1:
            fail(scope, "count")
        cands = store.candidates(scope, query, include_archived=True)
        if [cands.ids[j] for j in np.flatnonzero(cands.mask)] != [mine.id]:
            fail(scope, "candidates")
        got = store.get(scope, mine.id)
        if got is None or not got.same_as(mine):
            fail(scope, "get own")
        if store.get(scope, other.id) is not None:
            fail(scope, "get neighbour's id")
        if [r.id for r in store.get_many(scope, [other.id, mine.id])] != [mine.id]:
            fail(scope, "get_many")
        if [r.id for r in store.superseded_by(scope, [CORRECTOR, other.id])] != [mine.id]:
            fail(scope, "superseded_by")
        if store.touch(scope, [other.id], 1.79e9) != 0:
            fail(scope, "touch of a neighbour's id")
        if store.mark_archived(scope, [other.id], 1.79e9) != 0:
            fail(scope, "archive of a neighbour's id")
        if store.delete(scope, [other.id]) != 0:
            fail(scope, "delete of a neighbour's id")
        try:
            store.put(other.copy(scope=scope, content="taken over"))
            fail(scope, "put of a neighbour's id was accepted")
        except InputError:
            pass
        ops += 11
        if layer_recall:
            hits = layer.recall(RecallQuery(scope, "secret of its scope"), touch=False)
            if [h.record.id for h in hits] != [mine.id]:
                fail(scope, "recall")
            ops += 1
    listed = store.scopes()
    if sorted(listed) != sorted(scopes) or len(listed) != len(set(listed)):
        failures.append("scopes() does not list every scope once")
    for scope, record in records.items():
        got = store.get(scope, record.id)
        if got is None or not got.same_as(record):
            fail(scope, "record changed by another scope's calls")
    ops += 1 + len(records)
    return ops, len(failures), failures[:3]


def run(
    stores: dict[str, Callable[[], MemoryStore]],
    n: int = 10_000,
    progress: Callable[[int], None] | None = None,
) -> list[Row]:
    scopes = adversarial_scopes(n)
    rows = []
    for name, open_store in stores.items():
        t0 = time.perf_counter()
        store = open_store()
        try:
            ops, failures, examples = check_store(store, scopes)
        finally:
            store.close()
        rows.append(
            Row(
                "adversarial scopes, takeover attempts",
                name,
                len(scopes),
                ops,
                failures,
                "; ".join(examples) if examples else "no leak, no takeover, no change",
                time.perf_counter() - t0,
            )
        )
        if progress is not None:
            progress(1)
    return rows
