# mypy: disable-error-code="arg-type,list-item,misc,return-value,call-overload,dict-item"
"""Bad-argument cases for the constructors, policies and free functions.

The half of the corpus (``memlab.reliability.badargs``) that needs no stored
record: store and layer constructors, the policy and weight dataclasses, the
embedder, the summarizer and the text helpers, each called with one wrong
argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memlab.memory import (
    EvictionPolicy,
    ExtractiveSummarizer,
    HalfLives,
    HashEmbedder,
    InMemoryStore,
    JsonlStore,
    MemoryLayer,
    MemoryQuestionRewriter,
    NeighborPolicy,
    RankWeights,
    SqliteStore,
    SummarizePolicy,
    estimate_salience,
    estimate_tokens,
    format_memory,
    parse_time,
)
from memlab.memory.quotes import Untrusted, find_quotes
from memlab.memory.records import Source
from memlab.reliability.badargs import DIMS, INF, NAN, Case, Env


def construction_cases() -> Iterator[Case]:
    def folder(env: Env) -> Path:
        return env.folder

    yield Case("JsonlStore(None)", "path", lambda env: JsonlStore(None))
    yield Case("JsonlStore(3)", "path", lambda env: JsonlStore(3))
    yield Case("JsonlStore('')", "path", lambda env: JsonlStore(""))
    yield Case("JsonlStore(b'x')", "path", lambda env: JsonlStore(b"x"))
    yield Case("JsonlStore(folder)", "folder", lambda env: JsonlStore(folder(env)))
    yield Case(
        "JsonlStore(compact_min_lines=0)",
        "compact_min_lines",
        lambda env: JsonlStore(folder(env) / "x.jsonl", compact_min_lines=0),
    )
    yield Case(
        "JsonlStore(compact_ratio='x')",
        "compact_ratio",
        lambda env: JsonlStore(folder(env) / "x.jsonl", compact_ratio="x"),
    )
    yield Case(
        "JsonlStore(lock_timeout=-1)",
        "lock_timeout",
        lambda env: JsonlStore(folder(env) / "x.jsonl", lock_timeout=-1),
    )
    yield Case(
        "JsonlStore(fsync='yes')",
        "fsync",
        lambda env: JsonlStore(folder(env) / "x.jsonl", fsync="yes"),
    )
    yield Case("SqliteStore(None)", "path", lambda env: SqliteStore(None))
    yield Case("SqliteStore(3)", "path", lambda env: SqliteStore(3))
    yield Case("SqliteStore('')", "path", lambda env: SqliteStore(""))
    yield Case("SqliteStore(folder)", "folder", lambda env: SqliteStore(folder(env)))
    yield Case(
        "SqliteStore(timeout='x')",
        "timeout",
        lambda env: SqliteStore(folder(env) / "x.db", timeout="x"),
    )
    yield Case(
        "SqliteStore(integrity='deep')",
        "integrity",
        lambda env: SqliteStore(folder(env) / "x.db", integrity="deep"),
    )
    embedder = HashEmbedder(DIMS)
    layer_bad: list[tuple[str, str, dict[str, Any]]] = [
        ("store='x'", "store", {"store": "x"}),
        ("embedder=None", "embedder", {"embedder": None}),
        ("untrusted_salience_cap=2", "untrusted_salience_cap", {"untrusted_salience_cap": 2}),
        ("untrusted_salience_cap='x'", "untrusted_salience_cap", {"untrusted_salience_cap": "x"}),
        ("untrusted_salience_cap=nan", "untrusted_salience_cap", {"untrusted_salience_cap": NAN}),
        ("pool=0", "pool", {"pool": 0}),
        ("pool='x'", "pool", {"pool": "x"}),
        ("clock=3", "clock", {"clock": 3}),
        ("token_counter='x'", "token_counter", {"token_counter": "x"}),
        ("weights={}", "weights", {"weights": {"similarity": 1}}),
        ("half_life=3", "half_life", {"half_life": 3}),
        ("summarize='x'", "summarize", {"summarize": "x"}),
        ("eviction='x'", "eviction", {"eviction": "x"}),
        ("neighbors='x'", "neighbors", {"neighbors": "x"}),
    ]
    for label, arg, change in layer_bad:
        kw = {"store": InMemoryStore(), "embedder": embedder, **change}
        yield Case(
            f"MemoryLayer({label})",
            arg,
            lambda env, kw=kw: MemoryLayer(**kw),
        )
    yield Case(
        "MemoryLayer(dims mismatch)",
        "dimensions",
        lambda env: MemoryLayer(env.stores["memory"], HashEmbedder(32)),
    )
    policies: list[tuple[str, str, Callable[[], object]]] = [
        (
            "SummarizePolicy(trigger_tokens=0)",
            "trigger_tokens",
            lambda: SummarizePolicy(trigger_tokens=0),
        ),
        (
            "SummarizePolicy(trigger_tokens='x')",
            "trigger_tokens",
            lambda: SummarizePolicy(trigger_tokens="x"),
        ),
        (
            "SummarizePolicy(chunk_tokens=nan)",
            "chunk_tokens",
            lambda: SummarizePolicy(chunk_tokens=NAN),
        ),
        ("SummarizePolicy(keep_recent=-1)", "keep_recent", lambda: SummarizePolicy(keep_recent=-1)),
        (
            "SummarizePolicy(max_gap_hours='x')",
            "max_gap_hours",
            lambda: SummarizePolicy(max_gap_hours="x"),
        ),
        ("SummarizePolicy(min_records=0)", "min_records", lambda: SummarizePolicy(min_records=0)),
        ("NeighborPolicy(before=-1)", "before", lambda: NeighborPolicy(before=-1)),
        ("NeighborPolicy(after='x')", "after", lambda: NeighborPolicy(after="x")),
        ("NeighborPolicy(top=0)", "top", lambda: NeighborPolicy(top=0)),
        ("NeighborPolicy(max_tokens='x')", "max_tokens", lambda: NeighborPolicy(max_tokens="x")),
        ("EvictionPolicy(episodic_ttl=0)", "episodic_ttl", lambda: EvictionPolicy(episodic_ttl=0)),
        (
            "EvictionPolicy(episodic_ttl='x')",
            "episodic_ttl",
            lambda: EvictionPolicy(episodic_ttl="x"),
        ),
        ("EvictionPolicy(max_records=0)", "max_records", lambda: EvictionPolicy(max_records=0)),
        (
            "EvictionPolicy(salience_floor=nan)",
            "salience_floor",
            lambda: EvictionPolicy(salience_floor=NAN),
        ),
        (
            "EvictionPolicy(salience_floor='x')",
            "salience_floor",
            lambda: EvictionPolicy(salience_floor="x"),
        ),
        ("EvictionPolicy(cold_decay=2)", "cold_decay", lambda: EvictionPolicy(cold_decay=2)),
        ("EvictionPolicy(cold_after='x')", "cold_after", lambda: EvictionPolicy(cold_after="x")),
        (
            "EvictionPolicy(untrusted_ttl=nan)",
            "untrusted_ttl",
            lambda: EvictionPolicy(untrusted_ttl=NAN),
        ),
        ("RankWeights(similarity=-1)", "similarity", lambda: RankWeights(similarity=-1)),
        ("RankWeights(recency='x')", "recency", lambda: RankWeights(recency="x")),
        ("RankWeights(salience=inf)", "salience", lambda: RankWeights(salience=INF)),
        ("RankWeights(usage=True)", "usage", lambda: RankWeights(usage=True)),
        ("HalfLives(episodic=0)", "episodic", lambda: HalfLives(episodic=0)),
        ("HalfLives(semantic='x')", "semantic", lambda: HalfLives(semantic="x")),
        ("HalfLives(procedural=inf)", "procedural", lambda: HalfLives(procedural=INF)),
        ("HashEmbedder(dims=0)", "dims", lambda: HashEmbedder(0)),
        ("HashEmbedder(dims='x')", "dims", lambda: HashEmbedder("x")),
        ("HashEmbedder.embed('text')", "texts", lambda: HashEmbedder(DIMS).embed("text")),
        ("HashEmbedder.embed(None)", "texts", lambda: HashEmbedder(DIMS).embed(None)),
        ("HashEmbedder.embed([1])", "texts", lambda: HashEmbedder(DIMS).embed([1])),
        ("ExtractiveSummarizer(max_words=0)", "max_words", lambda: ExtractiveSummarizer(0)),
        ("ExtractiveSummarizer(max_words='x')", "max_words", lambda: ExtractiveSummarizer("x")),
        (
            "ExtractiveSummarizer.summarize('text')",
            "texts",
            lambda: ExtractiveSummarizer().summarize("text"),
        ),
        (
            "ExtractiveSummarizer.summarize(None)",
            "texts",
            lambda: ExtractiveSummarizer().summarize(None),
        ),
        (
            "ExtractiveSummarizer.summarize([1])",
            "texts",
            lambda: ExtractiveSummarizer().summarize([1]),
        ),
        ("parse_time(None, now)", "text", lambda: parse_time(None, 1.78e9)),
        ("parse_time(text, now='x')", "now", lambda: parse_time("last week", "x")),
        ("parse_time(text, now=nan)", "now", lambda: parse_time("last week", NAN)),
        ("estimate_tokens(None)", "text", lambda: estimate_tokens(None)),
        ("estimate_salience(None)", "text", lambda: estimate_salience(None)),
        (
            "MemoryQuestionRewriter.rewrite(None)",
            "text",
            lambda: MemoryQuestionRewriter().rewrite(None),
        ),
        ("format_memory('text')", "list", lambda: format_memory("text")),
        ("format_memory([None])", "item 1", lambda: format_memory([None])),
        ("format_memory(None)", "list", lambda: format_memory(None)),
        ("find_quotes(None, [])", "text", lambda: find_quotes(None, [])),
        ("find_quotes(text, 'x')", "untrusted", lambda: find_quotes("x", "untrusted")),
        (
            "find_quotes(min_words=1)",
            "min_words",
            lambda: find_quotes("x", [Untrusted("a b c", Source.TOOL, "t")], min_words=1),
        ),
    ]
    for label, arg, make in policies:
        yield Case(label, arg, lambda env, make=make: make())


__all__ = ["construction_cases"]
