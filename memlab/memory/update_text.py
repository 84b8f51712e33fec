"""The shape of an update, read from text: which sentences state something, which
words signal a change, which values a sentence names as old, and how two
statements differ.

This is the text half of the default consolidator (``memlab.memory.rule_consolidator``):
pure functions over strings, no numpy, no store. Every word list lives in
``memlab.memory.update_cues``, so the rules can be read, audited and extended in
one place; every decision the consolidator makes names the table entries that
fired (its reason strings).

A record's text is split into *clauses* (sentences; a clause that is only a cue,
such as "Correction:" or "Scratch that.", lends its cue to the clauses after
it). Each clause gets:

- ``cues``: change cues found in it or lent to it ("actually", "now", "moved",
  "from X to Y", ...);
- ``olds`` / ``news``: values the clause names as old / new ("we moved off
  Heroku to Fly.io": old "heroku", new "fly.io");
- ``markers``: why the clause may not state a current fact of the speaker's own:
  ``question``, ``request`` (a one-off "please ..."), ``hypothetical``, ``other``
  (someone else's value), ``addition``, ``history``, ``reported``;
- ``keys``: its content words as comparison keys (stopwords, fillers and cue words
  dropped; long alphabetic words cut to a 5-letter root so that "escalate" and
  "escalation" match, while values with digits or punctuation are kept whole).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from memlab.memory.update_cues import (
    ACK_WORDS,
    CHANGE_CUES,
    FUNCTION_WORDS,
    LEAD_PHRASES,
    LEADS,
    MARKER_EXCEPTIONS,
    MARKERS,
    MAX_CLAUSE_TOKENS,
    NEW_CUE,
    NOT_OWN_STATEMENT,
    OLD_VALUE_PATTERNS,
    OWN_STATEMENT,
    PAST_BEFORE,
    QUESTION_STARTS,
    STANDING,
    VALUE_TRIM,
)
from memlab.memory.update_tokens import (
    TOKEN,
    content_tokens,
    key,
    looks_like_value,
    loose,
    norm_token,
    quantities,
    tokens,
    value_class,
    value_type,
)

# Tokens and clauses
# ---------------------------------------------------------------------------

# Where a text is cut into clauses: a whitespace run after ".!?;", a run of newlines,
# or a dash between spaces, unless what follows the dash refers back to what came
# before ("small update on our log retention — it's 13 months now": the topic
# before the dash, the value after).
_DASH = (
    r"[—–]\s+(?=[A-Za-z])"
    r"(?!(?i:(?:it|that|this|they|which)(?:'s|’s|'re|’re|\s+is\b|\s+are\b|\s+will\b)))"
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+|\s+" + _DASH)
# The regex tries its dash branch from every position of a whitespace run, so its cost
# grows with the square of the longest run (100,000 spaces took minutes): a text with
# a run this long is cut by ``_cuts_linear``, which finds the same cuts.
_LONG_RUN = re.compile(r"\s{64}")
_WHITESPACE = re.compile(r"\s+")
_NEWLINES = re.compile(r"\n+")
_DASH_TAIL = re.compile(_DASH)


def _cuts(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each clause cut of ``text``, in order (``_SENTENCE``)."""
    if _LONG_RUN.search(text) is None:
        return [m.span() for m in _SENTENCE.finditer(text)]
    return _cuts_linear(text)


def _cuts_linear(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each cut, in order: what ``re.finditer`` gives for
    ``(?<=[.!?;])\\s+|\\n+|\\s+[—–]\\s+(?=[A-Za-z])(?!...)``, the three branches
    tried in that order at each position. Every branch starts on whitespace, so
    each maximal whitespace run is read once: the first branch can start only at
    the run's first character (after the punctuation) and takes the run; the
    second takes each run of newlines; the third matches from any position of a
    run or from none (its whitespace reaches the run's end, where the dash must
    be), and its match ends past the whitespace after the dash."""
    out: list[tuple[int, int]] = []
    pos = 0  # where the scan goes on: nothing before it can start a cut
    for run in _WHITESPACE.finditer(text):
        a, b = run.span()
        if a < pos:
            continue  # the whitespace after a dash, taken by that cut
        if a > 0 and text[a - 1] in ".!?;":
            out.append((a, b))
            continue
        tail = _DASH_TAIL.match(text, b)
        p = a
        while p < b:
            if text[p] == "\n":
                q = _NEWLINES.match(text, p).end()  # type: ignore[union-attr]
                out.append((p, q))
                p = q
                continue
            if tail is not None:
                out.append((p, tail.end()))
                pos = tail.end()
                break
            # no branch starts here: on to the next newline of the run, if any
            nl = text.find("\n", p, b)
            if nl < 0:
                break
            p = nl
    return out


def _alternation(phrases: list[str]) -> re.Pattern[str]:
    """One regex for many phrases as whole words (longest first, so "what if" wins
    over "if"): one pass over a clause instead of one per phrase."""
    ordered = sorted(set(phrases), key=lambda p: (-len(p), p))
    return re.compile(r"(?<![\w'])(" + "|".join(map(re.escape, ordered)) + r")(?![\w'])")


_MARKER_KIND = {m: kind for kind, phrases in MARKERS.items() for m in phrases}
_MARKER_RE = _alternation(list(_MARKER_KIND))
_EXCEPTION_RES = {m: re.compile(p) for m, p in MARKER_EXCEPTIONS.items()}
_CUE_RE = _alternation([c for c in CHANGE_CUES if c != "new"])


@dataclass(frozen=True)
class Clause:
    """One sentence of a record, analysed (see the module docstring)."""

    text: str
    start: int
    end: int
    tokens: tuple[str, ...]
    keys: tuple[str, ...]
    cues: tuple[str, ...]
    olds: tuple[str, ...]
    news: tuple[str, ...]
    patterns: tuple[str, ...]
    markers: dict[str, tuple[str, ...]]
    cased: bool = False  # the text has capitals, so value shapes can be read
    valuey: frozenset[str] = frozenset()  # keys of tokens that look like values
    typed: tuple[tuple[str, str], ...] = ()  # (value_type, token) of distinctive values
    classes: dict[str, str] = field(default_factory=dict)  # value key -> value_class
    token_keys: tuple[str, ...] = ()  # key() of each token
    loose: str = ""  # loose(text), for whole-word containment tests

    # Computed once per clause (parse() caches clauses, and every candidate pair
    # reads these): cached_property writes the instance's __dict__, which a frozen
    # dataclass allows, and equality still compares the fields only.
    @cached_property
    def token_set(self) -> frozenset[str]:
        return frozenset(self.tokens)

    @cached_property
    def word_keys(self) -> frozenset[str]:
        """The keys of every token that is no function word: a superset of ``keys``,
        of the words a frame, a slot or a topic can share with another clause."""
        return frozenset(
            k for t, k in zip(self.tokens, self.token_keys, strict=True) if t not in FUNCTION_WORDS
        )

    @cached_property
    def stated_keys(self) -> tuple[str, ...]:
        """The content keys the clause states: its keys without those of the values
        it names as old ("from AWS CodeCommit to Sourcehut": not "aws", "codec")."""
        if not self.olds:
            return self.keys
        named = {key(t) for v in self.olds for t in v.split()} - {
            key(t) for v in self.news for t in v.split()
        }
        kept = tuple(k for k in self.keys if k not in named)
        return kept or self.keys

    @property
    def question(self) -> bool:
        return "question" in self.markers

    @property
    def states(self) -> bool:
        """Whether the clause can state a fact: it has content and is no question."""
        return bool(self.keys) and not self.question

    @cached_property
    def marker_key(self) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], bool]:
        """What ``blocked_against`` reads of a clause, hashable: its markers (in
        order) and whether it names an old value."""
        return tuple(self.markers.items()), self.names_old

    def blocks(self, old: Clause) -> bool:
        """Whether ``blocked_against(old)`` gives any reason: the same answer, looked
        up by the two clauses' markers (a conversation has few distinct sets of them,
        and every clause pair of every candidate asks)."""
        if not self.markers and not old.markers:
            return False
        return _blocks(self.marker_key, old.marker_key)

    def blocked_against(self, old: Clause) -> list[str]:
        """The markers of this (new) clause that the old clause lacks: each is a
        reason this clause does not replace the old one."""
        if not self.markers and not old.markers:
            return []  # most pairs: checked for every clause pair of every candidate
        return _blocked_reasons(self.markers, self.names_old, old.markers)

    @property
    def names_old(self) -> bool:
        return bool(self.olds)


@lru_cache(maxsize=4096)
def _blocks(
    new: tuple[tuple[tuple[str, tuple[str, ...]], ...], bool],
    old: tuple[tuple[tuple[str, tuple[str, ...]], ...], bool],
) -> bool:
    return bool(_blocked_reasons(dict(new[0]), new[1], dict(old[0])))


def _blocked_reasons(
    markers: dict[str, tuple[str, ...]], names_old: bool, old_markers: dict[str, tuple[str, ...]]
) -> list[str]:
    """``Clause.blocked_against`` of a new clause's markers against an old one's."""
    out = []
    for kind, found in old_markers.items():
        if kind == "problem" and kind not in markers:
            out.append(f"old clause reports a problem ({', '.join(found)})")
    for kind, found in markers.items():
        if kind == "problem":
            continue
        if kind in ("question", "request"):
            # a request that names the value it replaces, or that repeats an
            # old request with another value ("Please bill us in AUD" -> "...
            # in CAD"), is a standing instruction changed, not a one-off ask
            if not (kind == "request" and (names_old or kind in old_markers)):
                out.append(kind)
            continue
        theirs = old_markers.get(kind, ())
        missing = [m for m in found if m not in theirs]
        # "we also moved off X" and "we used to be on X, now Y" name what they
        # replace: the marker does not make them additions or history
        if missing and not (kind in ("addition", "history") and names_old):
            out.append(f"{kind} ({', '.join(missing)})")
    return out


@dataclass(frozen=True)
class Parsed:
    """A record's text split into analysed clauses."""

    text: str
    clauses: tuple[Clause, ...]

    @cached_property
    def stating(self) -> tuple[Clause, ...]:
        """The clauses that can state a fact (``Clause.states``), in order: every
        comparison with an earlier record reads them."""
        return tuple(c for c in self.clauses if c.states)

    @property
    def cues(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for cl in self.clauses for c in cl.cues))

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(k for cl in self.clauses for k in cl.keys)

    @property
    def valuey(self) -> frozenset[str]:
        return frozenset(k for cl in self.clauses for k in cl.valuey)


def _find_markers(low: str, toks: list[str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    first = next((t for t in toks if t not in LEADS), "")
    if low.rstrip().endswith("?") or first in QUESTION_STARTS:
        out["question"] = (first or "?",)
    elif first == "please" and not STANDING.search(low) and not _own_statement(low):
        out["request"] = ("please",)
    found: dict[str, list[str]] = {}
    excused: dict[str, set[int]] = {}
    for m in _MARKER_RE.finditer(low):
        marker = m.group(1)
        exc = _EXCEPTION_RES.get(marker)
        if exc is not None:
            if marker not in excused:
                excused[marker] = {e.start() for e in exc.finditer(low)}
            # an exception pattern matched at (or spanning) the marker excuses it
            if any(e <= m.start() < e + 40 for e in excused[marker]):
                continue
        kind = _MARKER_KIND[marker]
        if kind == "addition" and marker == "also" and _lead_also(low):
            continue
        if marker not in found.setdefault(kind, []):
            found[kind].append(marker)
    if PAST_BEFORE.match(low):
        found.setdefault("history", []).append("before")
    out.update((kind, tuple(markers)) for kind, markers in found.items())
    return out


def _own_statement(low: str) -> bool:
    """Whether a "please" clause also states the speaker's own fact ("please update
    your notes, pacific/auckland is my time zone now"): then it is no one-off ask."""
    return bool(OWN_STATEMENT.search(low)) and not NOT_OWN_STATEMENT.search(low)


def _lead_also(low: str) -> bool:
    """'Also, ...' at the start of a clause is a discourse lead, not an addition,
    unless "also" appears again inside the clause."""
    stripped = low.lstrip(" \"'(")
    return stripped.startswith("also,") and stripped.count("also") == 1


def _cues(low: str) -> list[str]:
    found = list(dict.fromkeys(m.group(1) for m in _CUE_RE.finditer(low)))
    if NEW_CUE.search(low):
        found.append("new")
    if "right now" in found and "now" in found:
        found.remove("now")
    return found


def _strip_value(text: str) -> str:
    words = loose(text).split()
    while words and words[0] in VALUE_TRIM:
        words.pop(0)
    while words and words[-1] in VALUE_TRIM:
        words.pop()
    return " ".join(words[:6])


#: Literals without which a pattern cannot match, tested before it runs (a pattern
#: that starts with a lazy span tries it at every position): "X -> Y" took 70% of the
#: time of all the patterns together on LongMemEval_S turns and almost never matches;
#: with it skipped, the next ten took 60% of the rest. Each entry spells out the
#: words one of the pattern's alternatives must hold (tests/test_update_text.py checks
#: them against strings generated from the pattern itself).
_PATTERN_NEEDS: dict[str, tuple[str, ...]] = {
    "X -> Y": ("->", "→", "=>"),
    "X became Y": ("became", "becomes", "turned into", "is now", "are now", "changed to", "went to"),
    "X is out": (
        "out", "gone", "over", "done", "closed", "retired", "deprecated", "decommissioned",
        "shut down", "dead", "cancel", "no more", "a mistake",
    ),
    "Y replaced X": ("replace", "took over from"),
    "X was replaced by Y": ("replaced", "swapped out", "superseded"),
    "X swapped with Y": ("swapped", "traded", "switched", "handed over", "handed off"),
    "X isn't our Y anymore": ("anymore", "any more"),
    "not X anymore": ("anymore", "any more"),
    "X contract ended": ("ended", "expired", "lapsed", "was cancel"),
    "X didn't stick": ("stick", "work out", "last", "take"),
    "left X for Y": ("left", "ditched", "dropped", "abandoned", "quit", "dumped"),
    "from X to Y": ("from ",),
    "off X (to Y)": ("off",),
    "replaced X with Y": ("replaced", "swapped", "traded", "exchanged", "substituted"),
    "said goodbye to X": ("bye", "farewell"),
    "renamed X to Y": ("renamed", "rebranded", "retitled"),
    "forget X": ("forget", "disregard"),
    "instead of X": ("instead of", "rather than", "in place of"),
    "no longer X but Y": ("no longer",),
    "no longer X": ("no longer",),
    "not X but Y": ("not ",),
    "used to X, now": ("used to",),
    "after trying X, back to Y": ("after trying",),
    "back to Y": ("back to", "revert", "return"),
    "the switch to X is undone": ("switch to", "move to", "change to"),
}  # fmt: skip
#: Each pattern's literals as one search (one C-level scan instead of one per literal).
_PATTERN_GATES = {
    name: re.compile("|".join(map(re.escape, needs))) for name, needs in _PATTERN_NEEDS.items()
}
#: Every pattern's literals as one search, the first test before any pattern runs: a
#: clause without any of them cannot match one (derived from the gates, so a pattern
#: never goes unrun for a word a hand-written list forgot).
_VALUE_TRIGGER = re.compile(
    "|".join(map(re.escape, sorted({n for ns in _PATTERN_NEEDS.values() for n in ns})))
)


def _values(low: str) -> tuple[list[str], list[str], list[str]]:
    olds: list[str] = []
    news: list[str] = []
    names: list[str] = []
    if not _VALUE_TRIGGER.search(low):
        return olds, news, names
    taken: list[tuple[int, int]] = []  # the first pattern to match a span wins it
    for name, pat in OLD_VALUE_PATTERNS:
        gate = _PATTERN_GATES.get(name)
        if gate is not None and not gate.search(low):
            continue
        for m in pat.finditer(low):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            taken.append(m.span())
            groups = m.groupdict()
            old = _strip_value(groups.get("old") or "")
            new = _strip_value(groups.get("new") or "")
            if old and any(t not in FUNCTION_WORDS for t in old.split()):
                olds.append(old)
            if new:
                news.append(new)
            if old or new:
                names.append(name)
    return list(dict.fromkeys(olds)), list(dict.fromkeys(news)), list(dict.fromkeys(names))


_CODE_MARKS = frozenset("{}[];=<>`")


def _looks_like_code(raw: str) -> bool:
    """A line of code or markup ('$("#posts").append(card);', '<p class="x">'):
    two or more of ``{}[];=<>` `` or four or more of those and parentheses. A sentence
    with a parenthesis or two ("our SLA (the contract one) is 4 hours") is not."""
    marks = sum(map(raw.count, _CODE_MARKS))  # one C-level count per mark, not a loop per character
    return marks >= 2 or marks + raw.count("(") + raw.count(")") >= 4


DASH_VALUE_TOKENS = 4
_SUBJECTS = frozenset(("i", "we", "you", "they", "he", "she", "it", "there", "that", "this"))


def _add_span(text: str, spans: list[tuple[int, int]], start: int, end: int, dash: bool) -> None:
    """Append a clause span; a short fragment after a dash that ends its sentence is
    the value of the clause before it ("our log retention is different now — two
    years."), so it joins that clause."""
    if dash and spans:
        words = [w.casefold() for w in TOKEN.findall(text[start:end])]
        # "— we lost rows" is a clause of its own
        if len(words) <= DASH_VALUE_TOKENS and not _SUBJECTS.intersection(words):
            spans[-1] = (spans[-1][0], end)
            return
    spans.append((start, end))


_BRACKETED = re.compile(r"\[[^\[\]\n]*\]")


def parse_said(text: str, speaker: str | None = None) -> Parsed:
    """``parse`` of a record said by ``speaker``, without what is not its statements:
    a leading ``"<speaker>:"`` tag is attribution (in a group chat every line of one
    person would otherwise share the name as a word), and a bracketed aside
    ("[shares a photo: a dog on a beach]", "[laughs]") is an attachment or stage
    direction, not something the speaker states. Both are blanked, not cut, so
    clause offsets still index the record's text."""
    out = _BRACKETED.sub(lambda m: " " * len(m.group(0)), text) if "[" in text else text
    if speaker:
        tag = speaker.strip() + ":"
        head = out.lstrip()
        if tag and head[: len(tag)].casefold() == tag.casefold():
            cut = len(out) - len(head) + len(tag)
            out = " " * cut + out[cut:]
    return parse(out)


@lru_cache(maxsize=16384)
def parse(text: str) -> Parsed:
    """Split a record's text into analysed clauses (cached: a record is parsed once
    however many writes compare against it)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    dash = False  # whether the span was cut off from the one before by a dash
    for start, end in _cuts(text):
        _add_span(text, spans, pos, start, dash)
        dash = text[start:end].strip() in ("—", "–")
        pos = end
    _add_span(text, spans, pos, len(text), dash)
    clauses: list[Clause] = []
    lent: list[str] = []  # cues of a cue-only clause, lent to the clauses after it
    for start, end in spans:
        raw = text[start:end].strip()
        if not raw:
            continue
        # the span is the clause itself (a blanked speaker tag is not part of it)
        start += len(text[start:end]) - len(text[start:end].lstrip())
        end = start + len(raw)
        low = " ".join(raw.casefold().replace("’", "'").split())
        lead = LEAD_PHRASES.match(low)
        cut = lead.end() if lead else 0
        body = low[cut:]
        raw_body = " ".join(raw.split())[cut:] if cut else raw
        raws = [m.group(0) for m in TOKEN.finditer(raw_body)]
        if len(raws) > MAX_CLAUSE_TOKENS or _looks_like_code(raw):
            continue  # a log line, a data dump or code, not a statement of a fact
        toks = [norm_token(r) for r in raws]
        # a clause written with capitals at all (even only the first letter) shows
        # how its names look; all-lower-case writing does not
        cased = any(c.isupper() for c in raw)
        content = set(content_tokens(toks))
        tkeys = [key(t) for t in toks]
        keys = tuple(dict.fromkeys(k for t, k in zip(toks, tkeys, strict=True) if t in content))
        classes = {
            key(t): value_class(r, t) for i, (r, t) in enumerate(zip(raws, toks, strict=True))
            if t in content and looks_like_value(r, i == 0)
        }  # fmt: skip
        valuey = frozenset(classes)
        typed = tuple(
            dict.fromkeys(
                [(vt, t) for t in toks if (vt := value_type(t)) is not None] + quantities(toks)
            )
        )
        cues = _cues(body)
        olds, news, names = _values(body)
        markers = _find_markers(body, toks)
        if not keys and cues and not markers.get("question"):
            lent = list(dict.fromkeys(lent + cues))
            continue
        cues = list(dict.fromkeys(lent + cues + [f"'{n}'" for n in names]))
        clauses.append(
            Clause(
                text=raw,
                start=start,
                end=end,
                tokens=tuple(toks),
                token_keys=tuple(tkeys),
                loose=loose(raw),
                keys=keys,
                cues=tuple(cues),
                olds=tuple(olds),
                news=tuple(news),
                patterns=tuple(names),
                markers=markers,
                cased=cased,
                valuey=valuey,
                typed=typed,
                classes=classes,
            )
        )
    return Parsed(text, tuple(clauses))


# ---------------------------------------------------------------------------
# Comparing two clauses
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Diff:
    """How a new clause differs from an old one.

    ``shared`` are the content keys both state (the frame); ``old_only`` and
    ``new_only`` the keys only one states (the values, if the frame is the same
    statement). ``frame`` = |shared| / min(|old keys|, |new keys|), 0 if either is empty.
    """

    old: Clause
    new: Clause
    shared: tuple[str, ...]
    old_only: tuple[str, ...]
    new_only: tuple[str, ...]
    frame: float

    @property
    def old_value(self) -> str:
        """The old clause's differing words, in its own order and spelling."""
        return span_of(self.old, self.old_only)

    @property
    def new_value(self) -> str:
        return span_of(self.new, self.new_only)


def diff(old: Clause, new: Clause) -> Diff:
    """Compare the content keys of two clauses (see ``Diff``). Words the old clause
    itself names as old ("from AWS CodeCommit to Sourcehut") are not what it states,
    so they take no part."""
    o, n = old.stated_keys, new.keys
    in_new = set(n)
    shared = tuple(k for k in o if k in in_new)
    if shared:
        common = set(shared)
        old_only = tuple(k for k in o if k not in common)
        new_only = tuple(k for k in n if k not in common)
    else:  # nothing in common: each side is all its own
        old_only, new_only = o, n
    frame = len(shared) / min(len(o), len(n)) if o and n else 0.0
    return Diff(old, new, shared, old_only, new_only, frame)


def span_of(clause: Clause, keys: tuple[str, ...]) -> str:
    """The clause's tokens whose keys are in ``keys``, from the first to the last
    such token (function words between them kept): "GitLab self-managed"."""
    if not keys:
        return ""
    wanted = set(keys)
    toks = clause.tokens
    idx = [
        i
        for i, (t, k) in enumerate(zip(toks, clause.token_keys, strict=True))
        if k in wanted and t not in FUNCTION_WORDS
    ]
    if not idx:
        return ""
    # the longest contiguous run of value tokens (allowing one function word inside)
    runs: list[list[int]] = [[idx[0]]]
    for i in idx[1:]:
        if i - runs[-1][-1] <= 2:
            runs[-1].append(i)
        else:
            runs.append([i])
    best = max(runs, key=len)
    return " ".join(toks[best[0] : best[-1] + 1])


def contains(text_loose: str, value: str) -> bool:
    """Whether ``value`` occurs as whole words in a text given as ``loose(text)``."""
    v = loose(value)
    return len(v) > 2 and v in text_loose


__all__ = [
    "ACK_WORDS",
    "CHANGE_CUES",
    "FUNCTION_WORDS",
    "MARKERS",
    "OLD_VALUE_PATTERNS",
    "TOKEN",
    "Clause",
    "Diff",
    "Parsed",
    "contains",
    "diff",
    "key",
    "loose",
    "parse",
    "parse_said",
    "span_of",
    "tokens",
]
