"""Replay rows and multirun folders for the summary, chart, report and sweep tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from memlab.lab.replay import ReplaySettings, run_experiment
from memlab.lab.strategies import MemoryStrategy, SlidingWindow, StuffAll
from memlab.lab.summary import summarize, write_tables
from memlab.lab.transcripts import load
from memlab.memory import HashEmbedder, InMemoryStore
from tests.conftest import FIXTURES


def rows() -> tuple[pd.DataFrame, pd.DataFrame]:
    t = load(FIXTURES / "handmade.json")
    factories = {
        "stuff_all": lambda _: StuffAll(),
        "sliding_window": lambda _: SlidingWindow(window_turns=2),
        "memory": lambda _: MemoryStrategy("memory", InMemoryStore(), HashEmbedder()),
    }
    return run_experiment([t], factories, ReplaySettings(far_turns=1), progress=False)


def fake_sweep(root: Path, jobs: dict[str, dict[str, str]], *, failed: int = 0) -> Path:
    """A multirun folder as Hydra lays it out, with run rows from the handmade fixture."""
    probes, turns = rows()
    for num, overrides in jobs.items():
        job = root / num
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(
            "".join(f"- {k}={v}\n" for k, v in overrides.items())
        )
        p = probes.copy()
        if "budget" in overrides:  # make the jobs differ
            p["prompt_tokens"] = p["prompt_tokens"] + float(overrides["budget"])
        write_tables(job, p, turns, summarize(p, turns, n_boot=20))
    for k in range(failed):
        (root / f"{len(jobs) + k}" / ".hydra").mkdir(parents=True)
    (root / "multirun.yaml").write_text(
        "hydra:\n  sweeper:\n    params:\n      memory.half_life.episodic: 12,72\n"
        "  overrides:\n    task:\n    - budget=100,200\n    - progress=false\n"
    )
    return root
