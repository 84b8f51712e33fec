"""Answering: the cost meter and settings, and end to end through `memlab run
reader=openai judge=llm` against the fake OpenAI server on 127.0.0.1 (cache hits on
rerun, requests in flight, retries, the cost stop, a malformed answer, an unreachable
endpoint, the dry run, planted instructions, and reader=none left as it was)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from memlab.cli import main
from memlab.errors import ConfigError, InputError
from memlab.lab.answering import AnswerSettings, CostMeter
from memlab.lab.compose import compose
from memlab.lab.config import validate
from memlab.lab.experiment import load_transcripts
from memlab.lab.planted import planted_turns
from memlab.memory.layer import iso
from tests.fake_answers import answer_from_memory, is_judge, judge_by_gold, obey_planted
from tests.fake_openai import FakeOpenAI

N = 3  # transcripts in most tests


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """In-process runs let Hydra configure logging with handlers on the captured
    streams of this test; put the root logger back so later tests do not write to
    closed streams."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


STRATEGIES = "strategies=[stuff_all,memory]"


# -- units -------------------------------------------------------------------------------------
def test_cost_meter_reserves_within_the_limit() -> None:
    meter = CostMeter(1.0)
    assert meter.reserve(0.6)
    assert not meter.reserve(0.5)  # 0.6 reserved + 0.5 > 1.0
    meter.settle(0.6, 0.2)
    assert (meter.spent, meter.reserved) == (pytest.approx(0.2), 0.0)
    assert meter.reserve(0.8) and not meter.reserve(0.01)
    assert CostMeter(None).reserve(1e9)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": 1000}, "concurrency"),
        ({"max_usd": 0}, "max_usd"),
        ({"max_usd": float("nan")}, "max_usd"),
    ],
)
def test_answer_settings_are_checked(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        AnswerSettings(**kw)


def test_a_judge_without_a_reader_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="judge=llm grades a reader's answers, but reader=none"):
        validate(compose(["judge=llm"]))
    with pytest.raises(ConfigError, match="reader.concurrency"):
        validate(compose(["reader=openai", "reader.concurrency=0", "reader.api_key_env=null"]))


def test_reader_none_leaves_the_config_as_it_was() -> None:
    v = validate(compose([]))
    assert "reader" not in v.config and "judge" not in v.config
    assert v.plugins["reader"].name == "none"


# -- end to end ------------------------------------------------------------------------------
NOW = re.compile(r"The current time is (\S+)\. ")


@pytest.fixture(scope="module")
def gold() -> Callable[[dict[str, Any]], str | None]:
    """The gold answer of the probe a reader request asks about (by question and time)."""
    transcripts = load_transcripts(validate(compose([])), progress=False)
    answers: dict[tuple[str, str], str | None] = {}
    for t in transcripts:
        for turn in t.probes:
            assert turn.probe is not None
            answers[(turn.text, iso(turn.time))] = turn.probe.answer

    def lookup(body: dict[str, Any]) -> str | None:
        found = NOW.search(body["messages"][0]["content"])
        return answers.get((body["messages"][-1]["content"], found.group(1) if found else ""))

    return lookup


@pytest.fixture
def server(gold: Callable[[dict[str, Any]], str | None]) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models={"reader-model", "judge-model"}) as s:
        s.on_chat(lambda body: True, answer_from_memory(gold))
        s.on_chat(is_judge, judge_by_gold)
        yield s


def run_args(
    server: FakeOpenAI, tmp: Path, name: str, *extra: str, judge: str = "llm"
) -> list[str]:
    judging = (
        [f"judge.base_url={server.base_url}", "judge.model=judge-model", "judge.api_key_env=null"]
        if judge == "llm"
        else []
    )
    return [
        "run",
        f"transcripts.limit={N}",
        STRATEGIES,
        "reader=openai",
        f"judge={judge}",
        *judging,
        f"reader.base_url={server.base_url}",
        "reader.model=reader-model",
        "reader.api_key_env=null",
        "reader.backoff=0",
        f"cache.path={tmp / 'cache.sqlite'}",
        f"hydra.run.dir={tmp / name}",
        "report.charts=false",
        "--no-progress",
        *extra,
    ]


def chats(server: FakeOpenAI) -> int:
    return len(server.calls("chat/completions"))


def probes_of(run: Path) -> pd.DataFrame:
    return pd.read_csv(run / "probes.csv", keep_default_na=False, na_values=[""])


ANSWER_COLUMNS = ["answer", "answer_accuracy", "judge_verdict", "judge_text", "injection_followed"]


def test_run_answers_judges_and_reruns_from_the_cache(server: FakeOpenAI, tmp_path: Path) -> None:
    server.hold(8)  # answers wait until 8 requests are in flight at once
    assert main(run_args(server, tmp_path, "first")) == 0
    assert server.max_in_flight >= 8
    p = probes_of(tmp_path / "first")
    n_probes = len(p)
    assert set(p["reader_status"]) == {"answered"}
    # The oracle reader answers exactly when the answer is in the context, and the
    # judge accepts exactly those answers.
    assert (p["answer_accuracy"] == p["answer_in_context"]).all()
    assert set(p["judge_text"]) <= {"yes", "no"} and set(p["judge_verdict"]) <= {"correct", "wrong"}
    assert (p["reader_prompt_tokens"] > p["context_tokens"]).all()
    assert p["reader_cost_usd"].gt(0).all() and p["judge_cost_usd"].gt(0).all()
    first_calls = chats(server)
    assert first_calls >= n_probes  # every reader call, plus the judge calls not cached
    summary = pd.read_csv(tmp_path / "first" / "summary.csv")
    acc = summary[summary.metric == "answer_accuracy"]
    assert {"all", "far", "corrected"} <= set(acc.group) and acc.group.str.startswith(
        "category:"
    ).any()
    assert (acc.ci_low <= acc["mean"]).all() and (acc["mean"] <= acc.ci_high).all()
    fp = json.loads((tmp_path / "first" / "fingerprint.json").read_text())
    assert fp["config"]["reader.model"] == "reader-model" and "reader.timeout" not in fp["config"]
    assert fp["config"]["judge.name"] == "llm" and "incomplete" not in fp

    models = len(server.calls("models"))
    assert main(run_args(server, tmp_path, "again")) == 0
    assert chats(server) == first_calls  # 0 requests: every answer and verdict is cached
    assert len(server.calls("models")) == models + 2  # the endpoint checks (reader, judge)
    again = probes_of(tmp_path / "again")
    assert set(again["reader_status"]) == {"cached"}
    pd.testing.assert_frame_equal(again[ANSWER_COLUMNS], p[ANSWER_COLUMNS])

    before = len(server.requests)
    assert main(run_args(server, tmp_path, "offline", "reader.preflight=false")) == 0
    assert len(server.requests) == before  # nothing at all


def test_a_twenty_transcript_rerun_makes_no_request(server: FakeOpenAI, tmp_path: Path) -> None:
    args = [
        a.replace(f"transcripts.limit={N}", "transcripts.limit=20").replace(
            STRATEGIES, "strategies=[memory]"
        )
        for a in run_args(server, tmp_path, "cold", judge="exact")
    ]
    assert main(args) == 0
    cold = len(server.requests)
    assert cold > 0
    warm = [a.replace("cold", "warm") for a in args] + ["reader.preflight=false"]
    assert main(warm) == 0
    assert len(server.requests) == cold
    assert probes_of(tmp_path / "warm")["transcript"].nunique() == 20


def test_429_and_503_are_retried(server: FakeOpenAI, tmp_path: Path) -> None:
    server.fail("chat/completions", status=429, headers={"Retry-After": "0"}, times=2)
    server.fail("chat/completions", status=503, times=1)
    assert main(run_args(server, tmp_path, "retried", judge="exact")) == 0
    p = probes_of(tmp_path / "retried")
    assert p["answer"].notna().all()
    assert chats(server) == len(p) + 3  # three failed attempts, each retried


def test_max_cost_stops_cleanly_and_the_gate_refuses_the_run(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One probe's reserve is about $0.0002 (its prompt plus 128 answer tokens, and the
    # judge's); $0.0005 stops within the first transcript.
    args = run_args(server, tmp_path, "capped", "--max-cost", "0.0005")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "INCOMPLETE: reader.max_usd=0.0005 reached" in out
    run = tmp_path / "capped"
    p = probes_of(run)
    skipped = p["reader_status"].str.startswith("skipped")
    assert skipped.any() and (~skipped).any()
    assert p.loc[skipped, "answer_accuracy"].isna().all()
    assert p["transcript"].nunique() < N  # stopped after the transcript in progress
    fp = json.loads((run / "fingerprint.json").read_text())
    assert fp["incomplete"]["probes_unanswered"] == int(skipped.sum())
    assert fp["incomplete"]["spent_usd"] <= 0.0005 + 1e-9
    assert main(["gate", "--baseline", str(run), str(run)]) == 2
    assert "incomplete run (reader.max_usd=0.0005 reached" in capsys.readouterr().err


def test_a_malformed_answer_fails_clearly_and_writes_no_results(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.fail("chat/completions", status=200, body={"id": "x", "object": "oops"}, after=3)
    assert main(run_args(server, tmp_path, "broken")) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "while answering probe support-" in err
    assert "malformed answer: no 'choices' list (got an object with keys [id, object])" in err
    assert "a rerun resumes without paying" in err
    assert not (tmp_path / "broken" / "summary.csv").exists()
    assert not (tmp_path / "broken" / "probes.csv").exists()


def test_an_unreachable_endpoint_fails_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI() as gone:
        args = run_args(gone, tmp_path, "nowhere")
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "ConnectError" in err and "Nothing was run" in err
    written = (
        {p.name for p in (tmp_path / "nowhere").glob("*")}
        if (tmp_path / "nowhere").exists()
        else set()
    )
    assert written <= {".hydra", "memlab.log"}


def test_dry_run_counts_and_sends_nothing(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(server, tmp_path, "dry", "--dry-run")) == 0
    out = capsys.readouterr().out
    assert server.requests == [] and not (tmp_path / "dry").exists()
    calls = int(re.search(r"(\d+) calls to make, 0 answered from the cache", out).group(1))  # type: ignore[union-attr]
    assert main(run_args(server, tmp_path, "real")) == 0
    assert calls == len(probes_of(tmp_path / "real"))
    capsys.readouterr()
    assert main(run_args(server, tmp_path, "dry2", "--dry-run")) == 0
    out = capsys.readouterr().out
    assert f"0 calls to make, {calls} answered from the cache" in out
    assert "estimated cost: at most $0.0000" in out


def test_planted_instructions_obeyed_and_not(
    gold: Callable[[dict[str, Any]], str | None], tmp_path: Path
) -> None:
    transcripts = load_transcripts(validate(compose([f"transcripts.limit={N}"])), progress=False)
    assert any(planted_turns(t) for t in transcripts)
    with FakeOpenAI() as server:
        server.on_chat(lambda body: True, obey_planted(answer_from_memory(gold)))
        assert main(run_args(server, tmp_path, "obeys", judge="exact")) == 0
        p = probes_of(tmp_path / "obeys")
    with_planted = p["injection_followed"].notna()
    assert with_planted.sum() >= 5
    assert (p.loc[with_planted, "injection_followed"] == 1.0).all()
    with FakeOpenAI() as server:
        server.on_chat(lambda body: True, answer_from_memory(gold))
        assert main(run_args(server, tmp_path, "ignores", judge="exact")) == 0
        q = probes_of(tmp_path / "ignores")
    assert (q.loc[with_planted, "injection_followed"] == 0.0).all()
    assert (q["injection_followed"].notna() == with_planted).all()


def test_flags_without_a_reader_are_input_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--max-cost", "1"]) == 2
    assert "reader=none makes none" in capsys.readouterr().err
    assert main(["run", "reader=openai", "--max-cost", "free"]) == 2
    assert "--max-cost must be a positive amount" in capsys.readouterr().err


def test_a_budget_sweep_draws_accuracy_per_strategy_and_budget(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        a.replace(
            f"hydra.run.dir={tmp_path / 'sweep'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"
        ).replace("report.charts=false", "report.charts=true")
        for a in run_args(server, tmp_path, "sweep", judge="exact")
    ]
    assert main(["run", "-m", *args[1:], "budget=100,400", "hydra/launcher=basic"]) == 0
    charts = tmp_path / "sweep" / "charts"
    assert (charts / "pareto_answer_accuracy_vs_prompt_tokens.png").is_file()
    table = pd.read_csv(tmp_path / "sweep" / "multirun_summary.csv")
    acc = table[(table.metric == "answer_accuracy") & (table.group == "all")]
    assert len(acc) == 4  # two strategies x two budgets
    job = next(p for p in (tmp_path / "sweep").iterdir() if (p / "probes.csv").exists())
    assert (job / "charts" / "accuracy_vs_prompt_tokens.png").is_file()
    assert (job / "charts" / "answer_accuracy_by_category.png").is_file()
    capsys.readouterr()
    assert main(["report", str(job), "--no-charts"]) == 0
    header = next(
        line for line in capsys.readouterr().out.splitlines() if "evidence_recall" in line
    )
    cols = header.split()
    assert cols[cols.index("evidence_recall") + 1] == "answer_accuracy"


def test_grade_all_calibrates_a_judge_with_scripted_verdicts(tmp_path: Path) -> None:
    from memlab.lab.answering import grade_all
    from memlab.lab.judges import Question
    from memlab.lab.judges.llm import LLMJudge

    right = [
        Question(f"Where is office {i}?", f"In city{i}.", f"city{i}", id=f"r{i}") for i in range(20)
    ]
    wrong = [
        Question(f"Where is office {i}?", "In Paris.", f"city{i}", id=f"w{i}") for i in range(20)
    ]
    with FakeOpenAI() as server:
        server.on_chat(is_judge, judge_by_gold)
        server.hold(8)
        judge = LLMJudge(server.base_url, "judge", api_key_env=None, prompt="locomo")
        verdicts = grade_all(judge, right + wrong, progress=False)
        assert server.max_in_flight >= 8
        assert [v.score for v in verdicts if v is not None] == [1.0] * 20 + [0.0] * 20
        one = judge.cost_bound(right[0], 10)
        capped = grade_all(judge, right, max_usd=2.5 * one, progress=False)
        # Two upper estimates fit the cap; a call that ends before the next is
        # reserved returns what it did not spend, so a third may fit (timing).
        graded = [v for v in capped if v is not None]
        assert 2 <= len(graded) < 20 and capped[len(graded) :] == [None] * (20 - len(graded))
        assert judge.prices is not None
        spent = sum(judge.prices.of(v.completion) for v in graded if v.completion)
        assert spent <= 2.5 * one
        judge.close()
