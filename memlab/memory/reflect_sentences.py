"""How the LLM-free reflector reads a turn: its sentences, which of them state
something (not a pleasantry, a reaction or a question), which are preferences or
constraints, and which lean back on the sentence before them.

Used by ``memlab.memory.rule_reflector`` and by the reflection pass
(``memlab.memory.reflection_pass``).
"""

from __future__ import annotations

import re

from memlab.memory.salience import PLEASANTRY
from memlab.memory.text import WORD, content_words

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
# one thing out."): it opens with an interjection, and see ``is_reaction`` for the rest.
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


def sentences(text: str) -> list[str]:
    """A text's sentences (split after . ! ? and at line breaks), stripped."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def statement_key(text: str) -> frozenset[str]:
    return frozenset(content_words(text))


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def ended(sentence: str) -> str:
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


def states_before_asking(sentence: str) -> bool:
    """A sentence that ends with a question but opens with a statement ("I'm
    visiting my sister Emily in Denver soon, and I was wondering if ...?", "our
    controller wants the charges split by department, doable?"): after its
    discourse markers it does not open like a question."""
    rest = sentence[_LEAD.match(sentence).end() :]  # type: ignore[union-attr]
    return bool(rest) and not _INTERROGATIVE.match(rest)


def names_something(sentence: str) -> bool:
    """Whether a sentence names a value: a name or number (``specifics``) or a
    value-shaped token (an e-mail, a path, a dotted or dashed name)."""
    return bool(specifics(sentence) or _VALUE_SHAPE.search(sentence))


def is_reaction(sentence: str) -> bool:
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
        and not names_something(sentence)
        and not PREFERENCE.search(sentence)
        and not _SELF.search(sentence)
    )


def is_courtesy(sentence: str) -> bool:
    """A pleasantry or a greeting: it says nothing to remember."""
    return bool(PLEASANTRY.match(sentence) or GREETING.match(sentence))


# a pronoun that points back at what was just said ("never exceed it")
_ANAPHOR = re.compile(r"\b(?:it|that|this|them|those|these)\b", re.I)


def leans_back(sentence: str) -> bool:
    """A preference that means nothing without the sentence before it ("Always.",
    "Never exceed it.", "Never again."): a cue, names nothing, and no content word
    beside the cue but at most one verb pointing back with a pronoun."""
    if not PREFERENCE.search(sentence) or names_something(sentence):
        return False
    rest = content_words(PREFERENCE.sub(" ", sentence))
    return not rest or (len(rest) == 1 and bool(_ANAPHOR.search(sentence)))


def statements(parts: list[str]) -> list[str]:
    """A turn's sentences as statements: a preference that leans back on the
    sentence before it ("Hard cap on spend: $1,200 a month. Never exceed it.") is
    one statement with it, so the rule is remembered with what it rules on."""
    out: list[str] = []
    for s in parts:
        prev = out[-1] if out else ""
        if prev and leans_back(s) and not prev.endswith("?") and not is_courtesy(prev):
            out[-1] = f"{ended(prev)} {s}"
        else:
            out.append(s)
    return out


def specifics(sentence: str) -> set[str]:
    """The lower-cased words of a sentence that carry a value: words with a digit,
    and capitalized words (of two letters or more) that do not start it."""
    out = set()
    for i, w in enumerate(WORD.findall(sentence)):
        if any(c.isdigit() for c in w) or (i > 0 and len(w) > 1 and w[0].isupper()):
            out.add(w.lower())
    return out


__all__ = [
    "GREETING",
    "PREFERENCE",
    "REACTION",
    "ended",
    "is_courtesy",
    "is_reaction",
    "leans_back",
    "names_something",
    "overlap",
    "sentences",
    "specifics",
    "statement_key",
    "statements",
    "states_before_asking",
]
