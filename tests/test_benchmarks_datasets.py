"""The README table generator for the real benchmarks (benchmarks/datasets.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmarks.datasets import BEGIN, END, collect, main, tables


def fake_sweep(root: Path) -> Path:
    """A multirun folder with two budgets: stuff_all ignores the budget, memory not."""
    sweep = root / "locomo-x-hash"
    for job, budget in (("0", 400), ("1", 800)):
        d = sweep / job
        (d / ".hydra").mkdir(parents=True)
        (d / "probes.csv").write_text("x\n")
        (d / "turns.csv").write_text("x\n")
        (d / ".hydra" / "overrides.yaml").write_text(
            f"- transcripts=locomo\n- transcripts.path=/data/x.json\n- budget={budget}\n"
            "- embedder=hash\n"
        )
        rows = []
        for strategy, er in (("stuff_all", 1.0), ("memory", budget / 1000)):
            for group, n, mean in (
                ("all", 4, er),
                ("category:temporal", 3, er),
                ("category:multi-hop", 1, er / 2),
                ("unscored:adversarial", 2, 0.5),
            ):
                rows.append((strategy, group, "evidence_recall", mean, n))
                rows.append((strategy, group, "answer_in_context", mean / 2, n))
            rows.append((strategy, "all", "context_tokens", 16000.0 if er == 1 else budget, 4))
        pd.DataFrame(rows, columns=["strategy", "group", "metric", "mean", "n"]).assign(
            ci_low=0.0, ci_high=0.0
        ).to_csv(d / "summary.csv", index=False)
    return sweep


def test_tables_collapse_budget_free_strategies_and_order_categories(tmp_path: Path) -> None:
    data = collect([fake_sweep(tmp_path)])
    assert set(data.budget) == {400, 800} and set(data.file) == {"x.json"}
    text = tables(data)
    assert "#### locomo: `x.json` (4 scored questions, 2 unscored)" in text
    header = "| embedder | budget | strategy | multi-hop | temporal | all scored | adversarial† |"
    assert header + " context tokens |" in text
    assert "| hash | any | `stuff_all` | 0.50 | 1.00 | 1.00 | 0.50 | 16,000 |" in text
    assert "| hash | 400 | `memory` | 0.20 | 0.40 | 0.40 | 0.50 | 400 |" in text
    assert "| hash | 800 | `memory` | 0.40 | 0.80 | 0.80 | 0.50 | 800 |" in text
    assert text.count("`stuff_all`") == 2  # one row in each of the two tables


def test_table_command_replaces_the_readme_block(tmp_path: Path) -> None:
    sweep = fake_sweep(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{BEGIN}\nold\n{END}\noutro\n")
    main(["table", str(sweep), "--readme", str(readme), "--csv", str(tmp_path / "t.csv")])
    doc = readme.read_text()
    assert doc.startswith("intro\n" + BEGIN) and doc.endswith(END + "\noutro\n")
    assert "old" not in doc and "`memory`" in doc
    assert (tmp_path / "t.csv").exists()
