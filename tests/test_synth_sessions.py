"""The ``sessions`` scenario: the shipped set regenerates byte for byte, and every
transcript has what the procedure, reflection and layered-scope probes need."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memlab.errors import InputError
from memlab.lab.synth import sessions, write
from memlab.lab.transcripts import Transcript, dumps, load_dir
from memlab.memory.procedural import parse_tool_call

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "transcripts" / "sessions"
SEEDS = range(1, 13)


@pytest.fixture(scope="module")
def shipped() -> list[Transcript]:
    return load_dir(SHIPPED)


def test_shipped_set_regenerates_byte_for_byte() -> None:
    files = sorted(SHIPPED.glob("*.json"))
    assert [f.name for f in files] == [f"sessions-{s:04d}.json" for s in SEEDS]
    for f, seed in zip(files, SEEDS, strict=True):
        assert f.read_bytes() == dumps(sessions.generate(seed)).encode("utf-8"), f


def test_same_bytes_whatever_the_hash_seed() -> None:
    code = (
        "import hashlib; from memlab.lab.synth.sessions import generate; "
        "from memlab.lab.transcripts import dumps; "
        "print(hashlib.sha256(''.join(dumps(generate(s)) for s in (2, 5)).encode()).hexdigest())"
    )
    here = hashlib.sha256("".join(dumps(sessions.generate(s)) for s in (2, 5)).encode())
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert out.stdout.strip() == here.hexdigest()


def test_write_and_its_checks(tmp_path: Path) -> None:
    result = write(tmp_path, 2, 7, scenario="sessions")
    assert [p.name for p in result.written] == ["sessions-0007.json", "sessions-0008.json"]
    assert write(tmp_path, 2, 7, scenario="sessions").unchanged == result.written
    with pytest.raises(InputError, match="scenario"):
        write(tmp_path, 1, 1, scenario="chat")
    with pytest.raises(InputError, match="seed"):
        sessions.generate(-1)


def test_every_turn_has_a_session_and_sessions_do_not_interleave(
    shipped: list[Transcript],
) -> None:
    for t in shipped:
        assert all(x.session for x in t.turns)
        order = list(dict.fromkeys(x.session for x in t.turns))
        assert len(order) == len({x.session for x in t.turns}), t.id  # each session in one run
        for s in order:
            assert len({x.scope for x in t.turns if x.session == s}) == 1
        times = [x.time for x in t.turns]
        assert times == sorted(times)


def test_procedure_probes_name_steps_solved_earlier_in_other_sessions(
    shipped: list[Transcript],
) -> None:
    n = 0
    for t in shipped:
        for i, x in enumerate(t.turns):
            if x.probe is None or x.probe.category != "procedure":
                continue
            n += 1
            steps = list(x.probe.meta["steps"])
            calls = [parse_tool_call(t.turns[t.index[e]].text) for e in x.probe.evidence]
            assert [c.tool for c in calls if c is not None] == steps
            assert all(c is not None and c.ok for c in calls)
            ev_sessions = {t.turns[t.index[e]].session for e in x.probe.evidence}
            assert x.session not in ev_sessions
            # the steps were solved at least twice before, in earlier sessions
            solved = [
                y for y in t.turns[:i]
                if y.scope == x.scope and y.role == "tool"
                and (c := parse_tool_call(y.text)) is not None and c.tool == steps[0]
            ]  # fmt: skip
            assert len({y.session for y in solved}) >= 2
    assert n == 36


def test_fact_probes_have_their_evidence_where_the_category_says(
    shipped: list[Transcript],
) -> None:
    cats: dict[str, int] = {}
    for t in shipped:
        for x in t.turns:
            if x.probe is None or x.probe.category == "procedure":
                continue
            cats[x.probe.category] = cats.get(x.probe.category, 0) + 1  # type: ignore[index]
            ev = [t.turns[t.index[e]] for e in x.probe.evidence]
            assert all(e.scope == x.scope for e in ev)
            assert all(x.probe.answer in e.text for e in ev)
            if x.probe.category == "session":
                assert {e.session for e in ev} == {x.session}
            else:
                assert x.session not in {e.session for e in ev}
            if x.probe.category == "reflect":
                assert x.probe.meta["repeated"] >= 2 or x.probe.meta["class"] == "preference"
    assert cats == {"session": 94, "cross_session": 80, "reflect": 47}


def test_two_user_transcripts_give_each_user_other_values(shipped: list[Transcript]) -> None:
    two = [t for t in shipped if len(t.scopes) == 2]
    assert len(two) == 6
    for t in two:
        a, b = t.scopes
        for fact in sessions.FACTS_BY_ID:
            va = {m.value for x in t.turns if x.scope == a for m in x.mentions if m.fact == fact}
            vb = {m.value for x in t.turns if x.scope == b for m in x.mentions if m.fact == fact}
            assert not va & vb, (t.id, fact)
