"""Summarizers fold old episodes into durable semantic notes: the Summarizer
protocol, the SUMMARIZERS registry and the offline ExtractiveSummarizer."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from memlab.errors import InputError
from memlab.memory.checks import check_number, check_strings, check_text
from memlab.memory.salience import CORRECTION, HARD_RULE, IDENTITY, PLEASANTRY, SPECIFIC
from memlab.memory.text import words
from memlab.registry import Registry

SUMMARIZERS: Registry[type] = Registry("summarizer", "memlab.memory.models", error=InputError)
"""Summarizers by name (``extractive``, ``openai``); a module in ``memlab.memory.models``
registers its class with ``@SUMMARIZERS.register("name")``."""


@runtime_checkable
class Summarizer(Protocol):
    """Turns a list of memory texts (oldest first) into one terse note.

    ``name`` identifies the summarizer and its settings. An empty string means
    nothing in the texts is worth keeping; a reply that is not a valid unicode
    string makes the fold raise ``SummarizerError`` (nothing is archived).
    """

    @property
    def name(self) -> str: ...

    def summarize(self, texts: Sequence[str]) -> str: ...


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_DECISION = re.compile(
    r"\b(decided|agreed|will|plan|deadline|due|ticket|issue|bug|blocked|waiting|pending|"
    r"use|uses|using|is|are|was|runs?|deploy\w*|moved|based|located|lives?|works?)\b",
    re.I,
)


def _ended(sentence: str) -> str:
    return sentence if sentence[-1] in ".!?;:…" else sentence + "."


@SUMMARIZERS.register("extractive")
class ExtractiveSummarizer:
    """Offline, deterministic: keeps the sentences that state facts, preferences
    and decisions, drops pleasantries and questions, and caps the length.

    Each sentence is scored by cue phrases (hard rules 3, identity/preference 2,
    corrections 2, specifics such as numbers and names 1, decision verbs 1).
    Sentences scoring 0, pleasantries and questions are dropped; duplicates are
    kept once; if the rest exceed ``max_words``, the lowest-scored go first.
    Kept sentences stay verbatim (a full stop is added to one without an end
    mark) and in their original order, so the values they state survive exactly.

    Args:
        max_words: upper bound on the summary's words.
        separator: joins the kept sentences.
    """

    def __init__(self, max_words: int = 120, separator: str = " ") -> None:
        self.max_words = check_number(
            max_words, "ExtractiveSummarizer max_words", lo=1, integer=True
        )
        self.separator = check_text(separator, "ExtractiveSummarizer separator", empty=True)

    @property
    def name(self) -> str:
        return f"extractive-v2-{self.max_words}"

    @staticmethod
    def score(sentence: str) -> int:
        s = sentence.strip()
        if not s or PLEASANTRY.match(s) or s.endswith("?"):
            return 0
        score = 0
        score += 3 if HARD_RULE.search(s) else 0
        score += 2 if IDENTITY.search(s) else 0
        score += 2 if CORRECTION.search(s) else 0
        score += 1 if SPECIFIC.search(s) else 0
        score += 1 if _DECISION.search(s) else 0
        return score

    def summarize(self, texts: Sequence[str]) -> str:
        texts = check_strings(texts, "summarize() texts")
        candidates: list[tuple[int, int, str, int]] = []  # (order, score, text, words)
        seen: set[str] = set()
        for text in texts:
            for sentence in _SENTENCE.split(text):
                sentence = sentence.strip()
                key = " ".join(words(sentence))
                if not key or key in seen:
                    continue
                score = self.score(sentence)
                if score <= 0:
                    continue
                seen.add(key)
                candidates.append((len(candidates), score, sentence, len(sentence.split())))
        budget = self.max_words
        keep: list[tuple[int, int, str, int]] = []
        for cand in sorted(candidates, key=lambda c: (-c[1], c[0])):
            if cand[3] <= budget:
                keep.append(cand)
                budget -= cand[3]
        keep.sort(key=lambda c: c[0])
        # A kept sentence ends with a full stop if it had no end mark (chat lines
        # often have none): the note keeps its sources' sentence boundaries, so a
        # later correction supersedes one sentence of it, not a run of several.
        return self.separator.join(_ended(c[2]) for c in keep)
