"""Replay: the order of recall, observe and maintain, and the rows it writes."""

from __future__ import annotations

from memlab.lab.replay import ReplaySettings, replay, run_experiment
from memlab.lab.strategies import Context, SlidingWindow, StoreStats, StuffAll
from memlab.lab.transcripts import Transcript, Turn, load
from tests.conftest import FIXTURES


class Recorder:
    """A strategy that logs the order of calls."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def observe(self, turn: Turn) -> None:
        self.calls.append(f"observe {turn.id}")

    def context(self, probe: Turn, budget: int) -> Context:
        self.calls.append(f"context {probe.id} {budget}")
        return Context()

    def maintain(self, turn: Turn) -> None:
        self.calls.append(f"maintain {turn.id}")

    def stats(self) -> StoreStats:
        return StoreStats(0, 0, 0, 0)

    def close(self) -> None:
        self.calls.append("close")


def test_probe_context_comes_before_observing_the_probe() -> None:
    t = load(FIXTURES / "handmade.json")
    r = Recorder()
    probes, turns = replay(t, r, ReplaySettings(budget=123))
    i = r.calls.index("context t9 123")
    assert r.calls[i - 2 : i + 3] == [
        "observe t8",
        "maintain t8",
        "context t9 123",
        "observe t9",
        "maintain t9",
    ]
    assert len(probes) == 2 and len(turns) == len(t.turns)
    assert probes[0]["fact_recall"] == 0.0 and probes[0]["context_tokens"] == 0.0


def test_run_experiment_rows() -> None:
    t = load(FIXTURES / "handmade.json")
    settings = ReplaySettings(budget=800, prompt_overhead_tokens=10, far_turns=1)
    probes, turns = run_experiment(
        [t],
        {
            "stuff_all": lambda _: StuffAll(),
            "window": lambda _: SlidingWindow("window", window_turns=1),
        },
        settings,
        progress=False,
    )
    assert list(probes.strategy.unique()) == ["stuff_all", "window"]
    assert len(probes) == 4 and len(turns) == 2 * len(t.turns)
    row = probes[(probes.strategy == "stuff_all") & (probes.probe == "t9")].iloc[0]
    assert row.fact_recall == 1.0 and row.distance == 2 and bool(row.far) and bool(row.corrected)
    assert row.prompt_tokens == row.context_tokens + 15 + 10
    window = probes[(probes.strategy == "window") & (probes.probe == "t9")].iloc[0]
    assert window.fact_recall == 0.0  # t8 only: "Got it."
    assert turns.groupby("strategy").store_records.max().to_dict() == {
        "stuff_all": 11,
        "window": 11,
    }


def test_detached_probes_are_scored_but_never_observed() -> None:
    data = load(FIXTURES / "handmade.json").to_dict()
    data["turns"][9]["probe"]["detached"] = True
    t = Transcript.from_dict(data)
    r = Recorder()
    probes, turns = replay(t, r, ReplaySettings(budget=5))
    assert "context t9 5" in r.calls
    assert "observe t9" not in r.calls and "maintain t9" not in r.calls
    assert len(probes) == 2 and len(turns) == len(t.turns) - 1
