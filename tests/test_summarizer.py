"""ExtractiveSummarizer."""

from __future__ import annotations

import pytest

from memlab.errors import InputError
from memlab.memory import ExtractiveSummarizer, Summarizer


def test_keeps_facts_drops_pleasantries_and_questions() -> None:
    s = ExtractiveSummarizer()
    assert isinstance(s, Summarizer)
    out = s.summarize(
        [
            "Hi there! We deploy on GKE in europe-west1.",
            "Thanks so much!",
            "Can you check the logs?",
            "Always page me on PagerDuty, never email.",
            "We deploy on GKE in europe-west1.",
        ]
    )
    assert out == "We deploy on GKE in europe-west1. Always page me on PagerDuty, never email."


def test_is_deterministic_and_capped() -> None:
    s = ExtractiveSummarizer(max_words=12)
    texts = [f"Our server number {i} runs in region {i}." for i in range(10)] + [
        "Never deploy on Fridays."
    ]
    out = s.summarize(texts)
    assert out == s.summarize(texts)
    assert len(out.split()) <= 12
    assert "Never deploy on Fridays." in out  # a hard rule outranks plain facts


def test_nothing_worth_keeping_gives_empty() -> None:
    assert ExtractiveSummarizer().summarize(["thanks!", "ok", "cool"]) == ""
    with pytest.raises(InputError):
        ExtractiveSummarizer(max_words=0)
