"""The cost of supersession per write and per recall (``--cost`` of benchmarks.supersession).

``cost`` times ``MemoryLayer.remember()`` with and without detection, and
``recall()`` with and without supersession, interleaved in one process over the
same store, at each scope size, on the bench corpus and on turns of the shipped
transcripts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from benchmarks.supersession_data import SHIPPED, load_transcripts
from memlab.memory import (
    HashEmbedder,
    InMemoryStore,
    MemoryKind,
    MemoryLayer,
    MemoryRecord,
    RecallQuery,
    Source,
)
from memlab.memory.consolidate import Consolidator, ScopeReader, Supersession
from memlab.memory.update_text import parse

COST_WORKLOADS = ("bench-corpus", "transcript-user", "transcript-all")


def cost(sizes: Sequence[int], det: Consolidator, writes: int = 300) -> pd.DataFrame:
    """``MemoryLayer.remember()`` with and without a consolidator, and ``recall()``,
    interleaved in one process over the same store.

    Workloads: ``bench-corpus`` (``make bench``'s lines from memlab.bench.workload,
    every one a user statement, many with "moved to"/"switched to": a worst case);
    ``transcript-user`` (user turns of the shipped transcripts only);
    ``transcript-all`` (every turn with its own source, as a conversation writes
    them: agent and tool records decide nothing). The scope is filled with ``n``
    records of the workload first (each parsed once, as detection at their own
    write would have done). Each timed write is undone untimed (``forget``, which
    also lifts what it superseded), so every write sees the same ``n`` records.
    Recall is timed on the layer with the consolidator (default mode: superseded
    records excluded, recall guard on), the query's embedding cached, no touch.
    """
    from memlab.bench.workload import START, flat_lines, flat_records

    emb = HashEmbedder(384)
    turns = [t for ep in load_transcripts(SHIPPED) for t in ep.turns]
    rows = []
    for n in sizes:
        for workload in COST_WORKLOADS:
            store = InMemoryStore()
            if workload == "bench-corpus":
                base = flat_records(n, "alice", emb, seed=11)
                probes = [(text, Source.USER) for text in flat_lines(writes, seed=12)]
            else:
                pool = [t for t in turns if workload == "transcript-all" or t.source == "user"]
                texts = [f"{pool[i % len(pool)].text} (#{i})" for i in range(n)]
                vecs = emb.embed(texts)
                base = [
                    MemoryRecord(f"b{i}", texts[i], vecs[i], MemoryKind.EPISODIC, "alice", 0.5,
                                 -(-len(texts[i]) // 4), START + 60.0 * i, START + 60.0 * i,
                                 source=Source(pool[i % len(pool)].source))
                    for i in range(n)
                ]  # fmt: skip
                rng = np.random.default_rng(13)
                picks = rng.integers(0, len(pool), writes)
                probes = [(pool[int(k)].text, Source(pool[int(k)].source)) for k in picks]
            for i in range(0, n, 5000):
                store.put_many(base[i : i + 5000])
            for r in base:  # as if each had been written with detection (parsed once)
                parse(r.content)
            now = START + 60.0 * n
            counting = _Counting(det)
            plain_layer = MemoryLayer(store, emb, clock=_fixed(now))
            layer = MemoryLayer(store, emb, clock=_fixed(now), consolidator=counting)
            plain, detect, recall_plain, recall_sup = [], [], [], []
            for k, (text, source) in enumerate(probes):
                t0 = time.perf_counter()
                plain_layer.remember("alice", text, id=f"p{k}", source=source)
                plain.append(time.perf_counter() - t0)
                store.delete("alice", f"p{k}")  # keep the scope at n records
                t0 = time.perf_counter()
                layer.remember("alice", text, id=f"q{k}", source=source)
                detect.append(time.perf_counter() - t0)
                layer.forget("alice", f"q{k}")  # lifts what it superseded
                query = RecallQuery("alice", text)
                layer.embed_query(text)  # recall is timed without the query embedding
                t0 = time.perf_counter()
                plain_layer.recall(query, touch=False)
                recall_plain.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                layer.recall(query, touch=False)
                recall_sup.append(time.perf_counter() - t0)
            p50 = float(np.median(plain))
            rows.append(
                {
                    "records": n,
                    "workload": workload,
                    "remember_p50_us": 1e6 * p50,
                    "remember_mean_us": 1e6 * float(np.mean(plain)),
                    "with_detection_p50_us": 1e6 * float(np.median(detect)),
                    "with_detection_mean_us": 1e6 * float(np.mean(detect)),
                    "ratio_p50": float(np.median(detect)) / p50,
                    "ratio_mean": float(np.mean(detect)) / float(np.mean(plain)),
                    "fired_share": counting.fired / len(probes),
                    "recall_p50_ms": 1e3 * float(np.median(recall_plain)),
                    "recall_supersede_p50_ms": 1e3 * float(np.median(recall_sup)),
                }
            )
            print(f"  cost at {n:,} records ({workload}) done", flush=True)
    return pd.DataFrame(rows)


class _Counting:
    """A consolidator that counts the writes on which the wrapped one decided."""

    def __init__(self, inner: Consolidator) -> None:
        self.inner = inner
        self.name = inner.name
        self.fired = 0
        # only a consolidator that can judge gets the layer's recall guard: pass
        # ``judge`` through when the wrapped one has it, never invent one
        judge = getattr(inner, "judge", None)
        if callable(judge):
            self.judge: Callable[[MemoryRecord, Sequence[MemoryRecord]], list[Supersession]]
            self.judge = judge

    def decide(self, new: MemoryRecord, reader: ScopeReader) -> list[Supersession]:
        out = self.inner.decide(new, reader)
        self.fired += bool(out)
        return out


def _fixed(now: float) -> Callable[[], float]:
    return lambda: now


__all__ = ["COST_WORKLOADS", "cost"]
