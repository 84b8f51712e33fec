"""``RuleReflector`` (registry key ``rules``): the LLM-free reflector.

It lifts every statement of the user's episodes into a reflection, folds repeats,
gives preferences and constraints their own records, and bundles a pass's facts into
short profiles (see the class). How it reads a sentence is
``memlab.memory.reflect_sentences``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from memlab.errors import InputError
from memlab.memory.models.summarizer import ExtractiveSummarizer
from memlab.memory.records import UNTRUSTED_SOURCES, MemoryRecord, Source
from memlab.memory.reflect import META_KEY, REFLECTORS, Reflection, Reflections
from memlab.memory.reflect_sentences import (
    PREFERENCE,
    ended,
    is_courtesy,
    is_reaction,
    overlap,
    sentences,
    specifics,
    statement_key,
    statements,
    states_before_asking,
)
from memlab.memory.text import WORD, content_words


@REFLECTORS.register("rules")
class RuleReflector:
    """Offline, deterministic reflection.

    From each trusted user episode (and agent episodes, with ``sources``), every
    sentence that states something becomes a candidate: declarative (no question,
    no pleasantry, at least one content word) and, with ``min_score`` > 0, at least
    that score by the extractive summarizer's cues (hard rules, identity and
    preference phrases, corrections, specifics, decision verbs). The default lifts
    every statement: a fact said in plain lower case without a cue word ("we're
    bound by fedramp") is a fact all the same, and the cue rules missed such
    statements. Sentences with a preference or constraint cue (always, never,
    prefer, must, only ever, make sure, avoid...) are labelled ``preference`` and
    get at least ``preference_salience``. Then:

    - repeated statements (content words overlapping at least ``repeat_overlap``,
      Jaccard) fold into one reflection in the latest wording, with every source
      and a count;
    - a statement that restates a known one-statement reflection replaces it
      (count + 1); one that repeats a statement of a known bundle word for word
      (the same content words) adds nothing and is not written again;
    - the facts of one pass are bundled, in the order they were stated, into
      records of at most ``bundle_words`` words (a profile of what the pass
      learned, as a summary note folds episodes); a preference, a statement that
      replaces a known reflection, and a fact longer than the bound keep a record
      of their own. ``bundle_words=0`` writes one record per statement;
    - the value in force is left to the layer's consolidator (``ReflectPolicy.supersede``):
      a correction of one statement of a bundle marks that statement stale (a
      stale span), the bundle's other statements stay in force.

    An episode is covered when every sentence of it was lifted or says nothing
    (a pleasantry, a question; for an agent, a short acknowledgement or an echo
    of lifted values). A statement below ``min_score`` is neither: its episode is
    not covered and stays, so nothing the rules did not lift is archived.

    Args:
        min_score: a sentence needs this cue score (``ExtractiveSummarizer.score``)
            to be lifted; 0 (default) lifts every statement.
        repeat_overlap: Jaccard of content words above which two statements repeat.
        preference_salience: the lowest salience of a preference.
        sources: whose episodes are lifted (default: the user's).
        ack_words: an agent sentence of at most this many words with no specifics
            is an acknowledgement.
        bundle_words: the most words of a bundle of facts (0: no bundles).
    """

    def __init__(
        self,
        min_score: int = 0,
        repeat_overlap: float = 0.7,
        preference_salience: float = 0.85,
        sources: Sequence[Source | str] = (Source.USER,),
        ack_words: int = 12,
        bundle_words: int = 64,
    ) -> None:
        if isinstance(min_score, bool) or not isinstance(min_score, int) or min_score < 0:
            raise InputError(f"RuleReflector: min_score must be an integer >= 0, got {min_score!r}")
        if not 0.0 < repeat_overlap <= 1.0:
            raise InputError(
                f"RuleReflector: repeat_overlap must be in (0, 1], got {repeat_overlap!r}"
            )
        if not 0.0 <= preference_salience <= 1.0:
            raise InputError(
                f"RuleReflector: preference_salience must be in 0..1, got {preference_salience!r}"
            )
        self.min_score = min_score
        self.repeat_overlap = float(repeat_overlap)
        self.preference_salience = float(preference_salience)
        self.sources = frozenset(Source(s) for s in sources)
        if self.sources & UNTRUSTED_SOURCES:
            raise InputError("RuleReflector: sources may only name trusted sources (user, agent)")
        self.ack_words = ack_words
        if isinstance(bundle_words, bool) or not isinstance(bundle_words, int) or bundle_words < 0:
            raise InputError(
                f"RuleReflector: bundle_words must be an integer >= 0, got {bundle_words!r}"
            )
        self.bundle_words = bundle_words

    @property
    def name(self) -> str:
        who = "+".join(sorted(s.value for s in self.sources))
        bundles = f"-b{self.bundle_words}" if self.bundle_words else ""
        return f"rules-v1-{who}-{self.min_score}-{self.repeat_overlap:g}{bundles}"

    def __repr__(self) -> str:
        return f"RuleReflector({self.name})"

    def reflect(
        self, episodes: Sequence[MemoryRecord], known: Sequence[MemoryRecord]
    ) -> Reflections:
        groups: list[dict[str, Any]] = []  # one per distinct statement, in first-seen order
        lifted_by: dict[str, int] = {}  # episode id -> sentences lifted
        content_free: dict[str, int] = {}
        n_sentences: dict[str, int] = {}
        for r in episodes:
            if r.source in UNTRUSTED_SOURCES:
                continue  # never lifted: a tool's text is evidence, not a statement
            parts = statements(sentences(r.content))
            n_sentences[r.id] = len(parts)
            for s in parts:
                if s.endswith("?") and states_before_asking(s):
                    # "I'm visiting my sister Emily in Denver, any tips?": not a
                    # statement to lift, but its episode is kept, never archived unread
                    continue
                if is_courtesy(s) or s.endswith("?"):
                    content_free[r.id] = content_free.get(r.id, 0) + 1
                    continue
                if r.source not in self.sources:
                    continue
                if not content_words(s) or is_reaction(s):  # "ok then.", "fine by me."
                    content_free[r.id] = content_free.get(r.id, 0) + 1
                    continue
                if self.min_score and ExtractiveSummarizer.score(s) < self.min_score:
                    continue  # not lifted: the episode is not covered, it stays
                label = "preference" if PREFERENCE.search(s) else "fact"
                salience = float(r.salience)
                if label == "preference":
                    salience = max(salience, self.preference_salience)
                key = statement_key(s)
                group = next(
                    (g for g in groups if overlap(g["key"], key) >= self.repeat_overlap), None
                )
                if group is None:
                    groups.append({"key": key, "text": s, "label": label, "salience": salience,
                                   "sources": [r.id], "count": 1})  # fmt: skip
                else:  # a repeat: the latest wording wins, everything else adds up
                    group.update(text=s, key=key, salience=max(group["salience"], salience))
                    if label == "preference":
                        group["label"] = label
                    group["sources"].append(r.id)
                    group["count"] += 1
                lifted_by[r.id] = lifted_by.get(r.id, 0) + 1
        # what a known reflection still says: a statement marked stale (a correction
        # superseded it) is no longer held, so saying it again is news ("back to X")
        known_keys = [(k, statement_key(k.text_at())) for k in known]
        # a bundle is matched statement by statement: only a one-statement
        # reflection is replaced by a restatement (a bundle's other facts stand)
        known_parts = [(k, [statement_key(p) for p in sentences(k.text_at())]) for k in known]
        singles = [(k, kk) for (k, kk), (_, parts) in zip(known_keys, known_parts, strict=True)
                   if len(parts) <= 1]  # fmt: skip
        bundled = {kk for _, parts in known_parts if len(parts) > 1 for kk in parts}
        items: list[Reflection] = []
        for g in groups:
            if g["key"] in bundled:
                continue  # said again word for word: a known bundle already holds it
            replaces = tuple(
                k.id for k, kk in singles if overlap(kk, g["key"]) >= self.repeat_overlap
            )
            count = g["count"] + sum(
                int(k.meta.get(META_KEY, {}).get("count", 1)) for k in known if k.id in replaces
            )
            items.append(
                Reflection(
                    content=g["text"],
                    sources=tuple(dict.fromkeys(g["sources"])),
                    label=g["label"],
                    salience=min(1.0, g["salience"]),
                    replaces=replaces,
                    count=count,
                )
            )
        if self.bundle_words:
            items = _bundled(items, self.bundle_words)
        # an agent's echo of a fact reflected in an earlier pass is covered too
        lifted_words = set().union(*(g["key"] for g in groups), *(kk for _, kk in known_keys))
        covered = []
        echoes: list[MemoryRecord] = []
        for r in episodes:
            if r.source in UNTRUSTED_SOURCES or r.id not in n_sentences:
                continue
            n = n_sentences[r.id]
            if lifted_by.get(r.id, 0) + content_free.get(r.id, 0) >= n:
                covered.append(r.id)
            elif r.source not in self.sources and self._acknowledges(r.content, lifted_words):
                covered.append(r.id)
                echoes.append(r)
        return Reflections(_with_echoes(items, echoes), tuple(covered))

    def _acknowledges(self, text: str, lifted: set[str]) -> bool:
        """An agent message that only acknowledges, or echoes values that were lifted:
        each sentence is a pleasantry, short (``ack_words``) without specifics, or
        every specific word in it (numbers, names) is in a lifted statement."""
        for s in sentences(text):
            if is_courtesy(s):
                continue
            specific = specifics(s)
            if not specific and len(s.split()) <= self.ack_words:
                continue
            if specific and specific <= lifted:
                continue
            return False
        return True


def _with_echoes(items: list[Reflection], echoes: list[MemoryRecord]) -> list[Reflection]:
    """Each echo (an agent episode archived because it repeats lifted values) is
    covered by the first reflection of this pass that holds every value it names,
    so the echo's provenance stays cited. An echo of a value reflected in an
    earlier pass, or one naming no value ("Ok, noted."), is covered by none."""
    if not echoes or not items:
        return items
    words = [{w.lower() for w in WORD.findall(item.content)} for item in items]
    covers: list[list[str]] = [[] for _ in items]
    for echo in echoes:
        named = set().union(*(specifics(s) for s in sentences(echo.content)))
        if not named:
            continue
        at = next((i for i, w in enumerate(words) if named <= w), None)
        if at is not None:
            covers[at].append(echo.id)
    return [
        replace(item, covers=(*item.covers, *extra)) if extra else item
        for item, extra in zip(items, covers, strict=True)
    ]


def _bundled(items: list[Reflection], limit: int) -> list[Reflection]:
    """Consecutive facts joined into records of at most ``limit`` words, each
    sentence ended with a full stop so a later correction can mark one of them
    stale; preferences, replacements and long facts stay on their own."""
    out: list[Reflection] = []
    run: list[Reflection] = []
    words = 0

    def close() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            out.append(
                Reflection(
                    content=" ".join(ended(r.content) for r in run),
                    sources=tuple(dict.fromkeys(i for r in run for i in r.sources)),
                    label="fact",
                    salience=max(r.salience for r in run),
                    count=sum(r.count for r in run),
                    covers=tuple(dict.fromkeys(i for r in run for i in r.covers)),
                    parts=tuple(run),
                )
            )
        run.clear()

    for item in items:
        n = len(item.content.split())
        if item.label != "fact" or item.replaces or n > limit:
            out.append(item)
            continue
        if words + n > limit:
            close()
            words = 0
        run.append(item)
        words += n
    close()
    return out


__all__ = ["RuleReflector"]
