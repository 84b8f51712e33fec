"""What `memlab bench store` shows: the four-panel chart (``store.png``) and the
printed summary with the targets (met or missed). The measuring is
``memlab.bench.store``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memlab.bench.workload import DIMS, VECTORS

if TYPE_CHECKING:
    from memlab.bench.store import Settings


def chart(table: Any, pools: Any, path: Path, vectors: str = "hash embedder") -> None:
    """Four panels: recall latency, write throughput, pgvector pool trade-off, size."""
    import matplotlib

    from memlab.bench.store import BACKENDS  # the colours keep the backends' order

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {b: colors[i] for i, b in enumerate(BACKENDS)}
    for backend, g in table.groupby("backend", sort=False):
        g = g.sort_values("records")
        c = color.get(str(backend), "black")
        ax[0, 0].plot(g.records, g.recall_p50_ms, "o-", color=c, label=f"{backend} p50")
        ax[0, 0].plot(g.records, g.recall_p95_ms, "x:", color=c)
        ax[0, 1].plot(g.records, g.write_batched_per_s, "o-", color=c, label=f"{backend} batched")
        ax[0, 1].plot(g.records, g.write_single_per_s, "x:", color=c)
        if g.write_bulk_per_s.notna().any():
            ax[0, 1].plot(g.records, g.write_bulk_per_s, "s--", color=c, label=f"{backend} bulk")
        on_disk = g[g.size_mb > 0]
        if len(on_disk):
            ax[1, 1].plot(on_disk.records, on_disk.size_mb, "o-", color=c, label=backend)
    ax[0, 0].set(title="recall latency (p50 solid, p95 dotted)", ylabel="ms")
    ax[0, 1].set(
        title="writes (batched solid, single dotted, bulk load dashed)", ylabel="records / s"
    )
    ax[1, 1].set(title="store size on disk (InMemoryStore: none)", ylabel="MB")
    for a in (ax[0, 0], ax[0, 1], ax[1, 1]):
        a.set(xscale="log", yscale="log", xlabel="records in the recalled scope")
        a.grid(True, which="both", alpha=0.3)
        if a.get_legend_handles_labels()[0]:  # memory alone draws no size line
            a.legend(fontsize=8)
    a = ax[1, 0]
    if len(pools):
        for i, (n, by_n) in enumerate(pools.groupby("records")):
            nc = colors[(i + len(BACKENDS)) % len(colors)]
            for extras, g in by_n.groupby("extras"):
                g = g.sort_values("pool")
                a.plot(
                    g["pool"],
                    g.recall_at_k,
                    "o-" if extras else "x--",
                    color=nc,
                    label=f"{n:,} records{', + salient/recent' if extras else ''}",
                )
                if extras:
                    for x, y, ms in zip(g["pool"], g.recall_at_k, g.p50_ms, strict=True):
                        a.annotate(
                            f"{ms:.0f} ms", (x, y), textcoords="offset points", xytext=(4, -10),
                            fontsize=7, color=nc,
                        )  # fmt: skip
        a.axhline(0.95, color="grey", lw=0.8, ls=":")
        # Zoom on the range measured: the differences that matter are a few points.
        low = float(np.floor(pools.recall_at_k.min() * 10) / 10)
        a.set(xscale="log", ylim=(max(0.0, low - 0.05), 1.02))
        ticks = sorted(int(p) for p in pools["pool"].unique())
        a.set_xticks(ticks, [str(t) for t in ticks])
        a.minorticks_off()
        a.legend(fontsize=8)
    a.set(
        title="pgvector: recall@10 against exact vs candidate pool (labels: p50)",
        xlabel="pool (nearest neighbours fetched)",
        ylabel="recall@10",
    )
    a.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"memlab bench store ({vectors}, {DIMS} dims; shared machine)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary(table: Any, pools: Any, s: Settings) -> str:
    """The printed report: the table, the pool trade-off and the targets."""
    import pandas as pd

    cols = {
        "backend": "backend",
        "records": "records",
        "write_single_per_s": "single/s",
        "write_batched_per_s": "batched/s",
        "write_bulk_per_s": "bulk/s",
        "recall_p50_ms": "p50 ms",
        "recall_p95_ms": "p95 ms",
        "first_recall_ms": "first ms",
        "parity_identical": "identical",
        "recall_at_k": f"recall@{s.topk}",
        "size_mb": "size MB",
        "peak_rss_mb": "peak MB",
        "server_rss_mb": "server MB",
    }
    lines = [
        f"memlab bench store: {s.corpus} corpus ({VECTORS[s.corpus]}, {DIMS} dims), "
        f"{s.queries} queries; pgvector: pool {s.pool} + {s.extras} salient + {s.extras} "
        f"recent, window {s.pg_window:g} half-lives from {s.pg_window_from_rows:,} rows, "
        f"HNSW m={s.hnsw_m} "
        f"ef_construction={s.ef_construction}",
    ]
    with pd.option_context("display.width", 200, "display.float_format", "{:,.2f}".format):
        lines.append(table[list(cols)].rename(columns=cols).to_string(index=False))
        if len(pools):
            lines.append(f"\npgvector recall@{s.topk} against exact, and recall p50 ms, by pool:")
            piv = pools.pivot_table(
                index=["records", "extras"], columns="pool", values=["recall_at_k", "p50_ms"]
            )
            lines.append(piv.to_string())
    pg = table[table.backend == "pgvector"]
    if len(pg) and pg.records.max() >= 100_000:
        r = pg[pg.records == pg.records.max()].iloc[0]
        ok = r.recall_p50_ms < 10 and r.recall_at_k >= 0.95
        lines.append(
            f"\ntarget (pgvector @ {int(r.records):,}: p50 < 10 ms and recall@10 >= 0.95): "
            f"p50 {r.recall_p50_ms:.1f} ms, recall@10 {r.recall_at_k:.3f} -> "
            f"{'MET' if ok else 'MISSED'}"
        )
    big = table[table.records >= 1_000_000]
    for _, r in big.iterrows():  # the issue-18 targets at a million records per scope
        if r.backend == "pgvector":
            goal, ok = (
                "p50 <= 20 ms at recall@10 >= 0.95",
                (r.recall_p50_ms <= 20 and r.recall_at_k >= 0.95),
            )
        elif r.backend.endswith(("-bits", "-int8")):
            goal, ok = (
                "p50 <= 25 ms at recall@10 >= 0.99",
                (r.recall_p50_ms <= 25 and r.recall_at_k >= 0.99),
            )
        else:
            goal, ok = "exact p50 <= 60 ms", r.recall_p50_ms <= 60
        lines.append(
            f"target ({r.backend} @ {int(r.records):,}: {goal}): p50 {r.recall_p50_ms:.1f} ms, "
            f"recall@10 {r.recall_at_k:.3f}, peak RSS {r.peak_rss_mb:,.0f} MB, "
            f"disk {r.size_mb:,.0f} MB -> {'MET' if ok else 'MISSED'}"
        )
    # every in-process backend promises the float32 ranking (the -bits and -int8
    # scans through their bounds); pgvector's HNSW does not
    local = table[table.backend != "pgvector"]
    if len(local):
        same = local.parity_identical == 1.0
        lines.append(
            f"in-process backends with the float32 ranked ids on every query: "
            f"{', '.join(sorted(set(local[same].backend))) or 'none'}"
            + (
                f"; NOT on every query: {', '.join(sorted(set(local[~same].backend)))}"
                if (~same).any()
                else ""
            )
        )
    return "\n".join(lines)
