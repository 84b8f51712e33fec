"""A full disk, simulated with ``RLIMIT_FSIZE`` in a child process.

The child caps the size of any file it writes (``setrlimit(RLIMIT_FSIZE)``,
``SIGXFSZ`` ignored, so a write past the cap fails with ``EFBIG`` as it would
with ``ENOSPC``) and then writes records, batches and touches until well past
the cap. Every failure must be a ``MemlabError`` (no raw ``OSError`` or
``sqlite3.OperationalError``); what the writer's handle shows afterwards must be
exactly the acknowledged writes (no phantom records, defect 1 of issue 13); and
a reopened store must hold exactly those too (nothing lost).
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import MemlabError
from memlab.memory import JsonlStore, MemoryRecord, SqliteStore
from memlab.memory.stores.base import MemoryStore
from memlab.reliability import Row, make_record

DIMS = 8


def _open(kind: str, path: Path) -> MemoryStore:
    return JsonlStore(path, compact_min_lines=60) if kind == "jsonl" else SqliteStore(path)


def _record(i: int, pad: int) -> MemoryRecord:
    return make_record(f"r{i}", f"fact {i} " + "x" * pad, "alice", np.full(DIMS, 0.25), at=i)


def _child(kind: str, path: str, limit: int, conn: Any) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    acked: set[str] = set()
    attempts = errors = 0
    raw: list[str] = []
    visible: list[str] = []
    try:
        store = _open(kind, Path(path))
        try:
            i = 0
            while attempts < 600:
                size = 1 + (attempts % 4 == 0) * 4  # every fourth write is a batch of 5
                batch = [_record(i + j, 150 + (i * 37) % 400) for j in range(size)]
                i += size
                attempts += 1
                try:
                    store.put_many(batch)
                    acked.update(r.id for r in batch)
                except MemlabError:
                    errors += 1
                except Exception as exc:
                    raw.append(f"{type(exc).__name__}: {exc}")
                if attempts % 7 == 0 and acked:
                    try:
                        store.touch("alice", [sorted(acked)[0]], float(attempts))
                    except MemlabError:
                        errors += 1
                    except Exception as exc:
                        raw.append(f"{type(exc).__name__}: {exc}")
            visible = [r.id for r in store.list("alice", include_archived=True)]
        finally:
            store.close()
    except Exception as exc:
        raw.append(f"{type(exc).__name__}: {exc}")
    conn.send((sorted(acked), attempts, errors, raw, visible))


def trial(kind: str, folder: Path, limit: int) -> dict[str, Any]:
    path = folder / ("memory.jsonl" if kind == "jsonl" else "memory.db")
    if kind == "sqlite":
        SqliteStore(path).close()  # created before the cap (its header alone is 4 kB)
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(kind, str(path), limit, child))
    proc.start()
    acked, attempts, errors, raw, visible = parent.recv()
    proc.join()
    phantom = len(set(visible) - set(acked))
    missing_in_writer = len(set(acked) - set(visible))
    try:
        store = _open(kind, path)
        try:
            stored = {r.id for r in store.list("alice", include_archived=True)}
        finally:
            store.close()
        lost, extra, reopen = len(set(acked) - stored), len(stored - set(acked)), 0
    except MemlabError as exc:
        lost, extra, reopen = 0, 0, 1
        raw.append(f"reopen: {exc}")
    return {
        "ops": attempts,
        "errors": errors,
        "raw": raw,
        "phantom": phantom + extra,
        "lost": lost + missing_in_writer,
        "reopen": reopen,
        "refused": errors > 0,
    }


def run(folder: Path, trials: int = 6, stores: tuple[str, ...] = ("jsonl", "sqlite")) -> list[Row]:
    rows = []
    for kind in stores:
        t0 = time.perf_counter()
        results = []
        for t in range(trials):
            case = folder / f"diskfull-{kind}-{t}"
            case.mkdir(parents=True, exist_ok=True)
            limit = 40_000 + t * 23_000  # different caps hit different writes
            results.append(trial(kind, case, limit))
        raw = [r for res in results for r in res["raw"]]
        phantom = sum(r["phantom"] for r in results)
        lost = sum(r["lost"] for r in results)
        reopen = sum(r["reopen"] for r in results)
        never_full = sum(not r["refused"] for r in results)
        rows.append(
            Row(
                "disk full (RLIMIT_FSIZE)",
                kind,
                len(results),
                sum(r["ops"] for r in results),
                phantom + lost + reopen + len(raw) + never_full,
                f"phantom {phantom}, lost {lost}, raw errors {len(raw)}, reopen failures {reopen}, "
                f"refused writes {sum(r['errors'] for r in results)}"
                + (f"; first raw: {raw[0][:100]}" if raw else ""),
                time.perf_counter() - t0,
            )
        )
    return rows
