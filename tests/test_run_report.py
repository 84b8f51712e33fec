"""The report of one run folder (memlab.lab.run_report): its sections on a small
LoCoMo-shaped run with errata (ranked families with uninformative k flagged,
abstention, errata), and report.md."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pandas as pd
import pytest

from memlab.lab import run_report
from memlab.lab.datasets import DatasetWarning
from memlab.lab.experiment import run
from memlab.lab.report import rebuild
from memlab.lab.sweep import plan_run
from tests.conftest import FIXTURES


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "run"
    cfg = plan_run(
        [
            "transcripts=locomo",
            f"transcripts.path={FIXTURES / 'locomo_errata.json'}",
            f"transcripts.errata={FIXTURES / 'errata_handmade.json'}",
            "strategies=[memory,retriever_bm25,stuff_all]",
            "report.bootstrap=200",
            "report.charts=false",
            "progress=false",
        ]
    ).cfg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        run(cfg, out)
    return out


def test_sections_of_a_benchmark_run_with_errata(folder: Path) -> None:
    lines = rebuild(folder, n_boot=200, draw=False)
    text = "\n".join(lines)
    for title in (
        "Differences against memory",
        "Minimum detectable difference at the current n",
        "Ranked retrieval, full ranking (haystack_*)",
        "Ranked retrieval within the budget (context_*)",
        "Abstention questions",
        "Errata: 7 applied",
    ):
        assert title in text, title
    md = (folder / run_report.REPORT).read_text()
    assert "## Ranked retrieval, full ranking (`haystack_*`)" in md
    # Two sessions per conversation: session measures at k = 5 cover everything.
    assert "†" in md and "uninformative" in md
    assert (folder / run_report.DIFFERENCES).exists() and (folder / run_report.MDD).exists()


def test_uninformative_share_and_flags(folder: Path) -> None:
    from memlab.lab.summary import load_rows

    probes, _ = load_rows(folder)
    assert run_report.uninformative_share(probes, "memory", "haystack_session_recall_all@5") == 1.0
    share = run_report.uninformative_share(probes, "memory", "haystack_turn_recall_all@5")
    # Six turns in conv-x, two in conv-y: k = 5 covers conv-y's one scored question of 7.
    assert share == pytest.approx(1 / 7)
    assert run_report.uninformative_share(probes, "memory", "haystack_turn_ndcg@1") == 0.0
    assert math.isnan(run_report.uninformative_share(probes, "nobody", "haystack_turn_ndcg@1"))
    assert run_report.flag(1.0) == "†" and run_report.flag(0.125) == "†(12%)"


def test_abstention_section_pools_the_abstention_groups(folder: Path) -> None:
    summary = pd.read_csv(folder / "summary.csv")
    section = run_report.abstention_section(summary)
    assert section is not None
    ((_caption, table),) = section.tables
    assert "abstention_proxy (abstention questions)" in table.columns
    assert table.loc["memory", "abstention_proxy (abstention questions)"].endswith("(n=1)")
    assert run_report.abstention_section(summary[summary.metric != "abstention_proxy"]) is None


def test_a_single_strategy_run_has_no_differences(tmp_path: Path, folder: Path) -> None:
    from memlab.lab.summary import load_rows

    probes, _ = load_rows(folder)
    one = probes[probes.strategy == "memory"]
    summary = pd.read_csv(folder / "summary.csv")
    sections, written = run_report.build(tmp_path, one, summary[summary.strategy == "memory"],
                                         draw=False)  # fmt: skip
    assert not any(s.title.startswith("Differences") for s in sections) and written == []
    assert (tmp_path / run_report.REPORT).read_text().startswith("# How far to trust this run")


@pytest.mark.parametrize(
    "option", [{"reference": "memroy"}, {"differences": ["fact_recal"]}], ids=["ref", "metric"]
)
def test_a_misspelt_reference_or_metric_rewrites_nothing(
    tmp_path: Path, folder: Path, option: dict[str, object]
) -> None:
    import shutil

    from memlab.errors import MemlabError

    run_dir = tmp_path / "run"
    shutil.copytree(folder, run_dir)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    with pytest.raises(MemlabError, match="memroy|fact_recal"):
        rebuild(run_dir, n_boot=10, seed=3, draw=True, **option)  # type: ignore[arg-type]
    after = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    assert after == before
    assert not (run_dir / "charts").exists()
