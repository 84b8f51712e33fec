"""Layered scopes: read several scopes in one recall, write each kind to its layer.

A layered scope is an ordered list of exact scopes, narrowest first: for example
``["alice:support:s7", "alice:support"]``, a session's episodes and then what the
agent knows about the user across sessions. Every scope in the list is matched
exactly, as everywhere else: listing two scopes never reads a third, and a scope
is never a prefix pattern (``"alice:support"`` does not read ``"alice:support:s7"``
unless both are listed).

- Reading: ``RecallQuery(scope=[...])`` ranks the listed scopes' records together
  (a shared ranking: scores are comparable, so the best records win wherever they
  live), or with ``split=[0.6, 0.4]`` gives each layer its share of the token
  budget (what a layer leaves unused flows on to the next).
- Writing: ``LayerPolicy`` says which layer each kind of record goes to
  (episodes to the first, semantic and procedural records to the last, by
  default). ``MemoryLayer.remember`` given a list of scopes writes to that layer;
  summaries and reflections of a session's episodes go to the semantic layer.

``layers_of("alice:support:s7")`` builds the list from a scope's ``:``-separated
parts, for callers whose scopes follow that convention.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import overload

import numpy as np

from memlab.errors import InputError
from memlab.memory.records import (
    MemoryKind,
    ScopeArg,
    as_kind,
    check_scope,
    check_scopes,
    check_split,
)
from memlab.memory.stores.base import Candidates


def layers_of(scope: str, depth: int = 2, separator: str = ":") -> tuple[str, ...]:
    """A scope and its parents by ``separator``, narrowest first, at most ``depth``.

    ``layers_of("alice:support:s7")`` is ``("alice:support:s7", "alice:support")``;
    a scope with no separator is its only layer.

    Raises:
        InputError: a bad scope, ``depth`` not an integer >= 1 (a bool is not one),
            or ``separator`` not a non-empty string.
    """
    check_scope(scope)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError(f"depth must be an integer >= 1, got {depth!r}")
    if not isinstance(separator, str) or not separator:
        raise InputError(f"separator must be a non-empty string, got {separator!r:.40}")
    parts = scope.split(separator)
    out = []
    for n in range(len(parts), 0, -1):
        layer = separator.join(parts[:n])
        if layer:
            out.append(layer)
        if len(out) == depth:
            break
    return tuple(out)


@dataclass(frozen=True)
class LayerPolicy:
    """Which layer of a list of scopes each kind of record is written to.

    Each field is an index into the list (narrowest first): 0 is the first
    layer, -1 the last; an index past either end means the nearest end, so one
    policy serves lists of any length. With a single scope every kind goes there.

    Args:
        episodic: the layer of episodes (what was said; default the session).
        semantic: the layer of semantic records: summaries and reflections of
            episodes, facts (default the broadest).
        procedural: the layer of procedures (default the broadest).
    """

    episodic: int = 0
    semantic: int = -1
    procedural: int = -1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"layers.{f.name} must be an integer layer index, got {value!r}")

    def index(self, kind: MemoryKind | str, n_layers: int) -> int:
        """The layer index of ``kind`` in a list of ``n_layers`` scopes."""
        i = int(getattr(self, as_kind(kind).value))
        if i < 0:
            i += n_layers
        return min(max(i, 0), n_layers - 1)

    def scope_for(self, kind: MemoryKind | str, scope: ScopeArg) -> str:
        """The scope a record of ``kind`` is written to, given one scope or a list."""
        scopes = check_scopes(scope)
        return scopes[self.index(kind, len(scopes))]


class ChainedIds(Sequence[str]):
    """The ids of several candidate sets' rows, read in place: copying two 10k-id
    lists into one at every layered recall cost more than ranking them."""

    __slots__ = ("_lists", "_n", "_starts")

    def __init__(self, lists: Sequence[Sequence[str]], sizes: Sequence[int]) -> None:
        self._lists = list(lists)
        self._starts = [0]
        for size in sizes:
            self._starts.append(self._starts[-1] + int(size))
        self._n = self._starts.pop()

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, row: int) -> str: ...

    @overload
    def __getitem__(self, row: slice) -> list[str]: ...

    def __getitem__(self, row: int | slice) -> str | list[str]:
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(self._n))]
        i = operator.index(row)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"row {row} out of range for {self._n} rows")
        part = bisect.bisect_right(self._starts, i) - 1
        return self._lists[part][i - self._starts[part]]

    def __iter__(self) -> Iterator[str]:
        for ids, start, end in zip(
            self._lists, self._starts, [*self._starts[1:], self._n], strict=True
        ):
            yield from itertools.islice(ids, end - start)


@dataclass
class Layered:
    """The candidates of several scopes, side by side, without copying embeddings.

    ``offsets[i]`` is where layer ``i``'s rows start in the concatenated 1-D
    columns; ``layer[row]`` says which layer a row belongs to.
    """

    scopes: tuple[str, ...]
    parts: list[Candidates]
    ids: Sequence[str]
    created_at: np.ndarray
    tokens: np.ndarray
    source: np.ndarray
    mask: np.ndarray
    layer: np.ndarray
    offsets: np.ndarray
    invalid_at: np.ndarray

    @classmethod
    def of(cls, scopes: tuple[str, ...], parts: list[Candidates]) -> Layered:
        if len(parts) == 1:
            c = parts[0]
            return cls(scopes, parts, c.ids, c.created_at, c.tokens, c.source, c.mask,
                       np.zeros(len(c), dtype=np.int16), np.zeros(1, dtype=np.int64),
                       c.invalid_at)  # fmt: skip
        sizes = [len(c) for c in parts]
        return cls(
            scopes,
            parts,
            ChainedIds([c.ids for c in parts], sizes),
            np.concatenate([c.created_at for c in parts]),
            np.concatenate([c.tokens for c in parts]),
            np.concatenate([c.source for c in parts]),
            np.concatenate([c.mask for c in parts]),
            np.repeat(np.arange(len(parts), dtype=np.int16), sizes),
            np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
            np.concatenate([c.invalid_at for c in parts]),
        )

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def superseded(self) -> np.ndarray:
        """Rows of wholly superseded records (bool)."""
        return np.isfinite(self.invalid_at)

    @property
    def n_active(self) -> int:
        return int(sum(c.n_active for c in self.parts))

    def scope_of(self, row: int) -> str:
        return self.scopes[int(self.layer[row])]

    def keys(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        """(scope, id) of each row, read from the layers' own id lists (one gather
        for the layer of every row, not a search of the chained ids per row)."""
        if len(self.parts) == 1:
            scope, ids = self.scopes[0], self.parts[0].ids
            return [(scope, ids[r]) for r in rows]
        at = np.asarray(rows, dtype=np.int64)
        layer = self.layer[at]
        local = (at - self.offsets[layer]).tolist()
        return [
            (self.scopes[li], self.parts[li].ids[j])
            for li, j in zip(layer.tolist(), local, strict=True)
        ]


def split_budgets(budget: int, shares: Sequence[float]) -> list[int]:
    """Whole-token budgets per layer from shares summing to 1; the rounding
    remainder goes to the first layers, so they add up to ``budget``."""
    raw = [budget * s for s in shares]
    out = [int(np.floor(r)) for r in raw]
    rest = budget - sum(out)
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - out[i]), i))
    for i in order[:rest]:
        out[i] += 1
    return out


__all__ = [
    "LayerPolicy",
    "Layered",
    "ScopeArg",
    "check_scopes",
    "check_split",
    "layers_of",
    "split_budgets",
]
