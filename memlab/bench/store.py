"""`memlab bench store`: the same seeded workload over every store backend.

For each size N (default 1k, 10k, 100k) one scope holds N records and other
scopes hold N/2 more; every backend (memory, jsonl, sqlite, pgvector) gets the
identical records and queries, and each (backend, N) cell runs in a fresh child
process so its peak memory is its own. Measured:

- write throughput: batched (``put_many`` of ``batch`` records, while loading the
  scope) and single (``put`` one at a time, into the loaded store). pgvector
  loads all but the scope's last ``pg_batched`` records with ``bulk_load`` (rows,
  then one HNSW build: bulk/s counts both) and times batched puts of those last
  records into the loaded table, whose live HNSW graphs each row joins;
- recall latency p50/p95 of ``MemoryLayer.recall`` (384 dims,
  800-token budget, touches what it returns, like an agent);
- parity with the exact ranking (InMemoryStore, computed once per size): for
  every query the top-k ranked ids (``touch=False``, ``max_hits=k``). Exact
  backends must match exactly; pgvector reports recall@k for each candidate-pool
  size, with and without the salient+recent additions, and the latency at each;
- store size on disk (``size_bytes``) and peak RSS of the cell's process above
  its baseline after the workload was loaded into memory (for pgvector: the
  client; the server's backend RSS is reported separately).

Cells run with one BLAS thread (see ``run``). Writes ``store.csv`` (one row per measurement), ``store_pool.csv`` (pgvector pool
sweep) and ``store.png`` under the output folder, and prints a summary table.
Timings depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memlab.bench.store_report import chart, summary
from memlab.bench.workload import (
    CORPORA,
    DIMS,
    SALIENCE,
    SCOPE,
    VECTORS,
    Workload,
    make_workload,
)
from memlab.cli.common import OneLineErrors
from memlab.errors import ConfigError, MemlabError
from memlab.lab.files import writable_folder
from memlab.memory.stores.pg.sql import WINDOW, WINDOW_FROM_ROWS

__all__ = ["BACKENDS", "Settings", "main", "run"]

BACKENDS = (
    "memory", "memory-bits", "memory-int8", "jsonl", "sqlite", "sqlite-bits", "sqlite-int8",
    "pgvector",
)  # fmt: skip
# "-bits" / "-int8": the store with ScanPolicy(codes="bits" / "int8"): a sign-bit or an
# int8 scan and an exact float32 re-rank instead of the float32 scan of every row
# (memlab.memory.stores.indexed, memlab.memory.stores.int8_scan).
TOPK = 10


# -- one (backend, N) cell, run in a fresh child process ------------------------------
@dataclass
class Settings:
    """What one bench run measures (see ``main`` for the command-line options)."""

    sizes: list[int]
    backends: list[str]
    queries: int = 50
    pools: list[int] | None = None  # pgvector pool sweep
    pool: int = 200  # the pool of the latency row (MemoryLayer's default)
    extras: int = 50  # pgvector salient and recent additions
    single: int = 1000  # single puts measured
    batch: int = 500  # records per put_many
    pg_batched: int = 5000  # pgvector: records put_many writes after the bulk load
    seed: int = 0
    corpus: str = "clustered"
    salience: str = "estimated"
    topk: int = TOPK
    out: Path = Path("results/bench")
    dsn: str | None = None
    data_dir: str | None = None
    hnsw_m: int = 16
    ef_construction: int = 64
    pg_window: float = WINDOW  # pgvector recency window, half-lives (0: off)
    pg_window_from_rows: int = WINDOW_FROM_ROWS  # table rows from which it applies (0: always)
    progress: bool | None = None  # bars on stderr; None: only when it is a terminal

    @property
    def bars_off(self) -> bool | None:
        """tqdm's ``disable``: True when progress is off, None to decide by the terminal."""
        return None if self.progress is None else not self.progress


def _rss() -> int:
    """Resident set size of this process now, in bytes (Linux), else the peak."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return _peak_rss()


def _peak_rss() -> int:
    """Peak RSS of this process's address space, in bytes.

    Linux's VmHWM starts afresh at exec; ru_maxrss does not (a spawned child
    would report its parent's size at fork), so it is only the fallback.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _percentiles(times: Sequence[float]) -> tuple[float, float]:
    return float(np.percentile(times, 50) * 1e3), float(np.percentile(times, 95) * 1e3)


def _open(backend: str, n: int, tmp: Path, s: Settings, schema: str) -> Any:
    from memlab.memory import InMemoryStore, JsonlStore, SqliteStore

    scan = backend.partition("-")[2] or "float32"
    if backend.startswith("memory"):
        return InMemoryStore(scan=scan)
    if backend == "jsonl":
        return JsonlStore(tmp / f"bench-{n}.jsonl")
    if backend.startswith("sqlite"):
        return SqliteStore(tmp / f"bench-{n}-{scan}.db", scan=scan)
    from memlab.memory.stores.pg import PgVectorStore

    return PgVectorStore(
        s.dsn,
        dims=DIMS,
        schema=schema,
        table=f"bench_{n}",
        salient=s.extras,
        recent=s.extras,
        hnsw_m=s.hnsw_m,
        hnsw_ef_construction=s.ef_construction,
        window=s.pg_window,
        window_from_rows=s.pg_window_from_rows,
    )


def _ranked(layer: Any, queries: Sequence[str], k: int) -> tuple[list[list[str]], list[float]]:
    from memlab.memory import RecallQuery

    out, times = [], []
    for q in queries:
        t = time.perf_counter()
        res = layer.recall(RecallQuery(SCOPE, q, token_budget=1_000_000, max_hits=k), touch=False)
        times.append(time.perf_counter() - t)
        out.append([h.record.id for h in res])
    return out, times


def run_cell(
    backend: str, workload_path: str, ref: list[list[str]], s: Settings, schema: str, tmp: str
) -> dict[str, Any]:
    """Load one backend with one workload and measure it (runs in a child process)."""
    import pickle

    from tqdm import tqdm

    from memlab.memory import MemoryLayer, RecallQuery

    with open(workload_path, "rb") as f:
        w: Workload = pickle.load(f)
    emb = w.embedder()
    base = _rss()
    store = _open(backend, w.n, Path(tmp), s, schema)
    row: dict[str, Any] = {"backend": backend, "records": w.n}
    pool_rows: list[dict[str, Any]] = []
    try:
        label = f"{backend} {w.n:,}"
        start = 0
        row["write_bulk_per_s"] = float("nan")
        with tqdm(
            total=len(w.others) + w.n,
            desc=f"{label}: load",
            unit="rec",
            leave=False,
            disable=s.bars_off,
        ) as bar:
            if backend == "pgvector":
                # Everything but the last pg_batched records goes in as an import
                # (rows first, the HNSW graphs built once): batched puts through
                # live HNSW indexes run at a few hundred rows a second at 1M.
                start = max(0, w.n - s.pg_batched)
                bulk = [*w.others, *w.records[:start]]
                t = time.perf_counter()
                store.bulk_load(bulk, progress=s.progress)
                row["write_bulk_per_s"] = len(bulk) / (time.perf_counter() - t)
                bar.update(len(bulk))
            else:
                _put_batches(store, w.others, s.batch, bar)
            t = time.perf_counter()
            _put_batches(store, w.records[start:], s.batch, bar)
            row["write_batched_per_s"] = (w.n - start) / (time.perf_counter() - t)
        if backend == "pgvector":
            store.analyze()  # what autovacuum does soon after a bulk load
        layer = MemoryLayer(store, emb, clock=lambda: w.now, pool=s.pool)
        t = time.perf_counter()
        layer.recall(RecallQuery(SCOPE, w.queries[0]), touch=False)
        # The cold recall after the load: for scan="int8" it builds the blocks.
        row["first_recall_ms"] = (time.perf_counter() - t) * 1e3
        for q in w.queries:  # warm caches and the query-embedding cache
            layer.recall(RecallQuery(SCOPE, q), touch=False)
        got, _ = _ranked(layer, w.queries, s.topk)
        row["parity_identical"] = float(np.mean([a == b for a, b in zip(got, ref, strict=True)]))
        row["recall_at_k"] = float(
            np.mean([len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(got, ref, strict=True)])
        )
        if backend == "pgvector":
            for pool in s.pools or []:
                for extras in (s.extras, 0):
                    store.salient = store.recent = extras
                    layer.pool = pool
                    _ranked(layer, w.queries[:5], s.topk)  # warm
                    got, times = _ranked(layer, w.queries, s.topk)
                    p50, p95 = _percentiles(times)
                    pool_rows.append(
                        {
                            "records": w.n,
                            "pool": pool,
                            "extras": extras,
                            "recall_at_k": float(
                                np.mean(
                                    [
                                        len(set(a) & set(b)) / max(1, len(b))
                                        for a, b in zip(got, ref, strict=True)
                                    ]
                                )
                            ),
                            "p50_ms": p50,
                            "p95_ms": p95,
                        }
                    )
            store.salient = store.recent = s.extras
            layer.pool = s.pool
        times = []
        for q in tqdm(w.queries * 2, desc=f"{label}: recall", leave=False, disable=s.bars_off):
            t = time.perf_counter()
            layer.recall(RecallQuery(SCOPE, q))  # an agent's recall: 800 tokens, touches
            times.append(time.perf_counter() - t)
        row["recall_p50_ms"], row["recall_p95_ms"] = _percentiles(times)
        t = time.perf_counter()
        for r in tqdm(w.extra, desc=f"{label}: single puts", leave=False, disable=s.bars_off):
            store.put(r)
        row["write_single_per_s"] = len(w.extra) / (time.perf_counter() - t)
        row["size_mb"] = store.size_bytes() / 1e6
        row["peak_rss_mb"] = max(0, _peak_rss() - base) / 1e6
        row["server_rss_mb"] = _server_rss(store) if backend == "pgvector" else float("nan")
    finally:
        store.close()
    row["pool_rows"] = pool_rows
    return row


def _put_batches(store: Any, records: Sequence[Any], batch: int, bar: Any) -> None:
    for i in range(0, len(records), batch):
        chunk = records[i : i + batch]
        store.put_many(chunk)
        bar.update(len(chunk))


def _server_rss(store: Any) -> float:
    """RSS of the PostgreSQL backend serving the store's connection (local servers)."""
    try:
        import psutil

        pid = store._db().info.backend_pid
        return float(psutil.Process(pid).memory_info().rss / 1e6)
    except Exception:
        return float("nan")


# -- the driver ------------------------------------------------------------------------
def reference(w: Workload, k: int) -> list[list[str]]:
    """The exact top-k ids of every query (InMemoryStore, touch=False)."""
    from memlab.memory import InMemoryStore, MemoryLayer

    store = InMemoryStore()
    store.put_many(w.others)
    store.put_many(w.records)
    return _ranked(MemoryLayer(store, w.embedder(), clock=lambda: w.now), w.queries, k)[0]


def _pg_target(s: Settings) -> tuple[str, Callable[[], None]]:
    """The DSN to benchmark against and a cleanup that drops the bench schema."""
    from memlab.errors import require

    psycopg = require("psycopg", feature="the pgvector benchmark", extra="pg")
    dsn = s.dsn or os.environ.get("MEMLAB_PG_DSN") or None
    if dsn is None:
        from memlab.memory.stores.pg.server import embedded_dsn

        dsn = embedded_dsn(s.data_dir)
    schema = f"memlab_bench_{os.getpid()}"

    def drop() -> None:
        from psycopg import sql

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    return dsn, drop


def run(s: Settings) -> tuple[Any, Any]:
    """Run every (size, backend) cell; return (summary table, pool sweep table)."""
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    import pandas as pd
    from tqdm import tqdm

    for b in s.backends:
        if b not in BACKENDS:
            raise ConfigError(f"unknown backend {b!r}; choose from {', '.join(BACKENDS)}")
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    schema = f"memlab_bench_{os.getpid()}"
    if "pgvector" in s.backends:
        s.dsn, cleanup = _pg_target(s)
    rows, pool_rows = [], []
    # One BLAS thread in the cells: on a small, busy machine OpenBLAS's threaded
    # matrix-vector product spins for cores that are taken and gets ~40x slower,
    # which would measure the machine's load rather than the store.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    ctx = mp.get_context("spawn")
    try:
        with tempfile.TemporaryDirectory(prefix="memlab-bench-") as tmp:
            cells = tqdm(
                total=len(s.sizes) * len(s.backends),
                desc="bench store",
                unit="cell",
                disable=s.bars_off,
            )
            for n in s.sizes:
                cells.set_postfix_str(f"workload {n:,}")
                w = make_workload(
                    n,
                    seed=s.seed,
                    queries=s.queries,
                    single=s.single,
                    corpus=s.corpus,
                    salience=s.salience,
                )
                ref = reference(w, s.topk)
                path = os.path.join(tmp, f"workload-{n}.pkl")
                with open(path, "wb") as f:
                    pickle.dump(w, f, protocol=pickle.HIGHEST_PROTOCOL)
                del w
                for backend in s.backends:
                    cells.set_postfix_str(f"{backend} {n:,}")
                    # A fresh process per cell: its peak memory is its own.
                    with ProcessPoolExecutor(1, mp_context=ctx) as ex:
                        row = ex.submit(run_cell, backend, path, ref, s, schema, tmp).result()
                    pool_rows += row.pop("pool_rows")
                    rows.append(row)
                    cells.update()
                os.unlink(path)
            cells.close()
    except BaseException:
        # The failure to report is the cell's (an unreachable server, ...): dropping
        # the schema then fails the same way, and must not replace it.
        with contextlib.suppress(Exception):
            cleanup()
        raise
    cleanup()
    return pd.DataFrame(rows), pd.DataFrame(pool_rows)


def _ints(text: str, name: str) -> list[int]:
    try:
        values = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--{name} takes comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ConfigError(f"--{name} needs positive integers, got {text!r}")
    return values


def _check_memory(n: int, queries: int) -> None:
    """Refuse a workload whose vectors alone (float32, the scope's ``n`` records,
    ``n / 2`` in other scopes and the queries) exceed this machine's memory, before
    any cell runs (it used to fail with a MemoryError after the smaller sizes ran)."""
    need = (n + max(100, n // 2) + queries) * DIMS * 4
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if need > have:
        raise ConfigError(
            f"--sizes {n:,} (and --queries {queries:,}) needs more than {need / 2**30:,.1f} GB "
            f"for the workload's vectors alone; this machine has {have / 2**30:,.1f} GB. "
            "Choose smaller sizes"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``memlab bench store [options]``; returns the exit code."""
    ap = OneLineErrors(
        prog="memlab bench store",
        description=(
            "Compare the store backends (memory, jsonl, sqlite, pgvector; memory-bits and "
            "sqlite-bits: the sign-bit scan; memory-int8 and sqlite-int8: the int8 scan, "
            "needing memlab[int8]) on one seeded "
            "workload: write throughput, recall latency, parity with the exact ranking, size "
            "and memory. Writes store.csv, store_pool.csv and store.png under --out. Progress "
            "bars appear only on a terminal."
        ),
    )
    ap.add_argument("--sizes", default="1000,10000,100000", help="records in the scope")
    ap.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma-separated backends to compare"
    )
    ap.add_argument("--queries", type=int, default=50, help="recall queries per size")
    ap.add_argument("--pools", default="50,100,200,400", help="pgvector pool sweep")
    ap.add_argument("--pool", type=int, default=200, help="pool of the latency measurement")
    ap.add_argument("--extras", type=int, default=50, help="pgvector salient/recent additions")
    ap.add_argument("--single", type=int, default=1000, help="single puts to time")
    ap.add_argument("--batch", type=int, default=500, help="records per put_many")
    ap.add_argument(
        "--pg-batched",
        type=int,
        default=5000,
        help="pgvector: the scope's last records, written by put_many into the loaded "
        "table and timed as batched/s; the rest goes in by bulk_load (bulk/s)",
    )
    ap.add_argument(
        "--corpus",
        choices=CORPORA,
        default="clustered",
        help="where the vectors come from: MiniLM-calibrated clusters, or the hash "
        "embedder on topical (topics) or near-identical (flat) lines",
    )
    ap.add_argument(
        "--salience",
        choices=SALIENCE,
        default="estimated",
        help="salience drawn as memlab estimates it on real chat turns, or uniform",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the workload")
    ap.add_argument("--out", default="results/bench", help="output folder")
    ap.add_argument(
        "--dsn", default=None, help="PostgreSQL DSN (default: $MEMLAB_PG_DSN, else embedded)"
    )
    ap.add_argument("--data-dir", default=None, help="embedded server data directory")
    ap.add_argument("--hnsw-m", type=int, default=16, help="pgvector HNSW m")
    ap.add_argument("--ef-construction", type=int, default=64, help="pgvector HNSW ef_construction")
    ap.add_argument(
        "--pg-window",
        type=float,
        default=WINDOW,
        help=f"pgvector recency window in half-lives (0: off; default {WINDOW:g}, the store's)",
    )
    ap.add_argument(
        "--pg-window-from-rows",
        type=int,
        default=WINDOW_FROM_ROWS,
        help="table rows from which the window applies (0: always; default "
        f"{WINDOW_FROM_ROWS:,}, the store's)",
    )
    ap.add_argument(
        "--no-progress",
        dest="progress",
        action="store_const",
        const=False,
        default=None,
        help="no progress bars (they only appear on a terminal anyway)",
    )
    args = ap.parse_args(list(argv) if argv is not None else None)
    for name, low in [
        ("queries", 1),
        ("pool", 1),
        ("extras", 0),
        ("single", 1),
        ("batch", 1),
        ("pg_batched", 1),
        ("seed", 0),
    ]:
        if getattr(args, name) < low:
            raise ConfigError(f"--{name} must be >= {low}, got {getattr(args, name)}")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends:
        raise ConfigError(f"--backends needs at least one of {', '.join(BACKENDS)}")
    if "pgvector" in backends:  # refused now, not after the other backends' cells ran
        from memlab.memory.stores.pg.store import check_settings

        check_settings(
            salient=args.extras,
            recent=args.extras,
            window=args.pg_window,
            window_from_rows=args.pg_window_from_rows,
            hnsw_m=args.hnsw_m,
            hnsw_ef_construction=args.ef_construction,
        )
    sizes = _ints(args.sizes, "sizes")
    _check_memory(max(sizes), args.queries)
    # Checked now, not after the run: a default run takes minutes.
    writable_folder(args.out, "--out")
    s = Settings(
        sizes=sizes,
        backends=backends,
        queries=args.queries,
        pools=_ints(args.pools, "pools"),
        pool=args.pool,
        extras=args.extras,
        single=args.single,
        batch=args.batch,
        pg_batched=args.pg_batched,
        seed=args.seed,
        corpus=args.corpus,
        salience=args.salience,
        out=Path(args.out),
        dsn=args.dsn,
        data_dir=args.data_dir,
        hnsw_m=args.hnsw_m,
        ef_construction=args.ef_construction,
        pg_window=args.pg_window,
        pg_window_from_rows=args.pg_window_from_rows,
        progress=args.progress,
    )
    table, pools = run(s)
    s.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(s.out / "store.csv", index=False)
    pools.to_csv(s.out / "store_pool.csv", index=False)
    chart(table, pools, s.out / "store.png", VECTORS[s.corpus])
    print(summary(table, pools, s))
    print(f"\nwritten: {s.out / 'store.csv'}, {s.out / 'store_pool.csv'}, {s.out / 'store.png'}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except MemlabError as exc:
        print(f"memlab: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
