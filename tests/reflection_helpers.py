"""What the reflection tests share: a layer with a rule reflector, turns said at a
fake clock, and what the scope's reflections hold."""

from __future__ import annotations

from memlab.memory import (
    HashEmbedder,
    InMemoryStore,
    MemoryKind,
    MemoryLayer,
    MemoryRecord,
    Reflector,
    ReflectPolicy,
    RuleReflector,
)
from memlab.memory.reflect import META_KEY, is_reflection
from memlab.memory.reflect_sentences import sentences
from tests.conftest import Clock


def make_layer(clock: Clock, reflector: Reflector | None = None, **policy: object) -> MemoryLayer:
    return MemoryLayer(
        InMemoryStore(),
        HashEmbedder(256),
        clock=clock,
        reflector=reflector or RuleReflector(),
        reflect=ReflectPolicy(**policy),  # type: ignore[arg-type]
    )


def say(layer: MemoryLayer, clock: Clock, scope: str | list[str], turns: list[tuple[str, str]]):
    out = []
    for i, (source, text) in enumerate(turns):
        clock.t += 60
        out.append(layer.remember(scope, text, source=source, provenance=[f"t{len(out)}-{i}"]))
    return out


def reflections(layer: MemoryLayer, scope: str) -> list[MemoryRecord]:
    return [r for r in layer.store.list(scope, kinds=[MemoryKind.SEMANTIC]) if is_reflection(r)]


def statements(layer: MemoryLayer, scope: str) -> list[str]:
    """What the scope's reflections say in force, statement by statement (a bundle
    holds several), oldest record first."""
    recs = sorted(reflections(layer, scope), key=lambda r: (r.created_at, r.id))
    return [s for r in recs for s in sentences(r.text_at())]


def labels(layer: MemoryLayer, scope: str) -> list[tuple[str, str]]:
    return sorted((r.meta[META_KEY]["label"], r.content) for r in reflections(layer, scope))
