"""Long and mixed transcripts (memlab.lab.synth.mix, ``memlab synth --turns ...``).

The shipped long set (``transcripts/synthetic_long``) regenerates byte for byte, in
this process and in others whatever the hash seed; every mix option changes what
it says it changes, and the structural guarantees of the default generator
(ground truth, late probes, no leaked values) hold for long transcripts too.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from memlab.errors import InputError
from memlab.lab import synth
from memlab.lab.synth import Mix, generate, parse_turns
from memlab.lab.synth.mix import EARLY_SHARE
from memlab.lab.transcripts import Transcript, dumps, load_dir

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_LONG = ROOT / "transcripts" / "synthetic_long"
LONG = Mix(turns=(300, 600))  # the shipped set: memlab synth --n 16 --seed 1 --turns 300-600


@pytest.fixture(scope="module")
def shipped() -> list[Transcript]:
    return load_dir(SHIPPED_LONG)


def test_the_shipped_long_set_regenerates_byte_for_byte() -> None:
    files = sorted(SHIPPED_LONG.glob("*.json"))
    assert [f.stem for f in files] == [f"long-{s:04d}" for s in range(1, 17)]
    for f in files:
        seed = int(f.stem.split("-")[1])
        assert dumps(generate(seed, LONG)).encode("utf-8") == f.read_bytes(), f.name


def test_same_bytes_in_other_processes_whatever_the_hash_seed() -> None:
    code = (
        "import hashlib; from memlab.lab.synth import Mix, generate; "
        "from memlab.lab.transcripts import dumps; "
        "m = Mix(turns=(120, 200), noise=0.5, injections=3.0); "
        "print(hashlib.sha256(''.join(dumps(generate(s, m)) for s in (3, 4)).encode()).hexdigest())"
    )
    digests = set()
    for hash_seed in ("0", "1", "random"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        digests.add(out.stdout.strip())
    m = Mix(turns=(120, 200), noise=0.5, injections=3.0)
    here = hashlib.sha256("".join(dumps(generate(s, m)) for s in (3, 4)).encode()).hexdigest()
    assert digests == {here}


def test_the_default_mix_is_the_default_generator() -> None:
    assert Mix().is_default() and not LONG.is_default()
    assert dumps(generate(5, Mix())) == dumps(generate(5))
    assert synth.mix.transcript_id(5, Mix()) == "support-0005"
    assert synth.mix.transcript_id(5, LONG) == "long-0005"
    assert generate(5, LONG).id == "long-0005"
    # Another mix is another stream: the same seed gives another transcript.
    assert dumps(generate(5, Mix(turns=(300, 600), noise=2.0))) != dumps(generate(5, LONG))


def test_shipped_long_set_is_multi_week_and_long(shipped: list[Transcript]) -> None:
    assert len(shipped) == 16
    for t in shipped:
        assert 300 <= len(t.turns) <= 600
        first = datetime.fromisoformat(t.turns[0].ts.replace("Z", "+00:00"))
        last = datetime.fromisoformat(t.turns[-1].ts.replace("Z", "+00:00"))
        assert (last - first).days >= 14, t.id
        stamps = [x.ts for x in t.turns]
        assert stamps == sorted(stamps), t.id
        sessions = [x.session for x in t.turns]
        assert len(set(sessions)) >= 8, t.id
        assert t.meta["scenario"] == "support-long" and t.meta["mix"] == LONG.key()
    assert sum(len(t.scopes) > 1 for t in shipped) >= 4  # two customers, separate scopes


def test_probes_come_late_and_hold_the_value_in_force(shipped: list[Transcript]) -> None:
    corrected = 0
    for t in shipped:
        n_late = 0
        for i, turn in enumerate(t.turns):
            if turn.probe is None:
                continue
            n_late += i >= int(len(t.turns) * EARLY_SHARE) - 4
            state = t.fact_state(i, turn.scope)
            for fact in turn.probe.needs:
                assert state[fact].current == turn.probe.answer, (t.id, turn.id)
                corrected += bool(state[fact].stale)
            for e in turn.probe.evidence:
                ev = t.turns[t.index[e]]
                assert ev.scope == turn.scope
                assert any(m.value == turn.probe.answer for m in ev.mentions)
        assert n_late == len(t.probes) >= 8, t.id
    assert corrected >= 30  # probes of corrected facts: the value in force is the new one


def _acts(t: Transcript) -> Counter[str]:
    return Counter(str(x.meta.get("act")) for x in t.turns)


def test_each_mix_option_does_what_it_says() -> None:
    base = Mix(turns=(240, 240))
    b = generate(7, base)
    assert len(b.turns) == 240
    quiet = generate(7, Mix(turns=(240, 240), noise=0.0))
    assert _acts(quiet)["chat"] == 0 and _acts(quiet)["thanks"] == 0 < _acts(b)["chat"]
    no_tools = generate(7, Mix(turns=(240, 240), tool_output=0.0))
    assert _acts(no_tools)["noise"] == 0 and _acts(b)["noise"] > 0
    assert sum(x.role == "tool" for x in no_tools.turns) < sum(x.role == "tool" for x in b.turns)
    chatty = generate(7, Mix(turns=(240, 240), tool_output=4.0))
    assert sum(x.role == "tool" for x in chatty.turns) > sum(x.role == "tool" for x in b.turns)
    planted = [sum(bool(x.meta.get("planted")) for x in generate(7, Mix(turns=(240, 240), injections=k)).turns) for k in (0.0, 5.0)]  # fmt: skip
    assert planted[0] == 0 < planted[1]
    facts = [len(generate(7, Mix(turns=(240, 240), fact_density=d)).facts) for d in (2.0, 10.0)]
    assert facts[0] < facts[1]

    def corrections(t: Transcript) -> int:
        return sum(x.meta.get("act") == "correction" for x in t.turns)

    assert corrections(generate(7, Mix(turns=(240, 240), corrections=0.0))) == 0
    assert corrections(generate(7, Mix(turns=(240, 240), corrections=1.0))) > corrections(b)
    timed = generate(7, Mix(turns=(240, 240), sessions=5, days=60))
    assert len({x.session for x in timed.turns}) == 5
    first = datetime.fromisoformat(timed.turns[0].ts.replace("Z", "+00:00"))
    last = datetime.fromisoformat(timed.turns[-1].ts.replace("Z", "+00:00"))
    assert 40 <= (last - first).days <= 60
    probes = [len(generate(7, Mix(turns=(240, 240), probes=p)).probes) for p in (1.0, 8.0)]
    assert probes[0] < probes[1]


def test_bad_mixes_are_input_errors() -> None:
    assert parse_turns("450") == (450, 450) and parse_turns("300-600") == (300, 600)
    for text in ("many", "3-x", ""):
        with pytest.raises(InputError, match="--turns"):
            parse_turns(text)
    for kw, needle in [
        ({"turns": (30, 30)}, "--turns"),
        ({"turns": (600, 300)}, "--turns"),
        ({"turns": (100, 100), "sessions": 50}, "--sessions"),
        ({"days": 0}, "--days"),
        ({"fact_density": 0.0}, "--fact-density"),
        ({"noise": -1.0}, "--noise"),
        ({"corrections": 1.5}, "--corrections"),
        ({"injections": 99.0}, "--injections"),
    ]:
        with pytest.raises(InputError, match=needle):
            Mix(**kw)  # type: ignore[arg-type]


def test_cli_writes_long_transcripts_and_refuses_bad_options(tmp_path: Path) -> None:
    from memlab.cli import main

    out = tmp_path / "long"
    assert main(["synth", "--n", "2", "--seed", "3", "--out", str(out), "--turns", "120",
                 "--days", "20", "--noise", "0.5", "--no-progress"]) == 0  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == ["long-0003.json", "long-0004.json"]
    again = Mix(turns=(120, 120), days=20, noise=0.5)
    assert (out / "long-0003.json").read_bytes() == dumps(generate(3, again)).encode()
    assert main(["synth", "--n", "1", "--out", str(out), "--turns", "20"]) == 2
    assert main(["synth", "--n", "1", "--out", str(out), "--corrections", "2"]) == 2
