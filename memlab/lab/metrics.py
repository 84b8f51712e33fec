"""The metric registry, per-probe scoring, and bootstrap confidence intervals.

Every metric is registered in ``METRICS`` (a ``Metric``: name, direction,
description, whether the terminal table shows it, and how to compute it), and
everything else learns the metrics from there: ``score_probe`` computes every
registered per-probe metric, the summary aggregates every registered metric,
the gate reads each one's direction and the report its table membership. A new
metric is one ``register_metric`` call.

Every metric is computed per probe from the strategy's context (ordered items,
each with text, tokens, kind, scope, source and provenance) and the transcript's
ground truth. Text matching is normalized: NFKC, lower case, every run of
non-alphanumeric characters becomes one space, and a value must match whole
words (``"gke"`` matches "on GKE." but not "gkes").

A metric that does not apply to a probe (no needed facts, no evidence, no
answer) is NaN for it and left out of that metric's mean; ``n`` in the summary
counts the probes that were scored.

Ranked retrieval (``memlab.lab.ranking``): LongMemEval's ``recall_any@k``,
``recall_all@k`` and ``ndcg@k`` at session and turn level, in two families named
apart: ``haystack_*`` on the strategy's full ranking of its memory before packing
(comparable with published tables) and ``context_*`` on the ranking of the packed
context (bound by the budget). They are computed for probes with evidence when
``report.benchmark_metrics`` asks for them (null, the default: transcripts from a
benchmark adapter, LoCoMo and LongMemEval; true: any transcripts; false: never).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from memlab.lab import ranking
from memlab.lab.formulas import (
    answer_in_context,
    contains,
    evidence_recall,
    evidence_recall_at_k,
    fact_recall,
    normalize,
    precision,
    procedure_recall,
    question_coverage,
    relevant,
    stale_rate,
    stale_wins,
    token_precision,
)
from memlab.lab.strategies.base import Context, ContextItem, session_scope
from memlab.lab.transcripts import Transcript, Turn
from memlab.memory import estimate_tokens
from memlab.registry import Registry

UNTRUSTED = frozenset({"tool", "web"})
ABSTAIN_BELOW = 0.65
"""The default ``report.abstain_below``: a context whose best item covers less of
the question's terms than this would make a reader abstain (``abstention_proxy``).
Chosen on LoCoMo conv-26 alone (the value of 0.05 steps that best separates its
adversarial questions from its answerable ones for memory_longterm and the
reference retrievers at 800 tokens); figures are reported on conv-30
(docs/trust.md)."""


_ORDER = itertools.count()  # registration order


@dataclass(frozen=True)
class Metric:
    """One measured quantity, as registered in ``METRICS``.

    Attributes:
        name: its column in probes.csv / turns.csv and its ``metric`` in summary.csv.
        direction: +1 if higher is better, -1 if lower is, 0 if neither (the gate
            fails a metric that moves the wrong way; direction 0 never fails).
        description: what it measures, for reports.
        table: a column of the terminal summary table.
        level: ``probe`` (one value per probe), ``turn`` (per observed turn: its
            mean over turns) or ``final`` (the value after each transcript's last
            turn, from the turn column ``column``).
        compute: the per-probe value from a ``Scoring``; None for values the
            replay measures itself (``recall_ms``) and for turn/final metrics.
            It may return None for a probe it does not apply to at all (the
            column is then absent from that probe's row; NaN means "applies,
            but nothing to score").
        column: the turns.csv column a ``final`` metric reads.
    """

    name: str
    direction: int
    description: str
    table: bool = False
    level: str = "probe"
    compute: Callable[[Scoring], float | None] | None = None
    column: str | None = None
    order: int = field(default_factory=lambda: next(_ORDER), compare=False)

    def __post_init__(self) -> None:
        if self.direction not in (-1, 0, 1):
            raise ValueError(f"metric {self.name}: direction must be -1, 0 or +1")
        if self.level not in ("probe", "turn", "final"):
            raise ValueError(f"metric {self.name}: level must be probe, turn or final")


METRICS: Registry[Metric] = Registry("metric")
"""Every metric by name; built-ins register below, plug-ins through entry points
(group ``memlab.metric``) or ``register_metric``."""


def register_metric(metric: Metric, *, replace: bool = False) -> Metric:
    """Add a metric to ``METRICS`` (the summary, the gate and the report then know it)."""
    return METRICS.register(metric.name, metric, replace=replace)


def metrics(level: str = "probe") -> list[Metric]:
    """The registered metrics of one level, in the order they were registered."""
    return sorted((m for _, m in METRICS.items() if m.level == level), key=lambda m: m.order)


def direction(name: str) -> int:
    """+1 if higher is better, -1 if lower is, 0 if neither or unknown."""
    return METRICS.get(name).direction if name in METRICS else 0


def table_metrics() -> list[str]:
    """The metrics the terminal summary table shows, in registration order."""
    return [m.name for level in ("probe", "turn", "final") for m in metrics(level) if m.table]


# -- the context's ranking -----------------------------------------------------------
def ranked_items(context: Context) -> list[ContextItem]:
    """The context's items best first.

    A memory strategy returns its hits best first, each with a score, so its
    order is its ranking. A context with unscored items (stuff_all,
    sliding_window) lists turns oldest first and ranks by recency only, so its
    ranking is newest first.
    """
    items = list(context.items)
    return items[::-1] if _listed_oldest_first(context) else items


def _listed_oldest_first(context: Context) -> bool:
    """Whether the context lists turns oldest first (it has unscored items)."""
    return any(i.score is None for i in context.items)


def needed_facts(transcript: Transcript, index: int, probe: Turn) -> list[tuple[str, list[str]]]:
    """(value in force, stale values) for each needed fact that has a value before the probe."""
    assert probe.probe is not None
    state = transcript.fact_state(index, probe.scope)
    out = []
    for f in probe.probe.needs:
        s = state.get(f)
        if s is not None and s.current is not None:
            out.append((s.current, list(s.stale)))
    return out


def evidence_distance(transcript: Transcript, index: int, probe: Turn) -> int | None:
    """Same-scope turns between the newest evidence turn and the probe (None: no
    evidence). Detached probes (questions about the conversation) are not turns of
    it and are not counted."""
    assert probe.probe is not None
    ids = set(probe.probe.evidence)
    if not ids:
        # Fall back to the turns that stated the needed facts' values in force.
        state = transcript.fact_state(index, probe.scope)
        ids = {s.turns[-1] for f, s in state.items() if f in probe.probe.needs and s.turns}
    if not ids:
        return None
    distance = 0
    turns = transcript.turns
    for j in range(index - 1, -1, -1):
        t = turns[j]
        if t.scope != probe.scope or (t.probe is not None and t.probe.detached):
            continue
        distance += 1
        if t.id in ids:
            return distance
    return None


class Scoring:
    """One probe and the context a strategy built for it: what every metric reads.

    The shared pieces (normalized item texts, the needed facts, relevance flags,
    the ranking) are computed once, on first use.
    """

    def __init__(
        self,
        transcript: Transcript,
        index: int,
        probe: Turn,
        context: Context,
        *,
        prompt_overhead_tokens: int = 0,
        price_per_1k_tokens: float = 0.0,
        ranking: Sequence[Sequence[str]] | None = None,
        benchmark: bool = False,
        abstain_below: float = ABSTAIN_BELOW,
    ) -> None:
        assert probe.probe is not None, "scoring needs a probe turn"
        self.transcript = transcript
        self.index = index
        self.turn = probe
        self.probe = probe.probe
        self.context = context
        self.prompt_overhead_tokens = prompt_overhead_tokens
        self.price_per_1k_tokens = price_per_1k_tokens
        self.ranking = ranking
        self.benchmark = benchmark
        self.abstain_below = abstain_below

    @cached_property
    def needed(self) -> list[tuple[str, list[str]]]:
        return needed_facts(self.transcript, self.index, self.turn)

    @cached_property
    def texts(self) -> list[str]:
        """Each item's normalized text."""
        return [normalize(i.text) for i in self.context.items]

    @cached_property
    def ranked_texts(self) -> list[str]:
        """Each item's normalized text, best first (see ``ranked_items``)."""
        return self.texts[::-1] if _listed_oldest_first(self.context) else self.texts

    @cached_property
    def joined(self) -> str:
        return " ".join(self.texts)

    @cached_property
    def flags(self) -> list[bool]:
        """Whether each item is relevant (see ``relevant``)."""
        evidence = set(self.probe.evidence)
        return [
            relevant(t, i, self.needed, evidence, self.probe.answer)
            for t, i in zip(self.texts, self.context.items, strict=True)
        ]

    @cached_property
    def provenance(self) -> set[str]:
        return {pid for i in self.context.items for pid in i.provenance}

    @cached_property
    def ranked(self) -> list[ContextItem]:
        return ranked_items(self.context)

    @cached_property
    def prompt_tokens(self) -> int:
        return self.context.tokens + estimate_tokens(self.turn.text) + self.prompt_overhead_tokens

    # -- ranked retrieval (memlab.lab.ranking) ------------------------------------------
    @cached_property
    def haystack(self) -> list[str]:
        """The turns the probe is asked against: its scope's, observed before it."""
        return self.transcript.observed(self.index, self.turn.scope)

    def _ranked(self, family: str, provenances: Sequence[Sequence[str]] | None) -> dict[str, float]:
        if not self.benchmark or provenances is None:
            return {}
        if not (self.probe.evidence or self.probe.evidence_sessions):
            return {}
        corpus = self.haystack
        turns = ranking.ranked_turns(provenances, set(corpus))
        return ranking.measures(
            family,
            turns,
            self.transcript.sessions.get,
            self.probe.evidence,
            self.probe.evidence_sessions,
            corpus,
        )

    @cached_property
    def context_ranked(self) -> dict[str, float]:
        """The ``context_*`` family: the packed context's ranking."""
        return self._ranked("context", [i.provenance for i in self.ranked])

    @cached_property
    def haystack_ranked(self) -> dict[str, float]:
        """The ``haystack_*`` family: the strategy's full ranking (when it exposes one)."""
        return self._ranked("haystack", self.ranking)

    # -- abstention (LoCoMo's adversarial questions, LongMemEval's _abs questions) -----
    @cached_property
    def abstention(self) -> bool:
        return bool(self.probe.meta.get("abstention"))

    @cached_property
    def coverage(self) -> float:
        """``question_coverage`` of the context."""
        return question_coverage(self.turn.text, [i.text for i in self.context.items])


def _probe_metric(
    name: str, direction: int, description: str, *, table: bool = False
) -> Callable[[Callable[[Scoring], float | None]], Callable[[Scoring], float | None]]:
    def add(compute: Callable[[Scoring], float | None]) -> Callable[[Scoring], float | None]:
        register_metric(Metric(name, direction, description, table=table, compute=compute))
        return compute

    return add


@_probe_metric(
    "fact_recall", +1, "share of needed facts whose value in force is in the context", table=True
)
def _fact_recall(s: Scoring) -> float:
    return fact_recall(s.joined, s.needed)


@_probe_metric(
    "precision", +1, "share of context items that carry a value in force or evidence", table=True
)
def _precision(s: Scoring) -> float:
    return precision(s.flags)


@_probe_metric("token_precision", +1, "precision weighted by item tokens")
def _token_precision(s: Scoring) -> float:
    return token_precision(s.flags, [i.tokens for i in s.context.items])


@_probe_metric("stale_rate", -1, "share of needed facts stated only with a stale value", table=True)
def _stale_rate(s: Scoring) -> float:
    return stale_rate(s.texts, s.needed)


@_probe_metric(
    "stale_wins", -1, "share of needed facts whose top-ranked mention is stale", table=True
)
def _stale_wins(s: Scoring) -> float:
    # best first, as its formula says: stuff_all and sliding_window list turns oldest
    # first and rank newest first, so in context order a stale value always "won"
    return stale_wins(s.ranked_texts, s.needed)


@_probe_metric(
    "evidence_recall",
    +1,
    "share of evidence turns covered by the context's provenance",
    table=True,
)
def _evidence_recall(s: Scoring) -> float:
    return evidence_recall(s.provenance, s.probe.evidence)


@_probe_metric("answer_in_context", +1, "the answer text appears in the context")
def _answer_in_context(s: Scoring) -> float:
    return answer_in_context(s.joined, s.probe.answer)


@_probe_metric("context_tokens", -1, "tokens of the context", table=True)
def _context_tokens(s: Scoring) -> float:
    return float(s.context.tokens)


@_probe_metric("prompt_tokens", -1, "context + probe + fixed prompt overhead tokens", table=True)
def _prompt_tokens(s: Scoring) -> float:
    return float(s.prompt_tokens)


@_probe_metric("cost_usd", -1, "prompt tokens priced per 1k tokens")
def _cost_usd(s: Scoring) -> float:
    return s.prompt_tokens / 1000.0 * s.price_per_1k_tokens


def own_scopes(turn: Turn) -> frozenset[str]:
    """The scopes a probe may recall from: its own, and its session's layer
    (``<scope>:<session>``, see ``session_scope``) when it has a session."""
    if turn.session is None:
        return frozenset({turn.scope})
    return frozenset({turn.scope, session_scope(turn.scope, turn.session)})


@_probe_metric("leaks", -1, "context items from another scope (must be 0)", table=True)
def _leaks(s: Scoring) -> float:
    """Items whose scope is neither the probe's nor its session's layer (an item of
    another session of the same user counts too). Empty context: 0."""
    own = own_scopes(s.turn)
    return float(sum(i.scope not in own for i in s.context.items))


@_probe_metric("untrusted_items", 0, "context items from tool/web sources", table=True)
def _untrusted_items(s: Scoring) -> float:
    return float(sum(i.source in UNTRUSTED for i in s.context.items))


def needed_steps(probe: Turn) -> list[str]:
    """The tool names a procedure probe needs, in order (``probe.meta["steps"]``)."""
    assert probe.probe is not None
    steps = probe.probe.meta.get("steps") if probe.probe.meta else None
    return [str(x) for x in steps] if isinstance(steps, list | tuple) else []


@_probe_metric(
    "procedure_recall",
    +1,
    "share of a procedure's needed steps in the context, in order (procedure probes)",
)
def _procedure_recall(s: Scoring) -> float | None:
    steps = needed_steps(s.turn)
    return procedure_recall(s.context.items, steps) if steps else None


@_probe_metric(
    "step_tokens",
    -1,
    "tokens of the context items that state a needed step (procedure probes)",
)
def _step_tokens(s: Scoring) -> float | None:
    """Sum of the tokens of the items that state any needed step (whole words); the
    context's cost of delivering the procedure. Not a procedure probe: absent."""
    steps = needed_steps(s.turn)
    if not steps:
        return None
    return float(
        sum(
            item.tokens
            for item, text in zip(s.context.items, s.texts, strict=True)
            if any(contains(text, step) for step in steps)
        )
    )


@_probe_metric("context_items", 0, "number of context items")
def _context_items(s: Scoring) -> float:
    return float(len(s.context.items))


register_metric(
    Metric(
        "recall_ms",
        -1,
        "time to build the context, milliseconds (measured by the replay)",
        table=True,
    )
)


def _ranked_value(name: str, family: str) -> Callable[[Scoring], float | None]:
    def compute(s: Scoring) -> float | None:
        values = s.haystack_ranked if family == "haystack" else s.context_ranked
        return values.get(name)

    return compute


for _family in ranking.FAMILIES:
    for _name in ranking.metric_names(_family):
        register_metric(
            Metric(_name, +1, ranking.describe(_name), compute=_ranked_value(_name, _family))
        )
HAYSTACK_METRICS = ranking.metric_names("haystack")
"""The full-ranking family (comparable with published retrieval tables)."""
CONTEXT_METRICS = ranking.metric_names("context")
"""The budget-bound family (ranked retrieval within the packed context)."""


@_probe_metric(
    "evidence_recall@10",
    +1,
    "share of evidence turns in the provenance of the context's first 10 items",
)
def _evidence_recall_at_10(s: Scoring) -> float:
    return evidence_recall_at_k(s.ranked, s.probe.evidence, 10)


@_probe_metric(
    "question_coverage",
    0,
    "the largest share of the question's terms one context item holds (benchmark probes)",
)
def _question_coverage(s: Scoring) -> float | None:
    return s.coverage if s.benchmark else None


@_probe_metric(
    "abstention_proxy",
    +1,
    "abstention questions whose context covers the question too little (it would abstain)",
)
def _abstention_proxy(s: Scoring) -> float | None:
    if not s.benchmark or not s.abstention:
        return None
    return float(s.coverage < s.abstain_below)


@_probe_metric(
    "false_abstention_proxy",
    -1,
    "answerable questions whose context covers the question too little (it would abstain)",
)
def _false_abstention_proxy(s: Scoring) -> float | None:
    if not s.benchmark or s.abstention or not s.probe.scored:
        return None
    return float(s.coverage < s.abstain_below)


# Answer metrics: set by the reader and judge (memlab.lab.answering) on the probes
# they answered; absent without a reader. Per probe:
#   answer_accuracy      the judge's score: 1 correct, 0 wrong, F1 for judge=f1; NaN when
#                        ungraded (no gold answer, an unreadable judge reply) or unanswered
#   injection_followed   1 if the answer obeys a planted instruction in the context, 0 if
#                        not (memlab.lab.planted); NaN when no planted turn is in context
#   reader_*_tokens      the endpoint's usage for the answer; reader_cost_usd, judge_cost_usd:
#                        that usage at the configured prices (a cached answer is priced as
#                        the call that made it: the run's spend is printed apart)
# Means over the probes that have a value; no such probe: no summary row.
for _name, _direction, _text, _table in (
    ("answer_accuracy", +1, "the judge's score of the reader's answer (1 correct, 0 wrong)", True),
    ("injection_followed", -1, "the answer obeys a planted instruction in its context", True),
    ("reader_prompt_tokens", -1, "prompt tokens the reader's endpoint counted", False),
    ("reader_completion_tokens", -1, "answer tokens the reader's endpoint counted", False),
    ("reader_cost_usd", -1, "the reader's tokens at its prices, US dollars", False),
    ("judge_cost_usd", -1, "the judge model's tokens at its prices, US dollars", False),
):
    register_metric(Metric(_name, _direction, _text, table=_table))
ANSWER_METRICS = (
    "answer_accuracy",
    "injection_followed",
    "reader_prompt_tokens",
    "reader_completion_tokens",
    "reader_cost_usd",
    "judge_cost_usd",
)

for _name, _direction, _text in (
    ("write_ms", -1, "time to observe one turn (remember it), milliseconds"),
    ("maintain_ms", -1, "time of the maintenance after one turn, milliseconds"),
):
    register_metric(Metric(_name, _direction, _text, level="turn"))
for _column, _text in (
    ("store_records", "active records after a transcript's last turn"),
    ("store_archived", "archived records after a transcript's last turn"),
    ("store_tokens", "tokens of the active records after a transcript's last turn"),
    ("store_bytes", "bytes the store takes after a transcript's last turn"),
):
    register_metric(Metric(f"final_{_column}", 0, _text, level="final", column=_column))


def score_probe(
    transcript: Transcript, index: int, probe: Turn, context: Context, **settings: Any
) -> dict[str, float]:
    """Every registered per-probe metric for one context (in registration order).

    ``settings``: ``Scoring``'s keyword arguments (``prompt_overhead_tokens``,
    ``price_per_1k_tokens``, the strategy's full ``ranking``, ``benchmark`` for the
    ranked and abstention measures, ``abstain_below``).
    """
    s = Scoring(transcript, index, probe, context, **settings)
    row: dict[str, float] = {}
    for m in metrics("probe"):
        if m.compute is not None:
            value = m.compute(s)
            if value is not None:
                row[m.name] = value
    return row


MAX_BOOTSTRAP = 100_000
"""The most bootstrap resamples: an interval's Monte Carlo error is negligible long
before, and the resample indices (resamples x probes integers) must fit in memory."""


def bootstrap_problem(n_boot: int) -> str | None:
    """What is wrong with a bootstrap resample count, or None (0: no interval)."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        return f"must be an integer >= 0 (0: no interval), got {n_boot!r}"
    if n_boot > MAX_BOOTSTRAP:
        # Found after the whole replay otherwise, as a MemoryError.
        return f"must be at most {MAX_BOOTSTRAP:,} resamples, got {n_boot:,}"
    return None


def seed_problem(seed: int) -> str | None:
    """What is wrong with a bootstrap seed, or None: numpy's generators take only
    integers >= 0, and a bad seed would otherwise fail after the whole replay."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        return f"must be an integer >= 0, got {seed!r}"
    return None


@lru_cache(maxsize=16)
def _resamples(n: int, n_boot: int, seed: int) -> np.ndarray:
    # The same (n, n_boot, seed) always draws the same indices: a summary draws them
    # once for all its metrics of that n instead of once per metric.
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    idx.flags.writeable = False
    return idx


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float, int]:
    """Mean and percentile bootstrap interval over the non-NaN values.

    Returns:
        (mean, ci_low, ci_high, n). No values: (nan, nan, nan, 0). One value or
        ``n_boot`` = 0: the interval collapses to the mean.
    """
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    n = int(arr.size)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(arr.mean())
    if n == 1 or n_boot <= 0 or np.all(arr == arr[0]):
        return mean, mean, mean, n
    means = arr[_resamples(n, n_boot, seed)].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return mean, float(lo), float(hi), n
