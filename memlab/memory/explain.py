"""``MemoryLayer.explain``: why each record of a recall was chosen, as a table."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memlab.errors import InputError
from memlab.memory.checks import check_number
from memlab.memory.layer_types import RecallResult, not_a_query
from memlab.memory.query import RecallQuery

if TYPE_CHECKING:
    from memlab.memory.layer import MemoryLayer


def explain(layer: MemoryLayer, result: RecallResult | RecallQuery, *, width: int = 60) -> str:
    """``MemoryLayer.explain(result, width=...)`` for ``layer`` (the table is described
    there)."""
    check_number(width, "width", lo=10, integer=True)
    if isinstance(result, RecallQuery):
        result = layer.recall(result, touch=False)
    elif not isinstance(result, RecallResult):
        raise InputError(not_a_query("explain", result))
    q = result.query
    signals = [("similarity", "sim"), ("lexical", "lex"), ("recency", "rec"), ("time", "time"),
               ("salience", "sal"), ("usage", "use")]  # fmt: skip
    shown = [
        (name, label)
        for name, label in signals
        if any(name in h.components for h in result.hits)
        or name in ("similarity", "recency", "salience", "usage")
    ]
    rank_of = {h.record.id: h.rank for h in result.hits}
    where = f"scope={q.scope!r}" if isinstance(q.scope, str) else f"scopes={list(q.scopes)!r}"
    if q.split is not None:
        where += " split=" + "/".join(f"{x:.2f}" for x in q.split)
    lines = [
        f"recall {where} budget={q.token_budget} tokens "
        f"considered={result.considered} chosen={len(result.hits)} used={result.tokens} tokens",
        f"query: {q.text!r}",
    ]
    if result.search_text and result.search_text != q.text:
        lines.append(f"rewritten to: {result.search_text!r}")
    if q.as_of is not None or result.superseded != "exclude":
        at = f", as of {iso(q.as_of)}" if q.as_of is not None else ""
        lines.append(f"superseded records: {result.superseded}{at}")
    if result.window is not None:
        lines.append(
            f"time: {result.window.expression!r} -> {iso(result.window.start)} .. "
            f"{iso(result.window.end)} (replaces recency for this query)"
        )
    header = f"{'#':>2} {'score':>6} " + " ".join(f"{label:>6}" for _, label in shown)
    lines.append(header + f" {'tok':>4} {'kind':<10} {'source':<6} {'why':<10} content")
    for h in result.hits:
        if h.neighbor_of is not None:
            why = f"next to #{rank_of.get(h.neighbor_of, '?')}"
        else:
            why = max(h.contributions, key=lambda k: h.contributions[k])
        # what the recall gave (its stale claims cut, as in the prompt; the entries
        # below say what was cut): the whole content showed a stale value as chosen
        text = _one_line(h.text)
        if len(text) > width:
            text = text[: width - 1] + "…"
        values = " ".join(f"{h.components.get(name, 0.0):6.3f}" for name, _ in shown)
        lines.append(
            f"{h.rank:>2} {h.score:6.3f} {values} {h.record.tokens:>4} "
            f"{h.record.kind.value:<10} {h.record.source.value:<6} {why:<10} {text}"
        )
        for entry in h.record.superseded:
            if q.as_of is None or entry.at <= q.as_of:
                lines.append(f"   {_one_line(entry.explain())}")
    for old_id, newer_id, why in result.guarded:
        lines.append(
            _one_line(f"left out {old_id}: the newer {newer_id} states it otherwise ({why})")
        )
    w = layer.ranker.weights.as_dict()
    lines.append(
        "weights: "
        + ", ".join(
            f"{k}={v:g}"
            for k, v in w.items()
            if v or k in ("similarity", "recency", "salience", "usage")
        )
        + (f" (fusion {layer.ranker.fusion})" if layer.ranker.fusion != "weighted" else "")
        + " (score = sum of weight x signal; 'why' is the largest term)"
    )
    return "\n".join(lines)


def _one_line(text: str) -> str:
    """``text`` on one line of the table: every line break and control character
    (``\\r``, U+2028, ESC, ...) a space, invisible format characters (bidirectional
    overrides, zero-width spaces) removed, so no record's text can start a row of
    its own or redraw the terminal."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        " " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch
        for ch in text
        if unicodedata.category(ch) != "Cf"
    )


def iso(ts: float) -> str:
    """Epoch seconds as an ISO-8601 UTC string (records and queries hold times
    within years 1..9999, ``checks.check_time``; anything else is shown as the
    number, so a prompt or an explanation never fails on a time)."""
    try:
        d = datetime.fromtimestamp(ts, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ts!r} (epoch seconds)"
    # the year by hand: strftime's %Y does not pad years before 1000 on every platform
    return f"{d.year:04d}-" + d.strftime("%m-%dT%H:%M:%SZ")
