"""Judges: exact, f1 (LoCoMo's token F1) and llm (LongMemEval's and mem0's published
prompts), the Question a probe becomes, and the registry."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlab.lab.judges import JUDGES, Question, Verdict, question_of, says_unknown
from memlab.lab.judges.exact import ExactJudge
from memlab.lab.judges.f1 import F1Judge, f1_score, multi_answer_f1, normalize_answer
from memlab.lab.judges.llm import (
    LLMJudge,
    family_of,
    judge_prompt,
    prompt_sha256,
    read_label,
    read_yes,
)
from memlab.lab.transcripts import Transcript
from memlab.memory import ModelCache
from tests.conftest import shared_path
from tests.fake_answers import is_judge, judge_by_gold
from tests.fake_openai import FakeOpenAI

FIXTURES = Path(__file__).parent / "fixtures"


def q(answer: str, gold: str | None = "GKE", **kw: object) -> Question:
    return Question("Where do we deploy?", answer, gold, **kw)  # type: ignore[arg-type]


def test_registry_holds_the_three_judges() -> None:
    assert JUDGES.names() == ["exact", "f1", "llm"]


# -- exact ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("We deploy on GKE.", 1.0),
        ("gke", 1.0),
        ("GKEs everywhere", 0.0),  # whole words only
        ("EKS", 0.0),
        ("", 0.0),
    ],
)
def test_exact_contains(answer: str, score: float) -> None:
    v = ExactJudge().grade(q(answer))
    assert v.score == score
    assert v.label == ("correct" if score else "wrong")


def test_exact_equal_and_no_gold() -> None:
    judge = ExactJudge(contains=False)
    assert judge.grade(q("GKE!")).score == 1.0
    assert judge.grade(q("We use GKE")).score == 0.0
    v = ExactJudge().grade(q("anything", gold=None))
    assert math.isnan(v.score) and v.label == "ungraded"


def test_abstention_with_rule_judges() -> None:
    for judge in (ExactJudge(), F1Judge()):
        assert judge.grade(q("I don't know.", abstention=True)).score == 1.0
        assert judge.grade(q("The memory does not say.", abstention=True)).score == 1.0
        assert judge.grade(q("It is GKE.", abstention=True)).score == 0.0


def test_says_unknown() -> None:
    assert says_unknown("No information available.")
    assert says_unknown("That is not mentioned in the conversation")
    assert not says_unknown("It is not in Paris but in London")
    assert not says_unknown("Dublin")
    # a typographic apostrophe, as models often write it, says the same
    for typed in ("I don\u2019t know.", "The memory doesn\u2019t say.", "I can\u2018t tell"):
        assert says_unknown(typed)
        assert ExactJudge().grade(q(typed, abstention=True)).score == 1.0


# -- f1 ---------------------------------------------------------------------------------------
def test_normalize_answer_as_locomo() -> None:
    assert normalize_answer("The cat, and a Dog!") == "cat dog"


def test_f1_hand_computed() -> None:
    # tokens after normalization and stemming: answer {run, fast} vs gold {run}
    assert f1_score("running fast", "run") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert f1_score("nothing alike", "GKE") == 0.0
    assert f1_score("", "GKE") == 0.0
    assert f1_score("GKE", "gke") == 1.0
    # multi-hop: mean over gold parts of the best answer part
    assert multi_answer_f1("pottery, camping", "camping, pottery, painting") == pytest.approx(2 / 3)


def test_f1_judge_locomo_rules() -> None:
    judge = F1Judge()
    v = judge.grade(q("camping, pottery", gold="pottery, camping", category="multi-hop"))
    assert v.score == 1.0
    v = judge.grade(q("psychology", gold="Psychology; counseling", category="open-domain"))
    assert v.score == 1.0
    v = judge.grade(q("in May", gold="7 May 2023"))
    assert v.label == "partial" and 0 < v.score < 1 and v.text.startswith("token F1 = ")
    adversarial = dict(abstention=True, dataset="locomo", category="adversarial")
    assert judge.grade(q("Not mentioned in the conversation", **adversarial)).score == 1.0
    assert judge.grade(q("I don't know", **adversarial)).score == 0.0  # LoCoMo's two phrases only


def test_f1_equals_locomo_nltk_f1_on_the_audit_answers() -> None:
    """memlab's F1 (snowball's Porter) against LoCoMo's own (NLTK's PorterStemmer),
    precomputed in tests/fixtures/locomo_f1_nltk.json, on the audit's 466 known-wrong
    answers of the development slice."""
    golden = json.loads((FIXTURES / "locomo_f1_nltk.json").read_text())["values"]
    cats = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
    judge = F1Judge()
    answers: dict[tuple[str, str], dict] = {}
    for name in ("wrong_answers_v1_dev2.json", "wrong_answers_v2_dev2.json"):
        path = shared_path("datasets", "locomo", "audit", name)
        for x in json.loads(path.read_text()):
            answers[(name, x["question_id"])] = x
    assert len(golden) == 466
    for g in golden:
        x = answers[(g["file"], g["question_id"])]
        v = judge.grade(
            Question(
                x["question"],
                str(x["generated_answer"]),
                str(x["golden_answer"]),
                category=cats[g["category"]],
                dataset="locomo",
            )
        )
        assert v.score == pytest.approx(g["f1"], abs=1e-9), g


# -- llm: the prompts -----------------------------------------------------------------------
UPSTREAM = {
    # sha256 of each upstream template filled with ("Q?", "A.", "R!"), computed from
    # xiaowu0162/LongMemEval src/evaluation/evaluate_qa.py and mem0 evaluation/metrics/
    # llm_judge.py (commit 2352a441...) as published.
    ("longmemeval", "single-session-user"): "fba46c99fd6329b5be0cf5c4d9e1f66b1b47f2cc325c7f25a9dbb5c96bde14ae",
    ("longmemeval", "multi-session"): "fba46c99fd6329b5be0cf5c4d9e1f66b1b47f2cc325c7f25a9dbb5c96bde14ae",
    ("longmemeval", "temporal-reasoning"): "a1f0c310f4721a330ba931cb2077ff7b118948d702471ba97f633dae1e9a1322",
    ("longmemeval", "knowledge-update"): "87c2709c0287218fea32564fa5a4e4c8ebc401833126c468349d2ffce68c508f",
    ("longmemeval", "single-session-preference"): "fd04e6af521a3b150d2f44f11ff22670750575f3ff15caad29892fc06b932d4b",
    ("longmemeval", "abstention"): "96257c47d82a3db43af84d241489a41cc9d79adcf1038102f56f0e3fd1c824ee",
    ("locomo", "single-hop"): "b7eb1e23029937d82e05cb8d7c66bf4c5aefa1bd2cf3604b777c959318c31adf",
}  # fmt: skip


@pytest.mark.parametrize(("family", "category"), list(UPSTREAM))
def test_prompts_are_the_published_ones(family: str, category: str) -> None:
    question = Question(
        "Q?", "R!", "A.", category=category, dataset=family,
        abstention=category == "abstention" and family == "longmemeval",
    )  # fmt: skip
    text = judge_prompt(question, family)
    assert hashlib.sha256(text.encode()).hexdigest() == UPSTREAM[(family, category)]


def test_prompt_family_and_types() -> None:
    assert family_of(q("x", dataset="locomo"), "auto") == "locomo"
    assert family_of(q("x", dataset="longmemeval"), "auto") == "longmemeval"
    assert family_of(q("x", dataset="synthetic"), "auto") == "longmemeval"
    assert family_of(q("x", dataset="locomo"), "longmemeval") == "longmemeval"
    corrected = judge_prompt(q("x", category="corrected"), "longmemeval")
    assert "updated answer" in corrected  # knowledge-update
    adversarial = judge_prompt(
        q("x", gold="self-care", dataset="locomo", abstention=True), "locomo"
    )
    assert "unanswerable" in adversarial and "self-care" in adversarial
    assert len(prompt_sha256()) == 64


def test_reading_replies() -> None:
    assert read_yes("Yes.") == 1.0 and read_yes("no") == 0.0
    assert read_label('The answer matches. {"label": "CORRECT"}') == 1.0
    assert read_label('```json\n{"label": "WRONG"}\n```') == 0.0
    assert read_label("Reasoning... CORRECT") == 1.0
    assert math.isnan(read_label("I cannot decide"))
    # a JSON object too deeply nested for json.loads (RecursionError): no label there
    assert read_label('{"label": ' + "[" * 100_000 + "} CORRECT") == 1.0
    assert math.isnan(read_label("CORRECT or WRONG, hard to say"))
    # Before, "NOT CORRECT" held the word CORRECT and no WRONG, and read correct.
    assert read_label("The answer is NOT CORRECT.") == 0.0
    assert read_label("Label: not CORRECT") == 0.0
    assert read_label("It isn’t CORRECT") == 0.0
    assert math.isnan(read_label("NOT CORRECT at first glance, but CORRECT"))
    assert read_label("INCORRECT, so WRONG") == 0.0


def test_verdict_labels() -> None:
    assert Verdict.of(1.0, "").label == "correct"
    assert Verdict.of(0.0, "").label == "wrong"
    assert Verdict.of(0.5, "").label == "partial"
    assert Verdict.of(math.nan, "").label == "ungraded"


# -- llm: against the fake server -----------------------------------------------------------
@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as s:
        s.on_chat(is_judge, judge_by_gold)
        yield s


def test_llm_judge_grades_through_the_server_and_caches(server: FakeOpenAI, tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "c.sqlite")
    judge = LLMJudge(server.base_url, "judge", api_key_env=None, cache=cache)
    right = judge.grade(q("We run on GKE", dataset="longmemeval"))
    wrong = judge.grade(q("EKS", dataset="longmemeval"))
    locomo = judge.grade(q("GKE, in Europe", dataset="locomo"))
    assert (right.score, right.text) == (1.0, "yes")
    assert (wrong.score, wrong.text) == (0.0, "no")
    assert locomo.score == 1.0 and json.loads(locomo.text) == {"label": "CORRECT"}
    sent = server.calls("chat/completions")
    assert len(sent) == 3
    assert sent[0].body["max_tokens"] == 10 and sent[0].body["temperature"] == 0
    assert sent[2].body["max_tokens"] == 256
    assert [m["role"] for m in sent[0].body["messages"]] == ["user"]
    again = LLMJudge(server.base_url, "judge", api_key_env=None, cache=cache)
    assert again.grade(q("We run on GKE", dataset="longmemeval")).completion.cached  # type: ignore[union-attr]
    assert again.lookup(q("EKS", dataset="longmemeval")).score == 0.0  # type: ignore[union-attr]
    assert again.lookup(q("never asked", dataset="longmemeval")) is None
    assert len(server.calls("chat/completions")) == 3
    assert "prompts-" in judge.name and "judge@127.0.0.1" in judge.name
    assert judge.cost_bound(q("x"), 100) > 0


def test_llm_judge_leaves_unreadable_replies_ungraded(server: FakeOpenAI) -> None:
    server.on_chat(is_judge, "Hard to say.")
    judge = LLMJudge(server.base_url, "judge", api_key_env=None)
    v = judge.grade(q("GKE", dataset="locomo"))
    assert math.isnan(v.score) and v.label == "ungraded" and v.text == "Hard to say."
    assert math.isnan(judge.grade(q("GKE", gold=None)).score)  # no gold: no call
    assert len(server.calls("chat/completions")) == 1


@pytest.mark.parametrize("reply", ["", "  \n"])
@pytest.mark.parametrize(("dataset", "abstention"), [("longmemeval", False), ("locomo", True)])
def test_llm_judge_leaves_an_empty_reply_ungraded(
    server: FakeOpenAI, reply: str, dataset: str, abstention: bool
) -> None:
    # LongMemEval's rule reads "yes" anywhere; an empty reply (a reasoning model out
    # of budget) holds none, which was scored wrong rather than not graded.
    server.on_chat(is_judge, reply)
    judge = LLMJudge(server.base_url, "judge", api_key_env=None)
    v = judge.grade(q("GKE", dataset=dataset, abstention=abstention))
    assert math.isnan(v.score) and v.label == "ungraded" and v.text == reply


@pytest.mark.parametrize("prompt", ["locomo", "locomo_strict"])
def test_llm_judge_reads_a_cut_reply_by_its_json_label_only(
    server: FakeOpenAI, prompt: str
) -> None:
    # Cut at max_tokens before its label, a reply's CORRECT or WRONG is a word of its
    # reasoning: it was read as the verdict.
    judge = LLMJudge(server.base_url, "judge", api_key_env=None, prompt=prompt)
    # every request is the judge's here (is_judge does not know the strict prompt)
    server.on_chat(
        lambda body: True, "The date is WRONG, but the event matches the gold", finish="length"
    )
    v = judge.grade(q("GKE", dataset="locomo"))
    assert math.isnan(v.score) and v.label == "ungraded"
    server.on_chat(lambda body: True, 'Same topic. {"label": "CORRECT"} and', finish="length")
    assert judge.grade(q("GKE", dataset="locomo")).score == 1.0  # the label made it
    server.on_chat(lambda body: True, "The date is WRONG. WRONG")  # not cut: read as before
    assert judge.grade(q("GKE", dataset="locomo")).score == 0.0
    server.on_chat(lambda body: True, "Yes, the response says the conv", finish="length")
    assert judge.grade(q("GKE", dataset="locomo", abstention=True)).score == 1.0


def test_llm_judge_reserves_nothing_for_a_question_it_will_not_ask(server: FakeOpenAI) -> None:
    # A probe without a gold answer (e.g. an erratum dropped it) is left ungraded
    # without a call: a dry run must not count one, nor a run reserve its cost.
    judge = LLMJudge(server.base_url, "judge", api_key_env=None)
    assert judge.cost_bound(q("GKE", gold=None), 100) == 0.0
    assert judge.cost_bound(q("GKE", gold="  "), 100) == 0.0
    assert judge.cost_bound(q("GKE", gold=None, abstention=True), 100) > 0  # asked
    assert judge.cost_bound(q("GKE"), 100) > 0


def test_llm_judge_counts_a_finished_answer_once(server: FakeOpenAI) -> None:
    # grade_all passes a graded answer's own tokens as answer_tokens; before, the
    # prompt rendered with the answer counted it a second time.
    judge = LLMJudge(server.base_url, "judge", api_key_env=None, price_per_1k_input=1.0)
    long = "GKE " * 2000
    assert judge.cost_bound(q(long), 2000) == judge.cost_bound(q(""), 2000)


def test_question_of_a_probe() -> None:
    t = Transcript.from_dict(
        {
            "format": "memlab.transcript/1",
            "id": "conv",
            "meta": {"dataset": "locomo"},
            "turns": [
                {"id": "t0", "ts": "2026-01-01T00:00:00Z", "scope": "s", "role": "user",
                 "source": "user", "text": "I went hiking."},
                {"id": "Q1", "ts": "2026-01-02T00:00:00Z", "scope": "s", "role": "user",
                 "source": "user", "text": "What did Bob paint?",
                 "probe": {"answer": "a sunset", "category": "adversarial", "scored": False,
                           "detached": True}},
            ],
        }
    )  # fmt: skip
    question = question_of(t, t.turns[1], "No idea.")
    assert question == Question(
        "What did Bob paint?", "No idea.", "a sunset", "adversarial", "locomo", True, "conv/Q1"
    )
