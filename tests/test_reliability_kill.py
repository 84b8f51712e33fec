"""Kill trials: a few real ones per mode, and the accounting that judges them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlab.memory import JsonlStore
from memlab.reliability import kill


@pytest.mark.parametrize(
    ("kind", "mode"),
    [
        ("jsonl", "random"),
        ("jsonl", "compaction"),
        ("jsonl", "torn"),
        ("sqlite", "random"),
        ("sqlite", "transaction"),
    ],
)
def test_a_killed_writer_loses_nothing(tmp_path: Path, kind: str, mode: str) -> None:
    path = tmp_path / ("m.jsonl" if kind == "jsonl" else "m.db")
    model = kill.Model()
    for seed in range(2):
        result = kill.trial(kind, path, model, mode, seed, max_ops=40)
        assert result.failures == 0, result
    assert model.acked > 0


def _log(path: Path, entries: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_the_accounting_finds_lost_half_and_phantom_writes(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    with JsonlStore(path) as s:
        s.put_many(
            [kill._record(rid, "s0", 0, __import__("random").Random(1), 1.0) for rid in ("a", "x")]
        )
    acks = tmp_path / "ack.log"
    model = kill.Model()
    _log(
        acks,
        [
            {"intent": {"op": "put", "ids": ["a", "b"], "scopes": ["s0", "s0"]}},  # b was lost
            {"ack": True},
            {"intent": {"op": "put", "ids": ["c", "d"], "scopes": ["s0", "s0"]}},  # in flight
        ],
    )
    result = kill.verify("jsonl", path, model, acks)
    assert (result.lost, result.phantom, result.half) == (1, 1, 0)  # b lost, x appeared
    with JsonlStore(path) as s:  # half of the in-flight batch
        s.put(kill._record("c", "s0", 0, __import__("random").Random(2), 2.0))
    _log(acks, [{"intent": {"op": "put", "ids": ["c", "d"], "scopes": ["s0", "s0"]}}])
    assert kill.verify("jsonl", path, model, acks).half == 1


def test_an_altered_record_and_a_temp_file_are_failures(tmp_path: Path) -> None:
    import random

    path = tmp_path / "m.jsonl"
    rng = random.Random(3)
    with JsonlStore(path) as s:
        s.put(kill._record("a", "s0", 0, rng, 1.0))
    acks = tmp_path / "ack.log"
    model = kill.Model()
    _log(acks, [{"intent": {"op": "put", "ids": ["a"], "scopes": ["s0"]}}, {"ack": True}])
    assert kill.verify("jsonl", path, model, acks).failures == 0
    _log(acks, [{"intent": {"op": "touch", "ids": ["a"]}}, {"ack": True}])  # never applied
    (tmp_path / "m.jsonl.compact-1").write_text("leftover of a live pid 1")
    result = kill.verify("jsonl", path, model, acks)
    assert result.altered == 1 and result.temp == 1


def test_the_compaction_trap_sits_where_the_store_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlab.memory.stores import files
    from memlab.memory.stores import jsonl as jsonl_module

    monkeypatch.setattr(jsonl_module, "write_whole", jsonl_module.write_whole)  # undone after
    assert jsonl_module.write_whole is files.write_whole
    store = kill.open_store("jsonl", tmp_path / "m.jsonl")
    try:
        kill._arm("jsonl", "compaction", store, __import__("random").Random(0))
        assert jsonl_module.write_whole is not files.write_whole
    finally:
        store.close()
