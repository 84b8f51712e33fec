"""The metrics' formulas on plain inputs: texts, flags, token counts, provenance ids.

Each function states its formula and its value on empty input; ``memlab.lab.metrics``
registers the per-probe metrics built on them. Text matching is normalized (NFKC,
lower case, every run of non-alphanumeric characters one space) and a value must
match whole words (``"gke"`` matches "on GKE." but not "gkes").
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from memlab.lab.strategies.base import ContextItem
from memlab.memory.lexical import terms

_NON_ALNUM = re.compile(r"[\W_]+", re.UNICODE)


@lru_cache(maxsize=1 << 16)
def normalize(text: str) -> str:
    """NFKC, lower case, non-alphanumerics collapsed to single spaces, padded with spaces.

    Cached: a replay normalizes the same turns and answers at every probe."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return " " + _NON_ALNUM.sub(" ", folded).strip() + " "


_APOSTROPHES = str.maketrans(dict.fromkeys("\u2018\u2019\u02bc\u2032\uff07`", "'"))


def straight_apostrophes(text: str) -> str:
    """``text`` with typographic apostrophes (U+2019 and kin) as ``'``: models often
    write "don’t", and the answer rules (``says_unknown``, ``planted.REFUSAL``)
    spell "don't"."""
    return text.translate(_APOSTROPHES)


def contains(normalized_text: str, value: str) -> bool:
    """Whether ``value`` appears as whole words in an already ``normalize``d text."""
    needle = normalize(value)
    return needle.strip() != "" and needle in normalized_text


def fact_recall(context_text: str, needed: Sequence[tuple[str, list[str]]]) -> float:
    """Share of needed facts whose value in force appears in the context.

    Formula: |{f : current(f) in context}| / |needed|. ``needed`` holds
    (current value, stale values) per needed fact that has a value before the
    probe. Empty ``needed``: NaN.
    """
    if not needed:
        return math.nan
    return sum(contains(context_text, cur) for cur, _ in needed) / len(needed)


def relevant(
    item_text: str,
    item: ContextItem,
    needed: Sequence[tuple[str, list[str]]],
    evidence: set[str],
    answer: str | None,
) -> bool:
    """An item is relevant if it states a needed value in force, cites an evidence
    turn in its provenance, or (for probes without needed facts) contains the answer."""
    if any(contains(item_text, cur) for cur, _ in needed):
        return True
    if evidence and evidence.intersection(item.provenance):
        return True
    return bool(not needed and answer and contains(item_text, answer))


def precision(flags: Sequence[bool]) -> float:
    """Share of context items that are relevant: sum(flags) / len(flags). Empty context: 0.0."""
    return sum(flags) / len(flags) if flags else 0.0


def token_precision(flags: Sequence[bool], tokens: Sequence[int]) -> float:
    """Relevant tokens / context tokens. Empty (or zero-token) context: 0.0."""
    total = sum(tokens)
    return sum(t for f, t in zip(flags, tokens, strict=True) if f) / total if total else 0.0


def stale_rate(item_texts: Sequence[str], needed: Sequence[tuple[str, list[str]]]) -> float:
    """Share of needed facts for which some item states a stale value without the
    value in force (an item stating both, e.g. a correction, is not stale).

    Formula: |{f : exists item with stale(f) and not current(f)}| / |needed|.
    Empty ``needed``: NaN.
    """
    if not needed:
        return math.nan
    bad = 0
    for cur, stale in needed:
        if stale and any(
            any(contains(t, s) for s in stale) and not contains(t, cur) for t in item_texts
        ):
            bad += 1
    return bad / len(needed)


def stale_wins(item_texts: Sequence[str], needed: Sequence[tuple[str, list[str]]]) -> float:
    """Share of needed facts whose highest-ranked item stating any value of the fact
    states only a stale one.

    Formula: |{f : first item mentioning a value of f mentions stale(f) and not current(f)}|
    / |needed|. Empty ``needed``: NaN.
    """
    if not needed:
        return math.nan
    wins = 0
    for cur, stale in needed:
        for t in item_texts:
            has_cur = contains(t, cur)
            has_stale = any(contains(t, s) for s in stale)
            if has_cur or has_stale:
                wins += int(has_stale and not has_cur)
                break
    return wins / len(needed)


def evidence_recall(provenance: set[str], evidence: Sequence[str]) -> float:
    """Share of evidence turns covered by the context's provenance:
    |evidence ∩ provenance| / |evidence|. No evidence: NaN."""
    if not evidence:
        return math.nan
    return len(set(evidence) & provenance) / len(set(evidence))


def evidence_recall_at_k(
    items: Sequence[ContextItem], evidence: Sequence[str], k: int = 10
) -> float:
    """Share of evidence turns covered by the provenance of the first ``k`` ranked
    items: |evidence ∩ prov(items[:k])| / |evidence|. No evidence: NaN."""
    if not evidence:
        return math.nan
    top = {pid for item in items[:k] for pid in item.provenance}
    return len(set(evidence) & top) / len(set(evidence))


def answer_in_context(context_text: str, answer: str | None) -> float:
    """1.0 if the normalized answer appears (whole words) in the normalized context,
    else 0.0. No answer: NaN."""
    if not answer or not normalize(answer).strip():
        return math.nan
    return float(contains(context_text, answer))


def question_coverage(question: str, item_texts: Sequence[str]) -> float:
    """How much of the question one context item covers: the largest share, over the
    items, of the question's distinct terms (stemmed content words, as BM25 reads
    them) that the item holds.

    Formula: max_i |terms(q) ∩ terms(item_i)| / |terms(q)|. A question without
    content words: 1.0, with or without items (it asks for nothing to cover); a
    question with content words and no items: 0.0.
    """
    wanted = _term_set(question)
    if not wanted:
        return 1.0
    best = 0
    for text in item_texts:
        best = max(best, len(wanted & _term_set(text)))
        if best == len(wanted):
            break
    return best / len(wanted)


@lru_cache(maxsize=1 << 16)
def _term_set(text: str) -> frozenset[str]:
    # Cached: every probe of a replay reads the same turns again.
    return frozenset(terms(text))


def procedure_recall(items: Sequence[ContextItem], steps: Sequence[str]) -> float:
    """Share of a procedure's needed steps that the context holds, in order.

    The context is read as the prompt shows it in time order: items by
    ``created_at`` (items without one after, in rank order), each item's text left
    to right. Each step is a tool name, matched as whole words (``normalize``);
    the score is the longest run of the needed steps that occurs in that order
    (a longest common subsequence of the needed steps and the steps found), over
    the number of needed steps. Formula: LCS(needed, found in order) / |needed|.
    No needed steps: NaN.
    """
    if not steps:
        return math.nan
    needles = [normalize(step) for step in steps]
    order = sorted(
        range(len(items)),
        key=lambda i: (items[i].created_at is None, items[i].created_at or 0.0, i),
    )
    found: list[int] = []  # indices of needed steps, in the order the context states them
    for i in order:
        text = normalize(items[i].text)
        hits = []
        for j, needle in enumerate(needles):
            if needle.strip():
                start = text.find(needle)
                while start != -1:
                    hits.append((start, j))
                    start = text.find(needle, start + 1)
        found += [j for _, j in sorted(hits)]
    return _lcs(list(range(len(needles))), found) / len(needles)


def _lcs(a: Sequence[int], b: Sequence[int]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for k, y in enumerate(b):
            cur.append(prev[k] + 1 if x == y else max(prev[k + 1], cur[k]))
        prev = cur
    return prev[-1]


__all__ = [
    "answer_in_context",
    "contains",
    "evidence_recall",
    "evidence_recall_at_k",
    "fact_recall",
    "normalize",
    "precision",
    "procedure_recall",
    "question_coverage",
    "relevant",
    "stale_rate",
    "stale_wins",
    "straight_apostrophes",
    "token_precision",
]
