"""What a text quotes from untrusted context: shared runs of words.

An agent's reply is trusted memory, but a model that repeats a tool result or a
web page would launder it: the quoted text would be stored as the agent's own,
uncapped, and folded into durable summaries. ``find_quotes`` finds the runs of
at least ``min_words`` consecutive words that a reply shares with the untrusted
texts the model was shown (words compared after NFKD normalization and case
folding, so case, punctuation, spacing and full-width look-alikes do not hide a
quote, nor do invisible characters (zero-width, soft hyphens) or underscores
inside the copied words). ``run_turn`` stores a reply that quotes untrusted
context with the untrusted source (and so the salience cap, and no
summarization) and records the quoted spans in its ``meta["quotes"]``.

It catches copying, not paraphrase: a model that rewords an injected instruction
in its own words is not detected (measured by ``make reliability``). A quote is an
unbroken run, so a copy with one word changed in every ``min_words`` (one word in a
short text) is not found either; joining runs across single-word edits was measured
and rejected (docs/library.md: it still misses copies with a few more edits, and
flags more replies that restate a tool's values).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from memlab.errors import InputError
from memlab.memory.checks import check_number, check_text
from memlab.memory.records import UNTRUSTED_SOURCES, Source

# Letters and digits; an underscore separates words, so ``the_user_has`` cannot
# hide the run ``the user has``.
_WORD = re.compile(r"[^\W_]+")
# Invisible format characters (zero-width space and joiners, soft hyphen, bidi
# controls) and combining marks (accents): a copy that inserts them
# inside words reads the same to a person and to a model, so they are dropped
# from both texts before the words are compared.
_HIDDEN = frozenset({"Cf", "Mn", "Me"})


@dataclass(frozen=True)
class Untrusted:
    """A text the model was shown that came from a tool or the web.

    Attributes:
        text: the text.
        source: ``tool`` or ``web``.
        origin: where it came from, for the record: a memory id, ``tool_results[0]``.
    """

    text: str
    source: Source
    origin: str


@dataclass(frozen=True)
class Quote:
    """A run of words a text shares with an untrusted text.

    Attributes:
        origin: the untrusted text's origin.
        source: its source (``tool`` or ``web``).
        words: the run's length in words.
        text: the run as it appears in the quoting text.
    """

    origin: str
    source: Source
    words: int
    text: str

    def as_dict(self) -> dict[str, object]:
        return {"from": self.origin, "source": self.source.value, "words": self.words}


def _normalize(text: str) -> str:
    if text.isascii():
        return text
    # Decomposed, so a mark added to a letter ("a" + U+0301) is dropped rather
    # than composed into another letter; accents are dropped alike on both sides.
    text = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in text if unicodedata.category(ch) not in _HIDDEN)


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(_normalize(text))]


def find_quotes(text: str, untrusted: Sequence[Untrusted], *, min_words: int = 6) -> list[Quote]:
    """The maximal runs of at least ``min_words`` words that ``text`` shares with
    one of the ``untrusted`` texts (an untrusted text shorter than that counts
    when it appears whole and has at least 3 words). Words are runs of letters
    and digits after NFKD normalization, with invisible format characters and
    combining marks (accents) removed, compared case-folded.

    Args:
        text: the text that may quote (a model's reply).
        untrusted: what the model was shown from tools and the web.
        min_words: the shortest run that counts as a quote (>= 2).

    Returns:
        The quotes in the order they appear in ``text`` (empty if none).
    """
    check_text(text, "text", empty=True)
    check_number(min_words, "min_words", lo=2, integer=True)
    if isinstance(untrusted, str) or not isinstance(untrusted, Sequence):
        raise InputError(f"untrusted must be a list of Untrusted, got {type(untrusted).__name__}")
    for i, item in enumerate(untrusted):
        if not isinstance(item, Untrusted):
            raise InputError(f"untrusted[{i}] is a {type(item).__name__}, not an Untrusted")
    norm = _normalize(text)
    found = list(_WORD.finditer(norm))  # positions in norm, for the quoted span
    tokens = [m.group().casefold() for m in found]
    quotes: list[Quote] = []
    for item in untrusted:
        if item.source not in UNTRUSTED_SOURCES:
            raise InputError(f"untrusted text {item.origin!r} has the trusted source {item.source}")
        theirs = _words(item.text)
        n = min(min_words, len(theirs))
        if n < 3 or len(tokens) < n:
            continue
        grams = {tuple(theirs[i : i + n]) for i in range(len(theirs) - n + 1)}
        i = 0
        while i <= len(tokens) - n:
            if tuple(tokens[i : i + n]) not in grams:
                i += 1
                continue
            j = i + n  # extend the run while the next window still matches
            while j < len(tokens) and tuple(tokens[j - n + 1 : j + 1]) in grams:
                j += 1
            span = norm[found[i].start() : found[j - 1].end()]
            quotes.append(Quote(item.origin, item.source, j - i, span))
            i = j
    quotes.sort(key=lambda q: norm.find(q.text))
    return quotes


def quoted_source(quotes: Sequence[Quote]) -> Source | None:
    """The source to store a quoting text under: ``web`` if it quotes the web,
    else ``tool`` if it quotes a tool, else None (it quotes nothing)."""
    sources = {q.source for q in quotes}
    if Source.WEB in sources:
        return Source.WEB
    if Source.TOOL in sources:
        return Source.TOOL
    return None
