"""Judge calibration (memlab.lab.calibration, ``memlab judge calibrate``): the answer
sets, Wilson intervals by hand, rule judges, and the pipeline with scripted judges on
the local fake server (a generous and a strict one: scripts, not models)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from memlab.cli import main
from memlab.errors import InputError
from memlab.lab import calibration
from memlab.lab.answering import grade_all
from memlab.lab.judges import Question
from memlab.lab.judges.exact import ExactJudge
from memlab.lab.judges.f1 import F1Judge
from tests.conftest import FIXTURES, shared_path
from tests.fake_answers import judge_by_prompt, lenient_judge, strict_judge
from tests.fake_openai import FakeOpenAI

SPECIFIC = FIXTURES / "wrong_answers_v1_handmade.json"
VAGUE = FIXTURES / "wrong_answers_v2_handmade.json"


def test_wilson_interval_by_hand() -> None:
    lo, hi = calibration.wilson(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert calibration.wilson(0, 20)[0] == 0.0 and calibration.wilson(0, 20)[1] == pytest.approx(
        0.1611, abs=1e-4
    )
    assert calibration.wilson(20, 20)[1] == 1.0
    assert all(math.isnan(x) for x in calibration.wilson(0, 0))


def test_answer_sets_from_the_audit_files() -> None:
    items = calibration.load_answers(SPECIFIC, VAGUE)
    sets = pd.Series([i.set for i in items]).value_counts().to_dict()
    assert sets == {"golden": 5, "specific": 4, "vague": 4}  # 5 distinct questions
    golden = {i.question_id: i for i in items if i.set == "golden"}
    assert golden["locomo_0_qa0"].answer == golden["locomo_0_qa0"].gold == "7 May 2023"
    assert (
        golden["locomo_0_qa0"].category == "temporal"
        and golden["locomo_0_qa4"].category == "single-hop"
    )
    with pytest.raises(InputError, match="does not exist"):
        calibration.load_answers(FIXTURES / "nope.json", VAGUE)


def test_find_audit(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="holds no wrong_answers_v1"):
        calibration.find_audit(tmp_path)
    (tmp_path / "wrong_answers_v1_x.json").write_text("[]")
    (tmp_path / "wrong_answers_v2_x.json").write_text("[]")
    found = calibration.find_audit(tmp_path)
    assert found["specific"].name == "wrong_answers_v1_x.json"


def test_rule_judge_rates_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["judge", "calibrate", "--specific", str(SPECIFIC), "--vague", str(VAGUE),
            "--out", str(tmp_path), "judge=exact", "--no-progress"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "100.0% [56.6%, 100.0%] of 5" in out  # the gold answers, all accepted
    summary = pd.read_csv(tmp_path / "summary.csv").set_index(["set", "category"])
    assert summary.loc[("golden", "all")].accept_rate == 1.0
    assert summary.loc[("specific", "all")].accepted == 0
    assert summary.loc[("vague", "all")].rate == "false-accept"
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["judge"]["name"] == "exact" and prov["judge"]["model"] is None
    assert len(prov["answers"]["specific"]["sha256"]) == 64
    graded = pd.read_csv(tmp_path / "graded.csv")
    assert len(graded) == 13 and set(graded.verdict) == {"correct", "wrong"}
    assert (tmp_path / "calibration.md").read_text().startswith("# Judge calibration")


def test_bad_arguments_are_clear_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["judge"]) == 2
    assert "memlab judge calibrate" in capsys.readouterr().err
    assert main(["judge", "train"]) == 2
    assert main(["judge", "calibrate", "judge=exact"]) == 2
    assert "pass --audit DIR" in capsys.readouterr().err
    assert main(["judge", "calibrate", "--audit", str(FIXTURES), "budget=3"]) == 2
    assert "takes judge=NAME" in capsys.readouterr().err
    assert main(["judge", "calibrate", "--specific", str(SPECIFIC), "--vague", str(VAGUE),
                 "judge=oracle"]) == 2  # fmt: skip
    assert "judge" in capsys.readouterr().err
    assert main(["judge", "calibrate", "--audit", str(FIXTURES), "--bogus"]) == 2
    # NaN or above 1 accepted nothing (every rate 0%), 0 or below everything
    for bad in ("nan", "1.5", "0", "-1"):
        assert main(["judge", "calibrate", "--specific", str(SPECIFIC), "--vague", str(VAGUE),
                     "--threshold", bad, "--out", str(tmp_path), "judge=exact"]) == 2  # fmt: skip
        assert "--threshold must be a number in (0, 1]" in capsys.readouterr().err
    with pytest.raises(InputError, match="threshold"):
        calibration.grade(ExactJudge(), [], threshold=float("nan"))
    assert main(["judge", "--help"]) == 0


def test_the_f1_judge_grades_from_many_threads() -> None:
    """Its stemmer keeps state; one per thread (a shared one crashed under grade_all)."""
    items = calibration.load_answers(SPECIFIC, VAGUE) * 30
    qs = [Question(i.question, i.answer, i.gold, i.category, "locomo") for i in items]
    judge = F1Judge()
    alone = [judge.grade(q).score for q in qs]
    together = grade_all(judge, qs, concurrency=8, progress=False)
    assert [v.score for v in together if v is not None] == alone


# -- scripted judges on the local fake server ----------------------------------------------
@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as s:
        s.on_chat(lambda body: True, judge_by_prompt)
        yield s


def calibrate(server: FakeOpenAI, out: Path, prompt: str, *extra: str) -> int:
    return main(
        [
            "judge", "calibrate", "--specific", str(SPECIFIC), "--vague", str(VAGUE),
            "--out", str(out), "--no-progress", "judge=llm", f"judge.base_url={server.base_url}",
            "judge.model=scripted", "judge.api_key_env=null", f"judge.prompt={prompt}",
            f"cache.path={out.parent / 'cache'}", *extra,
        ]
    )  # fmt: skip


def rates(out: Path) -> dict[str, float]:
    s = pd.read_csv(out / "summary.csv")
    return s[s.category == "all"].set_index("set")["accept_rate"].to_dict()


def test_pipeline_with_scripted_judges(server: FakeOpenAI, tmp_path: Path) -> None:
    assert calibrate(server, tmp_path / "lenient", "locomo") == 0
    assert calibrate(server, tmp_path / "strict", "locomo_strict") == 0
    lenient, strict = rates(tmp_path / "lenient"), rates(tmp_path / "strict")
    # The generous script accepts what shares a word with the gold answer or question:
    # one specific-but-wrong answer ("2023") and three of four vague ones.
    assert lenient == {"golden": 1.0, "specific": 0.25, "vague": 0.75}
    assert strict == {"golden": 1.0, "specific": 0.0, "vague": 0.0}
    sent = [r.body["messages"][0]["content"] for r in server.calls("chat/completions")]
    assert sum("Answer to grade:" in m for m in sent) == 13  # the strict prompt, 13 answers
    assert sum("Generated answer:" in m for m in sent) == 13
    prov = json.loads((tmp_path / "strict" / "provenance.json").read_text())
    assert prov["judge"]["model"] == "scripted" and ":locomo_strict:" in prov["judge"]["name"]
    lprov = json.loads((tmp_path / "lenient" / "provenance.json").read_text())
    assert lprov["judge"]["prompt_sha256"] != prov["judge"]["prompt_sha256"]
    # A rerun is answered from the cache: no new judge request.
    before = len(server.calls("chat/completions"))
    assert calibrate(server, tmp_path / "again", "locomo_strict") == 0
    assert len(server.calls("chat/completions")) == before
    assert rates(tmp_path / "again") == strict


def test_pipeline_counts_unreadable_replies_and_stops_at_the_cost_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI() as server:
        server.on_chat(lambda body: "Hmm.", "I cannot tell.")
        assert calibrate(server, tmp_path / "unread", "locomo_strict") == 0
        s = pd.read_csv(tmp_path / "unread" / "summary.csv").set_index(["set", "category"])
        assert s.loc[("golden", "all")].ungraded == 5 and s.loc[("golden", "all")].n == 0
        server.on_chat(lambda body: True, strict_judge)
        capsys.readouterr()
        args = ["--max-cost", "0.0000001", "judge.price_per_1k_input=1.0"]
        assert calibrate(server, tmp_path / "capped", "locomo_strict", *args) == 0
        assert "INCOMPLETE: --max-cost stopped the grading" in capsys.readouterr().out
    with FakeOpenAI() as gone:
        url = gone.base_url
    args = ["judge", "calibrate", "--specific", str(SPECIFIC), "--vague", str(VAGUE),
            "--out", str(tmp_path / "down"), "judge=llm", f"judge.base_url={url}",
            "judge.api_key_env=null", "judge.max_retries=0"]  # fmt: skip
    assert main(args) == 3
    assert not (tmp_path / "down").exists()


def test_scripted_judges_on_the_dev_audit(server: FakeOpenAI, tmp_path: Path) -> None:
    audit = shared_path("datasets", "locomo", "audit")
    for prompt in ("locomo", "locomo_strict"):
        assert main(
            ["judge", "calibrate", "--audit", str(audit), "--out", str(tmp_path / prompt),
             "--no-progress", "judge=llm", f"judge.base_url={server.base_url}",
             "judge.model=scripted", "judge.api_key_env=null", f"judge.prompt={prompt}",
             f"cache.path={tmp_path / 'cache'}"]
        ) == 0  # fmt: skip
    lenient, strict = rates(tmp_path / "locomo"), rates(tmp_path / "locomo_strict")
    assert strict["vague"] < lenient["vague"] / 4 and strict["golden"] > 0.9
    summary = pd.read_csv(tmp_path / "locomo" / "summary.csv")
    assert set(summary.category) == {"multi-hop", "temporal", "open-domain", "single-hop", "all"}
    assert int(summary[(summary.set == "golden") & (summary.category == "all")].n.iloc[0]) == 233


def test_lenient_script_is_what_it_says() -> None:
    body = {"messages": [{"role": "user", "content": "Question: What did Ana paint?\n"
                          "Gold answer: a lake\nGenerated answer: she likes to paint\n\n"}]}  # fmt: skip
    assert json.loads(lenient_judge(body))["label"] == "CORRECT"
    assert json.loads(strict_judge(body))["label"] == "WRONG"


def test_an_output_folder_that_cannot_be_written_is_refused_before_grading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every answer was graded (a model judge's calls paid for) and then the
    write failed: "cannot write .../afile/graded.csv: File exists"."""

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("graded")

    monkeypatch.setattr(calibration, "grade", never)
    afile = tmp_path / "afile"
    afile.write_text("")
    for out in (afile, afile / "sub"):
        args = ["judge", "calibrate", "--specific", str(SPECIFIC), "--vague", str(VAGUE),
                "--out", str(out), "judge=exact", "--no-progress"]  # fmt: skip
        assert main(args) == 3
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--out {out}: {afile} is a file, not a folder" in err
    assert afile.read_text() == ""
