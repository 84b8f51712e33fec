"""Query rewriting: questions about memory itself become questions about the topic.

"What did I tell you about the billing contact?" shares "tell", "you" and
"about" with every other question about memory and little with the statement it
needs ("Invoices go to accounts@..."). The reference design advises recalling
with the topic alone. ``MemoryQuestionRewriter`` does that with a few regular
expressions: deterministic, dependency-free, pluggable (any object with
``rewrite(text) -> str`` is a ``QueryRewriter``).
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from memlab.memory.checks import check_text


@runtime_checkable
class QueryRewriter(Protocol):
    def rewrite(self, text: str) -> str:
        """The text to recall with (the original when nothing applies)."""
        ...


_I = r"(?:i|we)"
_TOLD = r"(?:tell|told|say|said|mention|mentioned|share|shared|give|gave|explain|explained)"
# Each pattern keeps the topic in a group named "topic".
PATTERNS = [
    rf"^(?:what|which|how)\s+(?:did|do|have)\s+{_I}\s+{_TOLD}\s+(?:to\s+)?(?:you\s+)?(?:about|regarding|re|on|concerning)\s+(?P<topic>.+)$",
    rf"^(?:what|which)\s+(?:was|is|were|are)\s+(?:it\s+)?(?:that\s+)?{_I}\s+{_TOLD}\s+(?:to\s+)?(?:you\s+)?(?:about|regarding|on)\s+(?P<topic>.+)$",
    rf"^(?:do|did|can|could|would)\s+you\s+(?:still\s+)?(?:remember|recall|know)\s+(?:what|when|where|who|how|which|if|whether|that)?\s*(?:{_I}\s+{_TOLD}\s+(?:you\s+)?(?:about\s+)?)?(?P<topic>.+)$",
    r"^(?:please\s+)?remind\s+me\s+(?:again\s+)?(?:of|about)?\s*(?P<topic>.+)$",
    rf"^(?:what|which)\s+did\s+{_I}\s+{_TOLD}\s+(?P<topic>.+)$",
    r"^(?:what|which)\s+do\s+you\s+(?:remember|recall|know|have)\s+(?:about|on|regarding|for)\s+(?P<topic>.+)$",
]
_COMPILED = [re.compile(p, re.I) for p in PATTERNS]
# Openers that carry no topic ("Quick one:", "Random, but", "Sanity check:").
FILLERS = re.compile(
    r"^(?:(?:hi|hey|hello|ok|okay|so|um|hmm|also|btw|by the way|one more thing|quick one|"
    r"quick question|random question|random|sanity check|just checking|before we close this out|"
    r"good (?:morning|afternoon|evening)|hi again|hey again|sorry|question)\b[\s,:;.!-]*(?:but\s+)?)+",
    re.I,
)
_PHRASE = (
    r"(?:again|if you recall|if you remember|as i said|as i mentioned|earlier|before|"
    r"by any chance|please|per what i (?:told|said to) you|from what i (?:told you|said))"
)
# \s*(?:,?\s*PHRASE)+\s*[?.!]*\s*$ written without two \s* side by side (the first
# unit's "\s*,?\s*" without a comma, "\s*[?.!]*\s*" without a mark): a run of k spaces
# could be split between them k ways at every step of backtracking, so 1,000
# spaces before a last word took a minute to rewrite
_TAIL = re.compile(
    rf"\s*(?:,\s*)?{_PHRASE}(?:,?\s*{_PHRASE})*\s*(?:[?.!]+\s*)?$",
    re.I,
)


#: How much of a query's end ``_TAIL`` reads (see ``strip_tail``).
TAIL_WINDOW = 1024


def strip_tail(q: str) -> str:
    """``q`` without its trailing "again", "if you recall", ... phrases, looked for
    in its last ``TAIL_WINDOW`` characters.

    ``_TAIL`` is anchored at the end only, so over a whole text it is tried from
    every position, each time scanning to the end: a 48k-character message of
    " again" repeated took 98 s to rewrite. A question about memory is far shorter
    than the window, so for every text up to it the result is the same; a longer
    text keeps what phrases it ends with before its last ``TAIL_WINDOW`` characters.
    """
    cut = max(0, len(q) - TAIL_WINDOW)
    return q[:cut] + _TAIL.sub("", q[cut:])


class MemoryQuestionRewriter:
    """Strips fillers and "what did I tell you about ..." frames from a query.

    ``"Quick one: what did I tell you about our billing email?"`` ->
    ``"our billing email"``. A query that matches no frame keeps its words (minus
    leading fillers and trailing "if you recall"-style tails); a query nothing
    applies to is returned unchanged, and an empty result falls back to it.
    """

    name = "memory-question-v1"

    def rewrite(self, text: str) -> str:
        check_text(text, "text", empty=True)
        q = FILLERS.sub("", text.strip())
        framed = False
        for pattern in _COMPILED:
            m = pattern.match(q)
            if m:
                q, framed = m.group("topic"), True
                break
        q = strip_tail(q).strip()
        if q == text.strip():
            return (
                text  # nothing applied: keep the exact text (punctuation matters to some embedders)
            )
        if framed:
            q = q.rstrip("?.! ")
        return q if q else text


class NoRewrite:
    """The identity rewriter."""

    name = "none"

    def rewrite(self, text: str) -> str:
        return check_text(text, "text", empty=True)
