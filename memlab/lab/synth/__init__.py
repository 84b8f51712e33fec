"""A seeded generator of 60-turn support-agent transcripts (format v1).

``generate(seed)`` returns a validated :class:`~memlab.lab.transcripts.Transcript`:
a customer (or, for seeds divisible by 3, two customers in separate scopes)
talks to a support agent over one to four sessions. Every transcript states at
least eight facts (of the 36 kinds in ``catalog``): hard preferences,
account facts and offhand remarks, sometimes two in one message.
Some facts are corrected later (sometimes naming the old value too: "we moved
off Heroku to Fly.io"). Probes come in the last third of the conversation,
mostly far beyond a 10-turn window from the statement they need and mostly
paraphrased; each carries ``needs``, ``evidence`` (the turns that state the
value in force) and ``answer`` (that value). Around them: the support problem
itself, tool output (some with planted instructions, which state no facts),
pleasantries and noise.

Determinism: one ``random.Random`` seeded with a string (hashed with SHA-512 by
the stdlib, so independent of ``PYTHONHASHSEED``) drives every choice, and every
choice is made from a tuple or list, never from a set or dict order. The same
seed gives the same bytes on every machine (checked by tests against the shipped
files). ``VERSION`` changes whenever output for a seed changes.

Ground-truth annotations that strategies must not read: ``salience_hint`` on
user turns, and each turn's ``meta`` (``act``: what the turn does; ``planted``:
the turn carries an injected instruction; on probes, ``probe.meta`` holds the
measured word overlap and the distance to the evidence).

The package: ``catalog`` (the word lists), ``words`` (overlap and matching),
``plan`` (users, facts, blocks), ``render`` (turn texts and time) and
``generator`` (``generate``, ``write``, ``stats``); ``mix`` (``Mix``: longer,
multi-week transcripts and the proportions of facts, noise, tool output,
injections and corrections, behind ``memlab synth --turns ...``).
"""

from memlab.lab.synth.generator import (
    GENERATOR,
    LATE_START,
    MAX_ATTEMPTS,
    SCENARIO,
    SCENARIO_TWO_USERS,
    TWO_USER_EVERY,
    VERSION,
    WINDOW,
    WriteResult,
    generate,
    stats,
    transcript_id,
    write,
)
from memlab.lab.synth.mix import Mix, parse_turns
from memlab.lab.synth.render import N_TURNS
from memlab.lab.synth.words import (
    PARAPHRASE_MAX_OVERLAP,
    STOPWORDS,
    _clash,
    contains_value,
    content_words,
    normalize,
    normalize_loose,
    word_overlap,
)

__all__ = [
    "GENERATOR",
    "LATE_START",
    "MAX_ATTEMPTS",
    "N_TURNS",
    "PARAPHRASE_MAX_OVERLAP",
    "SCENARIO",
    "SCENARIO_TWO_USERS",
    "STOPWORDS",
    "TWO_USER_EVERY",
    "VERSION",
    "WINDOW",
    "Mix",
    "WriteResult",
    "_clash",
    "contains_value",
    "content_words",
    "generate",
    "normalize",
    "normalize_loose",
    "parse_turns",
    "stats",
    "transcript_id",
    "word_overlap",
    "write",
]
