"""Tokens, comparison keys and value types: the word level of an update's text.

``tokens`` splits a text into casefolded tokens that keep e-mails, URLs, numbers
and dotted or slashed names whole; ``key`` turns a token into the key two
statements are compared by; ``value_type`` and ``value_class`` say what kind of
value a token is (an e-mail of a domain, a ticket id of a prefix, a number, a
name); ``loose`` normalizes a text for whole-word containment tests. The clause
level built on it (cues, markers, old and new values, diffs) is
``memlab.memory.update_text``. Pure functions over strings; the word lists live in
``memlab.memory.update_cues``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from memlab.memory.update_cues import (
    CUE_WORDS,
    DURATION_UNITS,
    FUNCTION_WORDS,
    MONTHS,
    NUMBER_WORDS,
    UNIT_WORDS,
    WEEKDAYS,
)

_EMAIL_TOKEN = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
_OTHER = (
    r"https?://\S+"  # url
    r"|[$€£]?\d[\d,.:/]*\d%?|[$€£]?\d%?"  # numbers, money, times, dates
    r"|[#@]?\w+(?:['’]\w+|[.\-/+&]\w+)*"  # words, fly.io, europe-west1, asia/jakarta
)
_OTHER_RE = re.compile(_OTHER)
_EMAIL_RE = re.compile(_EMAIL_TOKEN)
_LOCAL_RUN = re.compile(r"[\w.+-]+")
_DOMAIN_AT = re.compile(r"@[\w-]+(?:\.[\w-]+)+")


class _Tokens:
    """The tokens of ``pattern`` (an e-mail, a URL, a number, a word), found as
    ``re.finditer`` of it finds them, in linear time. The regex tried its e-mail
    branch from every position of a run of local-part characters, each time reading
    to the run's end, so 100,000 dots took 28 s. That branch matches at a position
    exactly when the position lies in a run followed by "@" and a domain: those
    runs are found once, and elsewhere the other branches are searched alone."""

    pattern = f"{_EMAIL_TOKEN}|{_OTHER}"

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """The matches, as ``re.finditer(pattern, text)`` gives them."""
        if "@" not in text:
            yield from _OTHER_RE.finditer(text)
            return
        # (run start, run end) of each run an e-mail can start in
        runs = [m.span() for m in _LOCAL_RUN.finditer(text) if _DOMAIN_AT.match(text, m.end())]
        pos, i = 0, 0
        while pos <= len(text):
            while i < len(runs) and runs[i][1] <= pos:
                i += 1  # a run the scan has passed
            other = _OTHER_RE.search(text, pos)
            if i < len(runs):
                at = max(pos, runs[i][0])
                if other is None or at <= other.start():
                    email = _EMAIL_RE.match(text, at)
                    assert email is not None  # the run is followed by "@" and a domain
                    yield email
                    pos = email.end()
                    continue
            if other is None:
                return
            yield other
            pos = other.end()

    def findall(self, text: str) -> list[str]:
        """The matched texts, as ``re.findall(pattern, text)`` gives them."""
        return [m.group(0) for m in self.finditer(text)]


TOKEN = _Tokens()
_LOOSE = re.compile(r"[^\w@#$%]+", re.UNICODE)


@lru_cache(maxsize=1 << 16)  # every raw token of every clause parsed
def norm_token(raw: str) -> str:
    t = raw.casefold().replace("’", "'").rstrip(".-/+&")
    if t.endswith("'s") and len(t) > 2:
        t = t[:-2]
    return t


def tokens(text: str) -> list[str]:
    """Tokens of a text, casefolded, with trailing possessive 's dropped.

    E-mails, URLs, numbers (``$30,000``, ``02:00``), dotted, slashed and hyphenated
    names (``fly.io``, ``asia/jakarta``, ``europe-west1``) stay one token.
    """
    return [t for t in (norm_token(m.group(0)) for m in TOKEN.finditer(text)) if t]


def token_breaks(text: str, toks: tuple[str, ...]) -> frozenset[int]:
    """Indices into ``toks`` (a clause's tokens: ``tokens(text)`` or a run of them,
    leading words dropped) of the tokens that punctuation follows (a comma, a colon,
    a semicolon, a dash, a bracket): where a noun phrase ends ("during our window,
    tuesday 01:00 utc")."""
    spans = [
        (m.start(), m.end(), norm) for m in TOKEN.finditer(text) if (norm := norm_token(m.group(0)))
    ]
    words = [w for _, _, w in spans]
    n = len(toks)
    at = next((k for k in range(len(words) - n + 1) if tuple(words[k : k + n]) == toks), None)
    if at is None:
        return frozenset()
    return frozenset(
        i for i in range(n - 1) if _BREAK.search(text, spans[at + i][1], spans[at + i + 1][0])
    )


_BREAK = re.compile(r"[,;:()\u2013\u2014]|\s-\s")


_ID = re.compile(r"^([a-z]{2,})-\d{2,}$")
_EMAIL = re.compile(r"^[^@\s]+@([\w-]+(?:\.[\w-]+)+)$")
_AREA = re.compile(r"^[a-z]+/[a-z_]+$")


@lru_cache(maxsize=1 << 16)  # a parse asks it of every token; vocabularies repeat
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
_ANCHORS = DURATION_UNITS | MONTHS  # quantities() finds nothing in a clause without one


def quantities(toks: list[str]) -> list[tuple[str, str]]:
    """(kind, token) of durations ("30 days", "one year") and dates ("March 31")."""
    # each one is a number next to a unit or a month: most clauses hold neither
    if _ANCHORS.isdisjoint(toks):
        return []
    out = []
    for i, t in enumerate(toks):
        if t[:1].isdigit():
            t = _ORDINAL.sub(r"\1", t)  # "7th" -> "7"
        number = t.replace(",", "").isdigit() or t in NUMBER_WORDS or t in ("a", "an", "one")
        if not number:
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        prev = toks[i - 1] if i else ""
        if nxt in DURATION_UNITS and t not in ("a", "an"):
            out.append(("duration", f"{t} {nxt}"))
        elif t == "an" and nxt in DURATION_UNITS and value_type(prev) != "money":
            out.append(("duration", f"{t} {nxt}"))  # "after an hour", not "$40 an hour"
        elif t.isdigit() and (prev in MONTHS or nxt in MONTHS):
            out.append(("date", f"{prev} {t}" if prev in MONTHS else f"{t} {nxt}"))
    return out


def value_class(raw: str, token: str) -> str:
    """What kind of value a value-looking token is: its ``value_type`` without the
    domain or prefix (``email``, ``id``, ``channel``, ``url``, ``area/city``), else
    ``number`` (digits, number words, "four-hour"), else ``name``. Two values of one
    fact are of one class: "#ops" does not replace "20 minutes". A weekday or a
    month is a ``date``: "we deploy on Tuesday mornings" is not replaced by "we
    deploy on Fly.io now" (when is not where)."""
    if token in WEEKDAYS or token in MONTHS:
        return "date"
    vt = value_type(token)
    if vt in ("money", "clock", "percent"):
        return "number"
    if vt is not None:
        return vt.split("@")[0].split(":")[0]
    if any(c.isdigit() for c in token) or token.split("-")[0] in NUMBER_WORDS:
        return "number"
    return "name"


@lru_cache(maxsize=1 << 16)  # asked of every content token of every clause parsed
def looks_like_value(raw: str, first: bool) -> bool:
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


@lru_cache(maxsize=1 << 16)  # every token of every clause parsed, and every compared value
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


@lru_cache(maxsize=1 << 16)  # values are tested against every candidate clause
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


__all__ = [
    "TOKEN",
    "content_tokens",
    "key",
    "looks_like_value",
    "loose",
    "norm_token",
    "quantities",
    "token_breaks",
    "tokens",
    "value_class",
    "value_type",
]
