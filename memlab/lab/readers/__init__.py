"""Readers: a chat model that answers every probe from the strategy's context.

A reader turns a probe's context into the prompt an agent would send (the
memory layer's ``prompt_messages``: its system prompt and the memory block,
then the question, so a measured answer comes from the very prompt
``run_turn`` builds) and asks a chat model. Answers are cached by model,
messages and parameters, so a rerun, or a second strategy that builds the same
context, costs nothing.

Readers register in ``READERS`` under the name the ``reader`` config group uses
(``reader=none|openai``): ``none`` (the default: no model, the lab scores the
context only) and ``openai`` (any OpenAI-compatible endpoint). A new reader is
one module here plus one YAML in conf/reader/.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from memlab.errors import ConfigError
from memlab.lab.strategies.base import ContextItem
from memlab.memory import Completion, Hit, MemoryKind, MemoryRecord, Source
from memlab.memory.agent import Message
from memlab.memory.layer import iso
from memlab.registry import Registry


@dataclass(frozen=True)
class Prices:
    """What a model's tokens cost, in US dollars per 1,000 tokens."""

    input_per_1k: float = 0.0
    output_per_1k: float = 0.0

    def __post_init__(self) -> None:
        for name, value in (("price_per_1k_input", self.input_per_1k),
                            ("price_per_1k_output", self.output_per_1k)):  # fmt: skip
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a number >= 0 (US dollars), got {value!r}")

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        """prompt_tokens / 1000 * input price + completion_tokens / 1000 * output price."""
        return (prompt_tokens * self.input_per_1k + completion_tokens * self.output_per_1k) / 1000

    def of(self, completion: Completion | None) -> float:
        """The cost of a completion's usage (0.0 for None)."""
        if completion is None:
            return 0.0
        return self.cost(completion.prompt_tokens, completion.completion_tokens)


@runtime_checkable
class Reader(Protocol):
    """A model that answers probes (registered in ``READERS``).

    Attributes:
        name: the model and endpoint (results and provenance name it).
        prices: what its tokens cost.
        max_tokens: the cap on an answer's tokens.
    """

    name: str
    prices: Prices
    max_tokens: int

    def messages(self, question: str, items: Sequence[ContextItem], now: float) -> list[Message]:
        """The prompt for one probe: the question, the strategy's context items
        (rank order) and the probe's time (epoch seconds)."""
        ...

    def lookup(self, messages: Sequence[Message]) -> Completion | None:
        """The cached answer to these messages, or None; sends nothing."""
        ...

    def answer(self, messages: Sequence[Message]) -> Completion:
        """The answer (from the cache, or the model's). Safe to call from threads."""
        ...

    def check(self) -> None:
        """Fail before any work if the endpoint cannot answer (unreachable, the key
        refused, the model unknown)."""
        ...

    def close(self) -> None: ...


READERS: Registry[type] = Registry("reader", "memlab.lab.readers", error=ConfigError)
"""Reader classes by name (``reader.name``); each module here registers its own."""

NO_READER = "none"

_VECTOR = np.zeros(1, dtype=np.float32)  # the block never shows embeddings
_KINDS = frozenset(k.value for k in MemoryKind)


def context_hits(items: Sequence[ContextItem]) -> list[Hit]:
    """A context's items as the hits ``format_memory`` renders: content, kind
    (a raw turn is an episode), source and date, in rank order."""
    hits = []
    for rank, item in enumerate(items):
        kind = MemoryKind(item.kind) if item.kind in _KINDS else MemoryKind.EPISODIC
        when = item.created_at if item.created_at is not None else 0.0
        record = MemoryRecord(
            id=f"item-{rank}",
            content=item.text,
            embedding=_VECTOR,
            kind=kind,
            scope=item.scope,
            salience=0.0,
            tokens=item.tokens,
            created_at=when,
            last_accessed_at=when,
            source=Source(item.source),
            provenance=item.provenance,
        )
        hits.append(Hit(record, item.score or 0.0, rank, {}, {}))
    return hits


def format_now(now: float) -> str:
    """A probe's time as the reader's prompt states it (ISO 8601, UTC)."""
    return iso(now)


__all__ = ["NO_READER", "READERS", "Prices", "Reader", "context_hits", "format_now"]
