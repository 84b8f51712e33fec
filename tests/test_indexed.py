"""memlab.memory.stores.indexed: ScopeIndex columns stay equal to the records they
index through upserts, archives, touches, deletes and compactions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.memory import MemoryKind
from memlab.memory.lexical import LexicalIndex
from memlab.memory.records import KIND_CODES, SOURCE_CODES, MemoryRecord
from memlab.memory.stores.indexed import ScopeIndex
from tests.conftest import DIMS, make_record

WORDS = ["gke", "europe", "billing", "pager", "coffee", "invoice", "deploy", "oncall"]


def expected_view(records: dict[str, MemoryRecord], include_archived: bool) -> dict[str, tuple]:
    return {
        r.id: (r.created_at, r.last_accessed_at, r.access_count, KIND_CODES[r.kind])
        for r in records.values()
        if include_archived or r.archived_at is None
    }


def actual_view(idx: ScopeIndex, include_archived: bool) -> dict[str, tuple]:
    v = idx.view(None, include_archived)
    return {
        v.ids[i]: (
            float(v.created_at[i]),
            float(v.last_accessed_at[i]),
            int(v.access_count[i]),
            int(v.kind[i]),
        )
        for i in np.flatnonzero(v.mask)
    }


def test_upsert_grows_and_replaces_in_place() -> None:
    idx = ScopeIndex(DIMS)
    recs = [make_record(id=f"r{i}", created_at=float(i)) for i in range(40)]
    for r in recs:
        idx.upsert(r)
    assert len(idx) == 40 and idx.cap >= 40
    changed = recs[3].copy(salience=0.9, content="now about billing")
    idx.upsert(changed)
    assert len(idx) == 40 and idx.n == 40  # same row, no new one
    row = idx.row["r3"]
    assert idx.salience[row] == np.float32(0.9)
    assert np.array_equal(idx.emb[row], changed.embedding)
    assert idx.lexical.scores("billing", idx.n)[row] > 0


def test_view_masks_archived_kinds_and_dead_rows() -> None:
    idx = ScopeIndex(DIMS)
    idx.upsert(make_record(id="e", kind=MemoryKind.EPISODIC))
    idx.upsert(make_record(id="s", kind=MemoryKind.SEMANTIC))
    idx.upsert(make_record(id="gone"))
    idx.set_archived("e", True)
    idx.remove("gone")
    idx.remove("never-there")  # ignored
    active = idx.view(None, include_archived=False)
    assert [active.ids[i] for i in np.flatnonzero(active.mask)] == ["s"]
    every = idx.view(None, include_archived=True)
    assert sorted(every.ids[i] for i in np.flatnonzero(every.mask)) == ["e", "s"]
    semantic = idx.view(frozenset({MemoryKind.EPISODIC}), include_archived=True)
    assert [semantic.ids[i] for i in np.flatnonzero(semantic.mask)] == ["e"]
    assert int(every.source[every.ids.index("s")]) == SOURCE_CODES[make_record().source]
    assert every.lexical is None and idx.view(None, False, text="gke").lexical is not None


def test_compaction_keeps_rows_aligned_with_ids_and_bm25() -> None:
    idx = ScopeIndex(DIMS)
    recs = [
        make_record(id=f"r{i:03d}", content=f"note {WORDS[i % len(WORDS)]}", created_at=float(i))
        for i in range(300)
    ]
    for r in recs:
        idx.upsert(r)
    for r in recs[:200]:
        idx.remove(r.id)
    assert idx.n < 300 and idx.dead <= 64  # compacted at least once
    assert len(idx) == 100 and len(idx.ids) == idx.n
    view = idx.view(None, include_archived=False)
    live = {view.ids[i] for i in np.flatnonzero(view.mask)}
    assert live == {r.id for r in recs[200:]}
    for i in np.flatnonzero(view.mask):
        rid = view.ids[i]
        assert np.array_equal(view.embeddings[i], recs[int(rid[1:])].embedding)
    # BM25 over the survivors equals a fresh index of them.
    fresh = LexicalIndex()
    for i in range(idx.n):
        fresh.set_text(i, idx.contents[i], bool(view.mask[i]))
    for word in WORDS:
        assert np.allclose(idx.lexical.scores(word, idx.n), fresh.scores(word, idx.n))


ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "archive", "unarchive", "touch", "remove"]),
        st.integers(0, 29),
        st.sampled_from(WORDS),
    ),
    max_size=400,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_columns_equal_the_records_after_any_operations(
    steps: list[tuple[str, int, str]],
) -> None:
    idx = ScopeIndex(DIMS)
    records: dict[str, MemoryRecord] = {}
    clock = 0.0
    for op, k, word in steps:
        rid = f"r{k}"
        clock += 1.0
        if op == "put":
            r = make_record(id=rid, content=f"about {word}", created_at=clock)
            records[rid] = r
            idx.upsert(r)
        elif rid not in records:
            continue
        elif op == "remove":
            del records[rid]
            idx.remove(rid)
        elif op in ("archive", "unarchive"):
            records[rid].archived_at = clock if op == "archive" else None
            idx.set_archived(rid, clock if op == "archive" else None)
        else:
            records[rid].access_count += 1
            records[rid].last_accessed_at = clock
            idx.touch(rid, clock)
    assert len(idx) == len(records)
    for include_archived in (False, True):
        assert actual_view(idx, include_archived) == expected_view(records, include_archived)
    active = [r for r in records.values() if r.archived_at is None]
    for word in WORDS[:3]:
        view = idx.view(None, False, text=word)
        assert view.lexical is not None
        hit = {view.ids[i] for i in np.flatnonzero(view.mask & (view.lexical > 0))}
        assert hit == {r.id for r in active if word in r.content}
