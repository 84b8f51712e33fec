"""Replay transcripts through strategies, turn by turn, and collect tidy rows.

For each turn in order: if it is a probe, the strategy builds its context (recall
fully resolves first) and the context is scored; then the strategy observes the
turn; then it runs maintenance. A detached probe (a benchmark question asked
about the conversation, not in it) is scored but neither observed nor followed
by maintenance, and has no turn row. Time comes from the transcript's timestamps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from memlab.lab import errata
from memlab.lab.metrics import ABSTAIN_BELOW, evidence_distance, score_probe
from memlab.lab.schema import default_of
from memlab.lab.strategies.base import Context, RanksHaystack, Strategy, StrategyFactory
from memlab.lab.transcripts import Transcript, Turn, question_id
from memlab.memory import RecallQuery
from memlab.progress import bar

DEFAULT_BUDGET: int = default_of(RecallQuery, "token_budget")

ProbeHook = Callable[[Transcript, int, Turn, Context, dict[str, Any]], None]
"""Called with each probe's transcript, turn index, turn, context and metric row,
right after the context is scored (the lab's reader hooks in here)."""


@dataclass(frozen=True)
class ReplaySettings:
    """How probes are asked and priced.

    Attributes:
        budget: the recall budget in tokens (default: ``RecallQuery``'s).
        prompt_overhead_tokens: system prompt etc., added to every prompt.
        price_per_1k_tokens: input price, for ``cost_usd``.
        far_turns: a probe whose evidence lies beyond this many same-scope
            turns counts as ``far``.
        benchmark_metrics: compute the ranked retrieval families (``haystack_*``,
            ``context_*``) and the abstention proxies; None: for transcripts from
            a benchmark adapter (``meta.dataset`` set: LoCoMo, LongMemEval).
        abstain_below: the question coverage under which a context counts as
            "would abstain" (``abstention_proxy``).
    """

    budget: int = DEFAULT_BUDGET
    prompt_overhead_tokens: int = 60
    price_per_1k_tokens: float = 0.0
    far_turns: int = 10
    benchmark_metrics: bool | None = None
    abstain_below: float = ABSTAIN_BELOW

    def benchmark(self, transcript: Transcript) -> bool:
        """Whether ``transcript``'s probes get the benchmark measures."""
        if self.benchmark_metrics is not None:
            return self.benchmark_metrics
        return bool(transcript.meta.get("dataset"))


def replay(
    transcript: Transcript,
    strategy: Strategy,
    settings: ReplaySettings,
    on_probe: ProbeHook | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Drive one transcript through one strategy.

    ``on_probe``: called with every probe's context and row (see ``ProbeHook``).

    Returns:
        (probe rows, turn rows): one row per probe with every metric, one row per
        turn with the store's size and the write/maintenance latency.
    """
    probes: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    benchmark = settings.benchmark(transcript)
    ranks = isinstance(strategy, RanksHaystack)
    for i, turn in enumerate(transcript.turns):
        if turn.probe is not None:
            # The full ranking first: it touches nothing, so the context is what it
            # would be without it (and recall_ms does not include it).
            full = None
            if benchmark and ranks and (turn.probe.evidence or turn.probe.evidence_sessions):
                full = strategy.ranking(turn)  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            context = strategy.context(turn, settings.budget)
            recall_ms = (time.perf_counter() - t0) * 1e3
            scoring = {
                "prompt_overhead_tokens": settings.prompt_overhead_tokens,
                "price_per_1k_tokens": settings.price_per_1k_tokens,
                "ranking": full,
                "benchmark": benchmark,
                "abstain_below": settings.abstain_below,
            }
            metrics = score_probe(transcript, i, turn, context, **scoring)
            distance = evidence_distance(transcript, i, turn)
            row: dict[str, Any] = {
                "transcript": transcript.id,
                "strategy": strategy.name,
                "probe": turn.id,
                "turn_index": i,
                "scope": turn.scope,
                "category": turn.probe.category or "",
                "scored": turn.probe.scored,
                "distance": distance,
                "far": distance is not None and distance > settings.far_turns,
                "corrected": _needs_corrected(transcript, i, turn),
                "abstention": bool(turn.probe.meta.get("abstention")),
                "question_id": question_id(transcript, turn),
                **_haystack_size(transcript, i, turn, benchmark),
                **metrics,
                "recall_ms": recall_ms,
                "context_ids": " ".join(pid for item in context.items for pid in item.provenance),
            }
            before = errata.original(turn)
            if before is not None:
                # The same context scored against the ground truth before the erratum.
                record = turn.probe.meta[errata.META_KEY]
                row["errata"] = f"{record['error_type']}:{record['action']}"
                old = score_probe(transcript, i, before, context, **scoring)
                row["errata_before"] = errata.before_row(old, turn)
            probes.append(row)
            if on_probe is not None:
                on_probe(transcript, i, turn, context, row)
            if turn.probe.detached:
                continue
        t0 = time.perf_counter()
        strategy.observe(turn)
        write_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        strategy.maintain(turn)
        maintain_ms = (time.perf_counter() - t0) * 1e3
        stats = strategy.stats()
        turns.append(
            {
                "transcript": transcript.id,
                "strategy": strategy.name,
                "turn": turn.id,
                "turn_index": i,
                "scope": turn.scope,
                "role": turn.role,
                "store_records": stats.records,
                "store_archived": stats.archived,
                "store_tokens": stats.tokens,
                "store_bytes": stats.bytes,
                "write_ms": write_ms,
                "maintain_ms": maintain_ms,
            }
        )
    return probes, turns


def _haystack_size(transcript: Transcript, index: int, turn: Turn, on: bool) -> dict[str, int]:
    """How many turns and sessions the probe's haystack holds (for the ranked
    metrics' "k >= haystack" flag); nothing without the benchmark measures."""
    if not on:
        return {}
    observed = transcript.observed(index, turn.scope)
    sessions = {s for s in map(transcript.sessions.get, observed) if s is not None}
    return {"haystack_turns": len(observed), "haystack_sessions": len(sessions)}


def _needs_corrected(transcript: Transcript, index: int, turn: Any) -> bool:
    state = transcript.fact_state(index, turn.scope)
    return any(state[f].stale for f in turn.probe.needs if f in state)


def run_experiment(
    transcripts: Iterable[Transcript],
    factories: Mapping[str, StrategyFactory],
    settings: ReplaySettings,
    *,
    progress: bool | None = None,
    before_transcript: Callable[[Transcript], None] | None = None,
    on_probe: ProbeHook | None = None,
    stop: Callable[[], bool] | None = None,
    after_transcript: Callable[[Transcript, list[dict[str, Any]]], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Replay every transcript through every strategy (a fresh strategy each time).

    ``progress``: a bar on a terminal (True or None), or none (False).
    Transcripts are the outer loop so that per-transcript work (``before_transcript``,
    e.g. embedding all of its texts in one batch) is done once for all strategies.
    ``on_probe`` sees every probe (see ``replay``); once ``stop()`` is true the
    replay ends after the transcript it is in (every strategy replays the same
    transcripts).
    ``after_transcript`` gets each transcript's probe rows (every strategy's) once
    it is replayed; the tuner reports running means from it, and an exception it
    raises (a pruned trial) ends the replay.

    Returns:
        (probes, turns) DataFrames, grouped by strategy in the order of ``factories``.
    """
    transcripts = list(transcripts)
    probe_rows: dict[str, list[dict[str, Any]]] = {name: [] for name in factories}
    turn_rows: dict[str, list[dict[str, Any]]] = {name: [] for name in factories}
    total = len(transcripts) * len(factories)
    done: list[dict[str, Any]] = []
    with bar(total=total, progress=progress, desc="replay", unit="run", leave=False) as shown:
        for t in transcripts:
            if stop is not None and stop():
                break
            if before_transcript is not None:
                before_transcript(t)
            for name, factory in factories.items():
                shown.set_postfix_str(f"{name} / {t.id}")
                strategy = factory(t)
                try:
                    p, tr = replay(t, strategy, settings, on_probe)
                finally:
                    strategy.close()
                probe_rows[name] += p
                turn_rows[name] += tr
                done.extend(p)
                shown.update()
            if after_transcript is not None:
                after_transcript(t, done)
            done = []
    return (
        pd.DataFrame([row for rows in probe_rows.values() for row in rows]),
        pd.DataFrame([row for rows in turn_rows.values() for row in rows]),
    )
