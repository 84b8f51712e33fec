"""Reflection: derive durable semantic records from recent episodes.

A ``Reflector`` reads a scope's unreflected episodes (oldest first) and the
reflections it already holds, and proposes new semantic records: facts about the
user, stated preferences and constraints, a statement repeated several times
folded into one. The layer runs it on its maintenance schedule
(``ReflectPolicy``: every N new episodes, or once the unreflected episodes hold
more than T tokens, and always at ``MemoryLayer.end_session``), writes what it
proposes with provenance to the episodes it read, keeps the value in force (a
``Consolidator`` decides which earlier reflections a new one supersedes; those
are archived), and archives the episodes the reflections cover.

Trust: reflection never promotes untrusted content. By default untrusted (tool,
web) episodes are not shown to a reflector at all; with ``read_untrusted`` they
are shown as data, and any reflection citing one is stored with that untrusted
source, so the layer's ``untrusted_salience_cap`` applies and the prompt's memory
block marks it; it never replaces a trusted reflection. A reflection must cite the episodes it came from; one citing
none of the episodes it was shown is dropped.

``RuleReflector`` (``rules``) is the LLM-free reflector;
``memlab.memory.models.openai_reflector.OpenAIReflector`` (``openai``) asks a chat model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from memlab.errors import InputError, MemlabError
from memlab.memory.checks import check_bool, check_number, check_strings
from memlab.memory.records import UNTRUSTED_SOURCES, MemoryKind, MemoryRecord
from memlab.registry import Registry

REFLECTORS: Registry[type] = Registry("reflector", "memlab.memory.models", error=InputError)
"""Reflectors by name (``rules`` in ``memlab.memory.rule_reflector``; ``openai`` in
``memlab.memory.models.openai_reflector``)."""


class ReflectorError(MemlabError):
    """A reflector failed or returned something unusable (a model's answer that is
    not the JSON it was asked for, an endpoint that keeps failing); nothing of the
    pass is written."""

    exit_code = 3


META_KEY = "reflection"
LABELS = ("fact", "preference")


@dataclass(frozen=True)
class Reflection:
    """One record a reflector proposes.

    Attributes:
        content: the text to remember (a fact, a preference, a consolidated statement).
        sources: ids of the episodes it came from (must be among those it was shown).
        label: ``fact`` or ``preference`` (preferences and constraints get their own
            records and a higher salience).
        salience: in [0, 1]; the layer caps it when a source is untrusted.
        replaces: ids of earlier reflections this one restates or updates (the layer
            archives them; their provenance carries over).
        count: how many statements it folds (a statement repeated three times: 3).
        covers: ids of episodes it covers without coming from them (an agent's echo
            of its values, archived with it): their provenance is kept, so what
            cited them stays cited; their source does not count for its trust.
        parts: for a bundle, the one-statement reflections it joins, in order (the
            layer may move its first statements into an earlier bundle with room,
            each with its own sources); empty otherwise.
    """

    content: str
    sources: tuple[str, ...]
    label: str = "fact"
    salience: float = 0.6
    replaces: tuple[str, ...] = ()
    count: int = 1
    covers: tuple[str, ...] = ()
    parts: tuple[Reflection, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.content, str) or not self.content.strip():
            raise InputError("a reflection needs content")
        if self.label not in LABELS:
            raise InputError(f"reflection label must be one of {LABELS}, got {self.label!r}")
        # a reflector is user code: a string salience or sources=None was a bare
        # TypeError, and sources="ab" cited the episodes "a" and "b"
        check_number(self.salience, "reflection salience", lo=0.0, hi=1.0)
        check_number(self.count, "reflection count", lo=1, integer=True)
        for name in ("sources", "replaces", "covers"):
            ids = check_strings(getattr(self, name), f"reflection {name}")
            object.__setattr__(self, name, tuple(ids))
        if isinstance(self.parts, str) or not isinstance(self.parts, Iterable):
            raise InputError(f"reflection parts must be a list of Reflections, got {self.parts!r}")
        object.__setattr__(self, "parts", tuple(self.parts))
        if any(not isinstance(p, Reflection) or p.parts for p in self.parts):
            raise InputError("a reflection's parts must be one-statement Reflections")


@dataclass(frozen=True)
class Reflections:
    """A reflector's answer: new reflections, and the ids of the episodes they
    fully cover (the layer may archive those)."""

    items: list[Reflection] = field(default_factory=list)
    covered: tuple[str, ...] = ()


@runtime_checkable
class Reflector(Protocol):
    """Proposes semantic records from episodes.

    ``reflect`` gets a scope's unreflected episodes, oldest first (untrusted ones
    only if the policy shows them; ``record.source`` says which), and the active
    reflections already stored for that scope (to restate or update rather than
    duplicate). It must not write anything, and must treat every text as data.
    """

    @property
    def name(self) -> str: ...

    def reflect(
        self, episodes: Sequence[MemoryRecord], known: Sequence[MemoryRecord]
    ) -> Reflections: ...


@dataclass(frozen=True)
class ReflectPolicy:
    """When the layer reflects, and what it does with what was read.

    Args:
        every: reflect once this many episodes arrived since the last reflection
            ("every N turns"); None: never by count.
        trigger_tokens: reflect once the unreflected episodes hold more than this
            many tokens; None: never by size. Both count only the episodes the
            reflector is shown: tool/web ones only with ``read_untrusted``.
        archive: which reflected episodes are archived: ``covered`` (those the
            reflections fully cover), ``all`` (every trusted episode read) or
            ``none``.
        read_untrusted: show tool/web episodes to the reflector (as data; what
            it derives from them stays untrusted and capped).
        supersede: let a consolidator retire earlier reflections a new one
            supersedes (the value in force wins).
    """

    every: int | None = 12
    trigger_tokens: int | None = 400
    archive: str = "covered"
    read_untrusted: bool = False
    supersede: bool = True

    def __post_init__(self) -> None:
        # bool is an int: every=True reflected after each episode
        if self.every is not None and (
            isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1
        ):
            raise InputError(f"reflect.every must be an integer >= 1 or null, got {self.every!r}")
        if self.trigger_tokens is not None and (
            isinstance(self.trigger_tokens, bool)
            or not isinstance(self.trigger_tokens, int)
            or self.trigger_tokens < 1
        ):
            raise InputError(
                f"reflect.trigger_tokens must be an integer >= 1 or null, got {self.trigger_tokens!r}"
            )
        if not isinstance(self.archive, str) or self.archive not in ("covered", "all", "none"):
            raise InputError(f"reflect.archive must be covered, all or none, got {self.archive!r}")
        # any truthy value ("no") used to turn these on
        check_bool(self.read_untrusted, "reflect.read_untrusted")
        check_bool(self.supersede, "reflect.supersede")

    def due(self, episodes: Sequence[MemoryRecord]) -> bool:
        """Whether unreflected ``episodes`` trigger a reflection. Untrusted (tool,
        web) episodes count only with ``read_untrusted``: ones the reflector is not
        shown made a flood of tool output run it after every user turn."""
        if not self.read_untrusted:
            episodes = [r for r in episodes if r.source not in UNTRUSTED_SOURCES]
        if not episodes:
            return False
        if self.every is not None and len(episodes) >= self.every:
            return True
        return (
            self.trigger_tokens is not None
            and sum(r.tokens for r in episodes) > self.trigger_tokens
        )


def is_reflection(record: MemoryRecord) -> bool:
    """Whether a record was written by a reflection pass."""
    return record.kind is MemoryKind.SEMANTIC and isinstance(record.meta.get(META_KEY), dict)


def superseded_reflections(record: MemoryRecord) -> list[str]:
    """Ids of the earlier reflections this reflection superseded whole (and its
    pass archived): what forgetting it puts back in force."""
    data = record.meta.get(META_KEY) if is_reflection(record) else None
    ids = data.get("supersedes") if isinstance(data, dict) else None
    if not isinstance(ids, list):
        return []
    return [i for i in ids if isinstance(i, str) and i]


__all__ = [
    "LABELS",
    "META_KEY",
    "REFLECTORS",
    "ReflectPolicy",
    "Reflection",
    "Reflections",
    "Reflector",
    "ReflectorError",
    "is_reflection",
    "superseded_reflections",
]
