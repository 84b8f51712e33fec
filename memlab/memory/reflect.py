"""Reflection: derive durable semantic records from recent episodes.

A ``Reflector`` reads a scope's unreflected episodes (oldest first) and the
reflections it already holds, and proposes new semantic records: facts about the
user, stated preferences and constraints, a statement repeated several times
folded into one. The layer runs it on its maintenance schedule
(``ReflectPolicy``: every N new episodes, or once the unreflected episodes hold
more than T tokens, and always at ``MemoryLayer.end_session``), writes what it
proposes with provenance to the episodes it read, keeps the value in force (a
``Consolidator`` decides which earlier reflections a new one supersedes; those
are archived), and archives the episodes the reflections cover.

Trust: reflection never promotes untrusted content. By default untrusted (tool,
web) episodes are not shown to a reflector at all; with ``read_untrusted`` they
are shown as data, and any reflection citing one is stored with that untrusted
source, so the layer's ``untrusted_salience_cap`` applies and the prompt's memory
block marks it. A reflection must cite the episodes it came from; one citing
none of the episodes it was shown is dropped.

``RuleReflector`` (``rules``) is the LLM-free reflector;
``memlab.memory.models.openai_reflector.OpenAIReflector`` (``openai``) asks a chat model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memlab.errors import InputError, MemlabError
from memlab.memory.consolidate import Consolidator, ScopeReader, Supersession
from memlab.memory.models.embedder import check_embeddings
from memlab.memory.models.summarizer import ExtractiveSummarizer
from memlab.memory.records import (
    UNTRUSTED_SOURCES,
    MemoryKind,
    MemoryRecord,
    Source,
    Superseded,
    new_id,
)
from memlab.memory.salience import PLEASANTRY
from memlab.memory.text import WORD, content_words
from memlab.registry import Registry

if TYPE_CHECKING:
    from memlab.memory.layer import MemoryLayer

REFLECTORS: Registry[type] = Registry("reflector", "memlab.memory.models", error=InputError)
"""Reflectors by name (``rules`` here; ``openai`` in
``memlab.memory.models.openai_reflector``)."""


class ReflectorError(MemlabError):
    """A reflector failed or returned something unusable (a model's answer that is
    not the JSON it was asked for, an endpoint that keeps failing); nothing of the
    pass is written."""

    exit_code = 3


META_KEY = "reflection"
LABELS = ("fact", "preference")
PREFERENCE = re.compile(
    r"\b(always|never|prefer|prefers|preferred|preference|only ever|must|must not|mustn'?t|"
    r"don'?t ever|do not ever|make sure|from now on|under no circumstances|rather than|"
    r"instead of|avoid)\b"
    # a bound needs the quantity it bounds ("at least two reviewers"); a sentence that
    # ends on it, or a comma after it, is the adverb ("that's progress at least.")
    r"|\b(?:no more than|at least|at most)\s+[\w$\u00a3\u20ac]",
    re.I,
)
# A greeting or sign-off addressed to someone ("Welcome back, Maya.", "Talk soon!"):
# names in it are the addressee, not a value.
GREETING = re.compile(
    r"^\W*(?i:welcome( back)?|hi|hello|hey|good (morning|afternoon|evening)|morning|talk soon|"
    r"see you( soon| later| tomorrow)?|bye|have a (good|great|nice) (day|one|evening|weekend))"
    r"(,?\s+[A-Z][\w'-]*)?\W*$",
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# A reaction to the conversation ("Brilliant, that's what I needed.", "Ok, that rules
# one thing out."): it opens with an interjection, and see ``_reaction`` for the rest.
REACTION = re.compile(
    r"^\W*(?:ok(?:ay)?|alright|all right|yep|yeah|yup|nope|nah|thanks|thank you|thx|ty|"
    r"great|perfect|brilliant|nice|cool|fine|lovely|awesome|super|gotcha|got it|hmm+|ugh|"
    r"oh|ah+|huh|hah|wow|haha|lol|excellent|amazing|wonderful|fair enough|understood|agreed|"
    r"cheers|appreciated?|much appreciated|makes sense|interesting|weird|"
    r"hi|hello|hey|morning|good (?:morning|afternoon|evening))\b"
    # "ok, and ...", "ok wait, ...", "ok so ...": the opener leads into a statement
    r"(?!\W*(?:and|but|so|wait|also|actually|then|btw|by the way)\b)",
    re.I,
)
# a token shaped like a value in any casing: a digit, an e-mail, a path, a #channel,
# a dotted or dashed name ("finance@acme.io", "incident.io", "eu-west-1")
_VALUE_SHAPE = re.compile(r"\d|[@#/_]|\w[.-]\w")
_UNCASED_WORDS = 4
# what a statement about the speaker or their organisation says of itself
_SELF = re.compile(r"\b(?:we|we'?re|we'?ve|our|ours|us|my|mine|i'?m|i am|i'?ve|i have)\b", re.I)


@dataclass(frozen=True)
class Reflection:
    """One record a reflector proposes.

    Attributes:
        content: the text to remember (a fact, a preference, a consolidated statement).
        sources: ids of the episodes it came from (must be among those it was shown).
        label: ``fact`` or ``preference`` (preferences and constraints get their own
            records and a higher salience).
        salience: in [0, 1]; the layer caps it when a source is untrusted.
        replaces: ids of earlier reflections this one restates or updates (the layer
            archives them; their provenance carries over).
        count: how many statements it folds (a statement repeated three times: 3).
        covers: ids of episodes it covers without coming from them (an agent's echo
            of its values, archived with it): their provenance is kept, so what
            cited them stays cited; their source does not count for its trust.
        parts: for a bundle, the one-statement reflections it joins, in order (the
            layer may move its first statements into an earlier bundle with room,
            each with its own sources); empty otherwise.
    """

    content: str
    sources: tuple[str, ...]
    label: str = "fact"
    salience: float = 0.6
    replaces: tuple[str, ...] = ()
    count: int = 1
    covers: tuple[str, ...] = ()
    parts: tuple[Reflection, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.content, str) or not self.content.strip():
            raise InputError("a reflection needs content")
        if self.label not in LABELS:
            raise InputError(f"reflection label must be one of {LABELS}, got {self.label!r}")
        if not 0.0 <= self.salience <= 1.0:
            raise InputError(f"reflection salience {self.salience!r} is outside 0..1")
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "replaces", tuple(self.replaces))
        object.__setattr__(self, "covers", tuple(self.covers))
        object.__setattr__(self, "parts", tuple(self.parts))
        if any(not isinstance(p, Reflection) or p.parts for p in self.parts):
            raise InputError("a reflection's parts must be one-statement Reflections")


@dataclass(frozen=True)
class Reflections:
    """A reflector's answer: new reflections, and the ids of the episodes they
    fully cover (the layer may archive those)."""

    items: list[Reflection] = field(default_factory=list)
    covered: tuple[str, ...] = ()


@runtime_checkable
class Reflector(Protocol):
    """Proposes semantic records from episodes.

    ``reflect`` gets a scope's unreflected episodes, oldest first (untrusted ones
    only if the policy shows them; ``record.source`` says which), and the active
    reflections already stored for that scope (to restate or update rather than
    duplicate). It must not write anything, and must treat every text as data.
    """

    @property
    def name(self) -> str: ...

    def reflect(
        self, episodes: Sequence[MemoryRecord], known: Sequence[MemoryRecord]
    ) -> Reflections: ...


@dataclass(frozen=True)
class ReflectPolicy:
    """When the layer reflects, and what it does with what was read.

    Args:
        every: reflect once this many episodes arrived since the last reflection
            ("every N turns"); None: never by count.
        trigger_tokens: reflect once the unreflected episodes hold more than this
            many tokens; None: never by size.
        archive: which reflected episodes are archived: ``covered`` (those the
            reflections fully cover), ``all`` (every trusted episode read) or
            ``none``.
        read_untrusted: show tool/web episodes to the reflector (as data; what
            it derives from them stays untrusted and capped).
        supersede: let a consolidator retire earlier reflections a new one
            supersedes (the value in force wins).
    """

    every: int | None = 12
    trigger_tokens: int | None = 400
    archive: str = "covered"
    read_untrusted: bool = False
    supersede: bool = True

    def __post_init__(self) -> None:
        if self.every is not None and (not isinstance(self.every, int) or self.every < 1):
            raise InputError(f"reflect.every must be an integer >= 1 or null, got {self.every!r}")
        if self.trigger_tokens is not None and (
            not isinstance(self.trigger_tokens, int) or self.trigger_tokens < 1
        ):
            raise InputError(
                f"reflect.trigger_tokens must be an integer >= 1 or null, got {self.trigger_tokens!r}"
            )
        if self.archive not in ("covered", "all", "none"):
            raise InputError(f"reflect.archive must be covered, all or none, got {self.archive!r}")

    def due(self, episodes: Sequence[MemoryRecord]) -> bool:
        """Whether unreflected ``episodes`` trigger a reflection."""
        if not episodes:
            return False
        if self.every is not None and len(episodes) >= self.every:
            return True
        return (
            self.trigger_tokens is not None
            and sum(r.tokens for r in episodes) > self.trigger_tokens
        )


# -- the LLM-free reflector -----------------------------------------------------------
def sentences(text: str) -> list[str]:
    """A text's sentences (split after . ! ? and at line breaks), stripped."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _key(text: str) -> frozenset[str]:
    return frozenset(content_words(text))


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


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
            parts = _units(sentences(r.content))
            n_sentences[r.id] = len(parts)
            for s in parts:
                if s.endswith("?") and _states_before_asking(s):
                    # "I'm visiting my sister Emily in Denver, any tips?": not a
                    # statement to lift, but its episode is kept, never archived unread
                    continue
                if _courtesy(s) or s.endswith("?"):
                    content_free[r.id] = content_free.get(r.id, 0) + 1
                    continue
                if r.source not in self.sources:
                    continue
                if not content_words(s) or _reaction(s):  # "ok then.", "fine by me."
                    content_free[r.id] = content_free.get(r.id, 0) + 1
                    continue
                if self.min_score and ExtractiveSummarizer.score(s) < self.min_score:
                    continue  # not lifted: the episode is not covered, it stays
                label = "preference" if PREFERENCE.search(s) else "fact"
                salience = float(r.salience)
                if label == "preference":
                    salience = max(salience, self.preference_salience)
                key = _key(s)
                group = next(
                    (g for g in groups if _overlap(g["key"], key) >= self.repeat_overlap), None
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
        known_keys = [(k, _key(k.text_at())) for k in known]
        # a bundle is matched statement by statement: only a one-statement
        # reflection is replaced by a restatement (a bundle's other facts stand)
        known_parts = [(k, [_key(p) for p in sentences(k.text_at())]) for k in known]
        singles = [(k, kk) for (k, kk), (_, parts) in zip(known_keys, known_parts, strict=True)
                   if len(parts) <= 1]  # fmt: skip
        bundled = {kk for _, parts in known_parts if len(parts) > 1 for kk in parts}
        items: list[Reflection] = []
        for g in groups:
            if g["key"] in bundled:
                continue  # said again word for word: a known bundle already holds it
            replaces = tuple(
                k.id for k, kk in singles if _overlap(kk, g["key"]) >= self.repeat_overlap
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
            if _courtesy(s):
                continue
            specific = _specifics(s)
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
        named = set().union(*(_specifics(s) for s in sentences(echo.content)))
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
                    content=" ".join(_ended(r.content) for r in run),
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


def _ended(sentence: str) -> str:
    s = sentence.strip()
    return s if s[-1:] in (".", "!", "?") else s + "."


# how a question opens: "can you ...", "what ...", "is there ..."
_INTERROGATIVE = re.compile(
    r"(?:can|could|would|will|won'?t|is|isn'?t|are|aren'?t|am|was|were|do|does|did|don'?t|"
    r"doesn'?t|have|has|had|should|shall|may|might|must|what|which|who|whom|whose|where|"
    r"when|why|how|any|anything|anyone|whether|if|or)\b",
    re.I,
)
# discourse markers before it: "also, ...", "follow-up: ...", "ok. ..."
_LEAD = re.compile(
    r"^\W*(?:(?:also|and|but|so|ok(?:ay)?|oh|ah|well|hmm+|sorry|(?:hi|hey|hello)(?: there)?|btw|"
    r"by the way|separately|unrelated|quick one|real quick|one more thing|"
    r"(?:[\w'-]+\s+){0,4}[\w'-]+:)\W+)*",
    re.I,
)


def _states_before_asking(sentence: str) -> bool:
    """A sentence that ends with a question but opens with a statement ("I'm
    visiting my sister Emily in Denver soon, and I was wondering if ...?", "our
    controller wants the charges split by department, doable?"): after its
    discourse markers it does not open like a question."""
    rest = sentence[_LEAD.match(sentence).end() :]  # type: ignore[union-attr]
    return bool(rest) and not _INTERROGATIVE.match(rest)


def _names_something(sentence: str) -> bool:
    """Whether a sentence names a value: a name or number (``_specifics``) or a
    value-shaped token (an e-mail, a path, a dotted or dashed name)."""
    return bool(_specifics(sentence) or _VALUE_SHAPE.search(sentence))


def _reaction(sentence: str) -> bool:
    """A reaction that states nothing to keep: it opens with an interjection
    (``REACTION``), names nothing (no number, no name), has no preference cue and
    says nothing of the speaker or their side (we, our, my, I'm: "ok, we're bound
    by fedramp" and "oh, I'm a single parent" are facts). Text without capitals
    shows no names, so there a reaction has at most ``_UNCASED_WORDS`` words
    ("ah great", "fine by me"; not "thanks, the deadline is friday")."""
    if not any(c.isupper() for c in sentence) and len(WORD.findall(sentence)) > _UNCASED_WORDS:
        return False
    return bool(
        REACTION.match(sentence)
        and not _names_something(sentence)
        and not PREFERENCE.search(sentence)
        and not _SELF.search(sentence)
    )


def _courtesy(sentence: str) -> bool:
    """A pleasantry or a greeting: it says nothing to remember."""
    return bool(PLEASANTRY.match(sentence) or GREETING.match(sentence))


# a pronoun that points back at what was just said ("never exceed it")
_ANAPHOR = re.compile(r"\b(?:it|that|this|them|those|these)\b", re.I)


def _leans_back(sentence: str) -> bool:
    """A preference that means nothing without the sentence before it ("Always.",
    "Never exceed it.", "Never again."): a cue, names nothing, and no content word
    beside the cue but at most one verb pointing back with a pronoun."""
    if not PREFERENCE.search(sentence) or _names_something(sentence):
        return False
    rest = content_words(PREFERENCE.sub(" ", sentence))
    return not rest or (len(rest) == 1 and bool(_ANAPHOR.search(sentence)))


def _units(parts: list[str]) -> list[str]:
    """A turn's sentences as statements: a preference that leans back on the
    sentence before it ("Hard cap on spend: $1,200 a month. Never exceed it.") is
    one statement with it, so the rule is remembered with what it rules on."""
    out: list[str] = []
    for s in parts:
        prev = out[-1] if out else ""
        if prev and _leans_back(s) and not prev.endswith("?") and not _courtesy(prev):
            out[-1] = f"{_ended(prev)} {s}"
        else:
            out.append(s)
    return out


def _specifics(sentence: str) -> set[str]:
    """The lower-cased words of a sentence that carry a value: words with a digit,
    and capitalized words (of two letters or more) that do not start it."""
    out = set()
    for i, w in enumerate(WORD.findall(sentence)):
        if any(c.isdigit() for c in w) or (i > 0 and len(w) > 1 and w[0].isupper()):
            out.add(w.lower())
    return out


# -- running a reflection (used by MemoryLayer) -------------------------------------
@dataclass
class ReflectionReport:
    """What one reflection pass did.

    Attributes:
        read: ids of the episodes the reflector was shown.
        written: the new reflection records.
        retired: ids of earlier reflections archived (restated or superseded).
        archived: ids of episodes archived because the reflections cover them.
        dropped: proposals dropped (no valid source, superseded within the pass).
    """

    read: list[str] = field(default_factory=list)
    written: list[MemoryRecord] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    dropped: int = 0


def is_reflection(record: MemoryRecord) -> bool:
    return record.kind is MemoryKind.SEMANTIC and isinstance(record.meta.get(META_KEY), dict)


def reflect_scope(
    layer: MemoryLayer,
    source_scope: str,
    target_scope: str,
    now: float,
    *,
    force: bool = False,
    consolidator: Consolidator | None = None,
) -> ReflectionReport:
    """One reflection pass over ``source_scope``'s unreflected episodes, writing to
    ``target_scope`` (the same scope, or the semantic layer of a layered scope).

    Runs when ``layer.reflect_policy`` says it is due, or always with ``force``.
    Everything is decided before anything is written: the reflections are embedded
    and checked, then written in one batch, then retired reflections and covered
    episodes are archived.
    """
    report = ReflectionReport()
    reflector, policy = layer.reflector, layer.reflect_policy
    if reflector is None:
        return report
    since = layer.reflected_until(source_scope, target_scope)
    episodes = [
        r
        for r in layer.store.list(source_scope, kinds=[MemoryKind.EPISODIC])
        if (r.created_at, r.id) > since
    ]
    if not force and not policy.due(episodes):
        return report
    if not episodes:
        return report
    shown = [r for r in episodes if policy.read_untrusted or r.source not in UNTRUSTED_SOURCES]
    known = [
        r for r in layer.store.list(target_scope, kinds=[MemoryKind.SEMANTIC]) if is_reflection(r)
    ]
    answer = reflector.reflect(shown, known) if shown else Reflections()
    report.read = [r.id for r in shown]
    by_id = {r.id: r for r in shown}
    known_by_id = {r.id: r for r in known}
    until = (episodes[-1].created_at, episodes[-1].id)
    proposals = []
    for item in answer.items:
        sources = [by_id[i] for i in item.sources if i in by_id]
        if not sources:
            report.dropped += 1  # a reflection must cite what it came from
            continue
        proposals.append((item, sources))
    records = _records(
        layer, proposals, known_by_id, reflector.name, source_scope, target_scope, until, by_id
    )
    parts_of = {r.id: item.parts for r, (item, _) in zip(records, proposals, strict=True)}
    retired: dict[str, None] = {}
    for item, _ in proposals:
        retired.update(dict.fromkeys(i for i in item.replaces if i in known_by_id))
    marked: list[MemoryRecord] = []
    if policy.supersede and consolidator is not None and records:
        records, superseded, dropped, marked = _value_in_force(
            layer, consolidator, target_scope, records, known_by_id, retired
        )
        retired.update(dict.fromkeys(superseded))
        report.dropped += dropped
    limit = getattr(reflector, "bundle_words", 0)
    if limit and records:
        records, marked = _top_up(
            layer, records, known_by_id, marked, retired, limit, parts_of, by_id
        )
    if records or marked:
        layer.store.put_many(records + marked)
    report.written = records
    if retired:
        layer.store.mark_archived(target_scope, list(retired), now)
        report.retired = list(retired)
    if policy.archive != "none":
        trusted = {r.id for r in shown if r.source not in UNTRUSTED_SOURCES}
        if policy.archive == "all":
            archive = [i for i in report.read if i in trusted]
        else:
            archive = [i for i in answer.covered if i in trusted]
        if archive:
            layer.store.mark_archived(source_scope, archive, now)
            report.archived = archive
    layer.mark_reflected(source_scope, target_scope, until)
    return report


def _records(
    layer: MemoryLayer,
    proposals: list[tuple[Reflection, list[MemoryRecord]]],
    known: dict[str, MemoryRecord],
    reflector: str,
    source_scope: str,
    target_scope: str,
    until: tuple[float, str],
    shown: dict[str, MemoryRecord],
) -> list[MemoryRecord]:
    if not proposals:
        return []
    texts = [item.content.strip() for item, _ in proposals]
    emb = layer.embedder
    vectors = check_embeddings(emb.embed(texts), len(texts), emb.dims, emb.name)
    out = []
    for i, (item, sources) in enumerate(proposals):
        untrusted = [r.source for r in sources if r.source in UNTRUSTED_SOURCES]
        if untrusted:
            source = Source.WEB if Source.WEB in untrusted else Source.TOOL
        elif all(r.source is Source.USER for r in sources):
            source = Source.USER
        else:
            source = Source.AGENT
        salience = float(item.salience)
        if untrusted:
            salience = min(salience, layer.untrusted_salience_cap)
        provenance: dict[str, None] = {}
        for old_id in item.replaces:
            if old_id in known:
                provenance.update(dict.fromkeys(known[old_id].provenance))
        _cite(provenance, sources, item.covers, shown)
        created = max(r.created_at for r in sources)
        out.append(
            MemoryRecord(
                id=new_id(),
                content=texts[i],
                embedding=vectors[i],
                kind=MemoryKind.SEMANTIC,
                scope=target_scope,
                salience=salience,
                tokens=layer.count_tokens(texts[i]),
                created_at=created,
                last_accessed_at=created,
                source=source,
                provenance=tuple(provenance),
                meta={
                    META_KEY: {
                        "reflector": reflector,
                        "label": item.label,
                        "count": item.count,
                        "sources": [r.id for r in sources],
                        "from_scope": source_scope,
                        "until": list(until),
                    }
                },
            ).validate()
        )
    return out


def _cite(
    provenance: dict[str, None], sources: Sequence[MemoryRecord], covers: Sequence[str],
    shown: dict[str, MemoryRecord],
) -> dict[str, None]:  # fmt: skip
    """``provenance`` with what ``sources`` cite added, and what the echoes
    ``covers`` names (ids among ``shown``) cite: an echo archived with a reflection
    is cited, not trusted from, so an untrusted one adds nothing."""
    for r in sources:
        provenance.update(dict.fromkeys(r.provenance))
    for cid in covers:
        echo = shown.get(cid)
        if echo is not None and echo.source not in UNTRUSTED_SOURCES:
            provenance.update(dict.fromkeys(echo.provenance))
    return provenance


def _value_in_force(
    layer: MemoryLayer,
    consolidator: Consolidator,
    scope: str,
    records: list[MemoryRecord],
    known: dict[str, MemoryRecord],
    retired: dict[str, None],
) -> tuple[list[MemoryRecord], list[str], int, list[MemoryRecord]]:
    """Keep the value in force: a new reflection that supersedes a known one retires
    it; one that supersedes an earlier proposal of the same pass drops it; one that
    supersedes a single statement of a bundle marks that statement stale (a stale
    span; the bundle's other statements stay in force). Only a reflection of the
    same label (fact, preference) is ever superseded, and only reflections (the
    consolidator may name other semantic records: they stay).

    Returns the records to write, the known ids to retire, how many proposals were
    dropped, and the known reflections given stale spans (to write back)."""
    keep: list[MemoryRecord] = []
    superseded: list[str] = []
    dropped: set[str] = set()
    marked: dict[str, MemoryRecord] = {}
    for rec in records:
        if rec.source in UNTRUSTED_SOURCES:
            keep.append(rec)  # an untrusted record never supersedes anything
            continue
        reader = ScopeReader(layer.store, scope, pending=[*keep, *marked.values()],
                             pool=layer.pool, weights=layer.ranker.weights.as_dict())  # fmt: skip
        label = _label(rec)
        for s in consolidator.decide(rec, reader):
            in_pass = next((i for i, k in enumerate(keep) if k.id == s.old_id), None)
            old = marked.get(s.old_id) or known.get(s.old_id)
            if in_pass is not None:
                old = keep[in_pass]
            if old is None or _label(old) != label or s.old_id in retired:
                # a preference is only ever replaced by a preference, a fact by a fact:
                # "we prefer to deploy on Tuesdays" is not the value of "we deploy on X"
                continue
            if s.partial and s.span is not None:
                stale = _with_stale(old, rec, s)
                if stale is None:
                    continue
                if in_pass is not None:
                    keep[in_pass] = stale
                else:
                    marked[old.id] = stale
            elif in_pass is not None:
                dropped.add(s.old_id)
            elif s.old_id not in superseded:
                superseded.append(s.old_id)
                marked.pop(s.old_id, None)
        keep.append(rec)
    kept = [r for r in keep if r.id not in dropped]
    return kept, superseded, len(dropped), list(marked.values())


def _top_up(
    layer: MemoryLayer,
    records: list[MemoryRecord],
    known: dict[str, MemoryRecord],
    marked: list[MemoryRecord],
    retired: dict[str, None],
    limit: int,
    parts_of: dict[str, tuple[Reflection, ...]],
    shown: dict[str, MemoryRecord],
) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
    """A bundling reflector's newest earlier bundle takes the pass's facts while it
    has room, so bundles fill up across passes instead of leaving a part-filled
    one behind each pass.

    - The longest fact record of the pass that fits whole joins it (one record fewer).
    - Otherwise the pass's first bundle gives it its first statements (``parts_of``:
      the one-statement reflections each new bundle joins), each with its own
      sources and citations, and keeps the rest.

    The old bundle is rewritten with what it still says (its stale statements cut)
    and the new facts, and retired (added to ``retired``). Runs after the value in
    force was kept, so a carried statement a new fact supersedes is already cut.
    """
    now = {r.id: r for r in marked}
    facts = [
        now.get(k.id, k) for k in known.values()
        if k.id not in retired and k.source.trusted and _label(k) == "fact"
    ]  # fmt: skip
    if not facts:
        return records, marked
    old = max(facts, key=lambda k: (k.created_at, k.id))
    kept = old.text_at()
    if not kept:
        return records, marked
    room = limit - len(kept.split())
    movable = [
        (i, r) for i, r in enumerate(records)
        if _label(r) == "fact" and not r.superseded and r.source.trusted
    ]  # fmt: skip
    fits = [(len(r.content.split()), -i) for i, r in movable if len(r.content.split()) <= room]
    if fits:
        at = -max(fits)[1]  # the longest that fits; the first of equals
        moved, rest = records[at], None
    else:
        split = next(
            ((i, r, parts_of[r.id]) for i, r in movable if len(parts_of.get(r.id, ())) > 1), None
        )
        if split is None:
            return records, marked
        at, new, parts = split
        take, words = 0, 0  # the most first statements that fit, one left for the rest
        while take < len(parts) - 1 and words + len(parts[take].content.split()) <= room:
            words += len(parts[take].content.split())
            take += 1
        if not take:
            return records, marked
        moved = _piece(layer, new, parts[:take], shown, new_id())
        rest = _piece(layer, new, parts[take:], shown, new.id)
    text = f"{_ended(kept)} {moved.content}"
    data = dict(moved.meta[META_KEY])
    data["count"] = int(old.meta.get(META_KEY, {}).get("count", 1)) + int(data.get("count", 1))
    merged = moved.copy(
        content=text,
        tokens=layer.count_tokens(text),
        salience=max(float(old.salience), float(moved.salience)),
        provenance=tuple(dict.fromkeys((*old.provenance, *moved.provenance))),
        meta={**moved.meta, META_KEY: data},
    )
    pieces = [merged] if rest is None else [merged, rest]
    vectors = check_embeddings(layer.embedder.embed([r.content for r in pieces]), len(pieces),
                               layer.embedder.dims, layer.embedder.name)  # fmt: skip
    pieces = [r.copy(embedding=v) for r, v in zip(pieces, vectors, strict=True)]
    retired[old.id] = None  # archived after the write; a stale span on it is kept as history
    return [*records[:at], *pieces, *records[at + 1 :]], marked


def _piece(
    layer: MemoryLayer, bundle: MemoryRecord, parts: tuple[Reflection, ...],
    shown: dict[str, MemoryRecord], record_id: str,
) -> MemoryRecord:  # fmt: skip
    """The record of some of a new bundle's statements: ``bundle`` with their text,
    sources, citations, count and salience (its embedding is set by the caller)."""
    sources = [shown[i] for p in parts for i in p.sources if i in shown]
    provenance = _cite({}, sources, [c for p in parts for c in p.covers], shown)
    text = " ".join(_ended(p.content) for p in parts)
    data = dict(bundle.meta[META_KEY])
    data["count"] = sum(p.count for p in parts)
    data["sources"] = list(dict.fromkeys(r.id for r in sources))
    created = max((r.created_at for r in sources), default=bundle.created_at)
    return bundle.copy(
        id=record_id,
        content=text,
        tokens=layer.count_tokens(text),
        salience=min(bundle.salience, max(p.salience for p in parts)),
        created_at=created,
        last_accessed_at=created,
        provenance=tuple(provenance),
        meta={**bundle.meta, META_KEY: data},
    )


def _with_stale(old: MemoryRecord, new: MemoryRecord, s: Supersession) -> MemoryRecord | None:
    """``old`` with the spans ``s`` names marked stale by ``new`` (None when the
    decision cannot be applied: a span outside the text)."""
    spans = list(dict.fromkeys((s.span, *s.more_spans)))
    entries = [
        Superseded(by=new.id, at=new.created_at, span=span, reason=s.reason,
                   confidence=float(s.confidence), detail=s.detail)
        for span in spans
    ]  # fmt: skip
    changed = old.copy(superseded=(*old.superseded, *entries))
    try:
        for entry in entries:
            entry.check(changed)
    except InputError:
        return None
    return changed


def _label(record: MemoryRecord) -> str | None:
    data = record.meta.get(META_KEY)
    return data.get("label") if isinstance(data, dict) else None


__all__ = [
    "GREETING",
    "LABELS",
    "META_KEY",
    "PREFERENCE",
    "REFLECTORS",
    "ReflectPolicy",
    "Reflection",
    "ReflectionReport",
    "Reflections",
    "Reflector",
    "ReflectorError",
    "RuleReflector",
    "is_reflection",
    "reflect_scope",
    "sentences",
]
