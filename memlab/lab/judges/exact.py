"""``judge=exact``: the gold answer appears in the answer (normalized), no model."""

from __future__ import annotations

import math

from memlab.lab.judges import JUDGES, Question, RuleJudge, Verdict, abstention_verdict
from memlab.lab.metrics import contains, normalize


@JUDGES.register("exact")
class ExactJudge(RuleJudge):
    """Correct when the normalized gold answer appears in the normalized answer as
    whole words (``contains``, the default), or equals it (``contains: false``).

    Normalization is the lab's (``memlab.lab.metrics.normalize``: NFKC, lower
    case, every run of non-alphanumerics one space), so "GKE" matches "We run
    on gke." but not "gkes". An abstention question is correct when the answer
    says the information is not there (``says_unknown``). No gold answer: NaN.

    Use it for data whose answers are short values (the synthetic transcripts'
    facts); for free-form gold answers it is too strict.

    Args:
        contains: match the gold answer anywhere in the answer (True) or require
            the whole answer to be it (False).
    """

    def __init__(self, contains: bool = True) -> None:
        self.contains = bool(contains)
        self.name = "exact" if self.contains else "exact-equal"

    def grade(self, q: Question) -> Verdict:
        if q.abstention:
            return abstention_verdict(q)
        gold = (q.gold or "").strip()
        if not normalize(gold).strip():
            return Verdict.of(math.nan, "no gold answer")
        answer = normalize(q.answer)
        if self.contains:
            hit = contains(answer, gold)
            how = "appears in" if hit else "does not appear in"
        else:
            hit = answer == normalize(gold)
            how = "equals" if hit else "differs from"
        return Verdict.of(1.0 if hit else 0.0, f"the gold answer {how} the answer (normalized)")
