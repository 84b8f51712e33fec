"""The PNG charts of a run (memlab.lab.charts)."""

from __future__ import annotations

from pathlib import Path

from memlab.lab.charts import charts
from memlab.lab.replay import ReplaySettings, run_experiment
from memlab.lab.strategies import StuffAll
from memlab.lab.summary import summarize
from memlab.lab.transcripts import load
from tests.conftest import FIXTURES
from tests.run_rows import rows


def test_run_charts(tmp_path: Path) -> None:
    probes, turns = rows()
    s = summarize(probes, turns, n_boot=50)
    files = charts(probes, turns, s, tmp_path / "charts")
    names = {f.name for f in files}
    assert {
        "recall_precision.png",
        "prompt_tokens.png",
        "store_growth.png",
        "stale_rate.png",
    } <= names
    for f in files:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_category_charts(tmp_path: Path) -> None:
    t = load(FIXTURES / "handmade.json")
    probes, turns = run_experiment(
        [t], {"stuff_all": lambda _: StuffAll()}, ReplaySettings(), progress=False
    )
    probes["category"] = ["x", "y"]
    probes["scored"] = [True, False]
    s = summarize(probes, turns, n_boot=0)
    names = {f.name for f in charts(probes, turns, s, tmp_path)}
    assert {"evidence_recall_by_category.png", "answer_in_context_by_category.png"} <= names
