"""`memlab bench store` (memlab.bench.store) at a tiny size, and its errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from memlab.bench.store import BACKENDS
from memlab.cli import main as cli
from tests.conftest import memlab, on_a_terminal


def test_bench_store_runs_small_and_writes_table_and_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_server: Any
) -> None:
    pytest.importorskip("psycopg")
    dsn = pg_server.dsn()
    out = tmp_path / "bench"
    code = cli(
        [
            "bench", "store", "--sizes", "120,240", "--queries", "4", "--pools", "20,40",
            "--single", "10", "--batch", "50", "--pg-batched", "100", "--out", str(out),
            "--dsn", dsn, "--pg-window-from-rows", "0",  # the recency windows at any size
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "pgvector recall@10 against exact" in printed and "written:" in printed
    listed = ", ".join(sorted(b for b in BACKENDS if b != "pgvector"))
    assert f"in-process backends with the float32 ranked ids on every query: {listed}\n" in printed
    assert "NOT on every query" not in printed
    assert "window 0.5 half-lives from 0 rows" in printed
    table = pd.read_csv(out / "store.csv")
    assert sorted(zip(table.backend, table.records, strict=True)) == sorted(
        (b, n) for b in BACKENDS for n in (120, 240)
    )
    for col in (
        "write_single_per_s",
        "write_batched_per_s",
        "recall_p50_ms",
        "recall_p95_ms",
        "first_recall_ms",
    ):
        assert (table[col] > 0).all(), col
    assert (table.recall_p95_ms >= table.recall_p50_ms).all()
    pg = table.backend == "pgvector"  # the rest of the scope went in by bulk_load
    assert (table[pg].write_bulk_per_s > 0).all() and table[~pg].write_bulk_per_s.isna().all()
    # Exact backends agree exactly; pgvector returns small scopes whole (pool 200).
    assert (table.parity_identical == 1.0).all()
    disk = table[table.backend.isin(["jsonl", "sqlite", "sqlite-bits", "pgvector"])]
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
    for bad, message in (
        (["--corpus", "nope"], "argument --corpus: invalid choice: 'nope'"),
        (["--seed", "abc"], "argument --seed: invalid int value: 'abc'"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ):  # argparse's errors: one line, as every command's, not the usage and a line
        assert cli(["bench", "store", *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"bench store: {message}" in err, err


def test_bad_options_are_refused_before_any_cell_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, an empty --backends was an internal KeyError, --seed -1 an internal
    ValueError, a huge --sizes an internal MemoryError after the smaller sizes ran;
    an --out that is a file failed only after the whole run ("I/O failure afile:
    File exists"), and pgvector's --hnsw-m 1000 after every other backend's cells."""
    import memlab.bench.store as bench

    def never(s: object) -> None:
        raise AssertionError("the bench ran")

    monkeypatch.setattr(bench, "run", never)
    afile = tmp_path / "afile"
    afile.write_text("")
    for bad, code, message in (
        (["--backends", ","], 2, "--backends needs at least one of memory"),
        (["--seed", "-1"], 2, "--seed must be >= 0, got -1"),
        (["--sizes", "100,1000000000000000"], 2, "Choose smaller sizes"),
        (["--queries", "100000000000"], 2, "Choose smaller sizes"),
        (["--out", str(afile)], 3, "is a file, not a folder"),
        (["--out", str(afile / "sub")], 3, "is a file, not a folder"),
        (["--hnsw-m", "1000"], 2, "pgvector hnsw_m must be an integer in 2..100, got 1000"),
        (["--ef-construction", "10"], 2, "must be at least 2 x hnsw_m (32)"),
        (["--pg-window", "nan"], 2, "window must be a number of half-lives"),
        (["--pg-window-from-rows", "-1"], 2, "window_from_rows must be an integer >= 0"),
    ):
        assert cli(["bench", "store", "--sizes", "100", *bad]) == code, bad
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert afile.read_text() == ""


def test_bench_store_help_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["bench", "store", "--help"]) == 0
    assert "--no-progress" in capsys.readouterr().out


def _bench_in_a_terminal(tmp_path: Path, *extra: str) -> str:
    """Output of a tiny `memlab bench store` whose stdout and stderr are a terminal."""
    code, out = on_a_terminal(
        "bench", "store", "--sizes", "100", "--backends", "memory", "--queries", "2",
        "--single", "5", "--out", str(tmp_path / "out"), *extra, cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, out
    return out


@pytest.mark.slow
def test_progress_bars_only_on_a_terminal_and_never_with_no_progress(tmp_path: Path) -> None:
    bar = re.compile(r"bench store: +\d+%\|")
    assert bar.search(_bench_in_a_terminal(tmp_path))
    assert not bar.search(_bench_in_a_terminal(tmp_path, "--no-progress"))
    piped = memlab(
        "bench", "store", "--sizes", "100", "--backends", "memory", "--queries", "2",
        "--single", "5", "--out", str(tmp_path / "piped"), cwd=tmp_path,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert not bar.search(piped.stderr) and "written:" in piped.stdout


def test_an_unreachable_postgresql_server_is_reported_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, dropping the bench schema after the failed cell failed too, and its
    psycopg error replaced the cell's: "internal error: OperationalError: connection
    failed ... please report it"."""
    pytest.importorskip("psycopg")
    args = ["--sizes", "100", "--backends", "pgvector", "--queries", "2", "--single", "5"]
    dsn = "postgresql://memlab@127.0.0.1:1/nowhere"
    code = cli(["bench", "store", *args, "--dsn", dsn, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.count("\n") == 1 and "cannot reach PostgreSQL at 127.0.0.1:1" in err, err
    assert "internal error" not in err and not (tmp_path / "out").exists()
