"""The slot a clause names by its owner ("our spend cap", "my call window"): which
facts a clause names that way, whether two clauses name the same one or two
unrelated ones, and whether an old clause speaks of a slot a new one names. The
rules of ``memlab.memory.clause_rules`` use them to tell one fact's new value
from another fact's value of the same kind.
"""

from __future__ import annotations

from memlab.memory.update_cues import (
    CATEGORY_WORDS,
    FUNCTION_WORDS,
    GENERIC_SLOTS,
    SLOT_OWNERS,
    SLOT_PLACES,
    SLOT_SKIP,
    SLOT_STOPS,
)
from memlab.memory.update_text import Clause
from memlab.memory.update_tokens import key, token_breaks


def slots(clause: Clause) -> frozenset[tuple[str, ...]]:
    """The facts a clause names by their owner: the keys of up to three words after
    "our"/"my" ("our spend cap": ``("spend", "cap")``; a leading "new" or "current"
    passed over), until a function word, a verb, an adverb, a token that is no word
    or punctuation; none after a place ("on our side") or when the one word is
    generic."""
    found = clause.__dict__.get("_slots")  # once per clause, as Clause's cached_property
    if found is None:
        found = clause.__dict__["_slots"] = _slots(clause.text, clause.tokens, clause.token_keys)
    return found


def _slots(text: str, toks: tuple[str, ...], keys: tuple[str, ...]) -> frozenset[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    breaks = token_breaks(text, toks)
    for i, t in enumerate(toks):
        if t not in SLOT_OWNERS or (i and toks[i - 1] in SLOT_PLACES):
            continue
        words: list[str] = []  # the slot's tokens
        named: list[str] = []  # and their keys, which name it
        for j in range(i + 1, min(i + 5, len(toks))):
            w = toks[j]
            if not words and w in SLOT_SKIP:
                continue
            if (
                w in FUNCTION_WORDS
                or w in SLOT_STOPS
                or not w.replace("-", "").isalpha()
                or len(words) == 3
            ):
                break
            words.append(w)
            named.append(keys[j])
            if j in breaks:
                break  # "our window, tuesday 01:00": the phrase ends at the comma
        if words and not (len(words) == 1 and words[0] in GENERIC_SLOTS):
            out.add(tuple(named))
    return frozenset(out)


def shared_slot(old: Clause, new: Clause) -> tuple[str, ...] | None:
    """A fact both clauses name by their owner ("our spend cap"), if any."""
    if not (SLOT_OWNERS & new.token_set) or not (SLOT_OWNERS & old.token_set):
        return None
    both = slots(old) & slots(new)
    return max(both, key=len) if both else None


def named_apart(old: Clause, new: Clause) -> bool:
    """Both clauses name a fact by its owner, and no two of the facts are related:
    none opens with the other's first word, and neither's words are among the
    other's ("our window" is "our maintenance window"; "my call window" is not). Two
    such statements are about two facts, whatever values they share a kind of."""
    if not (SLOT_OWNERS & new.token_set) or not (SLOT_OWNERS & old.token_set):
        return False
    olds, news = slots(old), slots(new)
    if not olds or not news:
        return False
    return not any((set(o) & set(n)) - TOPIC_SKIP for o in olds for n in news) and not any(
        set(o) <= set(n) or set(n) <= set(o) for o in olds for n in news
    )


def slot_topic(old: Clause, new: Clause) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """A fact the new clause names by its owner that the old clause speaks of
    without naming it: the old clause holds a distinctive word of the slot, in any
    inflection ("our escalation rule" and "escalate to the CTO after an hour"; "our
    code host" and "source is hosted on Gitea"; "my call window" and "only call me
    between 13:00 and 15:00"). Category words ("window", "tool", "primary") and
    generic ones are not distinctive, and a slot of one word is not enough: "our
    deploys go to Elastic Beanstalk" is not the value of "we prefer to deploy on
    Tuesday mornings". When the old clause names facts by their owner too, one of
    them must open with the same word ("our escalation policy: the CTO after an
    hour"): "our repos live on Gitea" is about the repos whatever else it holds,
    and "our code host" is not "our hosting platform". Returns the slot and the
    words the old clause holds, or None."""
    owned = slots(old) if SLOT_OWNERS & old.token_set else set()
    held = {s[0] for s in owned} if owned else set(old.keys)
    best: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    for slot in sorted(slots(new)):
        if len(slot) < 2:
            continue  # one word may be an act as well as a thing ("our deploys go to X")
        words = tuple(
            k for i, k in enumerate(slot)
            if k in held and k not in TOPIC_SKIP and k not in FUNCTION_WORDS
            and not (owned and i)
        )  # fmt: skip
        if words and (best is None or len(words) > len(best[1])):
            best = (slot, words)
    return best


#: slot words too common to tie a slot to a clause (categories, generic slots)
TOPIC_SKIP = frozenset(key(w) for w in CATEGORY_WORDS | GENERIC_SLOTS)


__all__ = ["TOPIC_SKIP", "named_apart", "shared_slot", "slot_topic", "slots"]
