"""The shape of an update, read from text: which sentences state something, which
words signal a change, which values a sentence names as old, and how two
statements differ.

This is the text half of the default consolidator (``memlab.memory.consolidate``):
pure functions over strings, no numpy, no store. Every word list lives in the
tables at the top of this module, so the rules can be read, audited and extended
in one place; every decision the consolidator makes names the table entries that
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
from functools import lru_cache

# ---------------------------------------------------------------------------
# The tables (the only place cue words live)
# ---------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    """A word list written as text (reads better than a list literal)."""
    return frozenset(text.split())


#: Words that say a statement replaces an earlier one. Matched as whole words or
#: phrases, case-insensitively. Words that also carry everyday meanings are only
#: listed in the phrases that make them a change ("is back to", not "back to the
#: topic"; "effective immediately", not "an effective way"). "new" only counts in
#: "new X is" / "new X:" ("new cap is", not "my new bike"), see NEW_CUE.
CHANGE_CUES: tuple[str, ...] = (
    "actually", "now", "these days", "nowadays", "currently", "anymore", "any more",
    "instead", "from now on", "going forward", "as of", "effective immediately",
    "effective today", "starting today", "starting tomorrow", "starting next week",
    "from today", "correction", "correct that", "to correct", "update", "updated", "changed",
    "policy change", "change of plans", "switched", "switching", "moved to", "moved from",
    "moved off", "moved over", "moved away", "moved into", "moved out", "moved back",
    "moved the", "moved our", "moved my", "moved us", "moved everything", "migrated",
    "migration", "renegotiated", "scratch that", "scratch what", "scratch",
    "ignore the earlier", "ignore what i said", "ignore my earlier", "disregard", "i meant",
    "typo", "by mistake", "mistake", "wrong", "no longer", "not anymore", "became",
    "replaced", "swapped", "rather", "took over", "covering", "is out", "is gone",
    "went from", "raised", "lowered", "bumped", "increased", "decreased", "reduced",
    "dropped", "ditched", "upgraded", "downgraded", "transferred", "relocated", "rewrote",
    "finished the migration", "contract ended", "retired", "deprecated", "just got",
    "right now", "oh wait", "renamed", "is back to", "are back to", "'s back to",
    "'re back to", "went back to", "going back to", "switched back to", "moved back to",
    "changed back to", "back on",
)  # fmt: skip

#: "new" is a cue only before a noun phrase it renews, not in "new york" or
#: "brand new laptop" (a description of a thing, not of a change).
NEW_CUE = re.compile(
    r"\b(?:the |a |our |my )?new (?!york|zealand|delhi|orleans|jersey|mexico)[\w-]+"
    r"(?: [\w-]+)?(?: is| are|:)"
)

#: Patterns that name the old value (group ``old``) and often the new one
#: (group ``new``). Order matters: the first match on a span wins.
# A value: up to 60 characters without clause punctuation, except a dot, colon or
# comma inside a token ("fly.io", "9:30", "$15,000").
_V = r"(?P<{g}>(?:[^,;:.!?()]|[.:](?=\w)|,(?=\d)){{1,60}}?)"
_OLD = _V.format(g="old")
_NEW = _V.format(g="new")
_END = r"(?=\s*(?:,(?!\d)|[;!?()]|[.:](?!\w)|$|\s(?:now|instead|last|this|next|and|from now on|"
_END += r"going forward|for (?:good|now)|recently|today|yesterday|effective|starting)\b))"
CHANGE_VERBS = (
    "moved|move|moving|switched|switch|switching|changed|change|changing|went|go|going|"
    "migrated|migrate|migrating|migration|raised|lowered|bumped|cut|increased|decreased|"
    "reduced|upgraded|downgraded|swapped|transferred|shifted|relocated|updated|update|"
    "converted|renamed|ported|rewrote|grew|jumped|rose|fell|dropped|got|get|been|"
    "transitioned|transition|changeover|renegotiated"
)
OLD_VALUE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("from X to Y", re.compile(
        rf"\b(?:{CHANGE_VERBS})\b[^.;!?]{{0,40}}?\bfrom (?:the |our |my |a |an )?{_OLD}"
        rf" (?:to|into|onto|over to) (?:the |a |an )?{_NEW}{_END}")),
    ("off X (to Y)", re.compile(
        rf"\b(?:moved|moving|move|got|get|switched|migrated|came|off of)\s+off (?:of )?"
        rf"(?:the |our )?{_OLD}(?: (?:to|onto|for|in favou?r of) (?:the |a )?{_NEW})?{_END}")),
    ("left X for Y", re.compile(
        rf"\b(?:left|ditched|dropped|abandoned|quit|dumped) (?:the |our |my )?{_OLD}"
        rf"(?: (?:for|in favou?r of) (?:the |a )?{_NEW})?{_END}")),
    ("replaced X with Y", re.compile(
        rf"\b(?:replaced|swapped|traded|exchanged|substituted) (?:the |our |my )?{_OLD}"
        rf" (?:with|for|by) (?:the |a )?{_NEW}{_END}")),
    ("renamed X to Y", re.compile(
        rf"\b(?:renamed|rebranded|retitled) (?:the |our |my )?{_OLD} (?:to|as|into) "
        rf"(?:the |a )?{_NEW}{_END}")),
    ("X swapped with Y", re.compile(
        rf"(?:^|[,;:—–-] ){_OLD} (?:swapped|traded|switched|handed over|handed off) "
        rf"(?:shifts |places |roles |the rotation )?(?:with|to) {_NEW}{_END}")),
    ("instead of X", re.compile(rf"\b(?:instead of|rather than|in place of) (?:the |our |my )?{_OLD}{_END}")),
    ("no longer X", re.compile(
        r"\bno longer (?:use|using|on|in|at|with|run|running|have|having|go|going|be|"
        rf"send|sending|work|working|live|living|based in|located in)? ?(?:the |our |my )?{_OLD}{_END}")),
    ("not X anymore", re.compile(
        r"(?:\bnot|n't|\bno) (?:use |using |run |running |have |on |in |at |with |using |go to "
        rf"|send to )?(?:the |our |my )?{_OLD} any ?more\b")),
    ("not X but Y", re.compile(rf"\bnot (?!sure\b)(?:the |our |my )?{_OLD},? but (?:the |a )?{_NEW}{_END}")),
    ("X became Y", re.compile(rf"(?:^|[,;:—–-] |\b(?:the|our|my) ){_OLD} (?:became|becomes|turned into|is now|are now|changed to|went to) (?:the |a )?{_NEW}{_END}")),
    ("X -> Y", re.compile(rf"{_OLD} (?:->|→|=>) {_NEW}{_END}")),
    ("X is out", re.compile(
        rf"(?:^|[,;:—–-] |\b(?:the|our|my) ){_OLD} (?:is|are|was|were|has been|have been) "
        r"(?:out|gone|over|done|closed|retired|deprecated|decommissioned|shut down|dead|"
        r"cancell?ed|no more)\b")),
    ("X contract ended", re.compile(rf"(?:^|[,;:—–-] ){_OLD} (?:contract|subscription|plan|account|deal) (?:ended|expired|lapsed|was cancell?ed)\b")),
    ("used to X, now", re.compile(rf"\bused to (?:be |use |run |have |live |work |go )?(?:on |in |at |with |to )?(?:the |our |my )?{_OLD}{_END}(?=.*\b(?:now|these days|currently|instead|today)\b)")),
    ("back to Y", re.compile(rf"\b(?:back to|revert(?:ed|ing)? to|return(?:ed|ing)? to) (?:the |using |our )?{_NEW}{_END}")),
)  # fmt: skip

#: Markers of a clause that states no current fact of the speaker's own, by kind.
#: A new clause with a marker supersedes nothing, unless the old clause has the
#: same marker (both hypothetical, both about the colleague): then the two are
#: statements of the same kind and may replace each other.
MARKERS: dict[str, tuple[str, ...]] = {
    "hypothetical": (
        "if", "what if", "suppose", "supposing", "imagine", "hypothetically", "in theory",
        "thinking about", "thinking of", "think about", "considering", "consider", "might",
        "maybe", "perhaps", "possibly", "could", "would", "wondering", "wonder",
        "in case", "whether", "not sure", "unless", "someday", "one day", "eventually",
        "planning to", "plan to", "planning on", "hoping to", "hope to", "dreaming",
        "debating", "tempted", "toying with", "weighing", "looking into", "in the future",
        "may move", "may switch", "we may", "i may", "potentially", "thinking we",
        "want to", "wanted to", "wants to", "'d like to", "would like to", "'d love to",
        "would love to", "wish", "trying to", "try to", "goal is", "aiming to",
    ),
    # asking for something (advice, ideas) states no fact either
    "request": (
        "looking for", "recommend", "recommendation", "recommendations", "suggest",
        "suggestions", "any ideas", "ideas for", "help me", "can you", "could you",
        "tips on", "tips for", "advice on", "advice for",
    ),
    "other": (
        "someone else", "somebody else", "a friend", "another team", "the other team",
        "other team", "my colleague", "my coworker", "my co-worker", "my wife", "my husband",
        "my partner", "my friend", "my boss", "my brother", "my sister", "my mom",
        "my mother", "my dad", "my father", "my son", "my daughter", "my cousin",
        "my neighbor", "my neighbour", "my roommate", "my flatmate", "my teammate",
        "my landlord", "my uncle", "my aunt", "my girlfriend", "my boyfriend", "my kid",
        "my parents", "my client", "a colleague", "a coworker", "his", "she", "he",
        "colleague's", "coworker's", "co-worker's", "friend's", "wife's", "husband's",
        "partner's", "boss's", "manager's", "brother's", "sister's", "mom's", "dad's",
        "client's", "customer's", "neighbor's", "neighbour's", "teammate's", "cousin's",
    ),
    "addition": (
        "also", "as well", "too", "another", "additionally", "in addition", "a second",
        "second", "plus", "on top of", "besides", "along with", "alongside", "extra",
        "one more", "both", "opened", "added", "adding", "hired", "expanded", "new branch",
        "new office", "as a backup", "backup",
    ),
    "history": (
        "used to", "previously", "formerly", "back then", "before that", "in the past",
        "originally", "at first", "at the time", "years ago", "once", "growing up",
        "as a kid", "in college", "when i was", "when we were", "until last", "till last",
        "we were in", "i was in", "ex-", "former", "old office", "last job", "previous job",
        "previous company",
    ),
    "reported": (
        "according to", "apparently", "rumor", "rumour", "heard that", "i heard",
        "they say", "someone said", "supposedly", "allegedly", "claims",
    ),
    # a report of something failing names a symptom, not a value in force; only ever
    # counted on the old side (see Clause.blocked_against)
    "problem": (
        "fails", "failing", "failed", "error", "errors", "broken", "can't", "cannot",
        "isn't working", "doesn't work", "not working", "crashed", "crashing", "stuck",
        "timing out", "times out", "locked out", "invalid", "denied", "missing",
    ),
}  # fmt: skip

#: Marker phrases that do not count where they are followed by these words
#: ("would like" states a preference; "too many" is not an addition).
MARKER_EXCEPTIONS: dict[str, str] = {
    "would": r"\bwould (?:like|love|prefer|rather|appreciate)\b(?! to)",
    "could": r"\bcould (?:you|u)\b",
    "too": r"\btoo (?:many|much|few|little|long|big|small|late|early|slow|fast|high|low|"
    r"often|soon|far|old|expensive|busy|hard)\b",
    "once": r"\b(?:at|all at|once a|once an|once per|once every|once you|once we|once i|once it)\b",
    "if": r"\bif (?:(?:a|an|the|any|anything|something|it|you|they)\b[^.?!]*\b(?:page|alert|"
    r"fails|down|breaks|isn't|is not|doesn't|goes|needed|possible|urgent)\b|nobody|no one|"
    r"not|unacked|unacknowledged|needed|necessary|possible|urgent|in doubt)",
    "not sure": r"\bnot sure (?:if|whether) (?:it|this|that) (?:matters|helps|is relevant)",
    "she": r"\bshe\b(?=[^.?!]*\bmy\b)",
    "he": r"\bhe\b(?=[^.?!]*\bmy\b)",
    "plus": r"\bplus\b(?= ?\d)",
    "extra": r"\bextra (?:cost|charge|fee)",
}

#: A clause that starts with "please" asks for an action ("please kill the contractor's
#: tokens now"), which states no fact, unless it sets a standing rule with one of these.
STANDING = re.compile(
    r"\b(?:from now on|going forward|from here on|in future|in the future|always|never|only|"
    r"instead|should|every|any ?more|no longer|until further notice)\b"
)

#: Sentence openers that make a clause a question or a request for information.
QUESTION_STARTS: frozenset[str] = _words(
    """
    are is am was were do does did can could would will should shall may might have has had
    what what's whats which where where's when who who's whom whose why how how's remind
    tell any anything isn't aren't don't doesn't didn't won't wouldn't can't couldn't
    shouldn't
    """
)

#: Discourse words skipped at the start of a clause before looking for a question
#: opener ("Quick one: what's ...", "Sorry, remind me ...").
LEADS: frozenset[str] = _words(
    """
    quick sorry hmm wait ok okay so and but also oh hey hi hello well btw fyi actually
    update correction unrelated sanity check yes no right sure um uh again
    """
)

#: Words of an agent's acknowledgement or answer. A short record whose other
#: words are all in here (or in the statement it echoes) is an echo of the value
#: it repeats ("Noted: Heroku.", "Heroku, as you mentioned.").
ACK_WORDS: frozenset[str] = _words(
    """
    noted note got it ok okay saved save thanks thank understood updated update changed
    change set recorded record file on from now using have told mentioned according my
    notes that was is you your as the a an to i've i ll i'll keep mind in sure done
    confirmed confirm will go with new one there we we're our us
    """
)

#: Function words, pleasantries and light verbs: never a value, never a frame.
FUNCTION_WORDS: frozenset[str] = _words(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do
    does doesn't doing don't down during each few for from further had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out
    over own same shan't she she'd she'll she's should shouldn't so some such than that
    that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those through to too under until up very was wasn't we we'd we'll
    we're we've were weren't what what's when when's where where's which while who who's
    whom why why's with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves it'll that'll there'll us also just really still yet ever even
    please thanks thank ok okay yes yeah hi hello hey oh wait sorry hmm well btw fyi quick
    thing side note context sure right got get gets getting make made use uses using used
    last ago yesterday today tomorrow recently lately run runs running is lives live living
    sit sits sitting set put keep kept via per like need needs want wants wanted should
    everything anything something things stuff lot bit way whole every go goes going gone
    matters matter forget heads great cool awesome perfect nice brilliant star appreciate
    appreciated help helps helped sense cheers bye ah ha haha lol anyway alright must come
    comes came coming always never let ask asks asking asked tell tells telling say says
    saying think thinking thought know knew see seeing look looking try trying tried check
    checking checked wonder guess one good fine rush
    """
)

#: Units belong to a value ("25 minutes", "$7,500 a month") but are no evidence that
#: two statements are about the same thing, so they are not comparison keys.
UNIT_WORDS: frozenset[str] = _words(
    """
    second seconds sec secs minute minutes min mins hour hours hr hrs day days week weeks
    month months year years ms gb mb tb kb percent
    """
)

#: Cue words are removed from the comparison keys (they signal the change, they
#: are not the fact). Multi-word cues contribute their words.
CUE_WORDS: frozenset[str] = frozenset(w for cue in CHANGE_CUES for w in cue.split()) | _words(
    "correction quick scratch ignore earlier said told mention mentioned"
)

# ---------------------------------------------------------------------------
# Tokens and clauses
# ---------------------------------------------------------------------------

_TOKEN = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # e-mail
    r"|https?://\S+"  # url
    r"|[$€£]?\d[\d,.:/]*\d%?|[$€£]?\d%?"  # numbers, money, times, dates
    r"|[#@]?\w+(?:['’]\w+|[.\-/+&]\w+)*",  # words, fly.io, europe-west1, asia/jakarta
    re.UNICODE,
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+|\s+[—–]\s+(?=[A-Za-z])")


def _alternation(phrases: list[str]) -> re.Pattern[str]:
    """One regex for many phrases as whole words (longest first, so "what if" wins
    over "if"): one pass over a clause instead of one per phrase."""
    ordered = sorted(set(phrases), key=lambda p: (-len(p), p))
    return re.compile(r"(?<![\w'])(" + "|".join(map(re.escape, ordered)) + r")(?![\w'])")


_MARKER_KIND = {m: kind for kind, phrases in MARKERS.items() for m in phrases}
_MARKER_RE = _alternation(list(_MARKER_KIND))
_EXCEPTION_RES = {m: re.compile(p) for m, p in MARKER_EXCEPTIONS.items()}
_CUE_RE = _alternation([c for c in CHANGE_CUES if c != "new"])
#: Words without which no OLD_VALUE_PATTERNS entry can match (a cheap first test).
_VALUE_TRIGGER = re.compile(
    r"\b(?:from|off|left|ditched|dropped|abandoned|quit|dumped|replaced|swapped|traded|"
    r"exchanged|substituted|instead|rather|place|longer|not|n't|no|became|becomes|turned|"
    r"now|changed|went|is|are|was|were|has|have|contract|subscription|plan|account|deal|"
    r"used|back|revert\w*|return\w*|renamed|rebranded|retitled|switched|handed)\b|n't\b|->|→|=>"
)
_LOOSE = re.compile(r"[^\w@#$%]+", re.UNICODE)


def _norm_token(raw: str) -> str:
    t = raw.casefold().replace("’", "'").rstrip(".-/+&")
    if t.endswith("'s") and len(t) > 2:
        t = t[:-2]
    return t


def tokens(text: str) -> list[str]:
    """Tokens of a text, casefolded, with trailing possessive 's dropped.

    E-mails, URLs, numbers (``$30,000``, ``02:00``), dotted, slashed and hyphenated
    names (``fly.io``, ``asia/jakarta``, ``europe-west1``) stay one token.
    """
    return [t for t in (_norm_token(m.group(0)) for m in _TOKEN.finditer(text)) if t]


_ID = re.compile(r"^([a-z]{2,})-\d{2,}$")
_EMAIL = re.compile(r"^[^@\s]+@([\w-]+(?:\.[\w-]+)+)$")
_AREA = re.compile(r"^[a-z]+/[a-z_]+$")


def value_type(token: str) -> str | None:
    """A distinctive kind of value a token is, or None: ``email@<domain>``,
    ``id:<PREFIX>`` (SUP-72322), ``channel`` (#ops), ``url:<host>``, ``area/city``
    (time zones). Two tokens of the same kind are two values of one slot."""
    if m := _EMAIL.match(token):
        return f"email@{m.group(1)}"
    if m := _ID.match(token):
        return f"id:{m.group(1)}"
    if token.startswith("#") and len(token) > 1:
        return "channel"
    if token.startswith(("http://", "https://")):
        host = token.split("/")[2] if token.count("/") >= 2 else token
        return f"url:{host}"
    if _AREA.match(token):
        return "area/city"
    if _CLOCK.match(token):
        return "clock"
    if token.endswith("%") and token[:-1].replace(".", "").isdigit():
        return "percent"
    if token[:1] in "$€£" and len(token) > 1:
        return "money"
    if _CODE.match(token) and any(c.isdigit() for c in token) and any(c.isalpha() for c in token):
        # europe-west1 and europe-west4, us-east-1 and eu-central-1: one shape
        return "code:" + re.sub(r"[a-z]+", "a", re.sub(r"\d+", "9", token))
    return None


_CLOCK = re.compile(r"^\d{1,2}:\d{2}$")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_CODE = re.compile(r"^[a-z0-9]+(?:[-_.][a-z0-9]+)+$")
MONTHS = _words(
    "january february march april may june july august september october november "
    "december jan feb mar apr jun jul aug sep sept oct nov dec"
)
DURATION_UNITS = _words(
    "second seconds minute minutes hour hours day days week weeks month months year years"
)
#: Value kinds that many facts share (a sum of money, a duration, a date, a time of
#: day, a percentage): two of them are one fact's values only if the statements are
#: otherwise alike (see the consolidator's per-kind nearest rule).
BROAD_KINDS = frozenset({"money", "duration", "date", "clock", "percent"})


def _quantities(toks: list[str]) -> list[tuple[str, str]]:
    """(kind, token) of durations ("30 days", "one year") and dates ("March 31")."""
    out = []
    for i, t in enumerate(toks):
        t = _ORDINAL.sub(r"\1", t)  # "7th" -> "7"
        number = t.replace(",", "").isdigit() or t in NUMBER_WORDS or t in ("a", "one")
        if not number:
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        prev = toks[i - 1] if i else ""
        if nxt in DURATION_UNITS and t != "a":
            out.append(("duration", f"{t} {nxt}"))
        elif t.isdigit() and (prev in MONTHS or nxt in MONTHS):
            out.append(("date", f"{prev} {t}" if prev in MONTHS else f"{t} {nxt}"))
    return out


def value_class(raw: str, token: str) -> str:
    """What kind of value a value-looking token is: its ``value_type`` without the
    domain or prefix (``email``, ``id``, ``channel``, ``url``, ``area/city``), else
    ``number`` (digits, number words, "four-hour"), else ``name``. Two values of one
    fact are of one class: "#ops" does not replace "20 minutes"."""
    vt = value_type(token)
    if vt in ("money", "clock", "percent"):
        return "number"
    if vt is not None:
        return vt.split("@")[0].split(":")[0]
    if any(c.isdigit() for c in token) or token.split("-")[0] in NUMBER_WORDS:
        return "number"
    return "name"


#: Numbers written as words are values too ("two years", "twenty engineers"); "one"
#: is left out (a pronoun as often as a number), except before a unit.
NUMBER_WORDS: frozenset[str] = _words(
    """
    zero two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy
    eighty ninety hundred thousand million dozen half quarter single double
    """
)


def _looks_like_value(raw: str, first: bool) -> bool:
    """Capitalized (not only as the first word), all-caps, mixed-case, a number word,
    or holding a digit or a symbol: how names, products and numbers look in cased
    text."""
    if raw.casefold() in NUMBER_WORDS:
        return True
    if any(c.isdigit() for c in raw) or any(c in "@#$/%:" for c in raw):
        return True
    if "." in raw.strip("."):
        return True
    letters = [c for c in raw if c.isalpha()]
    if not letters:
        return False
    if any(c.isupper() for c in letters[1:]):
        return True  # GitLab, SSO, AKS
    return letters[0].isupper() and not first


def key(token: str) -> str:
    """The comparison key of a token: alphabetic words lose a plural "s" and are cut
    to their first five letters (so inflections and derivations match); anything
    holding a digit or punctuation is kept whole (so ``europe-west1`` never equals
    ``europe-west4``)."""
    if not token.isalpha():
        return token
    if len(token) >= 4 and token.endswith("s") and not token.endswith(("ss", "us", "is", "os")):
        token = token[:-1]  # "pages" and "page", "logs" and "log"
    for suffix in ("ing", "ed"):
        if len(token) >= len(suffix) + 3 and token.endswith(suffix):
            token = token[: -len(suffix)]  # "hosting", "hosted" and "host"
            if len(token) >= 3 and token[-1] == token[-2] and token[-1] not in "aeiousl":
                token = token[:-1]  # "capped" and "cap"
            break
    return token[:5] if len(token) >= 6 else token


def loose(text: str) -> str:
    """Casefold, punctuation to spaces, ordinals to numbers ("7th" -> "7"), spaces
    collapsed, padded with one space each side: ``f" {value} " in loose(text)``
    tests whole-word containment."""
    words = _LOOSE.sub(" ", text.casefold().replace("’", "'")).split()
    return " " + " ".join(_ORDINAL.sub(r"\1", w) for w in words) + " "


def content_tokens(toks: list[str]) -> list[str]:
    """The tokens that may be a fact's frame or value: no function words, cue words
    or units."""
    return [
        t
        for t in toks
        if t not in FUNCTION_WORDS and t not in CUE_WORDS and t not in UNIT_WORDS and t != "'s"
    ]


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

    @property
    def question(self) -> bool:
        return "question" in self.markers

    @property
    def states(self) -> bool:
        """Whether the clause can state a fact: it has content and is no question."""
        return bool(self.keys) and not self.question

    def blocked_against(self, old: Clause) -> list[str]:
        """The markers of this (new) clause that the old clause lacks: each is a
        reason this clause does not replace the old one."""
        out = []
        for kind, found in old.markers.items():
            if kind == "problem" and kind not in self.markers:
                out.append(f"old clause reports a problem ({', '.join(found)})")
        for kind, found in self.markers.items():
            if kind == "problem":
                continue
            if kind in ("question", "request"):
                if not (kind == "request" and self.names_old):
                    out.append(kind)
                continue
            theirs = old.markers.get(kind, ())
            missing = [m for m in found if m not in theirs]
            # "we also moved off X" and "we used to be on X, now Y" name what they
            # replace: the marker does not make them additions or history
            if missing and not (kind in ("addition", "history") and self.names_old):
                out.append(f"{kind} ({', '.join(missing)})")
        return out

    @property
    def names_old(self) -> bool:
        return bool(self.olds)


@dataclass(frozen=True)
class Parsed:
    """A record's text split into analysed clauses."""

    text: str
    clauses: tuple[Clause, ...]

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
    elif first == "please" and not STANDING.search(low):
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
    out.update((kind, tuple(markers)) for kind, markers in found.items())
    return out


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


#: Words trimmed from either end of a value a pattern captured ("the CTO" -> "cto").
_VALUE_TRIM: frozenset[str] = _words(
    """
    the a an our my your their its this that to of for on in at with we i it is are was
    were be been using use now so and but then just also
    """
)


def _strip_value(text: str) -> str:
    words = loose(text).split()
    while words and words[0] in _VALUE_TRIM:
        words.pop(0)
    while words and words[-1] in _VALUE_TRIM:
        words.pop()
    return " ".join(words[:6])


def _values(low: str) -> tuple[list[str], list[str], list[str]]:
    olds: list[str] = []
    news: list[str] = []
    names: list[str] = []
    if not _VALUE_TRIGGER.search(low):
        return olds, news, names
    for name, pat in OLD_VALUE_PATTERNS:
        for m in pat.finditer(low):
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


#: A sentence longer than this (in tokens) is not read: facts are stated in short
#: sentences, and tool output or pasted logs would only cost time.
MAX_CLAUSE_TOKENS = 60

#: Discourse leads removed before a clause is read: they frame the message, not the
#: fact ("Not sure if it matters, but ..." is not a hypothetical).
LEAD_PHRASES = re.compile(
    r"^(?:(?:not sure (?:if |whether )?(?:it|this|that) (?:matters|helps|is relevant),? but|"
    r"side note|for context|before i forget|one more thing|heads up|btw|fyi|also|oh,? and|"
    r"quick one|hey|hi|hello|ok|okay|so|well|anyway)\b[\s,:;—–-]*)+"
)


@lru_cache(maxsize=16384)
def parse(text: str) -> Parsed:
    """Split a record's text into analysed clauses (cached: a record is parsed once
    however many writes compare against it)."""
    spans = []
    pos = 0
    for m in _SENTENCE.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    clauses: list[Clause] = []
    lent: list[str] = []  # cues of a cue-only clause, lent to the clauses after it
    for start, end in spans:
        raw = text[start:end].strip()
        if not raw:
            continue
        low = " ".join(raw.casefold().replace("’", "'").split())
        lead = LEAD_PHRASES.match(low)
        cut = lead.end() if lead else 0
        body = low[cut:]
        raw_body = " ".join(raw.split())[cut:] if cut else raw
        raws = [m.group(0) for m in _TOKEN.finditer(raw_body)]
        if len(raws) > MAX_CLAUSE_TOKENS:
            continue  # a log line or a data dump, not a statement of a fact
        toks = [_norm_token(r) for r in raws]
        # a clause written with capitals at all (even only the first letter) shows
        # how its names look; all-lower-case writing does not
        cased = any(c.isupper() for c in raw)
        content = set(content_tokens(toks))
        tkeys = [key(t) for t in toks]
        keys = tuple(dict.fromkeys(k for t, k in zip(toks, tkeys, strict=True) if t in content))
        classes = {
            key(t): value_class(r, t) for i, (r, t) in enumerate(zip(raws, toks, strict=True))
            if t in content and _looks_like_value(r, i == 0)
        }  # fmt: skip
        valuey = frozenset(classes)
        typed = tuple(
            dict.fromkeys(
                [(vt, t) for t in toks if (vt := value_type(t)) is not None] + _quantities(toks)
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
        return _span(self.old, self.old_only)

    @property
    def new_value(self) -> str:
        return _span(self.new, self.new_only)


def diff(old: Clause, new: Clause) -> Diff:
    """Compare the content keys of two clauses (see ``Diff``). Words the old clause
    itself names as old ("from AWS CodeCommit to Sourcehut") are not what it states,
    so they take no part."""
    o, n = _stated_keys(old), new.keys
    shared = tuple(k for k in o if k in n)
    old_only = tuple(k for k in o if k not in shared)
    new_only = tuple(k for k in n if k not in shared)
    frame = len(shared) / min(len(o), len(n)) if o and n else 0.0
    return Diff(old, new, shared, old_only, new_only, frame)


def _stated_keys(clause: Clause) -> tuple[str, ...]:
    if not clause.olds:
        return clause.keys
    named = {key(t) for v in clause.olds for t in v.split()} - {
        key(t) for v in clause.news for t in v.split()
    }
    kept = tuple(k for k in clause.keys if k not in named)
    return kept or clause.keys


def _span(clause: Clause, keys: tuple[str, ...]) -> str:
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
    "Clause",
    "Diff",
    "Parsed",
    "contains",
    "diff",
    "key",
    "loose",
    "parse",
    "tokens",
]
