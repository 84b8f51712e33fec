"""Memory strategies the lab compares, one module per kind (see ``base`` for the
Strategy protocol and the ``STRATEGIES`` registry of kinds)."""

from memlab.lab.strategies.base import (
    STRATEGIES,
    Components,
    Context,
    ContextItem,
    Kind,
    RanksHaystack,
    SettingsKind,
    StoreStats,
    Strategy,
    StrategyFactory,
)
from memlab.lab.strategies.memory import MemoryStrategy, salience_function
from memlab.lab.strategies.sliding_window import SlidingWindow
from memlab.lab.strategies.stuff_all import StuffAll

__all__ = [
    "STRATEGIES",
    "Components",
    "Context",
    "ContextItem",
    "Kind",
    "MemoryStrategy",
    "RanksHaystack",
    "SettingsKind",
    "SlidingWindow",
    "StoreStats",
    "Strategy",
    "StrategyFactory",
    "StuffAll",
    "salience_function",
]
