"""Judges: whether a reader's answer to a probe is correct.

A judge grades a ``Question`` (the question, the reader's answer, the gold
answer, and what kind of question it is) with a ``Verdict``: a score (1.0
correct, 0.0 wrong, in between for partial credit, NaN when it cannot grade),
a label and its raw text (a model's own words, or how a rule decided). The
score of a probe is its ``answer_accuracy``.

Judges register in ``JUDGES`` under the name the ``judge`` config group uses:

- ``exact``: the gold answer, normalized as every text metric is (NFKC, lower
  case, punctuation folded), appears in the answer as whole words (or equals
  it, with ``contains: false``). No model; the same match ``answer_in_context``
  applies to the context.
- ``f1``: token F1 between the answer and the gold answer, as the LoCoMo paper
  reports it. No model.
- ``llm``: a chat model with LongMemEval's published judge prompts (one per
  question type, and one for abstention) or, for LoCoMo, the judge prompt the
  memory systems report (mem0's). Cached like the reader.

A new judge is one module here plus one YAML in conf/judge/.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memlab.errors import ConfigError
from memlab.lab.formulas import straight_apostrophes
from memlab.lab.readers import Prices
from memlab.lab.transcripts import Transcript, Turn
from memlab.memory import Completion
from memlab.registry import Registry

CORRECT, WRONG, PARTIAL, UNGRADED = "correct", "wrong", "partial", "ungraded"


@dataclass(frozen=True)
class Question:
    """What a judge grades.

    Attributes:
        question: the probe's text.
        answer: the reader's answer.
        gold: the ground-truth answer (for an abstention question: what the
            question asks that the conversation does not hold); None if the
            probe has none.
        category: the dataset's question type or category (LongMemEval's
            ``question_type``, LoCoMo's category name, the generator's class).
        dataset: where the question comes from (``locomo``, ``longmemeval``,
            ``synthetic``, or "" if unknown); picks the LLM judge's prompt family.
        abstention: the right answer is that the conversation does not say
            (LongMemEval's ``_abs`` questions, LoCoMo's adversarial category).
        id: the probe's id, for messages.
    """

    question: str
    answer: str
    gold: str | None
    category: str = ""
    dataset: str = ""
    abstention: bool = False
    id: str = ""


@dataclass(frozen=True)
class Verdict:
    """A judge's decision on one answer.

    Attributes:
        score: 1.0 correct, 0.0 wrong, a value in between for partial credit
            (``f1``), NaN when the answer could not be graded (no gold answer, or
            a judge model's reply that says neither).
        label: ``correct``, ``wrong``, ``partial`` or ``ungraded``.
        text: the judge model's raw reply, or how the rule decided.
        completion: the judge model's call (usage, cached or not); None for rules.
    """

    score: float
    label: str
    text: str
    completion: Completion | None = None

    @classmethod
    def of(cls, score: float, text: str, completion: Completion | None = None) -> Verdict:
        """A verdict whose label follows from its score."""
        if math.isnan(score):
            label = UNGRADED
        elif score >= 1.0:
            label = CORRECT
        elif score <= 0.0:
            label = WRONG
        else:
            label = PARTIAL
        return cls(score, label, text, completion)


@runtime_checkable
class Judge(Protocol):
    """Grades answers (registered in ``JUDGES``).

    Attributes:
        name: the judge's identity: for a model judge, the model, the endpoint
            and the hash of its prompts (so results name exactly what graded them).
        prices: what its model's tokens cost; None for a judge without a model.
    """

    name: str
    prices: Prices | None

    def grade(self, q: Question) -> Verdict:
        """Grade one answer. Safe to call from threads."""
        ...

    def cost_bound(self, q: Question, answer_tokens: int) -> float:
        """An upper estimate (US dollars) of grading ``q`` with an answer of at most
        ``answer_tokens`` tokens (0.0 for a judge without a model)."""
        ...

    def check(self) -> None:
        """Fail before any work if the judge's endpoint cannot answer."""
        ...

    def close(self) -> None: ...


JUDGES: Registry[type] = Registry("judge", "memlab.lab.judges", error=ConfigError)
"""Judge classes by name (``judge.name``); each module here registers its own."""


def question_of(transcript: Transcript, turn: Turn, answer: str) -> Question:
    """The ``Question`` a judge grades for a probe turn and the reader's answer."""
    probe = turn.probe
    assert probe is not None, "a probe turn"
    dataset = str(transcript.meta.get("dataset") or transcript.meta.get("generator") or "")
    category = probe.category or ""
    abstention = bool(probe.meta.get("abstention")) or (
        dataset == "locomo" and category == "adversarial"
    )
    return Question(
        question=turn.text,
        answer=answer,
        gold=probe.answer,
        category=category,
        dataset=dataset,
        abstention=abstention,
        id=f"{transcript.id}/{turn.id}",
    )


# LoCoMo's evaluation counts "no information available" and "not mentioned" as a
# correct answer to an adversarial question; readers say it in other words too.
UNKNOWN = re.compile(
    r"\b(no information available|not mentioned|(do not|don't|doesn't|does not) "
    r"(know|say|mention|contain|include|specify|have)|no (mention|record|information)|"
    r"not (stated|specified|recorded|provided|available)|"
    r"not in (the|my|your) (memory|conversation|notes|records|context)|cannot (tell|determine|answer)|"
    r"can't (tell|determine|answer)|not sure)\b",
    re.IGNORECASE,
)


def says_unknown(answer: str) -> bool:
    """The answer says the conversation does not hold the information: it contains
    one of LoCoMo's phrases ("no information available", "not mentioned") or a
    common paraphrase ("I don't know", "the memory does not say", ...), with any
    apostrophe ("I don’t know" too)."""
    return bool(UNKNOWN.search(straight_apostrophes(answer)))


def abstention_verdict(q: Question) -> Verdict:
    """The rule judges' grade of an abstention question: correct when the answer
    says the information is not there (``says_unknown``)."""
    if says_unknown(q.answer):
        return Verdict.of(1.0, "the answer says the information is not there")
    return Verdict.of(0.0, "the answer does not say the information is not there")


RULE_VERSION = 2  # bump when a rule judge's decision changes


class RuleJudge:
    """What the judges without a model share: no prices, no endpoint, free."""

    prices: Prices | None = None
    name: str = "rule"

    @property
    def prompt_sha256(self) -> str:
        """A rule judge has no prompt: the hash of its name and rule version."""
        return hashlib.sha256(f"rule:{self.name}:{RULE_VERSION}".encode()).hexdigest()

    def cost_bound(self, q: Question, answer_tokens: int) -> float:
        return 0.0

    def check(self) -> None:
        pass

    def close(self) -> None:
        pass


def provenance(judge: Judge) -> dict[str, str | None]:
    """What graded a run's answers, for its fingerprint: the judge's ``name``, its
    ``model`` (None for a rule) and ``prompt_sha256`` (the hash of its prompt
    templates; for a rule judge, of its rule's name and version)."""
    prompt = getattr(judge, "prompt_sha256", None)
    if not isinstance(prompt, str):
        prompt = hashlib.sha256(f"judge:{judge.name}".encode()).hexdigest()
    model = getattr(judge, "model", None)
    return {"name": judge.name, "model": model if isinstance(model, str) else None,
            "prompt_sha256": prompt}  # fmt: skip


__all__ = [
    "CORRECT",
    "JUDGES",
    "PARTIAL",
    "UNGRADED",
    "WRONG",
    "Judge",
    "Question",
    "RuleJudge",
    "Verdict",
    "abstention_verdict",
    "provenance",
    "question_of",
    "says_unknown",
]
