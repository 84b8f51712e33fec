"""A documented heuristic that estimates how important a message is to remember.

Strategies and the agent loop use it when no salience is given. It reads cue
phrases, not meaning, so it is a starting point to tune, not ground truth:

====================================  ======
cue (case-insensitive)                 effect
====================================  ======
start                                  0.30
hard rule: always, never, must,        +0.40
  don't ever, make sure, from now on
identity/fact: my name is, call me,    +0.25
  i am, i'm, we use, we deploy, our,
  my, prefer, favourite/favorite,
  i like, remember
correction: actually, instead,         +0.25
  switched, changed, moved to,
  no longer, not anymore, update
a number, an email or a proper noun    +0.10
a question (ends with ?)               -0.15
only pleasantries ("thanks!", "ok")    = 0.05
untrusted source (tool, web)           capped by the layer
====================================  ======

The result is clamped to [0, 1].
"""

from __future__ import annotations

import re
from functools import lru_cache

from memlab.memory.checks import check_text

HARD_RULE = re.compile(
    r"\b(always|never|must|don'?t ever|do not ever|make sure|from now on|under no circumstances)\b",
    re.I,
)
IDENTITY = re.compile(
    r"\b(my name is|call me|i am|i'm|we use|we deploy|we run|we're on|our|my|prefer|"
    r"preferred|favou?rite|i like|i love|remember|note that|keep in mind)\b",
    re.I,
)
CORRECTION = re.compile(
    r"\b(actually|instead|switched|changed|moved to|no longer|not anymore|any ?more|"
    r"update|correction|scratch that)\b",
    re.I,
)
SPECIFIC = re.compile(r"\d|@|(?<=[a-z,;] )[A-Z][a-z]+")
PLEASANTRY = re.compile(
    r"^\W*(hi|hello|hey|thanks|thank you|thx|ok|okay|great|cool|perfect|sounds good|got it|"
    r"awesome|nice|bye|cheers|no problem|sure|will do|you'?re welcome)(\s+(so much|a lot|again|"
    r"there|you|all))*\W*$",
    re.I,
)


def estimate_salience(text: str) -> float:
    """Estimate salience in [0, 1] from cue phrases (see the module docstring).

    Returns 0.05 for pleasantries and for empty text.

    Raises:
        InputError: ``text`` is not a string.
    """
    check_text(text, "text", empty=True)
    return _estimate(text.strip())


@lru_cache(maxsize=1 << 14)  # a replay writes the same turn once per strategy
def _estimate(stripped: str) -> float:
    if not stripped or PLEASANTRY.match(stripped):
        return 0.05
    score = 0.30
    if HARD_RULE.search(stripped):
        score += 0.40
    if IDENTITY.search(stripped):
        score += 0.25
    if CORRECTION.search(stripped):
        score += 0.25
    if SPECIFIC.search(stripped):
        score += 0.10
    if stripped.endswith("?"):
        score -= 0.15
    return float(min(1.0, max(0.0, score)))
