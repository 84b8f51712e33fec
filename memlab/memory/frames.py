"""One statement, one slot: two clauses that say the same words around one differing
span ("Code's all in Azure Repos." and "Code's all in Gitea.").

The key-based comparison in ``memlab.memory.update_text.diff`` drops function words
and cuts words to five letters, which is what lets it match inflections; it also
makes short statements with a multi-word value look unlike ("code" is their only
shared key) and lets a value hide behind a frame word ("sourcehut" and "source"
share the key "sourc"). ``same_frame`` compares the clauses' full token sequences
instead: the common prefix and suffix are the frame, the differing middle of each is
its value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from memlab.memory.update_cues import CUE_WORDS, FUNCTION_WORDS, NUMBER_WORDS
from memlab.memory.update_text import Clause
from memlab.memory.update_tokens import TOKEN, key, value_class, value_type

MIN_FRAME_TOKENS = 3


@dataclass(frozen=True)
class Frame:
    """The shared frame of two clauses and the value each puts in its slot."""

    frame: tuple[str, ...]  # the common prefix, then the common suffix
    old_value: str
    new_value: str
    old_keys: frozenset[str]
    new_keys: frozenset[str]


def same_frame(old: Clause, new: Clause, max_value_words: int) -> Frame | None:
    """The frame and values when ``new`` is ``old`` with one span replaced, else None.

    Both clauses must be the same token sequence except one contiguous span each
    (the values: at most ``max_value_words`` tokens, each with a word that is not a
    function or cue word, and different from each other). The frame, the tokens
    around the span, must hold at least ``MIN_FRAME_TOKENS`` tokens, one of them a
    content word ("it is in Porto" is too generic to be one statement), and at least
    as many tokens as either value. In cased text both values must look like values
    (names, numbers; "staging" and "production" are other facts, not other values);
    a value written with digits or symbols is only replaced by one of its class, in
    any casing; and values of two classes (a number, a #channel) or two distinct
    identifiers (SUP-123, SUP-456: two tickets) are never one slot.
    """
    o, n = old.tokens, new.tokens
    limit = min(len(o), len(n))
    p = 0
    while p < limit and o[p] == n[p]:
        p += 1
    s = 0
    while s < limit - p and o[-1 - s] == n[-1 - s]:
        s += 1
    mo, mn = o[p : len(o) - s], n[p : len(n) - s]
    if not mo or not mn or len(mo) > max_value_words or len(mn) > max_value_words:
        return None
    if p + s < max(MIN_FRAME_TOKENS, len(mo), len(mn)):  # the frame's length
        return None
    frame = o[:p] + o[len(o) - s :]
    if not any(_content(t) for t in frame):
        return None
    if p == 0 and (_set_off(old, len(mo)) or _set_off(new, len(mn))):
        return None  # "ty, will try that" -> "much appreciated, will try that": a greeting
    old_words = [t for t in mo if _content(t)]
    new_words = [t for t in mn if _content(t)]
    if not old_words or not new_words:
        return None  # "was" -> "is": a change of tense, not of value
    old_keys = frozenset(key(t) for t in old_words)
    new_keys = frozenset(key(t) for t in new_words)
    if old.cased and new.cased and not (old_keys & old.valuey and new_keys & new.valuey):
        return None
    old_classes = {old.classes[k] for k in old_keys if k in old.classes}
    new_classes = {new.classes[k] for k in new_keys if k in new.classes}
    if old_classes and new_classes and not old_classes & new_classes:
        return None
    # digits and symbols show in any casing: a value written with them (money, a
    # time, an e-mail) is only replaced by one of its class, even in lower case
    # ("aws ecs took its place" is not "$800 a month took its place")
    if symbolic(mo) != symbolic(mn):
        return None
    if any((value_type(t) or "").startswith("id:") for t in (*mo, *mn)):
        return None
    return Frame(tuple(frame), _words(old, p, len(mo)), _words(new, p, len(mn)), old_keys, new_keys)


def _set_off(clause: Clause, count: int) -> bool:
    """Whether the clause's first ``count`` tokens are set off by a comma (an
    interjection or an address before the statement, not a slot in it)."""
    found = list(TOKEN.finditer(clause.text))
    lead = len(found) - len(clause.tokens)  # tokens of a lead phrase cut off by parse()
    if lead < 0 or lead + count > len(found):
        return False
    return clause.text[found[lead + count - 1].end() :].lstrip().startswith(",")


def symbolic(value: Sequence[str]) -> frozenset[str]:
    """The classes (``value_class``) of a value's tokens that look like values in any
    casing: written with digits or symbols, or number words ("two", "four-hour")."""
    return frozenset(c for c in map(_symbol_class, value) if c is not None)


@lru_cache(maxsize=1 << 16)  # the recall guard compares the same hits' tokens again
def _symbol_class(token: str) -> str | None:
    if any(c.isdigit() or c in "@#$%€£/:" for c in token) or token.split("-")[0] in NUMBER_WORDS:
        return value_class(token, token)
    return None


def _content(token: str) -> bool:
    return (
        token not in FUNCTION_WORDS and token not in CUE_WORDS and any(c.isalnum() for c in token)
    )


def _words(clause: Clause, start: int, count: int) -> str:
    """The value's tokens (casefolded, as the clause's tokens are)."""
    return " ".join(clause.tokens[start : start + count])
