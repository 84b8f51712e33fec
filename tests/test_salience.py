"""The salience heuristic."""

from __future__ import annotations

import pytest

from memlab.memory import estimate_salience


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("thanks!", 0.0, 0.1),
        ("ok", 0.0, 0.1),
        ("", 0.0, 0.1),
        ("Always page me on PagerDuty, never email.", 0.75, 0.85),
        ("My name is Priya.", 0.6, 0.7),
        ("Actually, we moved to us-central1.", 0.6, 0.8),
        ("tool returned 200", 0.35, 0.45),
        ("what's the weather like?", 0.1, 0.2),
    ],
)
def test_cues(text: str, low: float, high: float) -> None:
    assert low <= estimate_salience(text) <= high


def test_ordering() -> None:
    assert (
        estimate_salience("Never email me, always page.")
        > estimate_salience("I might grab a coffee later.")
        > estimate_salience("thanks")
    )
