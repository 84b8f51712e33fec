"""``kind: sliding_window``: the last turns of the scope."""

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


class SlidingWindow(TurnLog):
    """The last ``window_turns`` turns of the probe's scope, optionally cut to the
    last ``window_tokens`` tokens. Ignores the budget."""

    def __init__(
        self,
        name: str = "sliding_window",
        window_turns: int | None = 10,
        window_tokens: int | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.window_turns = window_turns
        self.window_tokens = window_tokens

    def context(self, probe: Turn, budget: int) -> Context:
        recent = self.turns[probe.scope]
        if self.window_turns is not None:
            recent = recent[-self.window_turns :]
        if self.window_tokens is not None:
            kept: list[ContextItem] = []
            total = 0
            for item in reversed(recent):
                if total + item.tokens > self.window_tokens:
                    break
                kept.append(item)
                total += item.tokens
            recent = kept[::-1]
        return Context(list(recent))


@dataclass
class SlidingWindowSettings:
    """A ``strategies`` entry of kind ``sliding_window``."""

    window_turns: int | None = 10  # the last N turns of the scope
    window_tokens: int | None = None  # or the last T tokens

    def __post_init__(self) -> None:
        for key in ("window_turns", "window_tokens"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise InputError(f"{key} must be >= 1 or null, got {value}")

    def build(self, name: str, parts: Components) -> StrategyFactory:
        return lambda t: SlidingWindow(
            name, window_turns=self.window_turns, window_tokens=self.window_tokens
        )


STRATEGIES.register("sliding_window", SettingsKind(SlidingWindowSettings))
