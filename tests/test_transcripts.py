"""Transcript format v1: validation errors name file, turn and field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from memlab.errors import TranscriptError
from memlab.lab.transcripts import Transcript, dumps, load, load_dir, save
from tests.conftest import FIXTURES


def raw() -> dict[str, Any]:
    return json.loads((FIXTURES / "handmade.json").read_text())


def write(tmp: Path, name: str, data: Any) -> Path:
    p = tmp / name
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return p


def test_load_and_roundtrip(tmp_path: Path) -> None:
    t = load(FIXTURES / "handmade.json")
    assert t.id == "handmade-01" and len(t.turns) == 11 and len(t.probes) == 2
    assert t.scopes == ["alice:support", "bob:support"]
    assert t.turns[1].source == "agent" and t.turns[0].salience_hint == 0.9
    out = save(t, tmp_path / "x" / "copy.json")
    again = load(out)
    assert dumps(again) == dumps(t)
    assert out.read_text() == dumps(t)  # canonical bytes


def test_fact_state_is_per_scope_and_tracks_corrections() -> None:
    t = load(FIXTURES / "handmade.json")
    alice = t.fact_state(t.index["t9"], "alice:support")
    assert alice["cluster"].current == "Nomad" and alice["cluster"].stale == ["GKE"]
    assert alice["pager"].current == "PagerDuty" and alice["pager"].stale == []
    bob = t.fact_state(t.index["t10"], "bob:support")
    assert bob["cluster"].current == "EKS" and bob["cluster"].stale == []
    early = t.fact_state(t.index["t7"], "alice:support")
    assert early["cluster"].current == "GKE"


@pytest.mark.parametrize(
    ("mutate", "where", "field"),
    [
        (lambda d: d.update(format="memlab.transcript/2"), "top level", "format"),
        (lambda d: d["turns"][2].update(role="bot"), "turn 't2'", "role"),
        (lambda d: d["turns"][2].update(source="internet"), "turn 't2'", "source"),
        (lambda d: d["turns"][2].update(ts="yesterday"), "turn 't2'", "ts"),
        (lambda d: d["turns"][2].update(ts="2026-06-01T09:02:00"), "turn 't2'", "ts"),
        (lambda d: d["turns"][2].update(ts="2020-01-01T00:00:00Z"), "turn 't2'", "ts"),
        # Valid local times outside years 1..9999 in UTC: the replay refused them
        # mid-run ("created_at must be epoch seconds ..."), naming no file or turn.
        (lambda d: d["turns"][0].update(ts="0001-01-01T00:00:00+05:00"), "turn 't0'", "ts"),
        (lambda d: d["turns"][10].update(ts="9999-12-31T23:59:59-05:00"), "turn 't10'", "ts"),
        (lambda d: d["turns"][2].update(text="  "), "turn 't2'", "text"),
        (lambda d: d["turns"][2].update(id="t0"), "turn 't0'", "id"),
        (lambda d: d["turns"][2].update(salience_hint=3), "turn 't2'", "salience_hint"),
        (
            lambda d: d["turns"][2].update(mentions=[{"fact": "nope", "value": "x"}]),
            "turn 't2'",
            "mentions[0].fact",
        ),
        (lambda d: d["turns"][2].update(mentions=[{"fact": "pager"}]), "turn 't2'", "mentions[0]"),
        (lambda d: d["turns"][2].update(colour="red"), "turn 't2'", "colour"),
        (lambda d: d["turns"][9]["probe"].update(evidence=["t99"]), "turn 't9'", "probe.evidence"),
        (lambda d: d["turns"][9]["probe"].update(needs=["nope"]), "turn 't9'", "probe.needs"),
        (lambda d: d["turns"][9]["probe"].update(answer=7), "turn 't9'", "probe.answer"),
        (lambda d: d["turns"][9]["probe"].update(detached="yes"), "turn 't9'", "probe.detached"),
        (lambda d: d["turns"][9].update(probe={}), "turn 't9'", "probe"),
        (lambda d: d["turns"][3].update(probe={"evidence": ["t9"]}), "turn 't3'", "probe.evidence"),
        # a lone surrogate (the JSON escape "\ud800") loads but cannot be written as UTF-8
        (lambda d: d.update(id="x\ud800"), "top level", "id"),
        (lambda d: d.update(meta={"note": ["ok", "\udc00"]}), "top level", "meta.note[1]"),
        (lambda d: d["turns"][2].update(text="hi \ud800"), "turn 't2'", "text"),
        (lambda d: d["turns"][2].update(id="t\ud800"), "turn 't\\ud800'", "id"),
        (lambda d: d["turns"][2].update(scope="\ud800"), "turn 't2'", "scope"),
        (lambda d: d["turns"][2].update(session="s\ud800"), "turn 't2'", "session"),
        (lambda d: d["turns"][2].update(meta={"\ud800": 1}), "turn 't2'", "meta"),
        (lambda d: d["turns"][9]["probe"].update(answer="\ud800"), "turn 't9'", "probe.answer"),
    ],
)
def test_validation_names_file_turn_and_field(
    tmp_path: Path, mutate: Any, where: str, field: str
) -> None:
    d = raw()
    mutate(d)
    p = write(tmp_path, "bad.json", d)
    with pytest.raises(TranscriptError) as err:
        load(p)
    msg = str(err.value)
    assert str(p) in msg and where in msg and f"field '{field}'" in msg
    msg.encode("utf-8")  # the message itself can be printed


def test_every_problem_is_reported(tmp_path: Path) -> None:
    d = raw()
    d["turns"][0]["role"] = "bot"
    d["turns"][5]["text"] = ""
    with pytest.raises(TranscriptError, match="2 problems") as err:
        load(write(tmp_path, "bad.json", d))
    assert "turn 't0'" in str(err.value) and "turn 't5'" in str(err.value)


def test_invalid_json_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="line 1, column"):
        load(write(tmp_path, "broken.json", '{"format": '))
    with pytest.raises(TranscriptError, match="no such transcript"):
        load(tmp_path / "missing.json")


def test_a_file_with_a_utf8_byte_order_mark_loads(tmp_path: Path) -> None:
    # It was "not valid JSON at line 1, column 1: Unexpected UTF-8 BOM (decode using
    # utf-8-sig)", though LoCoMo and LongMemEval files with one load.
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "handmade.json").read_bytes())
    assert load(p).to_dict() == load(FIXTURES / "handmade.json").to_dict()


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_nan_or_infinity_is_refused_by_name(tmp_path: Path, word: str) -> None:
    """Python's json reads these non-JSON words as floats: a NaN in meta was loaded,
    and a NaN salience_hint was refused as 'must be a number in 0..1, got nan'."""
    text = (FIXTURES / "handmade.json").read_text(encoding="utf-8")
    bad = text.replace('"salience_hint": 0.9', f'"salience_hint": {word}', 1)
    assert bad != text
    with pytest.raises(TranscriptError, match=rf"holds {word}, which is not JSON") as err:
        load(write(tmp_path, "nan.json", bad))
    assert "write null or a finite number" in str(err.value)


def test_a_deeply_nested_file_or_a_huge_integer_is_a_transcript_error(tmp_path: Path) -> None:
    """Both were internal errors (RecursionError; ValueError 'Exceeds the limit (4300
    digits)'), exit 3 from memlab run transcripts=dir, not a bad-input error."""
    with pytest.raises(TranscriptError, match="nests arrays or objects too deeply"):
        load(write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000))
    huge = '{"format": "memlab.transcript/1", "id": "x", "meta": {"n": ' + "1" * 5000 + "}}"
    with pytest.raises(TranscriptError, match=r"huge.json: holds a value that cannot be read"):
        load(write(tmp_path, "huge.json", huge))


def test_load_dir_reports_every_bad_file(tmp_path: Path) -> None:
    good = raw()
    write(tmp_path, "a.json", good)
    bad1 = copy.deepcopy(good)
    bad1["id"] = "b"
    bad1["turns"][0]["role"] = "bot"
    write(tmp_path, "b.json", bad1)
    write(tmp_path, "c.json", "not json")
    with pytest.raises(TranscriptError) as err:
        load_dir(tmp_path)
    msg = str(err.value)
    assert "2 of 3 transcripts" in msg and "b.json" in msg and "c.json" in msg
    with pytest.raises(TranscriptError, match="holds no"):
        load_dir(tmp_path / "empty" if (tmp_path / "empty").mkdir() is None else tmp_path)


def test_duplicate_transcript_ids(tmp_path: Path) -> None:
    write(tmp_path, "a.json", raw())
    write(tmp_path, "b.json", raw())
    with pytest.raises(TranscriptError, match="same transcript id"):
        load_dir(tmp_path)


def test_from_dict_direct() -> None:
    t = Transcript.from_dict(raw())
    assert t.probes[0].probe is not None and t.probes[0].probe.answer == "Nomad"


def test_detached_probes_round_trip_and_default_to_false(tmp_path: Path) -> None:
    d = raw()
    d["turns"][9]["probe"]["detached"] = True
    t = Transcript.from_dict(d)
    assert t.turns[9].probe is not None and t.turns[9].probe.detached
    assert t.to_dict()["turns"][9]["probe"]["detached"] is True
    plain = Transcript.from_dict(raw())
    assert plain.turns[9].probe is not None and not plain.turns[9].probe.detached
    assert "detached" not in plain.to_dict()["turns"][9]["probe"]


def test_a_session_layer_that_names_another_scope_is_refused() -> None:
    """A layered strategy keeps a session's episodes in ``<scope>:<session>``: a
    transcript where that is also a turn's scope, or another session's layer, would
    give two scopes one store scope (the session read the other scope's records as
    its own, and ``leaks`` counted them as the probe's)."""
    d = raw()
    d["turns"][0]["scope"] = "alice:support:s1"  # another scope, no session
    for turn in d["turns"][1:4]:
        turn["scope"], turn["session"] = "alice:support", "s1"
    with pytest.raises(TranscriptError, match=r"turn 't1', field 'session'.*also the scope"):
        Transcript.from_dict(d)
    d = raw()
    d["turns"][0]["session"] = "support:s1"
    d["turns"][0]["scope"] = "alice"
    d["turns"][1]["scope"], d["turns"][1]["session"] = "alice:support", "s1"
    with pytest.raises(TranscriptError, match=r"turn 't1'.*also that of scope 'alice'"):
        Transcript.from_dict(d)
    d = raw()  # sessions of their own scopes are fine, in any number of turns
    for turn in d["turns"]:
        turn["session"] = "s1"
    assert {t.session for t in Transcript.from_dict(d).turns} == {"s1"}


def test_fact_state_is_cached_and_sessions_map_turns() -> None:
    t = Transcript.from_dict(raw())
    first = t.fact_state(9, "alice:support")
    assert t.fact_state(9, "alice:support") is first
    assert t.fact_state(9, "alice:support") == t._compute_fact_state(9, "alice:support")
    assert set(t.sessions) == {x.id for x in t.turns}


def test_save_all_names_files_by_id_safely(tmp_path: Path) -> None:
    from memlab.lab.transcripts import save_all

    a, b, c = (Transcript.from_dict(raw()) for _ in range(3))
    a.id, b.id, c.id = "conv/1", "conv:1", "x"
    paths = save_all([a, b, c], tmp_path / "out")
    assert [p.name for p in paths] == ["conv_1.json", "conv_1-2.json", "x.json"]
    assert [load(p).id for p in paths] == ["conv/1", "conv:1", "x"]


def test_save_all_gives_an_id_too_long_for_a_file_name_a_file(tmp_path: Path) -> None:
    # memlab convert of a LoCoMo sample with a 300-character sample_id failed with
    # "cannot write .../xxx...x.json: File name too long" (exit 3).
    from memlab.lab.transcripts import save_all

    a, b = (Transcript.from_dict(raw()) for _ in range(2))
    a.id, b.id = "x" * 300, "x" * 299 + "y"
    paths = save_all([a, b], tmp_path / "out")
    assert len({p.name for p in paths}) == 2 and all(len(p.name.encode()) < 255 for p in paths)
    assert [load(p).id for p in paths] == [a.id, b.id]
