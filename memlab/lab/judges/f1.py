"""``judge=f1``: token F1 between the answer and the gold answer, as the LoCoMo
paper reports it (no model; extra ``judge`` for the stemmer).

The rules are those of LoCoMo's own evaluation (snap-research/locomo,
``task_eval/evaluation.py``: ``normalize_answer``, ``f1_score``, ``f1`` and
``eval_question_answering``):

- normalize: drop commas, lower case, drop punctuation, drop the words a, an,
  the and "and", collapse white space; then Porter-stem every token;
- F1 = 2PR / (P + R) over the multisets of stemmed tokens (0 when none shared);
- multi-hop questions (category 1): the gold answer and the answer are split at
  commas, and the score is the mean over gold parts of the best F1 against any
  answer part;
- open-domain questions (category 3): only the gold answer's part before the
  first ";" counts;
- adversarial questions (category 5): 1 if the answer contains "no information
  available" or "not mentioned", else 0 (other abstention questions: 1 if the
  answer says the information is not there, ``says_unknown``).

LoCoMo stems with NLTK's ``PorterStemmer``; memlab uses the Porter algorithm of
``snowballstemmer`` (a small pure-Python package; NLTK takes seconds to
import). On the 466 known-wrong answers of the LoCoMo audit's development slice
(``wrong_answers_v{1,2}_dev2.json``) the two give identical F1 for every pair
(checked in tests/test_judges.py when the shared data is present).
"""

from __future__ import annotations

import math
import re
import string
import threading
from collections import Counter
from collections.abc import Callable

from memlab.errors import require
from memlab.lab.judges import JUDGES, Question, RuleJudge, Verdict, abstention_verdict

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_local = threading.local()  # snowballstemmer's stemmers keep state: one per thread


def normalize_answer(text: str) -> str:
    """LoCoMo's ``normalize_answer``: no commas, lower case, no punctuation, no
    a/an/the/and, single spaces."""
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def stemmer() -> Callable[[str], str]:
    """The Porter stemmer of the calling thread (imported on first use): a stemmer
    object is not safe to share, and judges grade from several threads."""
    stem: Callable[[str], str] | None = getattr(_local, "stem", None)
    if stem is None:
        snowball = require("snowballstemmer", feature="judge=f1 (Porter stemming)", extra="judge")
        stem = _local.stem = snowball.stemmer("porter").stemWord
    return stem


def tokens(text: str) -> list[str]:
    stem = stemmer()
    return [stem(w) for w in normalize_answer(text).split()]


def f1_score(answer: str, gold: str) -> float:
    """Token F1 of stemmed, normalized tokens (LoCoMo's ``f1_score``); 0.0 when
    no token is shared, or either side is empty."""
    pred, truth = tokens(answer), tokens(gold)
    same = sum((Counter(pred) & Counter(truth)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(truth)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(answer: str, gold: str) -> float:
    """LoCoMo's ``f1`` for multi-hop questions: the mean over the gold answer's
    comma-separated parts of the best ``f1_score`` against any part of the answer."""
    parts = [p.strip() for p in answer.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(f1_score(p, g) for p in parts) for g in golds) / len(golds)


@JUDGES.register("f1")
class F1Judge(RuleJudge):
    """Token F1 as LoCoMo reports it (see the module docstring); the score is the
    F1 itself (``answer_accuracy`` is then the mean F1). No gold answer: NaN."""

    name = "f1"

    def __init__(self) -> None:
        stemmer()  # a missing extra fails before the run starts

    def grade(self, q: Question) -> Verdict:
        if q.abstention:
            if q.dataset == "locomo":
                low = q.answer.lower()
                hit = "no information available" in low or "not mentioned" in low
                return Verdict.of(
                    float(hit),
                    "LoCoMo's adversarial rule: the answer "
                    + ("says" if hit else "does not say")
                    + " 'no information available' or 'not mentioned'",
                )
            return abstention_verdict(q)
        gold = (q.gold or "").strip()
        if not normalize_answer(gold):
            return Verdict.of(math.nan, "no gold answer")
        if q.category == "multi-hop":
            score = multi_answer_f1(q.answer, gold)
            how = "multi-answer F1 (comma-split)"
        else:
            if q.category == "open-domain":
                gold = gold.split(";")[0].strip()
            score = f1_score(q.answer, gold)
            how = "token F1"
        return Verdict.of(score, f"{how} = {score:.3f}")
