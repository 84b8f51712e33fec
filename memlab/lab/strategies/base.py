"""What every strategy is: the Strategy protocol, its context, and the registry of kinds.

A Strategy sees a transcript one turn at a time: ``context(probe, budget)``
before a probe turn (what it would put in the prompt), ``observe(turn)`` after
every turn, ``maintain(turn)`` after observing. Time always comes from the
transcript, never the wall clock.

A strategy *kind* (``kind: memory`` in a ``strategies`` entry) is registered in
``STRATEGIES``. It reads its own entry of the config (``settings``: typed and
checked, ConfigError naming the key) and builds a fresh strategy per transcript
from it (``factory``). A new kind is one module that registers itself plus one
YAML in conf/strategies/.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from memlab.lab.schema import structured
from memlab.lab.transcripts import Transcript, Turn
from memlab.lab.transcripts import session_scope as session_scope  # re-exported
from memlab.memory import Consolidator, Embedder, MemoryStore, Summarizer, estimate_tokens
from memlab.registry import Registry


@dataclass(frozen=True)
class ContextItem:
    """One thing a strategy puts into the prompt, in rank order.

    ``created_at`` (epoch seconds) dates the item in the prompt's memory block
    (the turn's time, or the memory record's); None for items without one.
    """

    text: str
    tokens: int
    kind: str
    scope: str
    source: str
    provenance: tuple[str, ...]
    score: float | None = None
    created_at: float | None = None


@dataclass
class Context:
    items: list[ContextItem] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(i.tokens for i in self.items)


@dataclass(frozen=True)
class StoreStats:
    """Size of what a strategy keeps, after a turn."""

    records: int  # active records (or kept turns)
    archived: int
    tokens: int  # tokens of the active records
    bytes: int  # bytes on disk (file stores) or of the kept text


@runtime_checkable
class Strategy(Protocol):
    name: str

    def observe(self, turn: Turn) -> None: ...

    def context(self, probe: Turn, budget: int) -> Context: ...

    def maintain(self, turn: Turn) -> None: ...

    def stats(self) -> StoreStats: ...

    def close(self) -> None: ...


@runtime_checkable
class RanksHaystack(Protocol):
    """A strategy that can show its full ranking (optional; the ``haystack_*``
    retrieval metrics need it, see ``memlab.lab.ranking``).

    ``ranking(probe)`` lists everything the strategy could put in a context for
    ``probe``, best first, before any budget, threshold or packing rule chooses:
    each ranked item's provenance (the turn ids it came from). It must not change
    the strategy's state (no access counts, no clock beyond the probe's time).
    """

    def ranking(self, probe: Turn) -> list[tuple[str, ...]]: ...


StrategyFactory = Callable[[Transcript], Strategy]


@dataclass
class Components:
    """What an experiment hands every strategy kind when it builds.

    Attributes:
        embedder: the run's embedder (shared by every strategy and transcript).
        summarizer: the run's summarizer.
        consolidator: the run's consolidator (which earlier records a new one
            supersedes); strategies whose ``supersede.enabled`` is false ignore it.
        open_store: ``(strategy name, transcript id) -> a fresh store`` (the
            configured ``store``).
        drop_store: delete a replay's store data when the replay ends (the
            store config's ``drop_after``).
    """

    embedder: Embedder
    summarizer: Summarizer
    open_store: Callable[[str, str], MemoryStore]
    drop_store: bool = False
    consolidator: Consolidator | None = None


class Kind(Protocol):
    """A strategy kind, as registered in ``STRATEGIES``.

    Attributes:
        schema: the dataclass of the entry's keys besides ``kind`` (Hydra
            type-checks conf/strategies/*.yaml against it).
    """

    schema: type

    def entry(self, name: str, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The ``strategies.<name>`` entry (without ``kind``) with every default
        filled in, as written to config.yaml and the fingerprint.

        Raises:
            ConfigError: unknown keys or wrong types, naming the key.
        """
        ...

    def settings(self, name: str, raw: Mapping[str, Any], run: Mapping[str, Any]) -> Any:
        """The entry's settings, checked (the library's checks included).

        Args:
            name: the strategy's name (``strategies.<name>``).
            raw: its entry, without ``kind``.
            run: the whole run config (for kinds that start from a run-level node,
                as ``memory`` strategies do from ``memory``).

        Raises:
            ConfigError: naming the key.
        """
        ...

    def factory(self, name: str, settings: Any, parts: Components) -> StrategyFactory:
        """A function that builds a fresh strategy for one transcript."""
        ...


class SettingsKind:
    """A kind whose entry is one settings dataclass with a ``build`` method.

    The dataclass's fields are the entry's keys (with their defaults); its
    ``__post_init__`` checks the values (raising ``InputError``); and
    ``build(name, parts) -> StrategyFactory`` makes the strategies. Register it
    with ``STRATEGIES.register("my_kind", SettingsKind(MySettings))``.
    """

    def __init__(self, settings_class: type) -> None:
        if not dataclasses.is_dataclass(settings_class) or not hasattr(settings_class, "build"):
            raise TypeError(f"{settings_class!r} must be a dataclass with a build() method")
        self.settings_class = settings_class
        self.schema = settings_class

    def entry(self, name: str, raw: Mapping[str, Any]) -> dict[str, Any]:
        obj = structured(self.settings_class, raw, f"strategies.{name}")
        return dataclasses.asdict(obj)

    def settings(self, name: str, raw: Mapping[str, Any], run: Mapping[str, Any]) -> Any:
        return structured(self.settings_class, raw, f"strategies.{name}")

    def factory(self, name: str, settings: Any, parts: Components) -> StrategyFactory:
        return settings.build(name, parts)


STRATEGIES: Registry[Kind] = Registry("strategy", "memlab.lab.strategies")
"""Strategy kinds by name; each module of ``memlab.lab.strategies`` registers its own."""


# -- shared by the memory-free baselines -----------------------------------------
def turn_item(turn: Turn) -> ContextItem:
    return ContextItem(
        text=turn.text,
        tokens=estimate_tokens(turn.text),
        kind="turn",
        scope=turn.scope,
        source=turn.source,
        provenance=(turn.id,),
        created_at=turn.time,
    )


class TurnLog:
    """Keeps every observed turn per scope (the baselines' whole state)."""

    def __init__(self) -> None:
        self.turns: dict[str, list[ContextItem]] = defaultdict(list)
        # running totals for stats(), read after every turn: summing the whole log
        # each time made a replay quadratic in its length
        self._tokens = 0
        self._bytes = 0

    def observe(self, turn: Turn) -> None:
        item = turn_item(turn)
        self.turns[turn.scope].append(item)
        self._tokens += item.tokens
        self._bytes += len(item.text.encode())

    def maintain(self, turn: Turn) -> None:
        pass

    def ranking(self, probe: Turn) -> list[tuple[str, ...]]:
        """Every kept turn of the scope, newest first: the baselines rank by recency
        only (a window is the head of this ranking)."""
        return [item.provenance for item in reversed(self.turns[probe.scope])]

    def stats(self) -> StoreStats:
        records = sum(len(items) for items in self.turns.values())
        return StoreStats(records=records, archived=0, tokens=self._tokens, bytes=self._bytes)

    def close(self) -> None:
        pass
