"""Word-level helpers of the generator: content words, overlap, value matching."""

from __future__ import annotations

import re

from memlab.lab.synth import catalog as cat

#: a probe is "paraphrased" when at most this share of its content words occur in
#: its evidence (see ``word_overlap``)
PARAPHRASE_MAX_OVERLAP = 0.2


STOPWORDS = frozenset(
    """a about above after again all am an and any are as at be been before being below
    between both but by can could d did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just ll m
    me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own re s same she should so some such t than that the their theirs them then there
    these they this those through to too under until up us ve very was we were what when where
    which while who whom why will with would you your yours yourself yourselves what's i'm
    we're it's don't isn't let lets get got go goes going gone make made want wanted need
    needs also still yet ever""".split()  # noqa: SIM905 - a word list reads better as text
) | frozenset(cat.DISCOURSE)
_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> list[str]:
    """The content words of a text: lowercase alphanumeric tokens that are not
    stopwords or discourse fillers ("remind", "again", "quick"), in order, unique."""
    words = [w for w in _WORD.findall(text.casefold()) if w not in STOPWORDS]
    return list(dict.fromkeys(words))


_SUFFIXES = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _same_word(a: str, b: str) -> bool:
    # Deliberately generous (so "paraphrased" is an honest claim): a word matches
    # its inflections and derivations ("deploy"/"deployed"/"deployment",
    # "host"/"hosts"/"hosted", "service"/"services").
    a, b = _stem(a), _stem(b)
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 4 and long_.startswith(short):
        return True
    return len(short) >= 5 and a[:5] == b[:5]


def word_overlap(probe: str, evidence: str) -> float:
    """Share of the probe's content words that also occur in the evidence text.

    overlap = |{w in C(probe) : w matches some word of C(evidence)}| / |C(probe)|,
    where C is ``content_words`` and two words match when, after stripping one
    suffix (-ing, -ed, -es, -s), they are equal, one (at least 4 letters) is a
    prefix of the other, or they share their first 5 letters.
    Returns 0.0 when the probe has no content words.
    """
    p, e = content_words(probe), content_words(evidence)
    if not p:
        return 0.0
    return sum(1 for w in p if any(_same_word(w, x) for x in e)) / len(p)


def normalize(text: str) -> str:
    """Casefold and collapse whitespace (how a metric matches values in text)."""
    return " ".join(text.casefold().split())


def normalize_loose(text: str) -> str:
    """Casefold, turn punctuation into spaces and collapse whitespace."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.casefold()).split())


def contains_value(text: str, value: str) -> bool:
    """Whether ``value`` occurs in ``text`` under either normalization."""
    return normalize(value) in normalize(text) or (
        bool(normalize_loose(value)) and normalize_loose(value) in normalize_loose(text)
    )


def _clash(a: str, b: str) -> bool:
    """Two values clash if one occurs inside the other (under either normalization)."""
    return contains_value(a, b) or contains_value(b, a)
