"""Where the stale values in a corrected probe's context come from.

    python -m benchmarks.stale_sources --dir /tmp/dev [--embedder minilm] [--list 20]

Replays transcripts (format v1) through the lab's ``memory`` strategy (the run
config ``memlab run`` composes, with extra ``--set KEY=VALUE`` overrides) and,
for every probe of category ``corrected``, looks at each context item that states
a stale value of a needed fact without the value in force (what ``stale_rate``
counts). Each such item gets one cause:

- ``missed:<update>``: a user statement of the stale value whose correction the
  detector did not link to it (``<update>`` is the generator's kind of the
  correcting turn: named, cued, unlike, implicit, revert, ...);
- ``span-kept``: the record is partly superseded, yet its text still carries the
  stale value (the cut span missed it);
- ``summary:detected``: a summary note that folded the stale value, although every
  correction from it to the value in force superseded some record stating the value
  it replaced (the note was not marked);
- ``summary:missed:<update>``: a summary note that folded the stale value, and some
  correction on the way to the value in force superseded nothing stating the value
  it replaced (a detector miss inside a note; in a chain A -> B -> C, C missing B
  leaves B's sentence, which names A, in force);
- ``agent``: an agent record (echo, answer) stating the stale value;
- ``restated:<act>``: a user record that states the stale value without being a
  statement of the fact (history, someone else's value, a question, ...);
- ``untrusted``: a tool or web record;
- ``other``.

Prints counts per cause for ``stale_rate`` (every stale item) and for
``stale_wins`` (the first item that states any value of the fact), and with
``--list N`` the first N items with their texts.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memlab.lab.metrics import contains, needed_facts, normalize
from memlab.lab.strategies.base import Context, ContextItem
from memlab.lab.transcripts import Transcript, Turn

CORRECTED = "corrected"


@dataclass(frozen=True)
class StaleItem:
    """One context item that states a stale value of a needed fact."""

    transcript: str
    probe: str
    fact: str
    rank: int  # position in the context (0 = first)
    wins: bool  # the first item stating any value of the fact
    cause: str
    text: str
    stale: str
    current: str
    correction: str  # the text of the turn that replaced the stale value ("" if unknown)


def _turns_by_id(transcript: Transcript) -> dict[str, tuple[int, Turn]]:
    return {t.id: (i, t) for i, t in enumerate(transcript.turns)}


def _correction_of(
    transcript: Transcript, index: int, scope: str, fact: str, stale: str
) -> Turn | None:
    """The turn (before ``index``, in ``scope``) whose mention of ``fact`` replaced ``stale``."""
    chain = value_chain(transcript, index, scope, fact)
    at = next((k for k, (v, _) in enumerate(chain) if v == stale), None)
    return chain[at + 1][1] if at is not None and at + 1 < len(chain) else None


def value_chain(
    transcript: Transcript, index: int, scope: str, fact: str
) -> list[tuple[str, Turn]]:
    """The values the user gave ``fact`` in ``scope`` before ``index``, in order, each
    with the turn that first stated it (a value said again in a row is one step)."""
    out: list[tuple[str, Turn]] = []
    for t in transcript.turns[:index]:
        if t.scope != scope or t.source != "user":
            continue
        for m in t.mentions or ():
            if m.fact == fact and (not out or out[-1][0] != m.value):
                out.append((m.value, t))
    return out


def chain_linked(
    chain: Sequence[tuple[str, Turn]], stale: str, superseded: Callable[[Turn, str], bool]
) -> bool:
    """Whether every correction from ``stale``'s last statement to the value in force
    superseded a record stating the value it replaced (``superseded(turn, value)``).
    In a chain A -> B -> C a note holding A is only "detected" when B retired A and
    C retired B: a C that missed B leaves B's sentence, which names A, in force."""
    pos = max((k for k, (v, _) in enumerate(chain) if v == stale), default=None)
    if pos is None or pos == len(chain) - 1:
        return False
    return all(superseded(chain[k + 1][1], chain[k][0]) for k in range(pos, len(chain) - 1))


def classify(
    transcript: Transcript,
    index: int,
    item: ContextItem,
    fact: str,
    stale: str,
    superseded_spans: bool,
    update: str = "",
) -> str:
    """The cause of one stale item (see the module docstring).

    ``superseded_spans``: for an episode, its record carries at least one superseded
    span; for a summary note, the correcting record superseded some record (active
    or folded) that states the stale value.
    """
    if item.source in ("tool", "web"):
        return "untrusted"
    if item.kind != "episodic":
        # a note folded the stale value: was the correction linked to anything?
        return "summary:" + ("detected" if superseded_spans else f"missed:{update or 'unknown'}")
    if item.source == "agent":
        return "agent"
    if item.source != "user":
        return "other"
    turns = _turns_by_id(transcript)
    for tid in item.provenance:
        found = turns.get(tid)
        if found is None:
            continue
        _, turn = found
        states = any(m.fact == fact and m.value == stale for m in turn.mentions or ())
        if states:
            if superseded_spans:
                return "span-kept"
            return f"missed:{update or 'unknown'}"
        return f"restated:{(turn.meta or {}).get('act', 'unknown')}"
    return "other"


def stale_items(
    transcript: Transcript,
    index: int,
    probe: Turn,
    context: Context,
    spans_of: dict[tuple[str, ...], bool] | None = None,
) -> list[StaleItem]:
    """The context items that state a stale value of one of the probe's needed facts."""
    assert probe.probe is not None
    if probe.probe.category != CORRECTED:
        return []
    spans_of = spans_of or {}
    state = transcript.fact_state(index, probe.scope)
    texts = [normalize(i.text) for i in context.items]
    out = []
    for fact in probe.probe.needs:
        s = state.get(fact)
        if s is None or s.current is None or not s.stale:
            continue
        first = next(
            (
                k
                for k, t in enumerate(texts)
                if contains(t, s.current) or any(contains(t, v) for v in s.stale)
            ),
            None,
        )
        for k, (item, t) in enumerate(zip(context.items, texts, strict=True)):
            if contains(t, s.current):
                continue
            stale = next((v for v in s.stale if contains(t, v)), None)
            if stale is None:
                continue
            cause = classify(
                transcript,
                index,
                item,
                fact,
                stale,
                spans_of.get(item.provenance, False),
                str(probe.probe.meta.get("update", "")),
            )
            correction = _correction_of(transcript, index, probe.scope, fact, stale)
            out.append(
                StaleItem(
                    transcript.id,
                    probe.id,
                    fact,
                    k,
                    k == first,
                    cause,
                    item.text,
                    stale,
                    s.current,
                    correction.text if correction else "",
                )
            )
    return out


def counts(items: Sequence[StaleItem]) -> dict[str, Counter[str]]:
    """Causes counted once per (probe, fact, cause) for ``stale_rate`` and for the
    winning item (``stale_wins``)."""
    rate: Counter[str] = Counter()
    seen = set()
    for it in items:
        k = (it.transcript, it.probe, it.fact, it.cause)
        if k not in seen:
            seen.add(k)
            rate[it.cause] += 1
    wins = Counter(it.cause for it in items if it.wins)
    return {"items": Counter(it.cause for it in items), "facts": rate, "wins": wins}


def run(overrides: Sequence[str], strategy: str = "memory") -> tuple[list[StaleItem], int]:
    """Replay with the run config ``overrides`` describe; (stale items, corrected facts)."""
    from memlab.lab.compose import compose
    from memlab.lab.config import validate
    from memlab.lab.experiment import (
        load_transcripts,
        models,
        replay_settings,
        strategy_factories,
    )
    from memlab.lab.replay import replay
    from memlab.lab.strategies.memory import MemoryStrategy

    v = validate(compose([*overrides, f"strategies=[{strategy}]"]))
    transcripts = load_transcripts(v, progress=False)
    m = models(v)
    import tempfile
    from pathlib import Path

    items: list[StaleItem] = []
    n_facts = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            factory = strategy_factories(v, Path(tmp), m.embedder, m.summarizer, m.consolidator)[
                strategy
            ]
            settings = replay_settings(v)
            for t in transcripts:
                s = factory(t)
                assert isinstance(s, MemoryStrategy)

                def hook(
                    tr: Transcript,
                    i: int,
                    turn: Turn,
                    ctx: Context,
                    row: dict[str, Any],
                    s: MemoryStrategy = s,
                ) -> None:
                    nonlocal n_facts
                    if turn.probe is None or turn.probe.category != CORRECTED:
                        return
                    n_facts += len(needed_facts(tr, i, turn))
                    by_prov = {p: rid for rid, p in s._provenance.items()}
                    spans = {}
                    for item in ctx.items:
                        rid = by_prov.get(item.provenance)
                        if rid is None:
                            continue
                        recs = s.layer.store.get_many(item.scope, [rid])
                        spans[item.provenance] = bool(
                            recs and any(e.span is not None for e in recs[0].superseded)
                        )
                    # notes: did the correction supersede a record stating the stale value?
                    state = tr.fact_state(i, turn.scope)
                    every = s.layer.store.list(turn.scope, include_archived=True)

                    def superseded(by: Turn, value: str) -> bool:
                        crid = by_prov.get((by.id,))
                        return crid is not None and any(
                            e.by == crid and contains(normalize(r.content), value)
                            for r in every
                            for e in r.superseded
                        )

                    for item in ctx.items:
                        if item.kind == "episodic":
                            continue
                        hit = False
                        for f in turn.probe.needs:
                            fs = state.get(f)
                            if fs is None:
                                continue
                            chain = value_chain(tr, i, turn.scope, f)
                            text = normalize(item.text)
                            # only the stale values this note states
                            for v in fs.stale:
                                if contains(text, v):
                                    hit = hit or chain_linked(chain, v, superseded)
                        spans[item.provenance] = hit
                    items.extend(stale_items(tr, i, turn, ctx, spans))

                try:
                    replay(t, s, settings, hook)
                finally:
                    s.close()
    finally:
        m.close()
    return items, n_facts


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stale_sources", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--dir", required=True, help="a folder of transcripts")
    ap.add_argument("--embedder", default="hash")
    ap.add_argument("--strategy", default="memory")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--list", type=int, default=0, help="print the first N stale items")
    ap.add_argument("--cause", default="", help="with --list: only this cause (prefix)")
    args = ap.parse_args(argv)
    overrides = [
        "transcripts=dir",
        f"transcripts.path={args.dir}",
        f"embedder={args.embedder}",
        *args.set,
    ]
    items, n_facts = run(overrides, args.strategy)
    c = counts(items)
    probes_stale = len({(i.transcript, i.probe, i.fact) for i in items})
    wins = sum(c["wins"].values())
    print(
        f"corrected needed facts: {n_facts}; with a stale item: {probes_stale}; stale wins: {wins}"
    )
    print(f"{'cause':28s} {'items':>6s} {'facts':>6s} {'wins':>6s}")
    for cause in sorted(c["items"], key=lambda k: -c["facts"][k]):
        print(f"{cause:28s} {c['items'][cause]:6d} {c['facts'][cause]:6d} {c['wins'][cause]:6d}")
    shown = [i for i in items if i.cause.startswith(args.cause)][: args.list]
    for i in shown:
        print(
            f"\n{i.transcript} {i.probe} {i.fact} #{i.rank}{' WINS' if i.wins else ''} "
            f"[{i.cause}] stale={i.stale!r} current={i.current!r}\n  item: {i.text[:300]!r}"
            f"\n  correction: {i.correction[:200]!r}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
