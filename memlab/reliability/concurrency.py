"""Several writer processes and a compacting process on one store file.

2 and then 4 writer processes each put their own records (one ``put`` per record,
a ``touch`` every tenth), while another process compacts the store in a loop
(JSONL: ``compact()``; SQLite: ``PRAGMA wal_checkpoint(TRUNCATE)`` and now and
then ``VACUUM``). Afterwards every writer's records must all be there, with
their content, and no process may have seen an error (a spurious
``StoreCorrupted`` while the file was intact was defect 2 of issue 13).
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from memlab.memory import JsonlStore, SqliteStore
from memlab.memory.stores.base import MemoryStore
from memlab.reliability import Row, make_record

DIMS = 8


def _open(kind: str, path: Path) -> MemoryStore:
    # Compaction is the other process's job; writers never compact on their own.
    return JsonlStore(path, compact_min_lines=10**9) if kind == "jsonl" else SqliteStore(path)


def _writer(kind: str, path: str, worker: int, n: int, conn: Any) -> None:
    errors: list[str] = []
    written = 0
    try:
        store = _open(kind, Path(path))
        emb = np.full(DIMS, 0.25, dtype=np.float32)
        for i in range(n):
            rid = f"w{worker}-{i}"
            record = make_record(rid, f"worker {worker} fact {i}", f"w{worker}", emb, at=i)
            try:
                store.put(record)
                written += 1
                if i % 10 == 9:
                    store.touch(f"w{worker}", [rid], float(i))
                    store.count(f"w{worker}")
            except Exception as exc:  # counted, and the writer goes on
                errors.append(f"{type(exc).__name__}: {exc}")
        store.close()
    except Exception:
        errors.append(traceback.format_exc(limit=3))
    conn.send((written, errors))


def _compactor(kind: str, path: str, stop: Any, conn: Any) -> None:
    errors: list[str] = []
    rounds = 0
    try:
        if kind == "jsonl":
            store = JsonlStore(path, compact_min_lines=10**9)
            while not stop.is_set():
                try:
                    store.compact()
                    rounds += 1
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.005)
            store.close()
        else:
            db = sqlite3.connect(path, timeout=30, isolation_level=None)
            while not stop.is_set():
                try:
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    if rounds % 20 == 19:
                        db.execute("VACUUM")
                    rounds += 1
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        errors.append(str(exc))
                time.sleep(0.005)
            db.close()
    except Exception:
        errors.append(traceback.format_exc(limit=3))
    conn.send((rounds, errors))


def trial(kind: str, folder: Path, writers: int, per_writer: int) -> Row:
    path = folder / ("memory.jsonl" if kind == "jsonl" else "memory.db")
    _open(kind, path).close()
    if kind == "jsonl":  # the file exists before anyone compacts it
        with JsonlStore(path) as s:
            s.put(make_record("seed", "seed", "seed", np.full(DIMS, 0.25)))
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    pipes = [ctx.Pipe() for _ in range(writers + 1)]
    t0 = time.perf_counter()
    compactor = ctx.Process(target=_compactor, args=(kind, str(path), stop, pipes[0][1]))
    compactor.start()
    procs = [
        ctx.Process(target=_writer, args=(kind, str(path), w, per_writer, pipes[w + 1][1]))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    results = [pipes[w + 1][0].recv() for w in range(writers)]
    for p in procs:
        p.join()
    stop.set()
    rounds, compactor_errors = pipes[0][0].recv()
    compactor.join()
    errors = [e for _, errs in results for e in errs] + compactor_errors
    store = _open(kind, path)
    lost = 0
    try:
        for w in range(writers):
            have = {r.id: r.content for r in store.list(f"w{w}")}
            for i in range(per_writer):
                if have.get(f"w{w}-{i}") != f"worker {w} fact {i}":
                    lost += 1
    finally:
        store.close()
    written = sum(n for n, _ in results)
    failures = lost + len(errors) + (writers * per_writer - written)
    corrupted = sum("StoreCorrupted" in e for e in errors)
    detail = (
        f"lost {lost}, errors {len(errors)} (StoreCorrupted {corrupted}), "
        f"{rounds} compaction rounds"
    )
    if errors:
        detail += f"; first: {errors[0][:120]}"
    return Row(
        f"{writers} writers + compactor",
        kind,
        writers,
        written,
        failures,
        detail,
        time.perf_counter() - t0,
    )


def run(
    folder: Path, per_writer: int = 1500, stores: tuple[str, ...] = ("jsonl", "sqlite")
) -> list[Row]:
    rows = []
    for kind in stores:
        for writers in (2, 4):
            case = folder / f"concurrency-{kind}-{writers}"
            case.mkdir(parents=True, exist_ok=True)
            rows.append(trial(kind, case, writers, per_writer * 2 // writers))
    return rows
