"""Ranked retrieval as LongMemEval evaluates it, on two rankings (two metric families).

LongMemEval's retrieval evaluation (Wu et al., ICLR 2025; xiaowu0162/LongMemEval,
``src/retrieval/eval_utils.py`` and ``src/retrieval/run_retrieval.py``, MIT)
ranks every item of the haystack for a question and reports, for k in 1, 3, 5,
10, 30, 50, at turn and session level:

- ``recall_any@k``: 1 if some relevant id is among the top k, else 0;
- ``recall_all@k``: 1 if every relevant id is among the top k, else 0;
- ``ndcg_any@k``: DCG@k / IDCG@k with binary relevance and upstream's discount
  (rank 1 and rank 2 both count fully: DCG = rel_1 + sum_{r>=2} rel_r / log2(r)),
  IDCG the DCG of the corpus's relevant items sorted first, cut at k.

A retriever of turns gets its session-level figures from its turn ranking
(upstream ``evaluate_retrieval_turn2session``): k is widened until the top turns
cover k distinct sessions, recall counts the sessions of those turns, and nDCG is
computed over those turns. Upstream counts a turn of an evidence session for that
session only if the turn is evidence itself (it renames the session's other turns
``noans_...``, a session of their own): so a session is "retrieved" when one of
its evidence turns is, and the session nDCG is the turn nDCG at the widened k.

memlab computes these on two rankings, and names the two families apart:

- ``haystack_<level>_<measure>@k`` (**full ranking**): the strategy's ranking of
  everything it remembers, before packing (``Strategy.ranking``); this is what
  published retrieval tables measure. A result with k at or above the number of
  sessions (turns) in the haystack is uninformative: the top k then holds
  everything (``uninformative``).
- ``context_<level>_<measure>@k`` (**budget-bound**): the ranking of the context
  packed into the token budget; everything below the budget is missing, so these
  saturate at the budget and are not comparable with published tables.

The corpus (for the ideal DCG and the "uninformative" flag) is the haystack: the
turns of the probe's scope observed before it. Differences from upstream:
relevant turns are the probe's evidence turns wherever they are, and the ranking
holds every turn the strategy remembers (upstream indexes user turns only, so its
assistant-evidence questions have no relevant turn); a probe without relevant
ids gets no value (upstream scores 0 / 1 and leaves abstention questions out of
its averages).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Collection, Iterable, Sequence

RANK_KS = (1, 3, 5, 10, 30, 50)
"""The k of every ranked measure (upstream's)."""
LEVELS = ("session", "turn")
MEASURES = ("recall_any", "recall_all", "ndcg")
FAMILIES = {
    "haystack": "full ranking of the strategy's memory before packing",
    "context": "ranking of the context packed into the budget",
}
_DESCRIPTIONS = {
    "recall_any": "1 if any relevant {level} is among the top {k} ranked {level}s",
    "recall_all": "1 if every relevant {level} is among the top {k} ranked {level}s",
    "ndcg": "nDCG@{k} of the ranked {level}s, binary relevance (LongMemEval's formula)",
}
_NAME = re.compile(r"^(haystack|context)_(session|turn)_(recall_any|recall_all|ndcg)@(\d+)$")


def metric_name(family: str, level: str, measure: str, k: int) -> str:
    """``haystack_session_recall_all@5`` and the like."""
    return f"{family}_{level}_{measure}@{k}"


def metric_names(family: str, ks: Sequence[int] = RANK_KS) -> list[str]:
    """Every metric of a family, level by level, k by k, measure by measure."""
    return [metric_name(family, lv, m, k) for lv in LEVELS for k in ks for m in MEASURES]


def describe(name: str) -> str:
    """One line for a ranked metric's name (for the metric registry)."""
    found = _NAME.match(name)
    if found is None:
        raise ValueError(f"{name!r} is not a ranked retrieval metric")
    family, level, measure, k = found.groups()
    return f"{_DESCRIPTIONS[measure].format(level=level, k=k)} ({FAMILIES[family]})"


def parse(name: str) -> tuple[str, str, str, int] | None:
    """(family, level, measure, k) of a ranked metric's name, else None."""
    found = _NAME.match(name)
    if found is None:
        return None
    family, level, measure, k = found.groups()
    return family, level, measure, int(k)


# -- the measures -------------------------------------------------------------------
def recall_any_at_k(ranking: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if any relevant id is in ``ranking[:k]``, else 0.0. No relevant ids: NaN.

    Formula: 1[|top_k ∩ R| > 0] (upstream ``recall_any@k``)."""
    if not relevant:
        return math.nan
    rel = set(relevant)
    return float(any(x in rel for x in ranking[:k]))


def recall_all_at_k(ranking: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if every relevant id is in ``ranking[:k]``, else 0.0. No relevant ids: NaN.

    Formula: 1[R ⊆ top_k] (upstream ``recall_all@k``)."""
    if not relevant:
        return math.nan
    top = set(ranking[:k])
    return float(all(x in top for x in set(relevant)))


def dcg(relevances: Sequence[float]) -> float:
    """Upstream's DCG: rel_1 + sum_{r=2..n} rel_r / log2(r) (ranks 1 and 2 count fully).
    Empty: 0.0."""
    return sum(r if i == 0 else r / math.log2(i + 1) for i, r in enumerate(relevances))


def ndcg_at_k(
    ranking: Sequence[str], relevant: Collection[str], k: int, n_relevant: int | None = None
) -> float:
    """nDCG@k with binary relevance, as upstream computes it. No relevant ids: NaN.

    Formula: DCG(rel of ``ranking[:k]``) / DCG(min(n_relevant, k) ones), where
    ``n_relevant`` is how many relevant ids the corpus holds (default |R|). No
    relevant id in the corpus (``n_relevant`` 0): 0.0, as upstream.
    """
    if not relevant:
        return math.nan
    rel = set(relevant)
    ideal = dcg([1.0] * min(len(rel) if n_relevant is None else n_relevant, k))
    if ideal == 0:
        return 0.0
    return dcg([1.0 if x in rel else 0.0 for x in ranking[:k]]) / ideal


def effective_k(sessions: Sequence[str], k: int) -> int:
    """How many ranked turns the session-level measures at k read: k, widened until
    the top turns cover k distinct sessions (or the ranking ends), as upstream's
    turn-to-session evaluation does. ``sessions``: each ranked turn's session."""
    seen: set[str] = set()
    for i, s in enumerate(sessions):
        seen.add(s)
        if len(seen) >= k:
            return max(k, i + 1)
    return max(k, len(sessions) + 1)


NOT_EVIDENCE = "#not-evidence"
"""Suffix of the pseudo-session of an evidence session's other turns (see
``pseudo_session``)."""


def pseudo_session(
    turn: str, session: str, evidence: Collection[str], evidence_sessions: Collection[str]
) -> str:
    """The session a turn counts for in upstream's turn-to-session evaluation.

    Upstream names the turns of an evidence session that are not evidence
    themselves apart (``answer_...`` becomes ``noans_...``), so they count as
    another session: a turn ranks its evidence session only if it is an evidence
    turn. Every other turn counts for its own session."""
    if session in evidence_sessions and turn not in evidence:
        return session + NOT_EVIDENCE
    return session


def session_measures(
    turns: Sequence[str],
    session_of: Callable[[str], str | None],
    evidence: Collection[str],
    ks: Sequence[int] = RANK_KS,
    n_evidence: int | None = None,
) -> dict[int, tuple[float, float, float]]:
    """(recall_any, recall_all, ndcg) at session level for each k, from a turn
    ranking, as upstream's ``evaluate_retrieval_turn2session`` computes them. No
    evidence turn with a session: NaNs.

    The relevant sessions are the sessions of the evidence turns. Each ranked turn
    counts for its ``pseudo_session``; the cut-off is widened from k until the top
    turns cover k distinct (pseudo-)sessions (``effective_k``, e turns); then

    - recall_any = 1 if one of the top e turns counts for a relevant session,
    - recall_all = 1 if every relevant session is counted by one of them,
    - ndcg = DCG(rel of the top e turns) / DCG(min(n_evidence, e) ones), a turn
      relevant when it counts for a relevant session (so: when it is evidence);
      ``n_evidence`` is how many evidence turns the corpus holds (default: all).

    Args:
        turns: the ranked turn ids, best first.
        session_of: a turn's session (None: it has none, and is skipped).
        evidence: the evidence turns.
        ks: the cut-offs.
        n_evidence: evidence turns in the corpus (for the ideal DCG).
    """
    rel = {s for s in map(session_of, evidence) if s is not None}
    if not rel:
        return {k: (math.nan, math.nan, math.nan) for k in ks}
    n = len(set(evidence)) if n_evidence is None else n_evidence
    # One pass over the head of the ranking, then each k in O(log n): the first rank
    # of each relevant session, the discounted gain so far, the distinct sessions
    # so far. The pass stops once the largest k is covered, or once every evidence
    # turn was seen (nothing after it changes a measure: a later cut-off e only
    # meets irrelevant turns, and min(n, e) is n already).
    k_max = max(ks, default=0)
    first: dict[str, int] = {}
    gains = [0.0]
    distinct: list[int] = []
    seen: set[str] = set()
    found = 0
    for t in turns:
        s = session_of(t)
        if s is None:
            continue
        s = pseudo_session(t, s, evidence, rel)
        i = len(distinct)
        if s in rel:
            first.setdefault(s, i)
            found += 1
            gains.append(gains[-1] + (1.0 if i == 0 else 1.0 / math.log2(i + 1)))
        else:
            gains.append(gains[-1])
        seen.add(s)
        distinct.append(len(seen))
        if (len(seen) >= k_max and i + 1 >= k_max) or found >= n:
            break
    out: dict[int, tuple[float, float, float]] = {}
    for k in ks:
        e = max(k, bisect.bisect_left(distinct, k) + 1)  # past the end: the whole ranking
        recall_any = float(any(i < e for i in first.values()))
        recall_all = float(len(first) == len(rel) and max(first.values()) < e)
        ideal = dcg([1.0] * min(n, e))
        out[k] = (recall_any, recall_all, gains[min(e, len(distinct))] / ideal if ideal else 0.0)
    return out


# -- from ranked items to ranked turns and sessions ---------------------------------
def ranked_turns(provenances: Iterable[Sequence[str]], known: Collection[str]) -> list[str]:
    """Turn ids in rank order: each ranked item's provenance in order (a summary ranks
    all the turns it folded at its own rank), ids not in ``known`` dropped, each turn
    kept at its first (best) rank."""
    out: dict[str, None] = {}
    for provenance in provenances:
        for pid in provenance:
            if pid in known:
                out.setdefault(pid)
    return list(out)


def ranked_sessions(turns: Sequence[str], session_of: Callable[[str], str | None]) -> list[str]:
    """Session ids in rank order: each ranked turn's session at its first rank
    (turns without a session are skipped)."""
    out: dict[str, None] = {}
    for t in turns:
        s = session_of(t)
        if s is not None:
            out.setdefault(s)
    return list(out)


def measures(
    family: str,
    turns: Sequence[str],
    session_of: Callable[[str], str | None],
    evidence: Collection[str],
    evidence_sessions: Collection[str],
    corpus: Sequence[str],
    ks: Sequence[int] = RANK_KS,
) -> dict[str, float]:
    """Every ``<family>_{turn,session}_{recall_any,recall_all,ndcg}@k`` of one probe.

    Turn level: the evidence turns are relevant. Session level: from the turn
    ranking as upstream (``session_measures``); a probe with evidence sessions
    but no evidence turns is measured on its sessions ranked at their best turn
    (upstream's session-granularity evaluation). Measures that have nothing
    relevant are left out.

    Args:
        family: ``haystack`` or ``context``.
        turns: the ranked turn ids (``ranked_turns``), best first.
        session_of: a turn's session (None: it has none).
        evidence: the relevant turns.
        evidence_sessions: the relevant sessions when there are no evidence turns.
        corpus: the haystack's turn ids (for the ideal DCG).
        ks: the cut-offs.
    """
    out: dict[str, float] = {}
    n_evidence = len(set(evidence) & set(corpus))
    with_session = any(session_of(t) is not None for t in evidence)
    by_session = (
        session_measures(turns, session_of, evidence, ks, n_evidence) if with_session else {}
    )
    for k in ks:
        if evidence:
            out[metric_name(family, "turn", "recall_any", k)] = recall_any_at_k(turns, evidence, k)
            out[metric_name(family, "turn", "recall_all", k)] = recall_all_at_k(turns, evidence, k)
            out[metric_name(family, "turn", "ndcg", k)] = ndcg_at_k(turns, evidence, k, n_evidence)
        if with_session:
            values = by_session[k]
        elif evidence_sessions and not evidence:
            sessions = ranked_sessions(turns, session_of)
            values = (
                recall_any_at_k(sessions, evidence_sessions, k),
                recall_all_at_k(sessions, evidence_sessions, k),
                ndcg_at_k(sessions, evidence_sessions, k),
            )
        else:
            continue
        for measure, value in zip(MEASURES, values, strict=True):
            out[metric_name(family, "session", measure, k)] = value
    return out


def uninformative(name: str, haystack_turns: float, haystack_sessions: float) -> bool:
    """Whether a ranked metric's value for a probe says nothing about ranking: k is at
    least the number of sessions (session level) or turns (turn level) in the
    probe's haystack, so the top k holds all of it. Other metrics: False."""
    parsed = parse(name)
    if parsed is None:
        return False
    _, level, _, k = parsed
    size = haystack_sessions if level == "session" else haystack_turns
    return bool(size == size and k >= size)  # NaN size: not known, not flagged


__all__ = [
    "FAMILIES",
    "LEVELS",
    "MEASURES",
    "RANK_KS",
    "dcg",
    "describe",
    "effective_k",
    "measures",
    "metric_name",
    "metric_names",
    "ndcg_at_k",
    "parse",
    "ranked_sessions",
    "ranked_turns",
    "recall_all_at_k",
    "recall_any_at_k",
    "session_measures",
    "uninformative",
]
