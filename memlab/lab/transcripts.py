"""Transcript format v1: load, validate and save.

A transcript is one UTF-8 JSON file (see README, "Transcript format v1")::

    {"format": "memlab.transcript/1", "id": ..., "meta": {...}, "facts": {...},
     "turns": [{"id", "ts", "scope", "role", "source", "text",
                "mentions"?, "salience_hint"?, "probe"?, "session"?, "meta"?}]}

Validation reports every problem in a file, each naming the file, the turn id
and the field. Facts are tracked per scope: the value in force for a probe is
the latest mention of that fact, in the probe's scope, before the probe.
"""

from __future__ import annotations

import bisect
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memlab.errors import InputError, TranscriptError
from memlab.memory.checks import MAX_EPOCH, MIN_EPOCH, check_unicode

FORMAT = "memlab.transcript/1"
ROLES = ("user", "agent", "tool")
SOURCES = ("user", "agent", "tool", "web")
TURN_KEYS = {
    "id", "ts", "scope", "role", "source", "text", "mentions", "salience_hint",
    "probe", "session", "meta",
}  # fmt: skip
PROBE_KEYS = {
    "needs", "evidence", "answer", "category", "evidence_sessions", "scored", "detached", "meta",
}  # fmt: skip
TOP_KEYS = {"format", "id", "meta", "facts", "turns"}
MAX_REPORTED = 25


@dataclass(frozen=True)
class Mention:
    """A fact value a turn states."""

    fact: str
    value: str


@dataclass(frozen=True)
class Probe:
    """A turn that needs memory, with its ground truth.

    Attributes:
        needs: fact ids whose value in force must be in the context.
        evidence: ids of earlier turns that hold the answer.
        answer: the answer text.
        category: a label for per-group breakdowns (e.g. LoCoMo's "multi-hop").
        evidence_sessions: session ids that hold the answer (session-level metrics).
        scored: False keeps the probe in the tables but out of recall averages
            (adversarial / abstention questions).
        detached: True for a question asked *about* the transcript rather than in
            it (a benchmark's questions after the conversation): strategies build a
            context for it but never observe it, so one question never becomes
            memory for the next.
        meta: free-form.
    """

    needs: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    answer: str | None = None
    category: str | None = None
    evidence_sessions: tuple[str, ...] = ()
    scored: bool = True
    detached: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Turn:
    """One message. ``time`` is ``ts`` in epoch seconds."""

    id: str
    ts: str
    time: float
    scope: str
    role: str
    source: str
    text: str
    mentions: tuple[Mention, ...] = ()
    salience_hint: float | None = None
    probe: Probe | None = None
    session: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Transcript:
    """A validated transcript. Build one with ``Transcript.create`` or ``load``."""

    id: str
    turns: list[Turn]
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def __post_init__(self) -> None:
        self.index = {t.id: i for i, t in enumerate(self.turns)}
        self._fact_states: dict[tuple[int, str], dict[str, FactState]] = {}
        self._sessions: dict[str, str | None] | None = None
        self._observed: dict[str, tuple[list[int], list[str]]] = {}

    @property
    def sessions(self) -> dict[str, str | None]:
        """Turn id -> the turn's session id (None when it has none)."""
        if self._sessions is None:
            self._sessions = {t.id: t.session for t in self.turns}
        return self._sessions

    def observed(self, before: int, scope: str) -> list[str]:
        """Ids of the turns of ``scope`` that a strategy has observed before turn index
        ``before``, oldest first (detached probes are never observed): the haystack
        a probe at ``before`` is asked against."""
        found = self._observed.get(scope)
        if found is None:
            kept = [
                (i, t.id)
                for i, t in enumerate(self.turns)
                if t.scope == scope and not (t.probe is not None and t.probe.detached)
            ]
            found = self._observed[scope] = ([i for i, _ in kept], [tid for _, tid in kept])
        indices, ids = found
        return ids[: bisect.bisect_left(indices, before)]

    @property
    def probes(self) -> list[Turn]:
        return [t for t in self.turns if t.probe is not None]

    @property
    def scopes(self) -> list[str]:
        return sorted({t.scope for t in self.turns})

    def fact_state(self, before: int, scope: str) -> dict[str, FactState]:
        """For each fact mentioned in ``scope`` before turn index ``before``: the value
        in force (the latest mention) and the stale values (every earlier one).

        Cached per (before, scope), since every strategy's replay scores the same
        probes: the result is shared, do not modify it."""
        cached = self._fact_states.get((before, scope))
        if cached is None:
            cached = self._fact_states[(before, scope)] = self._compute_fact_state(before, scope)
        return cached

    def _compute_fact_state(self, before: int, scope: str) -> dict[str, FactState]:
        state: dict[str, FactState] = {}
        for t in self.turns[:before]:
            if t.scope != scope:
                continue
            for m in t.mentions:
                s = state.setdefault(m.fact, FactState(m.fact))
                if s.current is not None and s.current != m.value:
                    s.stale.append(s.current)
                s.current = m.value
                s.turns.append(t.id)
        for s in state.values():
            s.stale = [v for v in dict.fromkeys(s.stale) if v != s.current]
        return state

    @classmethod
    def from_dict(cls, data: Any, source: str = "<memory>") -> Transcript:
        """Validate a parsed JSON document and build a Transcript.

        Raises:
            TranscriptError: listing every problem, each with the turn id and field.
        """
        errors = _Errors(source)
        transcript = _build(data, errors)
        errors.raise_if_any()
        assert transcript is not None
        return transcript

    def to_dict(self) -> dict[str, Any]:
        """The transcript as format-v1 JSON data (optional fields only when set)."""
        out: dict[str, Any] = {"format": FORMAT, "id": self.id}
        if self.meta:
            out["meta"] = self.meta
        if self.facts:
            out["facts"] = self.facts
        out["turns"] = [_turn_to_dict(t) for t in self.turns]
        return out


@dataclass
class FactState:
    fact: str
    current: str | None = None
    stale: list[str] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)


def parse_ts(value: Any) -> float:
    """ISO-8601 with a timezone (``2026-06-01T14:02:00Z``) -> epoch seconds."""
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 string, got {type(value).__name__}")
    dt = datetime.fromisoformat(value)
    if dt.tzinfo is None:
        raise ValueError(f"{value!r} has no timezone; add 'Z' for UTC")
    return dt.timestamp()


def format_ts(epoch: float) -> str:
    """Epoch seconds -> ``YYYY-MM-DDTHH:MM:SSZ``."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Errors:
    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[str] = []

    def add(self, where: str, field_name: str, problem: str) -> None:
        self.items.append(f"{where}, field '{field_name}': {problem}")

    def raise_if_any(self) -> None:
        if not self.items:
            return
        shown = self.items[:MAX_REPORTED]
        more = len(self.items) - len(shown)
        lines = "\n".join(f"  - {e}" for e in shown)
        tail = f"\n  ... and {more} more" if more else ""
        raise TranscriptError(
            f"{self.source}: invalid transcript ({len(self.items)} problem"
            f"{'s' if len(self.items) != 1 else ''}):\n{lines}{tail}"
        )


def _lone_surrogate(text: str) -> int | None:
    """Where ``text`` holds a lone surrogate (not valid unicode), or None."""
    try:
        check_unicode(text, "text")
    except InputError:
        return next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff")
    return None


def _bad_unicode(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """``(field, problem)`` for every string (key or value) under ``value`` that is
    not valid unicode: JSON can escape a lone surrogate (``"\\ud800"``), which loads
    but cannot be written as UTF-8, so the run's fingerprint and tables would fail
    after the replay."""
    fix = "write the character itself or a valid surrogate pair"
    if isinstance(value, str):
        at = _lone_surrogate(value)
        if at is not None:
            yield path, f"not valid unicode (a lone surrogate escape at character {at}); {fix}"
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str) and _lone_surrogate(k) is not None:
                yield path or "(document)", f"the key {k!r} is not valid unicode; {fix}"
                continue
            yield from _bad_unicode(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _bad_unicode(v, f"{path}[{i}]")


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def _build(data: Any, errors: _Errors) -> Transcript | None:
    if not isinstance(data, dict):
        errors.add("top level", "(document)", "must be a JSON object")
        return None
    for key in sorted(set(data) - TOP_KEYS):
        errors.add("top level", key, f"unknown key; allowed: {sorted(TOP_KEYS)}")
    if data.get("format") != FORMAT:
        errors.add("top level", "format", f"must be {FORMAT!r}, got {data.get('format')!r}")
    tid = data.get("id")
    if not isinstance(tid, str) or not tid:
        errors.add("top level", "id", "must be a non-empty string")
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        errors.add("top level", "meta", "must be an object")
        meta = {}
    facts = data.get("facts", {})
    if not isinstance(facts, dict) or not all(isinstance(v, dict) for v in facts.values()):
        errors.add("top level", "facts", "must map fact ids to objects")
        facts = {}
    for key in sorted(set(data) & (TOP_KEYS - {"turns"})):
        for name, problem in _bad_unicode(data[key], key):
            errors.add("top level", name, problem)
    raw_turns = data.get("turns")
    if not isinstance(raw_turns, list) or not raw_turns:
        errors.add("top level", "turns", "must be a non-empty list")
        return None
    turns: list[Turn] = []
    seen: dict[str, int] = {}
    last_time = -math.inf
    for i, raw in enumerate(raw_turns):
        turn = _build_turn(raw, i, facts, seen, errors)
        if turn is None:
            continue
        if turn.time < last_time:
            errors.add(
                f"turn {turn.id!r}", "ts",
                f"{turn.ts} is earlier than the turn before it; turns must be in time order",
            )  # fmt: skip
        last_time = max(last_time, turn.time)
        turns.append(turn)
    _check_session_layers(turns, errors)
    if errors.items:
        return None
    return Transcript(id=tid, turns=turns, facts=facts, meta=meta)  # type: ignore[arg-type]


def session_scope(scope: str, session: str) -> str:
    """The scope of one session's layer: ``<scope>:<session>``.

    Layered strategies remember a session's episodes there; the ``leaks`` metric
    counts an item from it as the probe's own when the probe is in that session.
    A transcript where this names another scope, or two sessions' layers, is
    refused (``_check_session_layers``).
    """
    return f"{scope}:{session}"


def _check_session_layers(turns: list[Turn], errors: _Errors) -> None:
    """Refuse a transcript where a session's layer is also a turn's scope or
    another session's layer: scope ``alice:s1`` and scope ``alice`` in session
    ``s1`` (or scope ``alice`` in session ``support:s1`` and scope ``alice:support``
    in session ``s1``) would share one store scope in a layered strategy, which
    then recalled the other scope's records as the session's own, and the
    ``leaks`` metric could not tell them apart."""
    scopes: dict[str, str] = {}  # scope -> the first turn of it
    for t in turns:
        scopes.setdefault(t.scope, t.id)
    layers: dict[str, tuple[str, str, str]] = {}  # layer -> (scope, session, first turn)
    for t in turns:
        if t.session is None:
            continue
        layer = session_scope(t.scope, t.session)
        first = layers.setdefault(layer, (t.scope, t.session, t.id))
        if first[:2] != (t.scope, t.session):
            errors.add(
                f"turn {t.id!r}", "session",
                f"scope {t.scope!r} in session {t.session!r} has the session layer "
                f"{layer!r}, which is also that of scope {first[0]!r} in session "
                f"{first[1]!r} (turn {first[2]!r}); rename a scope or a session",
            )  # fmt: skip
        elif layer in scopes:
            errors.add(
                f"turn {t.id!r}", "session",
                f"scope {t.scope!r} in session {t.session!r} has the session layer "
                f"{layer!r}, which is also the scope of turn {scopes[layer]!r}; rename "
                "that scope or the session",
            )  # fmt: skip
            scopes.pop(layer)  # reported once


def _build_turn(
    raw: Any, i: int, facts: dict[str, Any], seen: dict[str, int], errors: _Errors
) -> Turn | None:
    if not isinstance(raw, dict):
        errors.add(f"turn #{i}", "(turn)", "must be a JSON object")
        return None
    tid = raw.get("id")
    where = f"turn {tid!r}" if isinstance(tid, str) and tid else f"turn #{i}"
    n_before = len(errors.items)
    for name, problem in _bad_unicode(raw, ""):
        errors.add(where, name, problem)
    for key in sorted(set(raw) - TURN_KEYS):
        errors.add(where, key, f"unknown key; allowed: {sorted(TURN_KEYS)}")
    if not isinstance(tid, str) or not tid:
        errors.add(where, "id", "must be a non-empty string")
    elif tid in seen:
        errors.add(where, "id", f"duplicate turn id (also turn #{seen[tid]})")
    else:
        seen[tid] = i  # even if the turn is bad, later probes may cite it
    try:
        time = parse_ts(raw.get("ts"))
    except (ValueError, TypeError) as exc:
        errors.add(where, "ts", f"not an ISO-8601 timestamp with timezone ({exc})")
        time = 0.0
    if not MIN_EPOCH <= time <= MAX_EPOCH:
        # An offset can carry a valid local time past year 1 or 9999 in UTC, where
        # the memory layer refuses the turn's time mid-replay, naming no turn.
        errors.add(where, "ts", f"{raw['ts']} is outside the years 1..9999 in UTC")
        time = 0.0
    scope = raw.get("scope")
    if not isinstance(scope, str) or not scope:
        errors.add(where, "scope", "must be a non-empty string")
    role = raw.get("role")
    if role not in ROLES:
        errors.add(where, "role", f"must be one of {list(ROLES)}, got {role!r}")
    source = raw.get("source", role)
    if source not in SOURCES:
        errors.add(where, "source", f"must be one of {list(SOURCES)}, got {source!r}")
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        errors.add(where, "text", "must be a non-empty string")
    mentions: list[Mention] = []
    raw_mentions = raw.get("mentions", [])
    if not isinstance(raw_mentions, list):
        errors.add(where, "mentions", "must be a list")
        raw_mentions = []
    for j, m in enumerate(raw_mentions):
        if not isinstance(m, dict) or set(m) != {"fact", "value"}:
            errors.add(where, f"mentions[{j}]", "must be an object with exactly 'fact' and 'value'")
            continue
        if not isinstance(m["fact"], str) or (facts and m["fact"] not in facts):
            errors.add(where, f"mentions[{j}].fact", f"{m['fact']!r} is not a declared fact")
            continue
        if not isinstance(m["value"], str) or not m["value"].strip():
            errors.add(where, f"mentions[{j}].value", "must be a non-empty string")
            continue
        mentions.append(Mention(m["fact"], m["value"]))
    hint = raw.get("salience_hint")
    if hint is not None and (
        isinstance(hint, bool) or not isinstance(hint, int | float) or not 0.0 <= hint <= 1.0
    ):
        errors.add(where, "salience_hint", f"must be a number in 0..1, got {hint!r}")
    session = raw.get("session")
    if session is not None and (not isinstance(session, str) or not session):
        errors.add(where, "session", "must be a non-empty string")
    meta = raw.get("meta", {})
    if not isinstance(meta, dict):
        errors.add(where, "meta", "must be an object")
    probe = _build_probe(raw.get("probe"), where, facts, seen, errors) if "probe" in raw else None
    if len(errors.items) > n_before:
        return None
    return Turn(
        id=str(tid),
        ts=raw["ts"],
        time=time,
        scope=str(scope),
        role=str(role),
        source=str(source),
        text=str(text),
        mentions=tuple(mentions),
        salience_hint=None if hint is None else float(hint),
        probe=probe,
        session=session,
        meta=meta,
    )


def _build_probe(
    raw: Any, where: str, facts: dict[str, Any], seen: dict[str, int], errors: _Errors
) -> Probe | None:
    if not isinstance(raw, dict):
        errors.add(where, "probe", "must be an object")
        return None
    for key in sorted(set(raw) - PROBE_KEYS):
        errors.add(where, f"probe.{key}", f"unknown key; allowed: {sorted(PROBE_KEYS)}")
    if not any(k in raw for k in ("needs", "evidence", "answer")):
        errors.add(where, "probe", "needs at least one of 'needs', 'evidence', 'answer'")
    needs = raw.get("needs", [])
    if not _str_list(needs):
        errors.add(where, "probe.needs", "must be a list of fact ids")
        needs = []
    for f in needs:
        if facts and f not in facts:
            errors.add(where, "probe.needs", f"{f!r} is not a declared fact")
    evidence = raw.get("evidence", [])
    if not _str_list(evidence):
        errors.add(where, "probe.evidence", "must be a list of turn ids")
        evidence = []
    for e in evidence:
        if e not in seen:
            errors.add(where, "probe.evidence", f"{e!r} is not an earlier turn of this transcript")
    answer = raw.get("answer")
    if answer is not None and not isinstance(answer, str):
        errors.add(where, "probe.answer", f"must be a string, got {type(answer).__name__}")
    category = raw.get("category")
    if category is not None and not isinstance(category, str):
        errors.add(where, "probe.category", "must be a string")
    ev_sessions = raw.get("evidence_sessions", [])
    if not _str_list(ev_sessions):
        errors.add(where, "probe.evidence_sessions", "must be a list of session ids")
        ev_sessions = []
    scored = raw.get("scored", True)
    if not isinstance(scored, bool):
        errors.add(where, "probe.scored", "must be true or false")
    detached = raw.get("detached", False)
    if not isinstance(detached, bool):
        errors.add(where, "probe.detached", "must be true or false")
    meta = raw.get("meta", {})
    if not isinstance(meta, dict):
        errors.add(where, "probe.meta", "must be an object")
    return Probe(
        needs=tuple(needs),
        evidence=tuple(evidence),
        answer=answer,
        category=category,
        evidence_sessions=tuple(ev_sessions),
        scored=bool(scored),
        detached=bool(detached),
        meta=meta if isinstance(meta, dict) else {},
    )


def _turn_to_dict(t: Turn) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": t.id, "ts": t.ts, "scope": t.scope, "role": t.role,
        "source": t.source, "text": t.text,
    }  # fmt: skip
    if t.session is not None:
        out["session"] = t.session
    if t.mentions:
        out["mentions"] = [{"fact": m.fact, "value": m.value} for m in t.mentions]
    if t.salience_hint is not None:
        out["salience_hint"] = t.salience_hint
    if t.probe is not None:
        p = t.probe
        probe: dict[str, Any] = {}
        if p.needs:
            probe["needs"] = list(p.needs)
        if p.evidence:
            probe["evidence"] = list(p.evidence)
        if p.answer is not None:
            probe["answer"] = p.answer
        if p.category is not None:
            probe["category"] = p.category
        if p.evidence_sessions:
            probe["evidence_sessions"] = list(p.evidence_sessions)
        if not p.scored:
            probe["scored"] = False
        if p.detached:
            probe["detached"] = True
        if p.meta:
            probe["meta"] = dict(p.meta)
        out["probe"] = probe
    if t.meta:
        out["meta"] = dict(t.meta)
    return out


def dumps(transcript: Transcript) -> str:
    """Canonical JSON text of a transcript (stable bytes for the same content)."""
    return json.dumps(transcript.to_dict(), ensure_ascii=False, indent=1) + "\n"


class _NonJsonConstant(Exception):
    """NaN, Infinity or -Infinity in a transcript file (raised by the decoder)."""


def _refuse_constant(name: str) -> Any:
    # json.loads reads these non-standard words as floats by default: a NaN in meta
    # loaded unnoticed, and one in a checked field was reported as a float ("got
    # nan") rather than as the word the file holds.
    raise _NonJsonConstant(name)


def load(path: str | os.PathLike[str]) -> Transcript:
    """Load and validate one transcript file.

    Raises:
        TranscriptError: naming the file, and for each problem the turn id and field
            (also for a file that is not UTF-8, not JSON, nests too deeply, holds
            an integer too long to read, or holds NaN or Infinity).
    """
    p = Path(path)
    try:
        # utf-8-sig: a byte-order mark (Notepad, PowerShell 5) is UTF-8 too, and the
        # benchmark readers accept it; json.loads refused it as "Unexpected UTF-8 BOM".
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise TranscriptError(f"{p}: no such transcript file") from None
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{p}: not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise TranscriptError(f"{p}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except _NonJsonConstant as exc:
        raise TranscriptError(
            f"{p}: holds {exc.args[0]}, which is not JSON (Python's json.dump writes it "
            "for a float NaN or infinity); write null or a finite number there"
        ) from None
    except json.JSONDecodeError as exc:
        raise TranscriptError(
            f"{p}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        # The C decoder recurses per nesting level; no transcript nests this deep.
        raise TranscriptError(
            f"{p}: nests arrays or objects too deeply to read; is this a transcript?"
        ) from None
    except ValueError as exc:
        # Not a syntax error (JSONDecodeError, above) but a value Python refuses:
        # an integer longer than 4300 digits.
        raise TranscriptError(f"{p}: holds a value that cannot be read: {exc}") from None
    t = Transcript.from_dict(data, str(p))
    t.path = p
    return t


def iter_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The ``*.json`` files of a folder, sorted by name."""
    p = Path(folder)
    if not p.is_dir():
        raise TranscriptError(f"{p}: not a folder of transcripts")
    return sorted(x for x in p.iterdir() if x.suffix == ".json" and x.is_file())


def load_dir(folder: str | os.PathLike[str]) -> list[Transcript]:
    """Load every ``*.json`` transcript of a folder.

    Raises:
        TranscriptError: listing every bad file (not just the first) with its problems.
    """
    files = iter_files(folder)
    if not files:
        raise TranscriptError(f"{folder}: holds no *.json transcripts")
    good, bad = [], []
    for f in files:
        try:
            good.append(load(f))
        except TranscriptError as exc:
            bad.append(str(exc))
    if bad:
        raise TranscriptError(
            f"{len(bad)} of {len(files)} transcripts in {folder} are invalid:\n" + "\n".join(bad)
        )
    ids: dict[str, Path] = {}
    for t in good:
        if t.id in ids:
            raise TranscriptError(f"{t.path} and {ids[t.id]} have the same transcript id {t.id!r}")
        ids[t.id] = t.path  # type: ignore[assignment]
    return good


def save(transcript: Transcript, path: str | os.PathLike[str]) -> Path:
    """Write a transcript atomically (temp file + rename) in canonical form, with
    the mode a new file gets under the umask.

    Raises:
        OutputError: the file or its folder cannot be written.
    """
    from memlab.lab.files import atomic_write_text

    return atomic_write_text(path, dumps(transcript), fsync=True)


def file_names(transcripts: Iterable[Transcript]) -> list[str]:
    """The file names ``save_all`` gives ``transcripts``, in their order: ``<id>.json``,
    where characters that are unsafe in a file name become ``_``, an id too long for
    a file name keeps its start and a hash, and ids that then collide get ``-2``,
    ``-3``..."""
    from memlab.lab.files import short_stem

    out: list[str] = []
    names: set[str] = set()
    for t in transcripts:
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in t.id) or "transcript"
        stem = short_stem(stem, t.id)  # an id too long for a file name: its start and a hash
        name, n = stem, 2
        while name in names:  # ids that differ only in unsafe characters
            name, n = f"{stem}-{n}", n + 1
        names.add(name)
        out.append(f"{name}.json")
    return out


def save_all(transcripts: Iterable[Transcript], folder: str | os.PathLike[str]) -> list[Path]:
    """Write each transcript to ``folder`` under its ``file_names`` name (see ``save``).
    Returns the files in the order of ``transcripts``.

    Raises:
        OutputError: a file cannot be written.
    """
    ts = list(transcripts)
    return [save(t, Path(folder) / name) for t, name in zip(ts, file_names(ts), strict=True)]


def iter_probes(transcripts: Iterable[Transcript]) -> Iterator[tuple[Transcript, int, Turn]]:
    """Every (transcript, turn index, probe turn)."""
    for t in transcripts:
        for i, turn in enumerate(t.turns):
            if turn.probe is not None:
                yield t, i, turn


def question_id(transcript: Transcript, turn: Turn) -> str:
    """A probe's question id, the key errata files use (``memlab.lab.errata``): the id
    its dataset's adapter gave it (``probe.meta.question_id``: LoCoMo's
    ``locomo_<c>_qa<i>``, LongMemEval's ``question_id``), else
    ``<transcript id>/<turn id>``."""
    meta = turn.probe.meta if turn.probe is not None else {}
    given = meta.get("question_id")
    return str(given) if given else f"{transcript.id}/{turn.id}"
