"""The supersession benchmark's data (benchmarks/supersession_data.py): the matching
rule, the shipped transcripts and the LongMemEval reading with its quirks."""

from __future__ import annotations

from pathlib import Path

from benchmarks.supersession_data import SHIPPED, has_value, load_longmemeval, load_transcripts

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_has_value_casefolds_and_ignores_whitespace_and_punctuation() -> None:
    assert has_value("Invoices go to  Vendor-Payments@acme.io now", "vendor-payments@acme.io")
    assert has_value("standup is at 9:30.", "9 30")
    assert has_value("We're on FLY.IO", "fly io")
    assert has_value("We use Herokuish", "Heroku")  # a substring counts, as in the lab
    assert not has_value("We use Render", "Heroku")
    assert not has_value("anything", "")
    assert not has_value("anything", "  ")


def test_shipped_transcripts_read_with_times_in_order_and_probes_marked() -> None:
    episodes = load_transcripts(SHIPPED)
    assert len(episodes) == len(list(SHIPPED.glob("*.json")))
    for ep in episodes:
        times = [t.time for t in ep.turns]
        assert times == sorted(times), ep.id
        assert {t.source for t in ep.turns} <= {"user", "agent", "tool", "web"}
    probes = [t for ep in episodes for t in ep.turns if t.probe]
    assert probes and all(t.needs for t in probes)
    assert any(t.mentions for ep in episodes for t in ep.turns)


def test_load_transcripts_of_an_empty_folder_is_empty(tmp_path: Path) -> None:
    assert load_transcripts(tmp_path) == []


def test_longmemeval_reading() -> None:
    episodes = load_longmemeval(FIXTURES / "longmemeval_quirks.json")
    assert episodes and all(ep.turns for ep in episodes)
    for ep in episodes:
        assert ep.kind and ep.answer
        assert {t.source for t in ep.turns} <= {"user", "agent"}
        assert all(t.text.strip() for t in ep.turns)  # empty and non-string turns dropped
        times = [t.time for t in ep.turns]
        assert times == sorted(times) and len(set(times)) == len(times)
