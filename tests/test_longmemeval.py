"""The LongMemEval adapter: every quirk (hand-made fixture), the shared oracle and
S slices, and the upstream retrieval measures in a run's summary."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest

from memlab.cli import main
from memlab.errors import TranscriptError
from memlab.lab.datasets import DatasetWarning
from memlab.lab.datasets.longmemeval import load, parse_date
from memlab.lab.experiment import run
from memlab.lab.replay import ReplaySettings, replay
from memlab.lab.strategies import StuffAll
from memlab.lab.sweep import plan_run
from memlab.lab.transcripts import Transcript, load_dir, parse_ts
from tests.conftest import FIXTURES, shared_path

QUIRKS = FIXTURES / "longmemeval_quirks.json"


def load_quiet(path: Path, **kw: object) -> tuple[list[Transcript], list[str]]:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ts = load(path, progress=False, **kw)  # type: ignore[arg-type]
    return ts, [str(x.message) for x in w if issubclass(x.category, DatasetWarning)]


@pytest.fixture(scope="module")
def fixture() -> dict[str, Transcript]:
    return {t.id: t for t in load_quiet(QUIRKS)[0]}


def question(t: Transcript):  # type: ignore[no-untyped-def]
    turn = t.turns[-1]
    assert turn.id == "question" and turn.probe is not None
    return turn


# -- the hand-made fixture ------------------------------------------------------------
def test_one_transcript_per_question(fixture: dict[str, Transcript]) -> None:
    assert list(fixture) == ["q-user", "q-assistant", "q-update_abs"]
    for qid, t in fixture.items():
        assert t.scopes == [qid] and t.meta["question_type"]
        assert [x.id for x in t.probes] == ["question"]


def test_turns_ids_roles_sessions_in_listed_order(fixture: dict[str, Transcript]) -> None:
    t = fixture["q-user"]
    assert [x.id for x in t.turns] == [
        "sharegpt_abc_0_1",
        "sharegpt_abc_0_2",
        "answer_q1_1_1",
        "answer_q1_1_2",
        # answer_q1_1_3 is empty: skipped
        "ultrachat_42_1",
        "ultrachat_42_2",
        "question",
    ]
    assert [x.role for x in t.turns[:2]] == ["user", "agent"]
    assert [x.source for x in t.turns[:2]] == ["user", "agent"]
    assert t.turns[2].session == "answer_q1_1" and t.turns[2].text.startswith("I just got")
    assert t.turns[0].ts == "2023-05-20T09:00:00Z" and t.turns[1].ts == "2023-05-20T09:00:01Z"
    assert t.turns[0].meta["date"] == "2023/05/20 (Sat) 09:00"


def test_out_of_order_dates_keep_the_listed_order(fixture: dict[str, Transcript]) -> None:
    t = fixture["q-user"]
    # ultrachat_42 is dated 08:15, before answer_q1_1 (12:30): moved just after it.
    u = t.turns[t.index["ultrachat_42_1"]]
    assert u.time == t.turns[t.index["answer_q1_1_2"]].time + 1
    assert u.meta["date"] == "2023/05/21 (Sun) 08:15"
    times = [x.time for x in t.turns]
    assert times == sorted(times)


def test_question_is_a_detached_probe_at_question_date(fixture: dict[str, Transcript]) -> None:
    q = question(fixture["q-user"])
    assert q.ts == "2023-05-30T10:00:00Z" and q.text == "What breed is my dog?"
    p = q.probe
    assert p.detached and p.scored and p.category == "single-session-user"
    assert p.answer == "a beagle"


def test_has_answer_turns_are_evidence_and_answer_sessions_are_evidence_sessions(
    fixture: dict[str, Transcript],
) -> None:
    p = question(fixture["q-user"]).probe
    assert p.evidence == ("answer_q1_1_1",)  # has_answer true; false / missing are not
    assert p.evidence_sessions == ("answer_q1_1",)  # answer_missing_9 is not in the haystack
    a = question(fixture["q-assistant"]).probe
    assert a.evidence == ("answer_q2_1_2",)  # an assistant turn holds the answer
    assert a.answer == "4"  # an integer upstream


def test_question_dated_before_its_last_session_and_unreadable_dates(
    fixture: dict[str, Transcript],
) -> None:
    t = fixture["q-assistant"]
    first = t.turns[t.index["answer_q2_1_2"]].time
    assert t.turns[t.index["sharegpt_x_1_1"]].time == first + 3600  # "someday"
    q = question(t)
    assert q.time == t.turns[-2].time + 1  # question_date 1 May is before the haystack
    assert q.probe.meta["question_date"] == "2023/05/01 (Mon) 07:00"


def test_abstention_questions_are_kept_unscored(fixture: dict[str, Transcript]) -> None:
    p = question(fixture["q-update_abs"]).probe
    assert not p.scored and p.meta["abstention"] and p.evidence == ()
    assert p.evidence_sessions == ("answer_q3_abs_1",) and p.answer.startswith("The information")


def test_one_warning_per_file() -> None:
    _, msgs = load_quiet(QUIRKS)
    assert len(msgs) == 1
    for part in [
        "1 empty turns (skipped)",
        "1 haystack sessions dated before the session listed before them",
        "1 answer session ids missing from the haystack (dropped)",
        "1 haystack dates that cannot be read",
        "1 questions dated before their last haystack session",
    ]:
        assert part in msgs[0], part


def test_repeated_session_ids_and_questions_without_ground_truth(tmp_path: Path) -> None:
    item = json.loads(QUIRKS.read_text())[0]
    item["haystack_session_ids"] = ["s", "s", "answer_q1_1"]
    item["answer_session_ids"] = ["s"]
    bare = dict(item, question_id="bare", answer="")
    bare["haystack_sessions"] = [[{"role": "user", "content": "hi"}]] * 3
    f = tmp_path / "x.json"
    f.write_text(json.dumps([item, bare]))
    ts, msgs = load_quiet(f)
    assert [t.id for t in ts] == ["q-user"]  # "bare" has no answer and no evidence turn
    t = ts[0]
    assert {x.session for x in t.turns if x.session} == {"s", "s#2", "answer_q1_1"}
    assert question(t).probe.evidence_sessions == ("s", "s#2")
    assert "repeated haystack session ids" in msgs[0] and "no answer and no evidence" in msgs[0]


def test_copies_of_a_repeated_answer_session_are_listed_in_haystack_order(tmp_path: Path) -> None:
    """They came in a set's order, which changes with the process's hash seed: two
    conversions (or runs) of one file differed, and the gate refused the second run
    ('transcripts whose content changed')."""
    import os
    import subprocess
    import sys

    item = json.loads(QUIRKS.read_text())[0]
    n = 6
    item["haystack_sessions"] = [[{"role": "user", "content": f"hi {i}"}] for i in range(n)]
    item["haystack_session_ids"] = ["s"] * n
    item["haystack_dates"] = [f"2023/05/2{i} (Sat) 09:00" for i in range(n)]
    item["answer_session_ids"] = ["s"]
    f = tmp_path / "x.json"
    f.write_text(json.dumps([item]))
    code = (
        "import sys, warnings; warnings.simplefilter('ignore');"
        "from memlab.lab.datasets.longmemeval import load;"
        "print(','.join(load(sys.argv[1], progress=False)[0].turns[-1].probe.evidence_sessions))"
    )
    seen = set()
    for seed in range(4):
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        out = subprocess.run(
            [sys.executable, "-c", code, str(f)], capture_output=True, text=True, env=env
        )
        assert out.returncode == 0, out.stderr
        seen.add(out.stdout.strip())
    assert seen == {"s,s#2,s#3,s#4,s#5,s#6"}


def test_parse_date() -> None:
    assert parse_date("2023/05/28 (Sun) 19:47") == parse_ts("2023-05-28T19:47:00Z")
    assert parse_date("2023/5/8 (Mon) 9:05") == parse_ts("2023-05-08T09:05:00Z")
    assert parse_date("2023/02/30 (Thu) 10:00") is None and parse_date(None) is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"sample_id": "conv-1"}]', "field 'question_id': missing"),
        (
            '[{"question_id": "q", "question": "?", "haystack_dates": [], '
            '"haystack_session_ids": ["a"], "haystack_sessions": [[]]}]',
            "'haystack_dates': has 0 entries for 1 haystack sessions",
        ),
        (
            '[{"question_id": "q", "question": "?", "haystack_dates": ["2023/01/01 (Sun) 10:00"], '
            '"haystack_session_ids": ["a"], "haystack_sessions": [[{"role": "bot", "content": "x"}]]}]',
            r"haystack_sessions\[0\]\[0\].role': must be 'user' or 'assistant'",
        ),
    ],
)
def test_files_that_are_not_longmemeval_get_clear_errors(
    tmp_path: Path, content: str, message: str
) -> None:
    f = tmp_path / "x.json"
    f.write_text(content)
    with pytest.raises(TranscriptError, match=message):
        load(f, progress=False)


def test_limit_stops_reading_the_file(tmp_path: Path) -> None:
    items = json.loads(QUIRKS.read_text())
    f = tmp_path / "big.json"
    f.write_text(json.dumps(items)[:-1] + ", {broken")  # a damaged tail
    assert [t.id for t in load_quiet(f, limit=2)[0]] == ["q-user", "q-assistant"]
    with pytest.raises(TranscriptError, match="item #3 is not valid JSON"):
        load(f, progress=False)


# -- ranked retrieval measures on a replay ----------------------------------------------
def test_stuff_all_ranks_by_recency_and_scores_like_upstream(
    fixture: dict[str, Transcript],
) -> None:
    t = fixture["q-user"]
    rows, _ = replay(t, StuffAll(), ReplaySettings())
    r = rows[0]
    # Ranked newest first: ultrachat_42_2, ultrachat_42_1, answer_q1_1_2,
    # answer_q1_1_1 (evidence, rank 4), sharegpt_abc_0_2, sharegpt_abc_0_1. The whole
    # haystack fits in the context, so both families see the same ranking.
    for family in ("haystack", "context"):
        assert r[f"{family}_turn_recall_any@3"] == 0.0 and r[f"{family}_turn_recall_any@5"] == 1.0
        assert r[f"{family}_turn_ndcg@5"] == pytest.approx(1 / math.log2(4))
        # Sessions as upstream counts them: ultrachat_42, then answer_q1_1's other turn
        # (a session of its own upstream, "noans_q1_1"), then answer_q1_1 at turn 4.
        assert r[f"{family}_session_recall_any@1"] == 0.0
        assert r[f"{family}_session_recall_all@3"] == 1.0
        assert r[f"{family}_session_ndcg@3"] == pytest.approx(1 / math.log2(4))
    assert r["haystack_turns"] == 6 and r["haystack_sessions"] == 3
    assert r["evidence_recall"] == 1.0


def test_run_on_longmemeval_has_rank_metrics_by_question_type(tmp_path: Path) -> None:
    cfg = plan_run(
        [
            "transcripts=longmemeval",
            f"transcripts.path={QUIRKS}",
            "strategies=[sliding_window,memory]",
            "report.bootstrap=0",
            "report.charts=false",
            "progress=false",
        ]
    ).cfg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        result = run(cfg, tmp_path / "run")
    s: pd.DataFrame = result.summary
    groups = set(s.group)
    assert {"category:single-session-user", "category:single-session-assistant"} <= groups
    assert "abstention:knowledge-update" in groups and "category:knowledge-update" not in groups
    mem = s[(s.strategy == "memory") & (s.group == "all")].set_index("metric")["mean"]
    for family in ("haystack", "context"):
        for level in ("session", "turn"):
            for k in (1, 3, 5, 10, 30, 50):
                for m in ("recall_any", "recall_all", "ndcg"):
                    assert 0.0 <= mem[f"{family}_{level}_{m}@{k}"] <= 1.0
        # Every haystack fits in the budget: all evidence is recalled, by any k >= 7.
        assert mem[f"{family}_turn_recall_all@50"] == 1.0
        assert mem[f"{family}_session_recall_all@50"] == 1.0
    n = s[(s.group == "all") & (s.metric == "haystack_session_recall_any@5")]["n"]
    assert set(n) == {2}  # the abstention question is left out, as upstream does


# -- the shared slices ------------------------------------------------------------------
def test_shared_oracle_slice() -> None:
    path = shared_path("datasets", "longmemeval", "longmemeval_oracle_dev48.json")
    ts, msgs = load_quiet(path)
    raw = json.loads(path.read_text())
    assert [t.id for t in ts] == [q["question_id"] for q in raw]
    assert sum(len(t.turns) - 1 for t in ts) == 897
    by_id = {t.id: t for t in ts}
    for q in raw:
        p = question(by_id[q["question_id"]]).probe
        assert p.category == q["question_type"]
        assert p.evidence_sessions == tuple(q["answer_session_ids"])
        assert p.scored == (not q["question_id"].endswith("_abs"))
        assert p.answer == str(q["answer"])
        n_has = sum(bool(x.get("has_answer")) for s in q["haystack_sessions"] for x in s)
        assert len(p.evidence) == n_has
    assert len(msgs) == 1 and "3 haystack sessions dated before" in msgs[0]
    assert "5 questions dated before their last haystack session" in msgs[0]


def test_shared_s_slice_and_convert(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = shared_path("datasets", "longmemeval", "longmemeval_s_dev6.json")
    ts, msgs = load_quiet(path)
    assert len(ts) == 6 and all(480 < len(t.turns) < 545 for t in ts)
    assert all(len(t.turns[-1].probe.evidence) >= 1 for t in ts)  # type: ignore[union-attr]
    assert len(msgs) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        assert (
            main(["convert", "longmemeval", str(path), "--out", str(tmp_path), "--limit", "2"]) == 0
        )
    assert "wrote 2 transcripts" in capsys.readouterr().out
    assert [t.to_dict() for t in load_dir(tmp_path)] == [t.to_dict() for t in ts[:2]]


def test_a_replay_gives_the_same_figures_every_time(tmp_path: Path) -> None:
    """Four questions whose figures differed from run to run while record ids
    were random (ties on created_at, between a note or reflection and its newest
    source, were broken by id): two replays in one process agree probe by probe."""
    path = shared_path("datasets", "longmemeval", "longmemeval_oracle_dev48.json")
    cfg = plan_run(
        [
            "transcripts=longmemeval",
            f"transcripts.path={path}",
            "transcripts.ids=[195a1a1b,4d6b87c8,9aaed6a3,993da5e2]",
            "strategies=[memory_longterm_reflect]",
            "report.bootstrap=0",
            "report.charts=false",
            "progress=false",
        ]
    ).cfg
    runs = []
    for i in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DatasetWarning)
            runs.append(run(cfg, tmp_path / f"run{i}").probes)
    cols = ["transcript", "probe", "evidence_recall", "context_tokens", "context_ids"]
    a, b = (r[cols].sort_values(["transcript", "probe"]).reset_index(drop=True) for r in runs)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"role": ["user"]}, r"haystack_sessions\[0\]\[0\].role': must be 'user' or 'assistant'"),
        ({"role": {}}, r"haystack_sessions\[0\]\[0\].role': must be 'user' or 'assistant'"),
        ({"answer_session_ids": 5}, "'answer_session_ids': must be a list .* got int"),
        ({"answer_session_ids": "s1"}, "'answer_session_ids': must be a list .* got str"),
    ],
)
def test_wrong_typed_fields_are_errors_naming_the_question(
    tmp_path: Path, capsys, change: dict[str, object], message: str
) -> None:  # type: ignore[no-untyped-def]
    # An unhashable role and a number as answer_session_ids were internal
    # TypeErrors; a string was read as a list of one-character session ids.
    item = json.loads(QUIRKS.read_text())[0]
    if "role" in change:
        item["haystack_sessions"][0][0]["role"] = change["role"]
    else:
        item.update(change)
    f = tmp_path / "x.json"
    f.write_text(json.dumps([item]))
    with pytest.raises(TranscriptError, match=message):
        load_quiet(f)
    assert main(["convert", "longmemeval", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and item["question_id"] in err and "Traceback" not in err


@pytest.mark.parametrize("date", ["9999/12/31 (Fri) 23:59", "0001/01/01 (Mon) 00:00"])
def test_dates_out_of_range_count_as_unreadable(tmp_path: Path, date: str) -> None:
    # Year 9999 with a long session was an internal ValueError (past year 10000);
    # year 1 was a TranscriptError about timestamps the user never wrote.
    item = json.loads(QUIRKS.read_text())[0]
    item["haystack_dates"] = [date] * len(item["haystack_dates"])
    item["haystack_sessions"][0] = [
        {"role": "user", "content": f"turn {j}"} for j in range(90)
    ] + item["haystack_sessions"][0]
    f = tmp_path / "x.json"
    f.write_text(json.dumps([item]))
    ts, msgs = load_quiet(f)
    assert len(ts) == 1 and "haystack dates that cannot be read" in msgs[0]
    assert parse_date(date) is None


def test_a_repeated_question_id_is_an_error_naming_both_items(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # Both were loaded as transcripts with one id (convert wrote one over the other).
    item = json.loads(QUIRKS.read_text())[0]
    f = tmp_path / "x.json"
    f.write_text(json.dumps([item, item]))
    with pytest.raises(TranscriptError, match=r"item #1 .* the same question_id as item #0"):
        load_quiet(f)
    assert main(["convert", "longmemeval", str(f), "--out", str(tmp_path / "out")]) == 2
    assert "same question_id" in capsys.readouterr().err
