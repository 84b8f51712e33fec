"""Text primitives shared by the memory layer: words, stopwords and token estimates.

One place for how memlab splits text, so the hash embedder, the BM25 index (and
pgvector's copy of its terms), the summarizer's duplicate check and the token
budget all agree on what a word is.
"""

from __future__ import annotations

import re
from collections.abc import Callable

WORD = re.compile(r"\w+")
"""A word: a run of unicode letters, digits or underscores."""

# Function words carry almost no topical signal but appear in every sentence, so
# hashing or indexing them would make every pair of texts look alike.
STOPWORDS = frozenset(
    """a an the and or but if then so of to in on at by for with from as into about over is
    are was were be been being am do does did done have has had having it its this that
    these those there here i me my mine we us our ours you your yours he him his she her
    hers they them their theirs what which who whom whose when where why how all any
    both each few more most other some such no nor not only own same than too very can
    will just should would could shall may might must s t d ll m re ve y also again up
    down out off once please ok okay yes yeah""".split()  # noqa: SIM905 - a list reads better as text
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens of a text (unicode aware), in order, with repeats."""
    return WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    """``words(text)`` without ``STOPWORDS``, in order, with repeats."""
    return [w for w in WORD.findall(text.lower()) if w not in STOPWORDS]


def estimate_tokens(text: str) -> int:
    """Estimated prompt tokens of a text: ``ceil(len(text) / 4)``, 0 for an empty string.

    Raises:
        InputError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        from memlab.errors import InputError

        raise InputError(f"estimate_tokens() takes a text string, got {type(text).__name__}")
    return -(-len(text) // 4)


TokenCounter = Callable[[str], int]
