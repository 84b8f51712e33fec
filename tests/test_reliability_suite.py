"""python -m memlab.reliability: the table, the CSV and the exit status."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from memlab.reliability import Row
from memlab.reliability.suite import main, table, write_csv


def test_a_quick_run_writes_the_csv_and_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--quick", "--only", "injection,laundering", "--no-pg", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "prompt injection: memory block breakouts" in out and "all at 0 failures" in out
    rows = list(csv.DictReader((tmp_path / "summary.csv").read_text().splitlines()))
    assert [r["check"] for r in rows][:2] == [
        "prompt injection: memory block breakouts",
        "laundering: quoted injections in summaries",
    ]
    assert {r["target"] for r in rows} == {"0", "measured"}


def test_unknown_check_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--only", "kil"]) == 2
    assert "unknown check" in capsys.readouterr().err


def test_table_and_csv(tmp_path: Path) -> None:
    rows = [
        Row("a check", "jsonl", 3, 1000, 0, "fine", 1.5),
        Row("limit", "-", 1, 2, 2, "x", 0, guarded=False),
    ]
    text = table(rows)
    assert "1,000" in text and "2 (limit)" in text
    write_csv(rows, tmp_path / "s.csv")
    got = list(csv.DictReader((tmp_path / "s.csv").read_text().splitlines()))
    assert got[0]["target"] == "0" and got[1]["target"] == "measured"


def test_the_docs_show_the_committed_summary() -> None:
    from memlab.reliability.suite import markdown

    root = Path(__file__).resolve().parents[1]
    summary = root / "results" / "reliability" / "summary.csv"
    page = (root / "docs" / "reliability.md").read_text()
    assert markdown(summary) in page  # regenerate with --markdown after a new run
    rows = list(csv.DictReader(summary.read_text().splitlines()))
    assert all(r["failures"] == "0" for r in rows if r["target"] == "0")
    kills = {r["store"]: 0 for r in rows if r["check"].startswith("kill")}
    for r in rows:
        if r["check"].startswith("kill"):
            kills[r["store"]] += int(r["trials"])
    assert kills == {"jsonl": 110, "sqlite": 110}
    scopes = [r for r in rows if r["check"].startswith("adversarial scopes")]
    assert {r["store"] for r in scopes} == {"memory", "jsonl", "sqlite", "pgvector"}
    assert all(int(r["trials"]) >= 10_000 for r in scopes)
