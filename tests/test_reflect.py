"""The reflection contract: Reflection and ReflectPolicy check their fields, the
policy's schedule, what counts as a reflection, and the registry."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.errors import InputError
from memlab.memory import (
    REFLECTORS,
    MemoryKind,
    MemoryRecord,
    Reflection,
    ReflectPolicy,
    RuleReflector,
)
from memlab.memory.reflect import META_KEY, is_reflection


def record(text: str, kind: MemoryKind = MemoryKind.EPISODIC, **meta: object) -> MemoryRecord:
    return MemoryRecord(
        id=f"r{abs(hash(text)) % 10_000}",
        scope="alice",
        content=text,
        kind=kind,
        embedding=np.ones(4, dtype=np.float32),
        tokens=len(text.split()),
        salience=0.5,
        created_at=0.0,
        last_accessed_at=0.0,
        meta=dict(meta),
    )


def test_policy_checks_its_fields() -> None:
    with pytest.raises(InputError, match="every"):
        ReflectPolicy(every=0)
    with pytest.raises(InputError, match="trigger_tokens"):
        ReflectPolicy(trigger_tokens=0)
    with pytest.raises(InputError, match="archive"):
        ReflectPolicy(archive="some")
    # a bool is an int: every=True reflected after every episode; any truthy value
    # ("no") turned read_untrusted on
    for bad, match in [
        ({"every": True}, "every must be an integer"),
        ({"trigger_tokens": False}, "trigger_tokens must be an integer"),
        ({"archive": ["all"]}, "archive must be"),
        ({"read_untrusted": "no"}, "read_untrusted must be True or False"),
        ({"supersede": 1}, "supersede must be True or False"),
    ]:
        with pytest.raises(InputError, match=match):
            ReflectPolicy(**bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="trusted sources"):
        RuleReflector(sources=["user", "tool"])
    assert REFLECTORS.get("rules") is RuleReflector


def test_a_reflection_checks_its_fields() -> None:
    with pytest.raises(InputError, match="label"):
        Reflection("x", ("a",), label="rule")
    with pytest.raises(InputError, match="content"):
        Reflection("  ", ("a",))
    with pytest.raises(InputError, match="salience"):
        Reflection("x", ("a",), salience=1.5)
    bundle = Reflection("a. b.", ("a", "b"), parts=(Reflection("a.", ("a",)),))
    with pytest.raises(InputError, match="one-statement"):
        Reflection("a. b. c.", ("a",), parts=(bundle,))
    assert Reflection("x", ["a"]).sources == ("a",)  # type: ignore[arg-type]
    # a string salience or sources=None was a bare TypeError; sources="ab" cited "a"
    # and "b"; a bool salience or count passed as a number
    for bad, match in [
        ({"salience": "high"}, "salience must be a number"),
        ({"salience": True}, "salience must be a number"),
        ({"sources": None}, "sources must be a list of strings"),
        ({"sources": "ab"}, "wrap it in a list"),
        ({"replaces": 5}, "replaces must be a list of strings"),
        ({"covers": [1]}, r"covers\[0\] must be a string"),
        ({"count": 0}, "count must be an integer >= 1"),
        ({"count": True}, "count must be an integer"),
        ({"parts": 5}, "parts must be a list of Reflections"),
    ]:
        with pytest.raises(InputError, match=match):
            Reflection("x", **({"sources": ("a",)} | bad))  # type: ignore[arg-type]


def test_the_policy_is_due_by_count_or_by_tokens() -> None:
    three = [record(f"turn number {i}") for i in range(3)]
    assert not ReflectPolicy(every=4, trigger_tokens=None).due(three)
    assert ReflectPolicy(every=3, trigger_tokens=None).due(three)
    assert ReflectPolicy(every=None, trigger_tokens=8).due(three)  # 9 tokens > 8
    assert not ReflectPolicy(every=None, trigger_tokens=9).due(three)
    assert not ReflectPolicy(every=1).due([])


def test_untrusted_episodes_count_towards_the_schedule_only_when_shown() -> None:
    # a reflector never shown tool/web episodes was run by them: 12 web chunks
    # after each user turn meant a reflector call (a model call) per turn
    user = record("we deploy on fly")
    web = [record(f"web page chunk {i}").copy(source="web", id=f"w{i}") for i in range(12)]
    assert not ReflectPolicy(every=12, trigger_tokens=None).due([user, *web])
    assert not ReflectPolicy(every=None, trigger_tokens=10).due([user, *web])
    assert not ReflectPolicy(every=1).due(web)
    assert ReflectPolicy(every=12, trigger_tokens=None, read_untrusted=True).due([user, *web])
    assert ReflectPolicy(every=1).due([user, *web])


def test_only_a_semantic_record_with_reflection_meta_is_a_reflection() -> None:
    assert is_reflection(record("x", MemoryKind.SEMANTIC, **{META_KEY: {"label": "fact"}}))
    assert not is_reflection(record("x", MemoryKind.SEMANTIC))
    assert not is_reflection(record("x", MemoryKind.EPISODIC, **{META_KEY: {"label": "fact"}}))
    assert not is_reflection(record("x", MemoryKind.SEMANTIC, **{META_KEY: "fact"}))
