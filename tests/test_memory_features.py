"""The memory_features strategy kind: presets compose, layered replays never leak,
procedures come through the slot, reflection shrinks the store, bad keys are clear
config errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.errors import ConfigError
from memlab.lab.compose import compose
from memlab.lab.config import validate
from memlab.lab.experiment import strategy_factories
from memlab.lab.metrics import needed_steps, own_scopes, procedure_recall
from memlab.lab.synth.sessions import generate
from memlab.memory import ExtractiveSummarizer, HashEmbedder

PRESETS = (
    "memory_procedural",
    "memory_procedural_no_slot",
    "memory_reflect",
    "memory_reflect_no_supersede",
    "memory_layered",
    "memory_layered_no_reflect",
)


def factories(tmp_path: Path, names: list[str], *extra: str):  # type: ignore[no-untyped-def]
    cfg = compose(["transcripts=sessions", f"strategies=[{','.join(names)}]", *extra])
    v = validate(cfg)
    return strategy_factories(v, tmp_path, HashEmbedder(384), ExtractiveSummarizer())


def replay(strategy, transcript):  # type: ignore[no-untyped-def]
    contexts = {}
    for turn in transcript.turns:
        if turn.probe is not None:
            contexts[turn.id] = (turn, strategy.context(turn, 400))
        strategy.observe(turn)
        strategy.maintain(turn)
    return contexts


def test_every_preset_composes(tmp_path: Path) -> None:
    made = factories(tmp_path, [*PRESETS, "memory"])
    assert set(made) == {*PRESETS, "memory"}


def test_layered_replay_stays_in_the_probes_scope_and_session(tmp_path: Path) -> None:
    t = generate(2)  # two users, six sessions each
    strategy = factories(tmp_path, ["memory_layered"])["memory_layered"](t)
    contexts = replay(strategy, t)
    scopes_seen = set()
    for turn, ctx in contexts.values():
        own = own_scopes(turn)
        assert all(item.scope in own for item in ctx.items), turn.id
        scopes_seen |= {item.scope for item in ctx.items}
    assert any(":" in s and s.rsplit(":", 1)[1][0] in "abcdefghijklmnopqrstuvwxyz"
               for s in scopes_seen)  # fmt: skip
    assert len(t.scopes) == 2


def test_procedures_reach_the_context_through_the_slot(tmp_path: Path) -> None:
    t = generate(1)
    made = factories(tmp_path, ["memory_procedural", "memory"])
    for name, expected in (("memory_procedural", 1.0), ("memory", 0.0)):
        contexts = replay(made[name](t), t)
        scores = [
            procedure_recall(ctx.items, needed_steps(turn))
            for turn, ctx in contexts.values()
            if turn.probe is not None and turn.probe.category == "procedure"
        ]
        assert scores and all(s == expected for s in scores), (name, scores)


def test_reflection_keeps_fewer_active_records(tmp_path: Path) -> None:
    t = generate(3)
    made = factories(tmp_path, ["memory_reflect", "memory"])
    counts = {}
    for name in ("memory_reflect", "memory"):
        s = made[name](t)
        replay(s, t)
        counts[name] = s.stats().records
    assert counts["memory_reflect"] < counts["memory"]


@pytest.mark.parametrize(
    "override, match",
    [
        ("strategies.memory_layered.layers.split=[1]", "layers.split"),
        ("strategies.memory_procedural.procedures.min_steps=0", "min_steps"),
        ("strategies.memory_reflect.reflect.every=0", "every"),
        ("strategies.memory_reflect.reflect.reflector=dreams", "reflector"),
    ],
)
def test_bad_feature_keys_are_config_errors(tmp_path: Path, override: str, match: str) -> None:
    name = override.split(".")[1]
    with pytest.raises(ConfigError, match=match):
        factories(tmp_path, [name], override)
