"""The supersession benchmark (benchmarks/supersession.py): ground truth from
mentions, the replay and the CLI's outputs (the data it reads and the cost bench
have test files of their own)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.supersession import (
    SHIPPED,
    Episode,
    Turn,
    edge_summary,
    gold_edges,
    main,
    make_embedder,
    records_of,
    replay,
    style_of,
)
from memlab.memory.consolidate import NoConsolidator
from memlab.memory.rule_consolidator import RuleConsolidator

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def turn(i: int, source: str, text: str, scope: str = "a", **mentions: str) -> Turn:
    return Turn(f"t{i}", 1000.0 + i, scope, source, source, text, dict(mentions))


EPISODE = Episode(
    "e",
    [
        turn(0, "user", "We deploy everything on Heroku.", host="Heroku"),
        turn(1, "agent", "Noted: Heroku.", host="Heroku"),
        turn(2, "tool", "deploy.status -> Heroku ok"),
        turn(3, "user", "Heroku is what bob uses.", scope="b", host="Heroku"),
        turn(4, "user", "We moved off Heroku to Fly.io last week.", host="Fly.io"),
        turn(5, "agent", "Fly.io, as you mentioned.", host="Fly.io"),
        turn(6, "user", "Actually, we're on Render now.", host="Render"),
    ],
)


def test_gold_edges_follow_mentions_and_scope() -> None:
    turns = EPISODE.turns
    assert gold_edges(turns, 4, {0, 1, 3}) == {0, 1}  # echo included, bob's scope not
    assert gold_edges(turns, 5, {4}) == set()  # restating the value in force
    assert gold_edges(turns, 6, {4, 5}) == {4, 5}  # a chain: only what is still active
    assert gold_edges(turns, 2, {0, 1}) == set()  # untrusted turns supersede nothing
    assert style_of(turns[4], turns[0]) == "names-old"
    assert style_of(turns[6], turns[4]) == "cue"


def test_replay_scores_the_detector_and_can_fail() -> None:
    emb = make_embedder("hash")
    recs = records_of(EPISODE, emb)
    edges, _ = replay(EPISODE, recs, RuleConsolidator(), "oracle")
    good = edge_summary(pd.DataFrame(edges))
    edges, _ = replay(EPISODE, recs, NoConsolidator(), "oracle")
    bad = edge_summary(pd.DataFrame(edges))
    assert good["gold_edges"] == bad["gold_edges"] == 4
    assert good["recall"] >= 0.5 and good["precision"] == 1.0
    assert bad["recall"] == 0.0 and bad["caught_all"] == 0.0


def test_the_command_writes_tables_and_a_chart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for f in sorted(SHIPPED.glob("*.json"))[:2]:
        shutil.copy(f, data / f.name)
    out = tmp_path / "out"
    argv = ["--dir", str(data), "--embedder", "hash", "--corpus", "--cost", "60",
            "--cost-writes", "4", "--longmemeval", str(FIXTURES / "longmemeval_quirks.json"),
            "--out", str(out), "--set", "min_similar=0.5"]  # fmt: skip
    assert main(argv) == 0
    summary = pd.read_csv(out / "supersession.csv")
    assert set(summary["mode"]) == {"oracle", "closed"}
    assert summary["precision"].between(0, 1).all()
    assert (out / "supersession.png").stat().st_size > 0
    corpus = pd.read_csv(out / "supersession-corpus.csv")
    assert corpus[corpus.kind == "ALL"]["cases"].iloc[0] >= 60
    cost = pd.read_csv(out / "supersession-cost.csv")
    assert set(cost["workload"]) == {"bench-corpus", "transcript-user", "transcript-all"}
    assert (cost["ratio_p50"] > 0).all()
    assert list(out.glob("supersession-lme-*.csv"))
    with pytest.raises(SystemExit, match="no field"):
        main(["--set", "nonsense=1", "--out", str(out)])
