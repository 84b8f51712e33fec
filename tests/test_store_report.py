"""memlab.bench.store_report: the summary's target lines and the chart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from memlab.bench.store import Settings
from memlab.bench.store_report import chart, summary


def _row(backend: str, records: int, p50: float, recall: float, identical: float) -> dict:
    return {
        "backend": backend, "records": records, "write_single_per_s": 100.0,
        "write_batched_per_s": 1000.0,
        "write_bulk_per_s": 2000.0 if backend == "pgvector" else np.nan,
        "recall_p50_ms": p50, "recall_p95_ms": 1.5 * p50, "first_recall_ms": 2 * p50,
        "parity_identical": identical, "recall_at_k": recall,
        "size_mb": 0.0 if backend == "memory" else 10.0, "peak_rss_mb": 50.0,
        "server_rss_mb": 30.0 if backend == "pgvector" else np.nan,
    }  # fmt: skip


def test_summary_says_which_targets_are_met_at_a_million_records(tmp_path: Path) -> None:
    table = pd.DataFrame(
        [
            _row("memory", 1_000_000, 55.0, 1.0, 1.0),  # exact: <= 60 ms
            _row("sqlite-int8", 1_000_000, 30.0, 1.0, 1.0),  # reduced precision: <= 25 ms
            _row("pgvector", 1_000_000, 18.0, 0.96, 0.0),  # <= 20 ms at >= 0.95
            _row("sqlite", 1_000_000, 61.0, 1.0, 0.5),
        ]
    )
    pools = pd.DataFrame(
        [{"records": 1_000_000, "extras": e, "pool": p, "recall_at_k": 0.9, "p50_ms": 10.0}
         for e in (0, 50) for p in (100, 200)]
    )  # fmt: skip
    text = summary(table, pools, Settings(sizes=[1_000_000], backends=list(table.backend)))
    lines = {ln.split(" @ ")[0]: ln for ln in text.splitlines() if ln.startswith("target (")}
    assert lines["target (memory"].endswith("MET")
    assert lines["target (sqlite-int8"].endswith("MISSED")
    # pgvector has two target lines: the 100k one (p50 < 10 ms) and the 1M one
    pg = [ln for ln in text.splitlines() if ln.startswith("target (pgvector")]
    assert len(pg) == 2
    assert pg[0].endswith("MISSED") and "p50 < 10 ms" in pg[0]
    assert pg[1].endswith("MET") and "p50 <= 20 ms" in pg[1]
    assert lines["target (sqlite"].endswith("MISSED")
    assert "pgvector recall@10 against exact" in text
    assert "NOT on every query: sqlite" in text
    chart(table, pools, tmp_path / "store.png")
    assert (tmp_path / "store.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
