"""benchmarks.stale_sources: which context item carries a stale value, and why."""

from __future__ import annotations

from typing import Any

from benchmarks.stale_sources import chain_linked, counts, stale_items, value_chain
from memlab.lab.strategies.base import Context, ContextItem
from memlab.lab.transcripts import Transcript

SCOPE = "alice:support"


def _turn(i: int, source: str, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"t{i}",
        "ts": f"2026-06-01T10:{i:02d}:00Z",
        "scope": SCOPE,
        "role": "user" if source == "user" else source,
        "source": source,
        "text": text,
        **extra,
    }


def _transcript() -> Transcript:
    m = {"fact": "ci", "value": "Jenkins"}
    turns = [
        _turn(0, "user", "Our CI is Jenkins.", mentions=[m]),
        _turn(1, "agent", "Noted: Jenkins.", mentions=[m]),
        _turn(2, "user", "We used to run Jenkins, years ago.", meta={"act": "false"}),
        _turn(
            3,
            "user",
            "Builds run on Buildkite.",
            mentions=[{"fact": "ci", "value": "Buildkite"}],
            meta={"act": "correction"},
        ),
        _turn(
            4,
            "user",
            "What CI do we use?",
            probe={"needs": ["ci"], "category": "corrected", "meta": {"update": "implicit"}},
        ),
    ]
    return Transcript.from_dict(
        {
            "format": "memlab.transcript/1",
            "id": "x",
            "facts": {"ci": {"description": "CI"}},
            "turns": turns,
        }
    )


def _item(text: str, source: str, prov: tuple[str, ...], kind: str = "episodic") -> ContextItem:
    return ContextItem(text, 5, kind, SCOPE, source, prov)


def test_each_stale_item_gets_its_cause() -> None:
    t = _transcript()
    ctx = Context(
        [
            _item("Our CI is Jenkins. Our office is in Porto.", "user", ("t0", "t9"), "semantic"),
            _item("Noted: Jenkins.", "agent", ("t1",)),
            _item("Builds run on Buildkite.", "user", ("t3",)),
            _item("Our CI is Jenkins.", "user", ("t0",)),
            _item("We used to run Jenkins, years ago.", "user", ("t2",)),
            _item("jenkins -> 200", "tool", ("t8",)),
        ]
    )
    got = stale_items(t, 4, t.turns[4], ctx, {("t0",): False})
    assert [(i.rank, i.cause, i.wins) for i in got] == [
        (0, "summary:missed:implicit", True),
        (1, "agent", False),
        (3, "missed:implicit", False),
        (4, "restated:false", False),
        (5, "untrusted", False),
    ]
    assert all(i.correction == "Builds run on Buildkite." for i in got)
    c = counts(got)
    assert c["wins"]["summary:missed:implicit"] == 1 and sum(c["facts"].values()) == 5
    # a record with a superseded span that still shows the value: the cut missed it
    (kept,) = stale_items(t, 4, t.turns[4], Context([ctx.items[3]]), {("t0",): True})
    assert kept.cause == "span-kept"


def test_only_corrected_probes_and_items_without_the_value_in_force() -> None:
    t = _transcript()
    both = Context([_item("We moved from Jenkins to Buildkite.", "user", ("t3",))])
    assert stale_items(t, 4, t.turns[4], both) == []


def test_a_chain_is_detected_only_when_every_step_retired_the_one_before() -> None:
    def said(i: int, value: str) -> dict[str, Any]:
        return _turn(i, "user", f"Our CI is {value}.", mentions=[{"fact": "ci", "value": value}])

    turns = [said(0, "Jenkins"), said(1, "Jenkins"), said(2, "Buildkite"), said(3, "CircleCI")]
    t = Transcript.from_dict(
        {"format": "memlab.transcript/1", "id": "c", "facts": {"ci": {"description": "CI"}},
         "turns": turns}
    )  # fmt: skip
    chain = value_chain(t, 4, SCOPE, "ci")
    assert [(v, turn.id) for v, turn in chain] == [
        ("Jenkins", "t0"), ("Buildkite", "t2"), ("CircleCI", "t3")
    ]  # fmt: skip
    # t2 retired Jenkins, t3 missed Buildkite: Jenkins is not "detected"
    links = {("t2", "Jenkins")}
    assert not chain_linked(chain, "Jenkins", lambda turn, v: (turn.id, v) in links)
    links.add(("t3", "Buildkite"))
    assert chain_linked(chain, "Jenkins", lambda turn, v: (turn.id, v) in links)
    assert chain_linked(chain, "Buildkite", lambda turn, v: (turn.id, v) in links)
    assert not chain_linked(chain, "CircleCI", lambda turn, v: True)  # the value in force
    assert not chain_linked(chain, "Travis", lambda turn, v: True)  # never stated
