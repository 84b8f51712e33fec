"""EvictionPolicy: TTL by kind, capacity, the salience floor, cold decay."""

from __future__ import annotations

import pytest

from memlab.errors import InputError
from memlab.memory import EvictionPolicy, Superseded
from memlab.memory.stores.base import MemoryStore
from tests.conftest import make_record

H = 3600.0


def test_validation() -> None:
    with pytest.raises(InputError, match="episodic_ttl"):
        EvictionPolicy(episodic_ttl=0)
    with pytest.raises(InputError, match="max_records"):
        EvictionPolicy(max_records=0)
    with pytest.raises(InputError, match="salience_floor"):
        EvictionPolicy(salience_floor=1.5)
    with pytest.raises(InputError, match="cold_decay"):
        EvictionPolicy(cold_decay=0)


def test_decay_unprotects_must_be_a_bool() -> None:
    # any truthy value ("no", 1) turned protection-follows-decay on
    for bad in ("no", 1, None):
        with pytest.raises(InputError, match="decay_unprotects must be True or False"):
            EvictionPolicy(decay_unprotects=bad)  # type: ignore[arg-type]


def test_apply_checks_its_arguments_before_changing_anything(store: MemoryStore) -> None:
    old = make_record(created_at=0.0, salience=0.1)
    store.put(old)
    policy = EvictionPolicy(episodic_ttl=1, cold_decay=0.5, cold_after=1)
    # a NaN now evicted nothing without a word; a string or None was a bare TypeError
    for bad in (float("nan"), float("inf"), "soon", None, True):
        with pytest.raises(InputError, match="eviction: now"):
            policy.apply(store, "alice", bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="scope"):
        policy.apply(store, "", 100 * H)
    with pytest.raises(InputError, match="eviction: store"):
        policy.apply(None, "alice", 100 * H)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="eviction: ranker"):
        policy.apply(store, "alice", 100 * H, ranker="hybrid")  # type: ignore[arg-type]
    kept = store.get("alice", old.id)  # nothing decayed or deleted
    assert kept is not None and kept.salience == pytest.approx(0.1) and not kept.meta
    assert policy.apply(store, "alice", 100 * H).expired == [old.id]


def test_ttl_deletes_old_episodes_only_and_respects_the_floor(store: MemoryStore) -> None:
    now = 100 * H
    old_ep = make_record(content="old episode", created_at=now - 50 * H, salience=0.5)
    old_protected = make_record(content="old but vital", created_at=now - 50 * H, salience=0.9)
    old_archived = make_record(content="old archived", created_at=now - 50 * H, salience=0.1)
    old_sem = make_record(
        content="old fact", kind="semantic", created_at=now - 500 * H, salience=0.1
    )
    old_proc = make_record(
        content="old howto", kind="procedural", created_at=now - 500 * H, salience=0.1
    )
    fresh = make_record(content="fresh episode", created_at=now - 1 * H, salience=0.1)
    other = make_record("bob", content="bob's old episode", created_at=0.0)
    store.put_many([old_ep, old_protected, old_archived, old_sem, old_proc, fresh, other])
    store.mark_archived("alice", [old_archived.id], at=now - 40 * H)
    report = EvictionPolicy(episodic_ttl=24, salience_floor=0.8).apply(store, "alice", now)
    assert set(report.expired) == {old_ep.id, old_archived.id}
    left = {r.id for r in store.list("alice", include_archived=True)}
    assert left == {old_protected.id, old_sem.id, old_proc.id, fresh.id}
    assert store.get("bob", other.id) is not None  # another scope is untouched


def test_capacity_drops_lowest_scored_evictable(store: MemoryStore) -> None:
    now = 1000 * H
    recs = [
        make_record(content=f"r{i}", created_at=now - i * H, salience=0.1 * i) for i in range(8)
    ]
    store.put_many(recs)  # salience 0.0 .. 0.7; r0 is newest but least salient
    vip = make_record(content="vip", created_at=0.0, salience=0.95)
    store.put(vip)
    report = EvictionPolicy(max_records=5, salience_floor=0.8).apply(store, "alice", now)
    assert len(report.dropped) == 4 and report.over_capacity == 0
    assert vip.id not in report.dropped
    assert store.count("alice") == 5
    kept = {r.content for r in store.list("alice")}
    assert "vip" in kept and "r7" in kept  # the most salient survive


def test_the_floor_wins_over_capacity(store: MemoryStore) -> None:
    store.put_many([make_record(content=f"vip {i}", salience=0.9) for i in range(4)])
    report = EvictionPolicy(max_records=2, salience_floor=0.8).apply(store, "alice", 10.0)
    assert report.dropped == [] and report.over_capacity == 2
    assert store.count("alice") == 4


def test_no_floor_means_anything_can_go(store: MemoryStore) -> None:
    store.put_many([make_record(content=f"vip {i}", salience=0.9, created_at=i) for i in range(4)])
    report = EvictionPolicy(max_records=2, salience_floor=None).apply(store, "alice", 10.0)
    assert len(report.dropped) == 2


def test_cold_salience_decays_but_the_floor_still_protects(store: MemoryStore) -> None:
    vip = make_record(content="once vital", salience=0.9, created_at=0.0)
    used = make_record(content="recalled often", salience=0.9, created_at=0.0)
    store.put_many([vip, used])
    store.touch("alice", [used.id], at=100 * H)
    decay_only = EvictionPolicy(salience_floor=0.8, cold_decay=0.5, cold_after=48)
    report = decay_only.apply(store, "alice", 100 * H)
    assert report.decayed == [vip.id]  # two cold periods: 0.9 * 0.5**2
    decayed = store.get("alice", vip.id)
    assert decayed is not None and decayed.salience == pytest.approx(0.225)
    assert decayed.meta["salience_written"] == pytest.approx(0.9)
    assert store.get("alice", used.id).salience == 0.9  # type: ignore[union-attr]
    # Decay is not applied twice for the same period.
    assert decay_only.apply(store, "alice", 100 * H).decayed == []
    # Decay lowered the ranking weight, not the protection: neither TTL nor
    # capacity takes a record written above the floor.
    strict = EvictionPolicy(
        episodic_ttl=24, max_records=1, salience_floor=0.8, cold_decay=0.5, cold_after=48
    )
    report = strict.apply(store, "alice", 100 * H)
    assert report.expired == [] and report.dropped == [] and report.over_capacity == 1
    assert store.get("alice", vip.id) is not None


def test_the_issue_case_a_095_record_unrecalled_for_100_hours_survives(
    store: MemoryStore,
) -> None:
    vip = make_record(content="never deploy on Fridays", salience=0.95, created_at=0.0)
    store.put(vip)
    policy = EvictionPolicy(episodic_ttl=24, salience_floor=0.8, cold_decay=0.5, cold_after=24)
    report = policy.apply(store, "alice", 100 * H)
    assert report.decayed == [vip.id] and report.expired == []
    kept = store.get("alice", vip.id)
    assert kept is not None and kept.salience < 0.8  # ranks lower, still kept


def test_decay_unprotects_is_the_documented_alternative(store: MemoryStore) -> None:
    vip = make_record(content="once vital", salience=0.9, created_at=0.0)
    store.put(vip)
    policy = EvictionPolicy(
        episodic_ttl=24, salience_floor=0.8, cold_decay=0.5, cold_after=48, decay_unprotects=True
    )
    report = policy.apply(store, "alice", 100 * H)
    assert report.decayed == [vip.id] and report.expired == [vip.id]
    assert store.get("alice", vip.id) is None


def test_records_written_below_the_floor_are_not_protected_by_the_written_key(
    store: MemoryStore,
) -> None:
    low = make_record(content="minor", salience=0.5, created_at=0.0)
    store.put(low)
    policy = EvictionPolicy(episodic_ttl=24, salience_floor=0.8, cold_decay=0.5, cold_after=48)
    assert policy.apply(store, "alice", 100 * H).expired == [low.id]


def test_procedural_records_never_expire_on_a_clock(store: MemoryStore) -> None:
    howto = make_record(
        content="restart then verify", kind="procedural", salience=0.1, created_at=0.0,
        source="tool",
    )  # fmt: skip
    store.put(howto)
    policy = EvictionPolicy(episodic_ttl=1, untrusted_ttl=1, salience_floor=0.8, cold_decay=0.5)
    assert policy.apply(store, "alice", 10_000 * H).expired == []
    assert store.get("alice", howto.id) is not None


def test_decay_and_ttl_in_one_pass(store: MemoryStore) -> None:
    vip = make_record(content="once vital", salience=0.9, created_at=0.0)
    store.put(vip)
    policy = EvictionPolicy(episodic_ttl=24, salience_floor=0.8, cold_decay=0.5, cold_after=48)
    report = policy.apply(store, "alice", 100 * H)
    assert report.decayed == [vip.id] and report.expired == []
    assert store.get("alice", vip.id) is not None


def test_approval_sets_the_protection_anew(store: MemoryStore) -> None:
    from memlab.memory import HashEmbedder, MemoryLayer

    layer = MemoryLayer(store, HashEmbedder(16), clock=lambda: 0.0)
    tool = layer.remember("alice", "the status page says: EU region degraded", source="tool")
    assert tool.salience <= 0.3  # capped as untrusted
    layer.approve("alice", tool.id, salience=0.9, reviewer="ops")
    policy = EvictionPolicy(untrusted_ttl=1, salience_floor=0.8, cold_decay=0.5, cold_after=24)
    assert policy.apply(store, "alice", 100 * H).expired == []  # approved above the floor
    decayed = store.get("alice", tool.id)
    assert decayed is not None and decayed.salience < 0.8
    # A later approval below the floor replaces the written salience: no more protection.
    layer.approve("alice", tool.id, salience=0.2, reviewer="ops")
    assert "salience_written" not in store.get("alice", tool.id).meta  # type: ignore[union-attr]
    assert policy.apply(store, "alice", 200 * H).expired == [tool.id]


def test_capacity_drops_a_superseded_record_before_the_one_in_force(store: MemoryStore) -> None:
    # the stale fact outscored (salience) the correction that superseded it, so
    # capacity dropped the correction and the scope held only the hidden stale value
    now = 100 * H
    fix = make_record(content="we no longer deploy on GKE, we deploy on EKS", created_at=now - H,
                      salience=0.2)  # fmt: skip
    stale = make_record(content="we deploy on GKE", kind="semantic", created_at=now - 2 * H,
                        salience=0.7, superseded=(Superseded(by=fix.id, at=now - H),))  # fmt: skip
    other = make_record(content="our CI is Buildkite", created_at=now - H, salience=0.2)
    store.put_many([stale, fix, other])
    report = EvictionPolicy(max_records=2, salience_floor=0.8).apply(store, "alice", now)
    assert report.dropped == [stale.id]
    assert {r.id for r in store.list("alice")} == {fix.id, other.id}
    # the floor still protects a superseded record: capacity then drops the lowest in force
    store.put(stale.copy(salience=0.9))
    report = EvictionPolicy(max_records=2, salience_floor=0.8).apply(store, "alice", now)
    assert stale.id not in report.dropped and len(report.dropped) == 1


def test_deleting_a_correction_leaves_what_it_superseded_superseded(store: MemoryStore) -> None:
    # an aged-out correction is not a wrong one: lifting its entry would put the
    # stale value back into force (forget() is the way to say it was wrong)
    now = 100 * H
    fix = make_record(content="the standup moved to 9:30", created_at=now - 50 * H, salience=0.2)
    stale = make_record(content="the standup is at 9:00", created_at=now - 51 * H, salience=0.9,
                        superseded=(Superseded(by=fix.id, at=now - 50 * H),))  # fmt: skip
    store.put_many([stale, fix])
    report = EvictionPolicy(episodic_ttl=24, salience_floor=0.8).apply(store, "alice", now)
    assert report.expired == [fix.id]
    kept = store.get("alice", stale.id)
    assert kept is not None and kept.superseded_by == fix.id
