"""`memlab bench store` at a tiny size, and its seeded workload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from memlab.benchstore import OTHER_SCOPES, SCOPE, Corpus, flat_lines, make_workload
from memlab.cli import main as cli
from memlab.memory import HashEmbedder


def test_workload_is_seeded_and_scoped() -> None:
    a = make_workload(300, seed=3, queries=5, single=20)
    b = make_workload(300, seed=3, queries=5, single=20)
    assert [r.content for r in a.records] == [r.content for r in b.records]
    assert all(
        np.array_equal(x.embedding, y.embedding) for x, y in zip(a.records, b.records, strict=True)
    )
    assert a.queries == b.queries and len(a.queries) == 5
    assert {r.scope for r in a.records} == {SCOPE} == {r.scope for r in a.extra}
    assert {r.scope for r in a.others} == set(OTHER_SCOPES) and len(a.others) == 150
    assert len(a.extra) == 20
    assert len({r.id for r in a.records + a.others + a.extra}) == 300 + 150 + 20
    assert min(r.created_at for r in a.extra) > max(r.created_at for r in a.records + a.others)
    assert a.now > max(r.created_at for r in a.extra)
    c = make_workload(300, seed=4, queries=5, single=20)
    assert [r.content for r in c.records] != [r.content for r in a.records]


def test_topic_corpus_separates_related_from_unrelated_lines() -> None:
    gen = Corpus(20, seed=0)
    lines, topic_of = gen.draw(400, seed=1)
    assert lines == gen.lines(400, seed=1)
    emb = HashEmbedder(384)
    vecs = emb.embed(lines)
    sims = vecs @ vecs.T
    off = ~np.eye(len(lines), dtype=bool)
    same = np.equal.outer(topic_of, topic_of) & off
    unrelated = sims[~same & off].mean()
    assert unrelated < 0.1 and sims[same].mean() > 1.5 * unrelated
    flat = emb.embed(flat_lines(200, seed=1))
    # The flat vocabulary makes any two lines look alike (the hard case).
    assert (flat @ flat.T)[~np.eye(200, dtype=bool)].mean() > 0.3


def test_bench_store_runs_small_and_writes_table_and_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_server: Any
) -> None:
    pytest.importorskip("psycopg")
    dsn = pg_server.dsn()
    out = tmp_path / "bench"
    code = cli(
        [
            "bench", "store", "--sizes", "120,240", "--queries", "4", "--pools", "20,40",
            "--single", "10", "--batch", "50", "--out", str(out), "--dsn", dsn,
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "pgvector recall@10 against exact" in printed and "written:" in printed
    table = pd.read_csv(out / "store.csv")
    assert sorted(zip(table.backend, table.records, strict=True)) == sorted(
        (b, n) for b in ("memory", "jsonl", "sqlite", "pgvector") for n in (120, 240)
    )
    for col in ("write_single_per_s", "write_batched_per_s", "recall_p50_ms", "recall_p95_ms"):
        assert (table[col] > 0).all(), col
    assert (table.recall_p95_ms >= table.recall_p50_ms).all()
    # Exact backends agree exactly; pgvector returns small scopes whole (pool 200).
    assert (table.parity_identical == 1.0).all()
    disk = table[table.backend.isin(["jsonl", "sqlite", "pgvector"])]
    assert (disk.size_mb > 0).all() and (table[table.backend == "memory"].size_mb == 0).all()
    pools = pd.read_csv(out / "store_pool.csv")
    assert len(pools) == 2 * 2 * 2
    assert set(pools["pool"]) == {20, 40} and set(pools.extras) == {0, 50}
    assert pools.recall_at_k.between(0, 1).all()
    assert (out / "store.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import psycopg

    with psycopg.connect(dsn) as conn:  # the bench schema is dropped afterwards
        left = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'memlab_bench_%%'"
        ).fetchone()
    assert left == (0,)


def test_bench_command_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["bench"]) == 2
    assert "memlab bench store" in capsys.readouterr().err
    assert cli(["bench", "store", "--sizes", "ten"]) == 2
    assert "--sizes takes comma-separated integers" in capsys.readouterr().err
    assert cli(["bench", "store", "--sizes", "10", "--backends", "redis"]) == 2
    assert "unknown backend 'redis'" in capsys.readouterr().err
    assert cli(["bench", "store", "--queries", "0"]) == 2
    assert "--queries must be >= 1" in capsys.readouterr().err
