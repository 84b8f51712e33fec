"""fingerprint.json: transcript content hashes and the experiment config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlab.errors import MemlabError
from memlab.lab import fingerprint as fpm
from memlab.lab.transcripts import Transcript, load
from tests.conftest import FIXTURES

CONFIG = {
    "budget": 800,
    "seed": 0,
    "progress": True,
    "memory": {"weights": {"similarity": 0.6, "recency": 0.15}},
    "report": {"charts": True, "bootstrap": 1000, "far_turns": 10},
    "transcripts": {"name": "dir", "path": "/somewhere"},
    "strategies": {"memory": {"kind": "memory", "memory": {}}},
    "tune": None,
}


def handmade() -> Transcript:
    return load(FIXTURES / "handmade.json")


def test_hash_ignores_formatting_and_location(tmp_path: Path) -> None:
    t = handmade()
    data = json.loads((FIXTURES / "handmade.json").read_text())
    moved = tmp_path / "elsewhere.json"
    moved.write_text(json.dumps(data, indent=4, sort_keys=True))
    assert fpm.transcript_hash(load(moved)) == fpm.transcript_hash(t)
    data["turns"][0]["text"] = "We deploy everything on EKS."
    moved.write_text(json.dumps(data))
    assert fpm.transcript_hash(load(moved)) != fpm.transcript_hash(t)


def test_volatile_keys_are_left_out() -> None:
    exp = fpm.experiment_config(CONFIG)
    assert exp["budget"] == 800 and exp["memory.weights.similarity"] == 0.6
    assert exp["report.far_turns"] == 10 and exp["strategies.memory.kind"] == "memory"
    for volatile in ("seed", "progress", "report.charts", "report.bootstrap", "transcripts.path"):
        assert volatile not in exp
    # An empty mapping is a leaf, so a strategy without overrides still shows.
    assert exp["strategies.memory.memory"] == {}


def test_same_experiment_has_no_differences(tmp_path: Path) -> None:
    t = handmade()
    a = fpm.fingerprint([t], CONFIG)
    b = fpm.fingerprint([t], {**CONFIG, "seed": 7, "progress": False})
    assert a["config_sha256"] == b["config_sha256"]
    fpm.write(tmp_path, a)
    assert fpm.differences(fpm.load(tmp_path), b) == []


def test_differences_name_transcripts_and_keys() -> None:
    t = handmade()
    base = fpm.fingerprint([t], CONFIG)
    changed_cfg = {**CONFIG, "budget": 400, "memory": {"weights": {"similarity": 0.0}}}
    run = fpm.fingerprint([], changed_cfg)
    diffs = fpm.differences(base, run)
    assert "transcripts missing from the run: handmade-01" in diffs
    assert "config key budget: 800 in the baseline, 400 in the run" in diffs
    assert any(
        d.startswith("config key memory.weights.recency: 0.15 in the baseline, absent")
        for d in diffs
    )
    allowed = fpm.differences(base, run, allow=["memory.weights", "budget"])
    assert allowed == ["transcripts missing from the run: handmade-01"]
    other = dict(base, transcripts={"handmade-01": "0" * 64, "extra": "1" * 64})
    diffs = fpm.differences(base, other)
    assert "transcripts whose content changed: handmade-01" in diffs
    assert "transcripts not in the baseline: extra" in diffs


def test_missing_or_bad_fingerprint_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MemlabError, match="has no fingerprint.json"):
        fpm.load(tmp_path, "baseline")
    (tmp_path / "fingerprint.json").write_text("{not json")
    with pytest.raises(MemlabError, match="unreadable"):
        fpm.load(tmp_path)
    (tmp_path / "fingerprint.json").write_bytes(b'{"format": "\xff\xfe"}')  # not UTF-8
    with pytest.raises(MemlabError, match="unreadable"):
        fpm.load(tmp_path)
    (tmp_path / "fingerprint.json").write_text('{"format": "other"}')
    with pytest.raises(MemlabError, match="not a memlab.fingerprint/3 file"):
        fpm.load(tmp_path)


def test_format_1_is_read_in_format_2_terms(tmp_path: Path) -> None:
    """A baseline written before the registries names plug-ins by _target_ and gives
    every strategy the old catch-all keys; it still matches today's fingerprint."""
    old_config = {
        "budget": 400,
        "embedder._target_": "memlab.memory.HashEmbedder",
        "embedder.dims": 384,
        "store._target_": "memlab.memory.InMemoryStore",
        "strategies.memory.kind": "memory",
        "strategies.memory.memory": {},
        "strategies.memory.window_turns": 10,
        "strategies.memory.context_limit": 128000,
        "strategies.sliding_window.kind": "sliding_window",
        "strategies.sliding_window.window_turns": 10,
        "strategies.sliding_window.memory": {},
    }
    (tmp_path / "fingerprint.json").write_text(
        json.dumps({"format": "memlab.fingerprint/1", "transcripts": {}, "config": old_config})
    )
    old = fpm.load(tmp_path, "baseline")
    assert old["partial"] and old["config"] == {
        "budget": 400,
        "embedder.name": "hash",
        "embedder.dims": 384,
        "store.name": "memory",
        "strategies.memory.kind": "memory",
        "strategies.memory.memory": {},
        "strategies.sliding_window.kind": "sliding_window",
        "strategies.sliding_window.window_turns": 10,
    }
    now = {
        "budget": 400,
        "embedder": {"name": "hash", "dims": 384},
        "store": {"name": "memory", "drop_after": False},  # a key format 1 did not record
        "strategies": {
            "memory": {"kind": "memory", "memory": {}},
            "sliding_window": {"kind": "sliding_window", "window_turns": 10, "window_tokens": None},
        },
    }
    assert fpm.differences(old, fpm.fingerprint([], now)) == []
    now["budget"] = 800
    assert fpm.differences(old, fpm.fingerprint([], now)) == [
        "config key budget: 400 in the baseline, 800 in the run"
    ]
    fpm.check_sealed(tmp_path, old)  # format 1 had no seal: nothing to check


def test_a_run_is_sealed_with_its_summary(tmp_path: Path) -> None:
    fpm.write(tmp_path, fpm.fingerprint([handmade()], CONFIG))
    (tmp_path / "summary.csv").write_text("strategy,group,metric,mean\n")
    with pytest.raises(MemlabError, match="holds no finished run"):
        fpm.check_sealed(tmp_path, fpm.load(tmp_path))
    fpm.seal(tmp_path)
    fpm.check_sealed(tmp_path, fpm.load(tmp_path))
    (tmp_path / "summary.csv").write_text("strategy,group,metric,mean\nx,all,leaks,0\n")
    with pytest.raises(MemlabError, match="summary.csv is not the one its run wrote"):
        fpm.check_sealed(tmp_path, fpm.load(tmp_path))


def test_provenance_is_recorded_and_compared() -> None:
    t = handmade()
    judge = {"name": "llm:gpt-4o-mini@x:locomo", "model": "gpt-4o-mini", "prompt_sha256": "a" * 64}
    base_prov = fpm.provenance("locomo", "d" * 64, {"sha256": "e" * 64, "entries": 3}, judge)
    base = fpm.fingerprint([t], CONFIG, base_prov)
    assert base["format"] == "memlab.fingerprint/3"
    assert base["provenance"]["dataset"] == {"name": "locomo", "sha256": "d" * 64}
    assert fpm.differences(base, fpm.fingerprint([t], CONFIG, base_prov)) == []

    def changed(**parts: object) -> list[str]:
        prov = {**base_prov, **parts}
        return fpm.differences(base, fpm.fingerprint([t], CONFIG, prov))

    assert changed(dataset={"name": "locomo", "sha256": "f" * 64}) == [
        f"dataset file differs: sha256 {'d' * 12}… in the baseline, sha256 {'f' * 12}… in the run"
    ]
    assert changed(errata=None) == [
        f"errata file differs: sha256 {'e' * 12}… in the baseline, none in the run"
    ]
    other_prompt = changed(judge={**judge, "prompt_sha256": "b" * 64})
    assert other_prompt == [
        f"judge prompt differs: sha256 {'a' * 12}… in the baseline, sha256 {'b' * 12}… in the run"
    ]
    other_model = changed(judge={**judge, "model": "gpt-4o"})
    assert "judge model differs: 'gpt-4o-mini' in the baseline, 'gpt-4o' in the run" in other_model
    # A deliberate comparison of judges; a fingerprint from before provenance.
    assert (
        fpm.differences(
            base,
            fpm.fingerprint([t], CONFIG, {**base_prov, "judge": None}),
            allow=["provenance.judge"],
        )
        == []
    )
    old = {k: v for k, v in base.items() if k != "provenance"}
    assert fpm.differences(old, fpm.fingerprint([t], CONFIG, base_prov)) == []
