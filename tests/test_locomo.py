"""The LoCoMo adapter: every quirk of the upstream file (hand-made fixture), the
shared development slice, replay of detached probes, `memlab run` and `memlab
convert` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from memlab.cli import main
from memlab.errors import TranscriptError
from memlab.lab.datasets import DatasetWarning, load_source
from memlab.lab.datasets.locomo import CATEGORIES, load, parse_date, repair_evidence
from memlab.lab.replay import ReplaySettings, replay
from memlab.lab.strategies import SlidingWindow
from memlab.lab.transcripts import Transcript, load_dir, parse_ts
from tests.conftest import FIXTURES, shared_path

QUIRKS = FIXTURES / "locomo_quirks.json"


def load_quiet(path: Path, **kw: object) -> tuple[list[Transcript], list[str]]:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ts = load(path, progress=False, **kw)  # type: ignore[arg-type]
    return ts, [str(x.message) for x in w if issubclass(x.category, DatasetWarning)]


@pytest.fixture(scope="module")
def conv_a() -> Transcript:
    return load_quiet(QUIRKS)[0][0]


def probe(t: Transcript, pid: str):  # type: ignore[no-untyped-def]
    p = t.turns[t.index[pid]].probe
    assert p is not None
    return p


# -- the hand-made fixture: one test per quirk ----------------------------------------
def test_one_transcript_per_sample_scoped_by_sample_id() -> None:
    ts, _ = load_quiet(QUIRKS)
    assert [t.id for t in ts] == ["conv-a", "conv-b"]
    for t in ts:
        assert t.scopes == [t.id]
        assert t.meta["dataset"] == "locomo"


def test_sessions_in_numeric_order_and_date_keys_without_sessions_ignored(
    conv_a: Transcript,
) -> None:
    sessions = list(dict.fromkeys(t.session for t in conv_a.turns if t.probe is None))
    # session_10 comes after session_4 (not after session_1), session_5/6 have
    # a date but no turns.
    assert sessions == ["session_1", "session_2", "session_3", "session_4", "session_10"]


def test_turn_ids_roles_and_speaker_text(conv_a: Transcript) -> None:
    t = conv_a.turns[0]
    assert (t.id, t.role, t.source, t.session) == ("D1:1", "user", "user", "session_1")
    assert t.text == "Ana: Hi Ben! I adopted a puppy called Biscuit yesterday."
    assert t.meta["speaker"] == "Ana" and t.meta["date"] == "1:56 pm on 8 May, 2023"


def test_image_captions_are_kept_as_text(conv_a: Transcript) -> None:
    t = conv_a.turns[conv_a.index["D1:2"]]
    assert t.text == (
        "Ben: That's lovely! I started painting again. "
        "[shares a photo: a photo of a painting of a sunrise over a lake]"
    )
    assert t.meta["img_url"] == ["https://example.org/sunrise.jpg"]


def test_time_from_session_dates_and_one_second_per_turn(conv_a: Transcript) -> None:
    t1, t2 = conv_a.turns[0], conv_a.turns[1]
    assert t1.ts == "2023-05-08T13:56:00Z" and t2.time - t1.time == 1.0
    assert conv_a.turns[conv_a.index["D10:1"]].ts == "2023-07-02T09:00:00Z"
    times = [t.time for t in conv_a.turns]
    assert times == sorted(times)


def test_missing_unreadable_and_out_of_order_dates_are_repaired(conv_a: Transcript) -> None:
    last_s1 = conv_a.turns[conv_a.index["D1:3"]].time
    # session_2 "not a date" and session_3 (no date key): an hour after the last turn.
    assert conv_a.turns[conv_a.index["D2:1"]].time == last_s1 + 3600
    s3 = conv_a.turns[conv_a.index["D3:1"]].time
    assert s3 == conv_a.turns[conv_a.index["D2:2"]].time + 3600
    # session_4 is dated 1 May, before session_1: moved just after session_3, date kept.
    s4 = conv_a.turns[conv_a.index["D4:1"]]
    assert s4.time == s3 + 1 and s4.meta["date"] == "10:37 am on 1 May, 2023"


def test_probes_come_after_the_conversation_detached_in_scope(conv_a: Transcript) -> None:
    last_turn = max(t.time for t in conv_a.turns if t.probe is None)
    probes = conv_a.probes
    assert [p.id for p in probes] == ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8"]
    assert probes[0].time == last_turn + 3600
    for p in probes:
        assert p.probe is not None and p.probe.detached
        assert (p.role, p.scope) == ("user", "conv-a")
    assert probes[0].text == "What is the name of Ana's puppy?"
    assert probe(conv_a, "Q1").evidence == ("D1:1",) and probe(conv_a, "Q1").answer == "Biscuit"


def test_integer_answers_become_strings(conv_a: Transcript) -> None:
    assert probe(conv_a, "Q2").answer == "3"


def test_categories_keep_their_names(conv_a: Transcript) -> None:
    cats = [probe(conv_a, f"Q{i}").category for i in range(1, 9)]
    assert cats == [
        "single-hop",
        "single-hop",
        "temporal",
        "multi-hop",
        "open-domain",
        "adversarial",
        "adversarial",
        "open-domain",
    ]
    assert CATEGORIES == {
        1: "multi-hop",
        2: "temporal",
        3: "open-domain",
        4: "single-hop",
        5: "adversarial",
    }


def test_adversarial_questions_use_adversarial_answer_and_are_unscored(
    conv_a: Transcript,
) -> None:
    q6, q7 = probe(conv_a, "Q6"), probe(conv_a, "Q7")
    assert q6.answer == "a sunrise" and not q6.scored
    assert q7.answer == "it is sunny" and q7.meta["answer"] == "nothing" and not q7.scored
    assert all(probe(conv_a, f"Q{i}").scored for i in (1, 2, 3, 4, 5, 8))


def test_malformed_evidence_is_split_respelled_or_dropped(conv_a: Transcript) -> None:
    assert probe(conv_a, "Q3").evidence == ("D10:1", "D1:2")  # "D10:1; D1:2"
    assert probe(conv_a, "Q4").evidence == ("D1:2",)  # "D1:02"
    q5 = probe(conv_a, "Q5")  # "D": nothing usable, the answer keeps the question
    assert q5.evidence == () and q5.answer == "unknown" and q5.meta["evidence_dropped"] == ["D"]
    q7 = probe(conv_a, "Q7")  # "D9:99" names no turn
    assert q7.evidence == ("D10:2",) and q7.meta["evidence_dropped"] == ["D9:99"]
    assert probe(conv_a, "Q8").evidence == ()  # empty upstream list, answer kept


def test_a_question_with_nothing_to_check_is_skipped(conv_a: Transcript) -> None:
    assert "Q9" not in conv_a.index


def test_one_warning_per_file_counts_every_repair() -> None:
    _, msgs = load_quiet(QUIRKS)
    assert len(msgs) == 1
    msg = msgs[0]
    assert msg.startswith(str(QUIRKS))
    for part in [
        "2 sessions without a readable date",
        "1 sessions dated before the previous session",
        "2 evidence strings split or respelled",
        "3 evidence ids naming no turn (dropped)",
        "1 questions with no answer and no usable evidence (skipped)",
        "conv-a Q3: ['D10:1; D1:2']",
    ]:
        assert part in msg, part


def test_repair_evidence_cases() -> None:
    lookup = {(8, 6): "D8:6", (9, 17): "D9:17", (1, 3): "D1:3"}
    assert repair_evidence(["D8:6; D9:17"], lookup) == (["D8:6", "D9:17"], [], True)
    assert repair_evidence(["D1:3"], lookup) == (["D1:3"], [], False)
    assert repair_evidence(["D1:03", "D1:3"], lookup) == (["D1:3"], [], True)
    assert repair_evidence(["D", "D2:2", 7], lookup) == ([], ["D", "D2:2", "7"], False)
    assert repair_evidence(["D8:6, D40:1"], lookup) == (["D8:6"], ["D8:6, D40:1"], True)
    assert repair_evidence(None, lookup) == ([], [], False)
    assert repair_evidence(["D:8:6", "d1:3"], lookup) == (["D8:6", "D1:3"], [], True)


def test_parse_date() -> None:
    assert parse_ts("2023-05-08T13:56:00Z") == parse_date("1:56 pm on 8 May, 2023")
    assert parse_date("12:09 am on 13 September, 2023") == parse_ts("2023-09-13T00:09:00Z")
    assert parse_date("10:04 am on 19 June,2023") == parse_ts("2023-06-19T10:04:00Z")
    assert parse_date("yesterday") is None and parse_date(None) is None


def test_limit_and_ids_select_samples() -> None:
    assert [t.id for t in load_quiet(QUIRKS, limit=1)[0]] == ["conv-a"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        ts = load_source("locomo", str(QUIRKS), ids=["conv-b", "conv-a"])
        assert [t.id for t in ts] == ["conv-b", "conv-a"]
        with pytest.raises(TranscriptError, match=r"\['conv-z'\] not found"):
            load_source("locomo", str(QUIRKS), ids=["conv-z"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"sample_id": "x"}', "expected a JSON array"),
        ('[{"question_id": "q"}]', "has no 'sample_id'; is this a LoCoMo file"),
        ('[{"sample_id": "x", "conversation": 3}]', "field 'conversation'"),
        ('[{"sample_id": "x", "conversation": {"speaker_a": "A"}}]', "holds no session_N"),
        (
            '[{"sample_id": "x", "conversation": {"session_1": [{"text": "hi"}]}}]',
            r"session_1\[0\], field 'dia_id'",
        ),
    ],
)
def test_files_that_are_not_locomo_get_clear_errors(
    tmp_path: Path, content: str, message: str
) -> None:
    f = tmp_path / "x.json"
    f.write_text(content)
    with pytest.raises(TranscriptError, match=message):
        load(f, progress=False)


def test_path_is_required_and_must_be_a_file(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="transcripts.path"):
        load(None)
    with pytest.raises(TranscriptError, match="is a folder"):
        load(tmp_path)


# -- replay: detached probes are asked, never remembered --------------------------------
def test_detached_probes_are_not_observed(conv_a: Transcript) -> None:
    window = SlidingWindow("window", window_turns=3)
    probes, turns = replay(conv_a, window, ReplaySettings())
    ids = [r["context_ids"] for r in probes]
    assert ids[0] == ids[-1] == "D4:1 D10:1 D10:2"  # not the earlier questions
    assert len(turns) == len(conv_a.turns) - len(conv_a.probes)
    er = {r["probe"]: r["evidence_recall"] for r in probes}
    assert er["Q3"] == 0.5 and er["Q1"] == 0.0
    assert probes[0]["distance"] == 9  # D1:1 is 9 conversation turns back


# -- the shared development slice -----------------------------------------------------
def test_shared_slice() -> None:
    path = shared_path("datasets", "locomo", "locomo_dev2.json")
    ts, msgs = load_quiet(path)
    assert [t.id for t in ts] == ["conv-26", "conv-30"]
    conv_turns = [sum(t.probe is None for t in tr.turns) for tr in ts]
    assert conv_turns == [419, 369]
    assert [len(t.probes) for t in ts] == [199, 105]
    raw = json.loads(path.read_text())
    for t, sample in zip(ts, raw, strict=True):
        cats = Counter(CATEGORIES[q["category"]] for q in sample["qa"])
        assert Counter(p.probe.category for p in t.probes) == cats  # type: ignore[union-attr]
        # the slice has session_N_date_time keys without sessions (conv-26: 35 dates, 19 sessions)
        assert len({x.session for x in t.turns if x.session}) == 19
    c26 = ts[0]
    assert probe(c26, "Q38").evidence == ("D8:6", "D9:17")  # upstream "D8:6; D9:17"
    assert probe(c26, "Q2").answer == "2022"  # an integer upstream
    adversarial = [p for t in ts for p in t.probes if p.probe.category == "adversarial"]  # type: ignore[union-attr]
    assert len(adversarial) == 71 and not any(p.probe.scored for p in adversarial)  # type: ignore[union-attr]
    assert probe(c26, next(p.id for p in adversarial)).answer  # adversarial_answer
    assert len(msgs) == 1 and "1 evidence strings split" in msgs[0]


# -- the command line -----------------------------------------------------------------
def test_convert_writes_loadable_format_v1_files(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "conv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        assert main(["convert", "locomo", str(QUIRKS), "--out", str(out)]) == 0
    assert "wrote 2 transcripts" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["conv-a.json", "conv-b.json"]
    again = {t.id: t.to_dict() for t in load_dir(out)}
    direct = {t.id: t.to_dict() for t in load_quiet(QUIRKS)[0]}
    assert again == direct


def test_convert_refuses_a_folder_holding_other_transcripts_unless_forced(
    tmp_path: Path,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    """Before, convert --limit 1 into a folder of an earlier full convert left conv-b
    there, and memlab run transcripts=dir replayed both."""
    out = tmp_path / "conv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        assert main(["convert", "locomo", str(QUIRKS), "--out", str(out)]) == 0
        # the same convert again rewrites its own files
        assert main(["convert", "locomo", str(QUIRKS), "--out", str(out)]) == 0
        capsys.readouterr()
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        assert main(["convert", "locomo", str(QUIRKS), "--out", str(out), "--limit", "1"]) == 2
        err = capsys.readouterr().err
        assert "already holds 1 other *.json file(s) (conv-b.json)" in err and "--force" in err
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
        (out / "notes.txt").write_text("not a transcript")
        assert main(["convert", "locomo", str(QUIRKS), "--out", str(out), "--ids", "conv-a"]) == 2
        args = ["convert", "locomo", str(QUIRKS), "--out", str(out), "--limit", "1", "--force"]
        assert main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == ["conv-a.json", "conv-b.json", "notes.txt"]


def test_convert_errors_exit_2_without_traceback(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["convert", "locomo", str(tmp_path / "nope.json"), "--out", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err


def test_memlab_run_on_locomo_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memlab.cli",
            "run",
            "transcripts=locomo",
            f"transcripts.path={QUIRKS}",
            "transcripts.ids=[conv-a]",
            "strategies=[stuff_all,sliding_window,memory]",
            "report.bootstrap=50",
            "progress=false",
            f"hydra.run.dir={out}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "memlab: warning: " in proc.stderr and "Traceback" not in proc.stderr
    summary = pd.read_csv(out / "summary.csv")
    groups = set(summary.group)
    assert {"all", "category:single-hop", "category:temporal", "abstention:adversarial"} <= groups
    assert "category:adversarial" not in groups  # abstention: kept out of category averages
    er = summary[(summary.metric == "evidence_recall") & (summary.group == "all")]
    assert er.set_index("strategy").loc["stuff_all", "mean"] == 1.0
    assert not summary.metric.str.startswith(
        ("session_", "turn_")
    ).any()  # no evidence sessions, no session/turn rank metrics
    probes = pd.read_csv(out / "probes.csv")
    assert len(probes) == 3 * 8 and set(probes.transcript) == {"conv-a"}
    charts = {p.name for p in (out / "charts").glob("*.png")}
    assert {"evidence_recall_by_category.png", "answer_in_context_by_category.png"} <= charts


@pytest.mark.parametrize("date", ["11:59 pm on 31 December, 9999", "12:00 am on 1 January, 0001"])
def test_dates_out_of_range_count_as_unreadable(tmp_path: Path, date: str) -> None:
    # Year 9999 was an internal ValueError (the turns ran past year 10000); year 1
    # was a TranscriptError about timestamps the user never wrote.
    sample = json.loads(QUIRKS.read_text())[0]
    sample["conversation"]["session_1_date_time"] = date
    f = tmp_path / "x.json"
    f.write_text(json.dumps([sample]))
    ts, msgs = load_quiet(f)
    assert len(ts) == 1 and "sessions without a readable date" in msgs[0]
    assert parse_date(date) is None


def test_a_repeated_sample_id_is_an_error_naming_both_samples(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # Both were loaded as transcripts with one id (convert wrote one over the
    # other); 1 and "1" are the same id once read.
    sample = json.loads(QUIRKS.read_text())[0]
    for ids in (["conv-a", "conv-a"], [1, "1"]):
        f = tmp_path / "x.json"
        f.write_text(json.dumps([dict(sample, sample_id=i) for i in ids]))
        with pytest.raises(TranscriptError, match=r"sample #1 has the same sample_id .* #0"):
            load_quiet(f)
    assert main(["convert", "locomo", str(f), "--out", str(tmp_path / "out")]) == 2
    assert "same sample_id" in capsys.readouterr().err


def test_a_session_number_too_long_to_read_is_an_error(tmp_path: Path) -> None:
    # int() of the 5000 digits was an internal ValueError.
    sample = json.loads(QUIRKS.read_text())[0]
    sample["conversation"]["session_" + "9" * 5000] = [
        {"speaker": "A", "dia_id": "D99:1", "text": "hi"}
    ]
    f = tmp_path / "x.json"
    f.write_text(json.dumps([sample]))
    with pytest.raises(TranscriptError, match=r"'conv-a', field 'conversation': session key"):
        load_quiet(f)


def test_a_dia_id_too_long_to_read_names_no_turn(tmp_path: Path) -> None:
    # int() of the 5000 digits, in an evidence string or a turn's dia_id, was an
    # internal ValueError ("Exceeds the limit (4300 digits)"), exit 3 from convert.
    huge = "D1:" + "1" * 5000
    assert repair_evidence([huge, "D1:3"], {(1, 3): "D1:3"}) == (["D1:3"], [huge], False)
    sample = json.loads(QUIRKS.read_text())[0]
    sample["qa"][0]["evidence"] = [huge]
    sample["conversation"]["session_1"][0]["dia_id"] = "D1:" + "2" * 5000
    f = tmp_path / "x.json"
    f.write_text(json.dumps([sample]))
    ts, msgs = load_quiet(f)
    assert len(ts) == 1 and "evidence ids naming no turn (dropped)" in msgs[0]


def test_nan_and_infinity_read_as_null(tmp_path: Path) -> None:
    """pandas-style exports write NaN for a missing cell. Before, json read it as a
    float, and a NaN answer became the gold answer "nan"."""
    data = json.loads(QUIRKS.read_text(encoding="utf-8"))
    data[0]["conversation"]["session_2_date_time"] = None
    data[0]["qa"][0]["answer"] = None
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    nulls = tmp_path / "a" / "locomo.json"
    nulls.write_text(json.dumps(data), encoding="utf-8")
    text = nulls.read_text(encoding="utf-8")
    nan = tmp_path / "b" / "locomo.json"
    nan.write_text(
        text.replace('"session_2_date_time": null', '"session_2_date_time": NaN', 1).replace(
            '"answer": null', '"answer": -Infinity', 1
        ),
        encoding="utf-8",
    )
    assert nan.read_text(encoding="utf-8").count("NaN") == 1 and "-Infinity" in nan.read_text()
    got, warned = load_quiet(nan)
    want, want_warned = load_quiet(nulls)
    assert [t.to_dict() for t in got] == [t.to_dict() for t in want]
    assert warned == [w.replace(str(nulls), str(nan)) for w in want_warned]
