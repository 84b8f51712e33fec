"""The MemoryStore contract, run against every backend in conftest.STORE_BACKENDS."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.errors import DimensionMismatch, InputError, StoreError
from memlab.memory import (
    HashEmbedder,
    LayerPolicy,
    MemoryInput,
    MemoryKind,
    MemoryLayer,
    MemoryRecord,
    RecallQuery,
)
from memlab.memory.stores.base import Candidates, MemoryStore
from tests.conftest import DIMS, StoreBackend, make_record, vec

ADVERSARIAL_SCOPES = [
    "alice",
    "alice ",
    "Alice",
    "alice%",
    "%",
    "_",
    "a_ice",
    "al'ice",
    'al"ice',
    "alice'; DROP TABLE records; --",
    "alice\\",
    "ali\x00ce",
    "ålice",
    "alice\u0301",
    "🙂",
    "a" * 300,
    "a" * 10_000,  # past PostgreSQL's b-tree entry limit (~2.7 kB)
    "é" * 3000 + "x",
    # ~9 kB that does not compress: PostgreSQL's b-tree entries hold ~2.7 kB.
    "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(3000)),
    "alice:support",
    "alice:*",
]


def test_is_a_memory_store(store: MemoryStore) -> None:
    assert isinstance(store, MemoryStore)


def test_put_get_roundtrip_keeps_every_field(store: MemoryStore) -> None:
    r = make_record(
        "alice",
        "We deploy on GKE — naïve “quotes” 🙂",
        kind=MemoryKind.SEMANTIC,
        salience=0.75,
        source="tool",
        provenance=("t1", "t2"),
        meta={"note": "x", "n": [1, 2]},
        access_count=3,
        archived_at=None,
    )
    store.put(r)
    got = store.get("alice", r.id)
    assert got is not None and got.same_as(r)
    assert got.embedding.dtype == np.float32
    assert store.dims == DIMS


def test_get_missing_is_none(store: MemoryStore) -> None:
    assert store.get("alice", "nope") is None
    assert store.get_many("alice", ["nope"]) == []


def test_get_many_keeps_order_and_skips_missing(store: MemoryStore) -> None:
    rs = [make_record(content=f"fact {i}", created_at=i) for i in range(5)]
    store.put_many(rs)
    ids = [rs[3].id, "missing", rs[0].id, rs[4].id]
    assert [r.id for r in store.get_many("alice", ids)] == [rs[3].id, rs[0].id, rs[4].id]


def test_put_is_upsert(store: MemoryStore) -> None:
    r = make_record(salience=0.2)
    store.put(r)
    store.put(r.copy(salience=0.9, content="changed"))
    got = store.get("alice", r.id)
    assert got is not None and got.salience == 0.9 and got.content == "changed"
    assert store.count("alice") == 1


def test_an_id_never_moves_to_another_scope(store: MemoryStore) -> None:
    r = make_record("alice")
    store.put(r)
    fresh = make_record("mallory", content="mallory's own")
    with pytest.raises(InputError, match="another scope"):
        store.put(r.copy(scope="mallory", content="taken over"))
    with pytest.raises(InputError, match="another scope"):  # the whole batch is refused
        store.put_many([fresh, r.copy(scope="mallory")])
    assert store.list("mallory") == [] and store.count("mallory") == 0
    got = store.get("alice", r.id)
    assert got is not None and got.same_as(r)
    assert store.candidates("alice").n_active == 1
    assert store.candidates("mallory").n_active == 0


def test_id_taking_methods_never_reach_another_scope(store: MemoryStore) -> None:
    bob = make_record("bob", content="bob's secret", created_at=1.0)
    store.put(bob)
    assert store.get("mallory", bob.id) is None
    assert store.get_many("mallory", [bob.id]) == []
    assert store.delete("mallory", [bob.id]) == 0
    assert store.mark_archived("mallory", [bob.id], at=5.0) == 0
    assert store.touch("mallory", bob.id, at=6.0) == 0
    got = store.get("bob", bob.id)
    assert got is not None and got.same_as(bob)  # unchanged: not archived, not touched
    assert [r.id for r in store.list("bob")] == [bob.id]


@pytest.mark.parametrize("rid", ["%", "_", "r'1", "r\x00nul", "🙂", "x" * 254])
def test_takeover_attempts_with_adversarial_ids_fail_on_every_path(
    store: MemoryStore, rid: str
) -> None:
    """Defect 3, extended: every way to reach bob's record from mallory's scope."""
    bob = make_record("bob", content="bob's secret", id=rid, created_at=1.0)
    archived = make_record("bob", content="bob's archive", id=rid + "-a", created_at=2.0)
    store.put_many([bob, archived])
    store.mark_archived("bob", [archived.id], at=3.0)
    snapshot = {r.id: r for r in store.list("bob", include_archived=True)}
    mine = make_record("mallory", content="mallory's", created_at=4.0)
    store.put(mine)
    for victim in (bob, archived):
        with pytest.raises(InputError, match="another scope"):
            store.put(victim.copy(scope="mallory", content="taken"))
        with pytest.raises(InputError, match="another scope"):
            store.put_many([make_record("mallory", content="new"), victim.copy(scope="mallory")])
        assert store.get("mallory", victim.id) is None
        assert store.delete("mallory", [mine.id, victim.id]) == 1  # only mallory's own
        store.put(mine)
        assert store.mark_archived("mallory", victim.id, at=9.0) == 0
        assert store.touch("mallory", [victim.id, victim.id], at=9.0) == 0
    assert [r.id for r in store.get_many("mallory", [bob.id, mine.id, archived.id])] == [mine.id]
    after = {r.id: r for r in store.list("bob", include_archived=True)}
    assert after.keys() == snapshot.keys()
    assert all(after[i].same_as(snapshot[i]) for i in after)
    cands = store.candidates("mallory", vec(0), include_archived=True)
    assert set(cands.ids[i] for i in np.flatnonzero(cands.mask)) == {mine.id}
    assert store.count("mallory", include_archived=True) == 1


def test_the_layer_cannot_take_over_another_scopes_record(store: MemoryStore) -> None:
    from memlab.memory import HashEmbedder, MemoryLayer, RecallQuery

    layer = MemoryLayer(store, HashEmbedder(DIMS))
    bob = layer.remember("bob", "bob's refund code is 7781", salience=0.9)
    with pytest.raises(InputError, match="another scope"):
        layer.remember("mallory", "mine now", id=bob.id)
    with pytest.raises(InputError, match="no memory"):
        layer.approve("mallory", bob.id, salience=1.0, reviewer="mallory")
    assert layer.forget("mallory", [bob.id]) == 0
    hits = layer.recall(RecallQuery("bob", "refund code"))
    assert [h.record.id for h in hits] == [bob.id]
    assert layer.recall(RecallQuery("mallory", "refund code")).hits == []


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"archived_at": float("nan")}, "archived_at"),
        ({"archived_at": float("inf")}, "archived_at"),
        ({"meta": {"k": object()}}, "meta"),
        ({"meta": {"k": float("nan")}}, "meta"),
        ({"meta": {1: "int key"}}, "meta"),
        ({"id": "x" * 257}, "characters"),
        ({"id": "bad\ud800"}, "unicode"),
        ({"content": "bad \udc80 text"}, "unicode"),
        ({"provenance": ("t1", 2)}, "provenance"),
        ({"tokens": "12"}, "tokens"),
        ({"salience": True}, "salience"),
    ],
)
def test_a_record_every_store_would_mangle_is_refused(
    store: MemoryStore, change: dict[str, object], match: str
) -> None:
    """Defect 10 (archived_at=nan was active again after a SQLite reopen) and defect 1
    (an unencodable meta): refused with an InputError before anything is written."""
    store.put(make_record(content="kept"))
    bad = make_record(content="bad")
    for k, v in change.items():
        object.__setattr__(bad, k, v)
    with pytest.raises(InputError, match=match):
        store.put(bad)
    with pytest.raises(InputError, match=match):
        store.put_many([make_record(content="good"), bad])
    assert [r.content for r in store.list("alice", include_archived=True)] == ["kept"]


@pytest.mark.parametrize("bad", [None, 3, b"id", [1], [None]])
def test_id_arguments_are_checked(store: MemoryStore, bad: object) -> None:
    with pytest.raises(InputError):
        store.delete("alice", bad)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        store.touch("alice", bad, at=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("at", [float("nan"), float("inf"), "soon", None, True])
def test_times_are_checked(store: MemoryStore, at: object) -> None:
    r = make_record()
    store.put(r)
    with pytest.raises(InputError):
        store.mark_archived("alice", [r.id], at=at)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        store.touch("alice", [r.id], at=at)  # type: ignore[arg-type]
    got = store.get("alice", r.id)
    assert got is not None and got.same_as(r)


def test_list_orders_by_time_and_filters(store: MemoryStore) -> None:
    a = make_record(content="a", created_at=30, kind="semantic")
    b = make_record(content="b", created_at=10)
    c = make_record(content="c", created_at=20, kind="procedural")
    other = make_record("bob", content="other", created_at=5)
    store.put_many([a, b, c, other])
    assert [r.content for r in store.list("alice")] == ["b", "c", "a"]
    assert [r.content for r in store.list("alice", kinds=["semantic", "procedural"])] == ["c", "a"]
    assert [r.content for r in store.list("alice", kinds=[MemoryKind.EPISODIC])] == ["b"]
    store.mark_archived("alice", [b.id], at=99)
    assert [r.content for r in store.list("alice")] == ["c", "a"]
    assert [r.content for r in store.list("alice", include_archived=True)] == ["b", "c", "a"]
    assert store.get("alice", b.id).archived_at == 99  # type: ignore[union-attr]


def test_delete_archive_touch_count(store: MemoryStore) -> None:
    rs = [make_record(content=f"f{i}", created_at=i) for i in range(4)]
    store.put_many(rs)
    store.put(make_record("bob"))
    assert store.count() == 5
    assert store.count("alice") == 4
    assert store.delete("alice", [rs[0].id, "missing"]) == 1
    assert store.delete("alice", rs[1].id) == 1
    assert store.count("alice") == 2
    assert store.mark_archived("alice", [rs[2].id], at=50.0) == 1
    assert store.count("alice") == 1
    assert store.count("alice", include_archived=True) == 2
    assert store.touch("alice", [rs[3].id], at=77.0) == 1
    assert store.touch("alice", rs[3].id, at=88.0) == 1
    got = store.get("alice", rs[3].id)
    assert got is not None and got.access_count == 2 and got.last_accessed_at == 88.0
    assert store.touch("alice", ["missing"], at=1.0) == 0
    assert store.scopes() == ["alice", "bob"]


def test_put_many_rejects_the_whole_batch(store: MemoryStore) -> None:
    good = make_record(content="good")
    bad = make_record(content="bad", embedding=vec(1, DIMS + 1))
    store.put(make_record(content="first"))
    with pytest.raises(DimensionMismatch):
        store.put_many([good, bad])
    assert store.get("alice", good.id) is None
    assert store.count() == 1


def _changed_after_construction(field: str) -> MemoryRecord:
    """A record whose field was assigned after the constructor checked it (records
    are mutable): only the store's own ``validate`` stands between it and the disk."""
    r = make_record(content=f"bad {field}")
    value = {
        "tokens": 2**63,  # past SQLite's and numpy's int64
        "access_count": 2**63,
        "embedding_2d": np.ones((DIMS, 2), dtype=np.float32),
        "embedding_f32_overflow": np.full(DIMS, 1e39),  # float64, inf as float32
        "created_at": 1e13,  # year 318857: no datetime shows it
        "archived_at": -1e12,
    }[field]
    setattr(r, field.split("_2d")[0].split("_f32")[0], value)
    return r


@pytest.mark.parametrize(
    "field",
    ["tokens", "access_count", "embedding_2d", "embedding_f32_overflow", "created_at",
     "archived_at"],
)  # fmt: skip
def test_a_field_changed_after_construction_is_refused_without_a_trace(
    backend: StoreBackend, tmp_path: Path, field: str
) -> None:
    s = backend.open(tmp_path)
    try:
        s.put(make_record(content="first"))
        good = make_record(content="good")
        with pytest.raises(InputError, match=field.split("_2d")[0].split("_f32")[0]):
            s.put_many([good, _changed_after_construction(field)])
        assert s.get("alice", good.id) is None and s.count() == 1
    finally:
        s.close()
    if backend.durable:  # the file opens, with the one record
        s2 = backend.open(tmp_path)
        try:
            assert [r.content for r in s2.list("alice")] == ["first"]
        finally:
            s2.close()


def test_a_float64_embedding_assigned_later_is_stored_as_float32(store: MemoryStore) -> None:
    r = make_record(content="fine")
    r.embedding = np.linspace(0.1, 1.0, DIMS)  # float64, within float32's range
    store.put(r)
    got = store.get("alice", r.id)
    assert got is not None and got.embedding.dtype == np.float32
    assert np.array_equal(got.embedding, r.embedding.astype(np.float32))


def test_rejects_invalid_records(store: MemoryStore) -> None:
    with pytest.raises(InputError):
        store.put(make_record(content="   "))
    with pytest.raises(InputError):
        store.put(make_record(salience=1.5))
    with pytest.raises(InputError):
        store.put(make_record(embedding=np.array([np.nan] * DIMS, dtype=np.float32)))
    r = make_record()
    with pytest.raises(InputError):
        store.put_many([r, r])
    assert store.count() == 0


def test_candidates_match_list(store: MemoryStore) -> None:
    rs = [
        make_record(content=f"f{i}", created_at=i, kind="semantic" if i % 2 else "episodic")
        for i in range(20)
    ]
    store.put_many(rs)
    store.put_many([make_record("bob", content=f"b{i}") for i in range(5)])
    store.delete("alice", [rs[0].id])
    store.mark_archived("alice", [rs[1].id], at=5)
    store.touch("alice", [rs[2].id], at=9)
    cands = store.candidates("alice", vec(0))
    active = {cands.ids[i] for i in np.flatnonzero(cands.mask)}
    assert active == {r.id for r in store.list("alice")}
    i = cands.ids.index(rs[2].id)
    assert cands.access_count[i] == 1 and cands.last_accessed_at[i] == 9
    sem = store.candidates("alice", vec(0), kinds=["semantic"])
    assert {sem.ids[i] for i in np.flatnonzero(sem.mask)} == {
        r.id for r in store.list("alice", kinds=["semantic"])
    }
    for row in np.flatnonzero(cands.mask):
        rec = store.get("alice", cands.ids[row])
        assert rec is not None
        assert np.array_equal(cands.embeddings[row], rec.embedding)
        assert cands.salience[row] == np.float32(rec.salience)
        assert cands.tokens[row] == rec.tokens
    assert store.candidates("nobody", vec(0)).n_active == 0


def test_candidates_stay_in_step_after_many_deletes(store: MemoryStore) -> None:
    rs = [make_record(content=f"f{i}", created_at=i) for i in range(300)]
    store.put_many(rs)
    store.candidates("alice", vec(0))  # warm any cache
    store.delete("alice", [r.id for r in rs[:200]])
    cands = store.candidates("alice", vec(0))
    assert {cands.ids[i] for i in np.flatnonzero(cands.mask)} == {r.id for r in rs[200:]}


def test_scope_columns_are_every_record_of_the_scope(store: MemoryStore) -> None:
    # what maintenance reads instead of listing the scope at every turn
    from memlab.memory.stores.base import scope_columns

    rs = [
        make_record(content=f"f{i}", created_at=i, kind="semantic" if i % 3 else "episodic")
        for i in range(30)
    ]
    store.put_many(rs)
    store.put_many([make_record("bob", content=f"b{i}") for i in range(5)])
    store.delete("alice", [rs[0].id])
    store.mark_archived("alice", [rs[3].id], at=50)

    def live(cands: Candidates) -> set[str]:
        return {cands.ids[i] for i in np.flatnonzero(cands.mask)}

    assert live(scope_columns(store, "alice")) == {r.id for r in store.list("alice")}
    every = scope_columns(store, "alice", include_archived=True)
    assert live(every) == {r.id for r in store.list("alice", include_archived=True)}
    episodic = scope_columns(store, "alice", kinds=["episodic"], include_archived=True)
    assert live(episodic) == {
        r.id for r in store.list("alice", kinds=["episodic"], include_archived=True)
    }
    i = every.ids.index(rs[3].id)
    assert every.archived_at[i] == 50 and every.tokens[i] == rs[3].tokens
    assert scope_columns(store, "nobody").n_active == 0


@pytest.mark.parametrize("scope", ADVERSARIAL_SCOPES)
def test_scope_is_exact_for_adversarial_strings(store: MemoryStore, scope: str) -> None:
    neighbours = {
        "alice",
        "alice ",
        "Alice",
        "a_ice",
        "al'ice",
        "%",
        "_",
        scope + "x",
        scope[:-1] or "z",
    }
    neighbours.discard(scope)
    for other in neighbours:
        store.put(make_record(other, content=f"belongs to {other!r}"))
    mine = make_record(scope, content="mine")
    store.put(mine)
    assert [r.id for r in store.list(scope)] == [mine.id]
    assert store.count(scope) == 1
    cands = store.candidates(scope, vec(0))
    assert [cands.ids[i] for i in np.flatnonzero(cands.mask)] == [mine.id]
    assert scope in store.scopes()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    scopes=st.lists(
        st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12),
        min_size=2,
        max_size=5,
        unique=True,
    )
)
def test_scope_isolation_property(
    backend: StoreBackend, tmp_path_factory: pytest.TempPathFactory, scopes: list[str]
) -> None:
    store = backend.open(tmp_path_factory.mktemp("prop"))
    try:
        owned = {}
        for i, s in enumerate(scopes):
            recs = [make_record(s, content=f"{i}-{j}") for j in range(2)]
            store.put_many(recs)
            owned[s] = {r.id for r in recs}
        for s in scopes:
            assert {r.id for r in store.list(s)} == owned[s]
            c = store.candidates(s, vec(1))
            assert {c.ids[i] for i in np.flatnonzero(c.mask)} == owned[s]
    finally:
        store.close()


def test_rejects_bad_scope(store: MemoryStore) -> None:
    with pytest.raises(InputError):
        store.list("")
    with pytest.raises(InputError):
        store.put(make_record("bad\ud800scope"))


def test_persists_across_reopen(backend: StoreBackend, tmp_path: Path) -> None:
    if not backend.durable:
        pytest.skip(f"{backend.name} is not durable by design")
    s = backend.open(tmp_path)
    rs = [make_record(content=f"f{i}", created_at=i, provenance=(f"t{i}",)) for i in range(10)]
    s.put_many(rs)
    s.delete("alice", rs[0].id)
    s.mark_archived("alice", [rs[1].id], at=3.5)
    s.touch("alice", [rs[2].id], at=4.5)
    s.put(rs[3].copy(salience=0.99))
    s.close()
    s2 = backend.open(tmp_path)
    try:
        assert s2.get("alice", rs[0].id) is None
        assert s2.get("alice", rs[1].id).archived_at == 3.5  # type: ignore[union-attr]
        got = s2.get("alice", rs[2].id)
        assert got is not None and got.access_count == 1 and got.last_accessed_at == 4.5
        assert s2.get("alice", rs[3].id).salience == 0.99  # type: ignore[union-attr]
        for r in rs[4:]:
            assert s2.get("alice", r.id).same_as(r)  # type: ignore[union-attr]
        assert s2.dims == DIMS
        assert s2.size_bytes() > 0
    finally:
        s2.close()


def test_closed_store_raises(backend: StoreBackend, tmp_path: Path) -> None:
    if not backend.durable:
        pytest.skip("in-memory store has nothing to close")
    s = backend.open(tmp_path)
    s.put(make_record())
    s.close()
    with pytest.raises(StoreError):
        s.list("alice")


def test_is_a_context_manager_and_close_is_idempotent(
    backend: StoreBackend, tmp_path: Path
) -> None:
    with backend.open(tmp_path) as s:
        s.put(make_record())
        assert s.count("alice") == 1
    s.close()  # again: harmless
    if backend.durable:
        with pytest.raises(StoreError):
            s.count("alice")
        with backend.open(tmp_path) as again:  # what the block wrote is there
            assert again.count("alice") == 1


def _lexical_matches_reference(store: MemoryStore, scope: str, query: str) -> None:
    from tests.test_lexical import reference_bm25

    cands = store.candidates(scope, vec(0), text=query)
    assert cands.lexical is not None
    active = {r.id: r.content for r in store.list(scope)}
    ref = reference_bm25(dict(enumerate(active.values())), query)
    by_id = dict(zip(active, ref.values(), strict=True))
    for row in np.flatnonzero(cands.mask):
        assert cands.lexical[row] == pytest.approx(by_id[cands.ids[row]], rel=1e-6, abs=1e-9)


def test_lexical_index_follows_writes_archives_and_deletes(store: MemoryStore) -> None:
    words = ["deploy", "region", "billing", "pager", "coffee", "gke", "eks", "nomad"]
    rs = [
        make_record(
            content=" ".join(words[(i * 3 + j) % len(words)] for j in range(1 + i % 4)),
            created_at=i,
        )
        for i in range(120)
    ]
    store.put_many(rs)
    store.put(
        make_record("bob", content="deploy deploy gke gke gke")
    )  # another scope's stats never count
    query = "where do we deploy on gke"
    _lexical_matches_reference(store, "alice", query)
    store.mark_archived("alice", [r.id for r in rs[:10]], at=500.0)
    _lexical_matches_reference(store, "alice", query)
    store.put(rs[20].copy(content="completely different billing words"))
    _lexical_matches_reference(store, "alice", query)
    store.delete(
        "alice", [r.id for r in rs[30:110]]
    )  # enough to force a compaction of the column cache
    _lexical_matches_reference(store, "alice", query)
    store.put(make_record(content="deploy gke nomad", created_at=999))
    _lexical_matches_reference(store, "alice", query)
    assert store.candidates("alice", vec(0)).lexical is None  # only computed when asked


# -- supersession -------------------------------------------------------------------
def _superseded_pair(store: MemoryStore) -> tuple[object, object, object]:
    """r0 (made at 1) wholly superseded by r2 at 3; r1 (made at 2) with one stale
    claim superseded by r2; r2 in force."""
    from memlab.memory import Superseded

    r0 = make_record(content="standup is at 9:00", created_at=1.0)
    r1 = make_record(content="standup is at 9:00. Invoices go to ap@x.example", created_at=2.0)
    r2 = make_record(content="standup moved to 9:30", created_at=3.0)
    r0 = r0.copy(superseded=(Superseded(by=r2.id, at=3.0, reason="explicit-old-value",
                                        confidence=0.9, detail="moved"),))  # fmt: skip
    r1 = r1.copy(superseded=(Superseded(by=r2.id, at=3.0, span=(0, 19)),))
    store.put_many([r0, r1, r2])
    return r0, r1, r2


def test_superseded_by_returns_the_scopes_records_with_entries_by_those_ids(
    store: MemoryStore,
) -> None:
    from memlab.memory import Superseded

    r0, r1, r2 = _superseded_pair(store)
    other = make_record(content="r3 supersedes r4", created_at=4.0)
    r4 = make_record(content="older", created_at=0.5)
    r4 = r4.copy(superseded=(Superseded(by=other.id, at=4.0),))
    # another scope's record with an entry naming alice's r2: never returned for alice
    bob = make_record(scope="bob", content="bob's", created_at=1.5)
    bob = bob.copy(superseded=(Superseded(by=r2.id, at=3.0),))  # type: ignore[attr-defined]
    store.put_many([other, r4, bob])
    store.mark_archived("alice", [r0.id], at=5.0)  # type: ignore[attr-defined]

    def ids(scope: str, by: list[str]) -> list[str]:
        return [r.id for r in store.superseded_by(scope, by)]

    assert ids("alice", [r2.id]) == [r0.id, r1.id]  # type: ignore[attr-defined]  # archived too
    assert ids("alice", [other.id]) == [r4.id]
    assert ids("alice", [r2.id, other.id]) == [r4.id, r0.id, r1.id]  # type: ignore[attr-defined]
    assert ids("alice", ["nobody"]) == [] and ids("carol", [r2.id]) == []  # type: ignore[attr-defined]
    assert ids("bob", [r2.id]) == [bob.id]  # type: ignore[attr-defined]
    got = store.superseded_by("alice", [r2.id])[1]  # type: ignore[attr-defined]
    assert got.same_as(r1)  # type: ignore[arg-type]
    got.superseded = ()  # a copy: the store's record keeps its entry
    assert ids("alice", [r2.id]) == [r0.id, r1.id]  # type: ignore[attr-defined]
    store.put(r1.copy(superseded=()))  # type: ignore[attr-defined]  # reinstated
    store.delete("alice", [r4.id])
    assert ids("alice", [r2.id, other.id]) == [r0.id]  # type: ignore[attr-defined]
    with pytest.raises(InputError):
        store.superseded_by("", [r2.id])  # type: ignore[attr-defined]


def test_supersession_round_trips_and_filters_candidates(store: MemoryStore) -> None:
    r0, r1, r2 = _superseded_pair(store)
    for r in (r0, r1, r2):
        got = store.get("alice", r.id)  # type: ignore[attr-defined]
        assert got is not None and got.same_as(r)  # type: ignore[arg-type]
    g0 = store.get("alice", r0.id)  # type: ignore[attr-defined]
    assert g0 is not None and g0.invalid_at == 3.0 and g0.superseded_by == r2.id  # type: ignore[attr-defined]
    g1 = store.get("alice", r1.id)  # type: ignore[attr-defined]
    assert (
        g1 is not None and g1.invalid_at is None and g1.text_at() == "Invoices go to ap@x.example"
    )

    def ids(**kw: object) -> set[str]:
        c = store.candidates("alice", vec(0), **kw)  # type: ignore[arg-type]
        return {i for i, m in zip(c.ids, c.mask, strict=True) if m}

    # superseded records stay on disk: without valid_at they are candidates, marked
    c = store.candidates("alice", vec(0))
    assert set(c.ids) == {r0.id, r1.id, r2.id}  # type: ignore[attr-defined]
    row = c.ids.index(r0.id)  # type: ignore[attr-defined]
    assert c.superseded[row] and c.invalid_at[row] == 3.0
    assert ids(valid_at=float("inf")) == {r1.id, r2.id}  # type: ignore[attr-defined]
    assert ids(valid_at=2.5) == {r0.id, r1.id}  # type: ignore[attr-defined]  # before r2
    assert ids(valid_at=0.5) == set()  # nothing made yet
    store.mark_archived("alice", [r1.id], at=5.0)  # type: ignore[attr-defined]
    assert ids(valid_at=4.0) == {r1.id, r2.id}  # type: ignore[attr-defined]  # archived later
    assert ids(valid_at=float("inf")) == {r2.id}  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="valid_at"):
        store.candidates("alice", vec(0), valid_at="now")  # type: ignore[arg-type]


def test_supersession_persists_across_reopen(backend: StoreBackend, tmp_path: Path) -> None:
    if not backend.durable:
        pytest.skip(f"{backend.name} is not durable by design")
    s = backend.open(tmp_path)
    r0, r1, r2 = _superseded_pair(s)
    s.close()
    s2 = backend.open(tmp_path)
    try:
        for r in (r0, r1, r2):
            got = s2.get("alice", r.id)  # type: ignore[attr-defined]
            assert got is not None and got.same_as(r)  # type: ignore[arg-type]
        c = s2.candidates("alice", vec(0), valid_at=float("inf"))
        assert {i for i, m in zip(c.ids, c.mask, strict=True) if m} == {r1.id, r2.id}  # type: ignore[attr-defined]
    finally:
        s2.close()


def test_a_record_with_a_bad_superseded_entry_is_refused(store: MemoryStore) -> None:
    from memlab.memory import Superseded

    r = make_record(content="short", created_at=5.0)
    for bad, match in [
        (Superseded(by=r.id, at=6.0), "supersede itself"),
        (Superseded(by="x", at=4.0), "before the record.s created_at"),
        (Superseded(by="x", at=6.0, span=(0, 99)), "span"),
    ]:
        with pytest.raises(InputError, match=match):
            store.put(r.copy(superseded=(bad,)))
    assert store.get("alice", r.id) is None


# -- layered scopes: a list of scopes reads exactly those scopes ---------------------
LAYER_NEIGHBOURS = ["alice:s1", "alice", "alice:s2", "alice:s1x", "alice:", "alice:s", "ali",
                    "alice:s1:deep", "%", "bob:s1", "bob"]  # fmt: skip


def _layer(store: MemoryStore) -> MemoryLayer:
    return MemoryLayer(store, HashEmbedder(DIMS), clock=lambda: 1000.0)


def test_layered_recall_reads_exactly_the_listed_scopes(store: MemoryStore) -> None:
    layer = _layer(store)
    owned: dict[str, set[str]] = {}
    for scope in LAYER_NEIGHBOURS:
        recs = layer.remember_many(
            [MemoryInput(scope, f"we deploy the {scope} service on GKE {i}") for i in range(3)]
        )
        owned[scope] = {r.id for r in recs}
    for listed in (["alice:s1", "alice"], ["alice", "alice:s1"], ["alice:s2", "alice", "bob"]):
        result = layer.recall(RecallQuery(listed, "where do we deploy?", token_budget=10_000))
        got = {h.record.id for h in result.hits}
        assert got == set().union(*(owned[s] for s in listed))
        assert {h.record.scope for h in result.hits} == set(listed)
    one = layer.recall(RecallQuery(["alice"], "deploy", token_budget=10_000)).hits
    assert {h.record.id for h in one} == owned["alice"]


def test_layered_recall_with_a_budget_split(store: MemoryStore) -> None:
    layer = _layer(store)
    for scope in ("alice:s1", "alice"):
        layer.remember_many(
            [MemoryInput(scope, f"{scope} note {i} about the deploy") for i in range(6)]
        )
    tokens = store.list("alice")[0].tokens
    # session layer only: the user scope's share is zero and nothing flows back
    hits = layer.recall(
        RecallQuery(["alice:s1", "alice"], "deploy", token_budget=tokens * 3, split=[1, 0])
    ).hits
    assert len(hits) == 3 and {h.record.scope for h in hits} == {"alice:s1"}
    # half each
    hits = layer.recall(
        RecallQuery(["alice:s1", "alice"], "deploy", token_budget=tokens * 4, split=[1, 1])
    ).hits
    assert sorted(h.record.scope for h in hits) == ["alice", "alice", "alice:s1", "alice:s1"]
    # what an empty layer leaves flows on to the next
    hits = layer.recall(
        RecallQuery(["alice:s9", "alice"], "deploy", token_budget=tokens * 4, split=[1, 1])
    ).hits
    assert [h.record.scope for h in hits] == ["alice"] * 4


def test_writes_go_to_the_layer_of_their_kind(store: MemoryStore) -> None:
    layer = _layer(store)
    ep = layer.remember(["alice:s1", "alice"], "I said this in session one.")
    fact = layer.remember(["alice:s1", "alice"], "Alice deploys on GKE.", kind="semantic")
    assert ep.scope == "alice:s1" and fact.scope == "alice"
    assert [r.id for r in store.list("alice:s1")] == [ep.id]
    assert [r.id for r in store.list("alice")] == [fact.id]
    routed = MemoryLayer(store, HashEmbedder(DIMS), layers=LayerPolicy(episodic=-1, semantic=0))
    assert routed.remember(["alice:s2", "alice"], "to the user scope").scope == "alice"
    assert routed.remember(["alice:s2", "alice"], "x", kind="semantic").scope == "alice:s2"
    with pytest.raises(InputError, match="listed twice"):
        layer.remember(["alice", "alice"], "x")
    with pytest.raises(InputError, match="empty"):
        layer.remember([], "x")
    with pytest.raises(InputError, match="split"):
        RecallQuery(["alice:s1", "alice"], "x", split=[1])


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    base=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=6),
    tails=st.lists(
        st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=4),
        min_size=2,
        max_size=4,
        unique=True,
    ),
    data=st.data(),
)
def test_listing_scopes_never_reveals_another_property(
    backend: StoreBackend,
    tmp_path_factory: pytest.TempPathFactory,
    base: str,
    tails: list[str],
    data: st.DataObject,
) -> None:
    """Scopes built as prefixes and extensions of each other (``a``, ``a:x``,
    ``a:x:y``, ``a:``...): a recall over any two of them returns records of those
    two only: a prefix is never a wildcard, and listing two never reveals a third."""
    scopes = list(dict.fromkeys([base, f"{base}:", *(f"{base}:{t}" for t in tails),
                                 f"{base}:{tails[0]}:{tails[1]}", base[:-1] or "z"]))  # fmt: skip
    store = backend.open(tmp_path_factory.mktemp("layers"))
    try:
        layer = _layer(store)
        owned = {}
        for s in scopes:
            recs = layer.remember_many([MemoryInput(s, f"note {j} on deploys") for j in range(2)])
            owned[s] = {r.id for r in recs}
        listed = data.draw(st.lists(st.sampled_from(scopes), min_size=2, max_size=2, unique=True))
        split = data.draw(st.sampled_from([None, [1, 1], [1, 0]]))
        hits = layer.recall(RecallQuery(listed, "deploys", token_budget=100_000, split=split)).hits
        got = {h.record.id for h in hits}
        allowed = owned[listed[0]] | owned[listed[1]]
        assert got <= allowed
        if split is None:
            assert got == allowed
    finally:
        store.close()
