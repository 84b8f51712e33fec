"""SIGKILL trials: a writing process is killed, and what it acknowledged must be there.

A forked child writes to a store in a loop (batches of new records, updates,
touches, archives, deletes over five scopes). Before each operation it logs its
intent to an acknowledgement file, after it returns it logs the acknowledgement
(each log line is one ``write`` call, so a killed child's log is complete up to
the kill). The child is killed

- ``random``: by the parent, at a random moment after a random number of
  operations;
- ``compaction`` (JSONL): by itself inside a compaction, before the temporary
  file is renamed over the log, after the rename, or halfway through writing it;
- ``torn line`` (JSONL): by itself after writing half of an operation's line;
- ``transaction`` (SQLite): by itself from SQLite's progress handler, in the
  middle of a write transaction.

Then the store is reopened and compared with the model of acknowledged writes:
every acknowledged record is there with the acknowledged content, touches and
archive state (``lost``, ``altered``); the one operation in flight is applied
entirely or not at all (``half``: a batch partly present); nothing else appeared
(``phantom``); the store reopens (``reopen``); no temporary file is left after
the reopen (``temp``). Trials continue on the same file, so later trials crash a
store that earlier crashes left behind.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import random
import signal
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memlab.memory import JsonlStore, MemoryRecord, SqliteStore
from memlab.memory.stores import jsonl as jsonl_module
from memlab.memory.stores.base import MemoryStore
from memlab.reliability import Row, make_record

SCOPES = [f"s{i}" for i in range(5)]
DIMS = 8
MAX_LIVE = 300


def open_store(kind: str, path: Path) -> MemoryStore:
    if kind == "jsonl":
        return JsonlStore(path, compact_min_lines=100, compact_ratio=1.2)
    return SqliteStore(path)


def _record(rid: str, scope: str, version: int, rng: random.Random, at: float) -> MemoryRecord:
    vec = np.frombuffer(rid.encode().ljust(DIMS * 4, b"x")[: DIMS * 4], dtype=np.uint8)
    emb = (vec[:DIMS].astype(np.float32) + 1.0) / 256.0
    return make_record(rid, f"{rid} v{version} " + "z" * rng.randrange(0, 300), scope, emb, at=at)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(kind: str, mode: str, store: MemoryStore, rng: random.Random) -> None:
    """Set the trap a targeted trial dies in."""
    if mode == "compaction":
        assert isinstance(store, JsonlStore)
        point = rng.choice(["before-rename", "after-rename", "mid-write"])
        real_write_whole = jsonl_module.write_whole
        real_replace, real_write = os.replace, os.write

        def write_whole(path: Path, kind: str, lines: list[bytes], *, link: bool) -> int:
            if kind != "compact":
                return real_write_whole(path, kind, lines, link=link)
            if point == "before-rename":
                os.replace = lambda *a, **k: _die()
            elif point == "after-rename":

                def replace_then_die(*a: Any, **k: Any) -> None:
                    real_replace(*a, **k)
                    _die()

                os.replace = replace_then_die
            else:

                def half_then_die(fd: int, data: Any) -> int:
                    real_write(fd, bytes(data[: max(1, len(data) // 2)]))
                    _die()
                    return 0

                os.write = half_then_die
            return real_write_whole(path, kind, lines, link=link)

        # the store calls the name its module imported: patch it there
        jsonl_module.write_whole = write_whole
    elif mode == "torn":
        real_write = os.write
        countdown = [rng.randrange(3, 60)]

        def torn_write(fd: int, data: Any) -> int:
            countdown[0] -= 1
            if countdown[0] <= 0 and len(data) > 2:
                real_write(fd, bytes(data[: rng.randrange(1, len(data) - 1)]))
                _die()
            return real_write(fd, data)

        os.write = torn_write
    elif mode == "transaction":
        assert isinstance(store, SqliteStore)
        steps = [rng.randrange(100, 3_000)]

        def progress() -> int:
            steps[0] -= 1
            if steps[0] <= 0:
                _die()
            return 0

        store._db.set_progress_handler(progress, 50)


def _child(kind: str, path: str, ack_path: str, seed: int, mode: str) -> None:
    warnings.simplefilter("ignore")  # a torn line left by the previous kill is expected
    rng = random.Random(seed)
    store = open_store(kind, Path(path))
    live: dict[str, str] = {}
    for scope in SCOPES:
        for r in store.list(scope, include_archived=True):
            live[r.id] = scope
    versions: dict[str, int] = {}
    at = time.time()
    if mode != "random":
        _arm(kind, mode, store, rng)
    with open(ack_path, "a", buffering=1) as ack:
        for i in range(1_000_000):
            roll = rng.random()
            ids = list(live)
            if len(live) > MAX_LIVE:
                roll = 0.95
            if roll < 0.5 or not ids:
                batch = [
                    _record(f"{seed}-{i}-{j}", rng.choice(SCOPES), 0, rng, at + i)
                    for j in range(rng.randrange(1, 9))
                ]
                op: dict[str, Any] = {
                    "op": "put",
                    "ids": [r.id for r in batch],
                    "scopes": [r.scope for r in batch],
                }
                ack.write(json.dumps({"intent": op}) + "\n")
                store.put_many(batch)
                live.update({r.id: r.scope for r in batch})
            elif roll < 0.65:
                rid = rng.choice(ids)
                version = versions.get(rid, 0) + 1
                current = store.get(live[rid], rid)
                assert current is not None
                new = _record(rid, live[rid], version, rng, current.created_at)
                new = new.copy(
                    access_count=current.access_count,
                    last_accessed_at=current.last_accessed_at,
                    archived_at=current.archived_at,
                )
                op = {"op": "update", "id": rid, "content": new.content}
                ack.write(json.dumps({"intent": op}) + "\n")
                store.put(new)
                versions[rid] = version
            elif roll < 0.85:
                chosen = rng.sample(ids, min(len(ids), rng.randrange(1, 4)))
                scope = live[chosen[0]]
                chosen = [c for c in chosen if live[c] == scope]
                op = {"op": "touch", "ids": chosen}
                ack.write(json.dumps({"intent": op}) + "\n")
                store.touch(scope, chosen, at + i)
            elif roll < 0.9:
                rid = rng.choice(ids)
                op = {"op": "archive", "ids": [rid]}
                ack.write(json.dumps({"intent": op}) + "\n")
                store.mark_archived(live[rid], [rid], at + i)
            else:
                chosen = rng.sample(ids, min(len(ids), rng.randrange(1, 3)))
                scope = live[chosen[0]]
                chosen = [c for c in chosen if live[c] == scope]
                op = {"op": "delete", "ids": chosen}
                ack.write(json.dumps({"intent": op}) + "\n")
                store.delete(scope, chosen)
                for c in chosen:
                    live.pop(c, None)
            ack.write('{"ack": true}\n')


@dataclass
class Expected:
    """What a record must look like, from acknowledged operations."""

    scope: str
    content: str
    touches: int = 0
    archived: bool = False


@dataclass
class Model:
    records: dict[str, Expected] = field(default_factory=dict)
    acked: int = 0  # acknowledged operations so far

    def apply(self, op: dict[str, Any], content: dict[str, str]) -> None:
        kind = op["op"]
        if kind == "put":
            for rid, scope in zip(op["ids"], op["scopes"], strict=True):
                self.records[rid] = Expected(scope, content[rid])
        elif kind == "update":
            self.records[op["id"]].content = op["content"]
        elif kind == "touch":
            for rid in op["ids"]:
                self.records[rid].touches += 1
        elif kind == "archive":
            for rid in op["ids"]:
                self.records[rid].archived = True
        elif kind == "delete":
            for rid in op["ids"]:
                self.records.pop(rid, None)


@dataclass
class TrialResult:
    acked_ops: int = 0
    lost: int = 0
    altered: int = 0
    half: int = 0
    phantom: int = 0
    reopen: int = 0
    temp: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> int:
        return self.lost + self.altered + self.half + self.phantom + self.reopen + self.temp


def _read_acks(ack_path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The acknowledged operations, and the one in flight (or None)."""
    done: list[dict[str, Any]] = []
    pending = None
    for line in ack_path.read_text().splitlines():
        if not line.endswith("}"):
            break  # the child died while writing its log line
        entry = json.loads(line)
        if "intent" in entry:
            pending = entry["intent"]
        elif pending is not None:
            done.append(pending)
            pending = None
    return done, pending


def _state(store: MemoryStore) -> dict[str, MemoryRecord]:
    out = {}
    for scope in store.scopes():
        for r in store.list(scope, include_archived=True):
            out[r.id] = r
    return out


def verify(kind: str, path: Path, model: Model, ack_path: Path) -> TrialResult:
    """Reopen the store after a kill and compare it with the model; then make the
    model follow whatever happened to the operation in flight."""
    result = TrialResult()
    done, pending = _read_acks(ack_path)
    result.acked_ops = len(done)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = open_store(kind, path)
        try:
            actual = _state(store)
        finally:
            store.close()
    except Exception as exc:  # the store must always reopen
        result.reopen = 1
        result.notes.append(f"reopen failed: {type(exc).__name__}: {exc}")
        return result
    result.temp = sum(
        1 for f in path.parent.iterdir() if ".compact-" in f.name or ".create-" in f.name
    )
    contents = {rid: r.content for rid, r in actual.items()}
    for op in done:
        if op["op"] == "put":
            for rid in op["ids"]:
                if rid not in contents:  # lost: remember it as missing content
                    contents[rid] = "<lost>"
        model.apply(op, contents)
    in_flight: set[str] = set()
    if pending is not None:
        in_flight = set(pending.get("ids", [])) | ({pending["id"]} if "id" in pending else set())
        if pending["op"] == "put":
            present = [rid in actual for rid in pending["ids"]]
            if any(present) and not all(present):
                result.half += 1
    gone = []
    for rid, want in model.records.items():
        got = actual.get(rid)
        if got is None:
            if not (pending and pending["op"] == "delete" and rid in in_flight):
                result.lost += 1
                gone.append(rid)  # counted once, not again in every later trial
            continue
        ok = got.scope == want.scope
        flight = pending["op"] if pending is not None and rid in in_flight else None
        ok &= got.content == want.content or (
            flight == "update" and pending is not None and got.content == pending["content"]
        )
        ok &= got.access_count == want.touches or (
            flight == "touch" and got.access_count == want.touches + 1
        )
        ok &= (got.archived_at is not None) == want.archived or flight == "archive"
        if not ok:
            result.altered += 1
    for rid in gone:
        del model.records[rid]
    for rid in actual:
        if rid not in model.records and not (
            pending and pending["op"] == "put" and rid in in_flight
        ):
            result.phantom += 1
    # The operation in flight took effect or not; the model follows the store.
    if pending is not None:
        if pending["op"] == "put":
            if all(rid in actual for rid in pending["ids"]):
                model.apply(pending, {rid: actual[rid].content for rid in pending["ids"]})
        elif pending["op"] == "delete":
            for rid in pending["ids"]:
                if rid not in actual:
                    model.records.pop(rid, None)
        else:
            for rid in in_flight:
                if rid in actual and rid in model.records:
                    got = actual[rid]
                    model.records[rid].content = got.content
                    model.records[rid].touches = got.access_count
                    model.records[rid].archived = got.archived_at is not None
    model.acked += len(done)
    ack_path.write_text("")
    return result


def trial(
    kind: str,
    path: Path,
    model: Model,
    mode: str,
    seed: int,
    *,
    min_ops: int = 5,
    max_ops: int = 150,
    timeout: float = 20.0,
) -> TrialResult:
    """One kill trial on the store at ``path`` (the model carries over)."""
    rng = random.Random(seed)
    ack_path = path.parent / "ack.log"
    ack_path.touch()
    ctx = mp.get_context("fork")
    proc = ctx.Process(target=_child, args=(kind, str(path), str(ack_path), seed, mode))
    proc.start()
    deadline = time.monotonic() + timeout
    wanted = rng.randrange(min_ops, max_ops)
    while proc.is_alive() and time.monotonic() < deadline:
        if mode == "random" and ack_path.read_bytes().count(b'"ack"') >= wanted:
            time.sleep(rng.random() * 0.01)
            break
        time.sleep(0.002)
    if proc.is_alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
    proc.join()
    result = verify(kind, path, model, ack_path)
    if proc.exitcode != -signal.SIGKILL:
        result.notes.append(f"the writer exited with {proc.exitcode}, not by SIGKILL")
        result.reopen += 1
    return result


PLANS: dict[str, list[tuple[str, float]]] = {
    # (mode, share of the trials)
    "jsonl": [("random", 0.55), ("compaction", 0.25), ("torn", 0.2)],
    "sqlite": [("random", 0.55), ("transaction", 0.45)],
}
LABELS = {
    "random": "kill: random points",
    "compaction": "kill: inside compaction",
    "torn": "kill: mid-line (torn batch)",
    "transaction": "kill: inside a transaction",
}


def run(
    folder: Path,
    trials: int = 110,
    seed: int = 13,
    stores: tuple[str, ...] = ("jsonl", "sqlite"),
    progress: Callable[[int], None] | None = None,
) -> list[Row]:
    """``trials`` kill trials per store, split between its modes; one row per mode."""
    rows = []
    for kind in stores:
        path = folder / f"kill-{kind}" / ("memory.jsonl" if kind == "jsonl" else "memory.db")
        path.parent.mkdir(parents=True, exist_ok=True)
        model = Model()
        plan = PLANS[kind]
        counts = [max(1, round(trials * share)) for _, share in plan]
        counts[0] += trials - sum(counts)
        schedule = [mode for (mode, _), n in zip(plan, counts, strict=True) for _ in range(n)]
        random.Random(seed).shuffle(schedule)
        per_mode: dict[str, list[TrialResult]] = {mode: [] for mode, _ in plan}
        started = {mode: 0.0 for mode, _ in plan}
        for i, mode in enumerate(schedule):
            t0 = time.perf_counter()
            per_mode[mode].append(trial(kind, path, model, mode, seed * 100_000 + i))
            started[mode] += time.perf_counter() - t0
            if progress is not None:
                progress(1)
        for mode, results in per_mode.items():
            keys = ("lost", "altered", "half", "phantom", "reopen", "temp")
            totals = {k: sum(getattr(r, k) for r in results) for k in keys}
            notes = [n for r in results for n in r.notes][:3]
            rows.append(
                Row(
                    LABELS[mode],
                    kind,
                    len(results),
                    sum(r.acked_ops for r in results),
                    sum(r.failures for r in results),
                    ", ".join(f"{k} {v}" for k, v in totals.items())
                    + (f"; {'; '.join(notes)}" if notes else ""),
                    started[mode],
                )
            )
    return rows
