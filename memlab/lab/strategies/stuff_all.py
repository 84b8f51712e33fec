"""``kind: stuff_all``: every earlier turn of the scope, up to the model's context."""

from __future__ import annotations

from dataclasses import dataclass

from memlab.errors import InputError
from memlab.lab.strategies.base import (
    STRATEGIES,
    Components,
    Context,
    ContextItem,
    SettingsKind,
    StrategyFactory,
    TurnLog,
)
from memlab.lab.transcripts import Turn


class StuffAll(TurnLog):
    """Every earlier turn of the probe's scope, oldest first, up to a context limit
    (the oldest turns are dropped once the limit is reached). Ignores the budget."""

    def __init__(self, name: str = "stuff_all", context_limit: int = 128_000) -> None:
        super().__init__()
        self.name = name
        self.context_limit = context_limit

    def context(self, probe: Turn, budget: int) -> Context:
        kept: list[ContextItem] = []
        total = 0
        for item in reversed(self.turns[probe.scope]):
            if total + item.tokens > self.context_limit:
                break
            kept.append(item)
            total += item.tokens
        return Context(kept[::-1])


@dataclass
class StuffAllSettings:
    """A ``strategies`` entry of kind ``stuff_all``."""

    context_limit: int = 128_000  # tokens of the model context

    def __post_init__(self) -> None:
        if self.context_limit < 1:
            raise InputError(f"context_limit must be >= 1, got {self.context_limit}")

    def build(self, name: str, parts: Components) -> StrategyFactory:
        return lambda t: StuffAll(name, context_limit=self.context_limit)


STRATEGIES.register("stuff_all", SettingsKind(StuffAllSettings))
