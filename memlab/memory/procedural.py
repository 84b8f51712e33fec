"""Procedural memory: how a kind of task was solved, as an ordered list of tool calls.

A procedure is a ``procedural`` record whose ``meta["procedure"]`` holds the task
it solved, its ordered steps (tool names and arguments, with values generalized
where they vary), the outcome, and how often it worked and failed. Its content is
the same, rendered for a prompt::

    Procedure for: replay the failed webhook deliveries for /v1/orders
    1. webhooks.list_failed(endpoint=<endpoint>, since=<since>)
    2. webhooks.replay(endpoint=<endpoint>)
    3. webhooks.resume(endpoint=<endpoint>)
    Outcome: ok (worked 2 of 2 times)

Three ways in:

- ``remember_procedure(layer, scope, task, steps, ...)`` (also
  ``MemoryLayer.remember_procedure``): the caller says what worked (or failed).
- ``ProcedureRecorder`` (``memlab.memory.procedure_recorder``): watches a conversation (user messages, tool calls, agent
  replies) and captures an attempt once it succeeded: the user confirmed it ("that
  did it, thanks") or, unless ``ProcedurePolicy.require_confirmation``, every tool
  call reported success. A complaint ("still failing") records a failure.
- ``parse_tool_call``: reads a tool turn written as ``name(key=value, ...) -> result``
  (the transcripts' tool lines). Only the call is read as steps; the result, which
  a tool wrote (untrusted), is only classified as success or failure and never
  copied into the procedure.

Merging: a new procedure with the same tool sequence as a stored one of the same
scope (and content similarity at least ``merge_similarity``) updates it instead of
adding a near duplicate: counts add up, argument values that differ become
placeholders (``<endpoint>``), and up to ``max_tasks`` task phrasings are kept.

Salience follows the success rate: ``min + (max - min) * (s + 1) / (s + f + 2)``
(Laplace), so a procedure that later fails ranks lower; each success or failure
is an explicit write, so the salience floor follows it too. Procedural records
never expire on a clock (``EvictionPolicy`` applies no TTL to them) and their
recency half-life is the longest (``HalfLives.procedural``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from memlab.errors import InputError
from memlab.memory.checks import check_bool, check_number, check_strings, check_text, check_time
from memlab.memory.evict import REVIEWED_KEY
from memlab.memory.models.embedder import check_embeddings
from memlab.memory.records import (
    MemoryKind,
    MemoryRecord,
    Source,
    as_source,
    check_scope,
    new_id,
)
from memlab.memory.text import words

if TYPE_CHECKING:
    from memlab.memory.layer import MemoryLayer

META_KEY = "procedure"
_NAME = re.compile(r"^[A-Za-z_][\w.\-/]*\Z")
_CALL = re.compile(r"^\s*(?P<name>[A-Za-z_][\w.\-/]*)\((?P<args>[^()]*)\)\s*(?:->\s*(?P<result>.*))?$",
                   re.S)  # fmt: skip
_OK = re.compile(
    r"^\W*(ok|okay|done|success(ful)?|succeeded|passed|healthy|resolved|completed?|"
    r"applied|updated|created|restarted|replayed|resumed|paused|enabled|disabled|rotated|"
    r"issued|sent|queued|scheduled|unlocked|restored|2\d\d)\b",
    re.I,
)
_FAIL = re.compile(
    r"\b(error|errors|failed|failure|fails|denied|forbidden|refused|timed? ?out|timeout|"
    r"not found|invalid|rejected|exception|unavailable|[45]\d\d)\b",
    re.I,
)
# What undoes a leading success word: a key whose value says no ('{"ok": false}',
# "success=0"), or a qualifier ("completed with errors", "ok, but 3 of 5 failed").
_KEY_FALSE = re.compile(
    r"""^["']?\s*[:=]\s*["']?(false|no|0|null|none|nil)["']?\s*([,;}\])]|$)""", re.I
)
_QUALIFIED = re.compile(
    r"^\W*(but|except|however)\b|^\W*with\s+(?!(0|no|zero)\b)(\S+\s+)?(errors?|failures?)\b",
    re.I,
)


@dataclass(frozen=True)
class ToolCall:
    """One tool call an agent made.

    Attributes:
        tool: the tool's name (``webhooks.replay``).
        args: argument name -> value as text, in call order (positional
            arguments are named ``arg0``, ``arg1``, ...).
        ok: True if it reported success, False if it failed, None if unknown.
    """

    tool: str
    args: tuple[tuple[str, str], ...] = ()
    ok: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not _NAME.match(self.tool):
            raise InputError(
                f"tool name {self.tool!r} is not a name (letters, digits, _ . - /, "
                "starting with a letter or _)"
            )
        object.__setattr__(self, "args", _as_args(self.args, self.tool))
        # ok="failed" (a truthy string) was kept as a step of a confirmed attempt,
        # where only ok is False drops a call
        if self.ok is not None and not isinstance(self.ok, bool):
            raise InputError(
                f"{self.tool}: ok must be True, False or None (unknown), got "
                f"{type(self.ok).__name__} {self.ok!r:.40}"
            )


def _as_args(
    args: Mapping[str, Any] | Sequence[tuple[str, Any]], tool: str
) -> tuple[tuple[str, str], ...]:
    items = list(args.items()) if isinstance(args, Mapping) else list(args)
    out: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InputError(f"{tool}: arguments must be name/value pairs, got {item!r}")
        name, value = item
        if not isinstance(name, str) or not name:
            raise InputError(f"{tool}: argument names must be non-empty strings, got {name!r}")
        out.append((name, str(value)))
    if len({n for n, _ in out}) != len(out):
        raise InputError(f"{tool}: an argument is named twice")
    return tuple(out)


@dataclass(frozen=True)
class Step:
    """One step of a procedure: a tool and its arguments (``<name>`` marks a value
    that varies from task to task)."""

    tool: str
    args: tuple[tuple[str, str], ...] = ()

    def render(self) -> str:
        """``tool(a=<a>, b=literal)``."""
        return f"{self.tool}(" + ", ".join(f"{k}={v}" for k, v in self.args) + ")"


@dataclass(frozen=True)
class Procedure:
    """What a procedural record holds (``meta["procedure"]``).

    Attributes:
        task: the task it solved, as last phrased.
        steps: the ordered steps.
        outcome: how it ended the last time it worked (``ok``), or ``""``.
        successes: attempts that worked.
        failures: attempts that failed.
        tasks: other phrasings of the task seen when near duplicates merged.
    """

    task: str
    steps: tuple[Step, ...]
    outcome: str = ""
    successes: int = 0
    failures: int = 0
    tasks: tuple[str, ...] = ()

    @property
    def signature(self) -> tuple[str, ...]:
        """The tool names in order: two procedures with the same signature may merge."""
        return tuple(s.tool for s in self.steps)

    def render(self) -> str:
        """The record's content: task, numbered steps, outcome and counts."""
        lines = [f"Procedure for: {self.task}"]
        lines += [f"{i}. {s.render()}" for i, s in enumerate(self.steps, 1)]
        also = [t for t in self.tasks if t != self.task]
        if also:
            lines.append("Also used for: " + "; ".join(also))
        total = self.successes + self.failures
        lines.append(
            f"Outcome: {self.outcome or 'unknown'} (worked {self.successes} of {total} "
            f"time{'s' if total != 1 else ''})"
        )
        return "\n".join(lines)

    def to_meta(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "steps": [{"tool": s.tool, "args": [list(a) for a in s.args]} for s in self.steps],
            "outcome": self.outcome,
            "successes": self.successes,
            "failures": self.failures,
            "tasks": list(self.tasks),
        }

    @classmethod
    def from_meta(cls, data: Mapping[str, Any]) -> Procedure:
        """Read ``meta["procedure"]`` back.

        Raises:
            InputError: the mapping is not a procedure.
        """
        try:
            steps = tuple(
                Step(str(s["tool"]), tuple((str(k), str(v)) for k, v in s.get("args", ())))
                for s in data["steps"]
            )
            return cls(
                task=str(data["task"]),
                steps=steps,
                outcome=str(data.get("outcome", "")),
                successes=int(data.get("successes", 0)),
                failures=int(data.get("failures", 0)),
                tasks=tuple(str(t) for t in data.get("tasks", ())),
            )
        except KeyError as exc:
            raise InputError(f"not a procedure (meta['procedure'] has no {exc})") from None
        except (TypeError, ValueError) as exc:
            raise InputError(f"not a procedure (meta['procedure'] is malformed: {exc})") from None


def procedure_of(record: MemoryRecord) -> Procedure | None:
    """The procedure a record holds, or None for any other record."""
    data = record.meta.get(META_KEY)
    if record.kind is not MemoryKind.PROCEDURAL or not isinstance(data, Mapping):
        return None
    return Procedure.from_meta(data)


@dataclass(frozen=True)
class ProcedurePolicy:
    """How procedures are captured, merged and rated.

    Args:
        min_steps: an attempt needs at least this many tool calls to be a procedure.
        require_confirmation: a captured attempt counts as a success only when the
            user confirmed it (False: every tool call reporting success is enough).
        merge: merge a new procedure into a stored one with the same tool sequence.
        merge_similarity: ... whose content embedding has at least this cosine.
        max_tasks: task phrasings kept on a merged procedure.
        min_salience: the salience of a procedure that always failed (in the limit).
        max_salience: the salience of one that always worked (in the limit).
    """

    min_steps: int = 2
    require_confirmation: bool = False
    merge: bool = True
    merge_similarity: float = 0.5
    max_tasks: int = 3
    min_salience: float = 0.3
    max_salience: float = 0.95

    def __post_init__(self) -> None:
        # Types first: merge_similarity="0.5" was a bare TypeError from "<=", and
        # require_confirmation="no" (a truthy string) turned confirmation on.
        check_number(self.min_steps, "procedures.min_steps", lo=1, integer=True)
        check_bool(self.require_confirmation, "procedures.require_confirmation")
        check_bool(self.merge, "procedures.merge")
        check_number(self.merge_similarity, "procedures.merge_similarity")
        check_number(self.max_tasks, "procedures.max_tasks", lo=1, integer=True)
        check_number(self.min_salience, "procedures.min_salience")
        check_number(self.max_salience, "procedures.max_salience")
        if not -1.0 <= self.merge_similarity <= 1.0:
            raise InputError(
                f"procedures.merge_similarity must be in -1..1, got {self.merge_similarity!r}"
            )
        if not 0.0 <= self.min_salience <= self.max_salience <= 1.0:
            raise InputError(
                "procedures.min_salience and max_salience must satisfy 0 <= min <= max <= 1, "
                f"got {self.min_salience!r} and {self.max_salience!r}"
            )

    def salience(self, successes: int, failures: int) -> float:
        """``min + (max - min) * (successes + 1) / (successes + failures + 2)``."""
        rate = (successes + 1) / (successes + failures + 2)
        return float(self.min_salience + (self.max_salience - self.min_salience) * rate)


# -- reading tool calls ---------------------------------------------------------
def outcome_ok(result: str) -> bool | None:
    """Classify a tool's result: True (it reports success), False (an error), None.

    A leading success word (``ok``, ``done``, ``2xx``, ``updated``...) means
    success ("ok, 41 failed" lists 41 failures: the call worked), unless it is a
    key whose value says no (``{"ok": false}``, ``success=0``: failure) or a
    qualifier follows it ("completed with errors", "ok, but 3 of 5 failed": then,
    as for any other text, an error word (``error``, ``failed``, ``denied``,
    ``4xx``/``5xx``...) in the first 200 characters means failure, and anything
    else is unknown).
    """
    text = result.strip()
    if not text:
        return None
    ok = _OK.match(text)
    if ok is not None:
        rest = text[ok.end() :]
        # both read as success before: a JSON result '{"ok": false}' and a job
        # that "completed with errors" raised the procedure's success count
        if _KEY_FALSE.match(rest):
            return False
        if not _QUALIFIED.match(rest):
            return True
    if _FAIL.search(text[:200]):
        return False
    return None


def parse_tool_call(text: str) -> ToolCall | None:
    """Read ``name(key=value, 'positional') -> result`` (None if ``text`` is not one).

    Values may be quoted with ' or "; the result is only classified (``outcome_ok``).
    """
    m = _CALL.match(text.splitlines()[0] if text else "")
    if m is None:
        return None
    args: list[tuple[str, str]] = []
    raw = m.group("args").strip()
    if raw:
        for i, part in enumerate(_split_args(raw)):
            key, sep, value = part.partition("=")
            if sep and re.fullmatch(r"[A-Za-z_]\w*", key.strip()):
                name, val = key.strip(), value.strip()
            else:
                name, val = f"arg{i}", part.strip()
            args.append((name, _unquote(val)))
    result = m.group("result") or ""
    try:
        return ToolCall(m.group("name"), tuple(args), outcome_ok(result) if result else None)
    except InputError:
        return None


def _split_args(raw: str) -> list[str]:
    parts, buf, quote = [], [], ""
    for ch in raw:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            buf.append(ch)
        elif ch == ",":
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    parts.append("".join(buf))
    return [p for p in parts if p.strip()]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


# -- generalizing -----------------------------------------------------------------
_VARIES = re.compile(r"\d")


def placeholder(name: str) -> str:
    return f"<{name}>"


def generalize(calls: Sequence[ToolCall], task: str) -> tuple[Step, ...]:
    """Steps from calls: a value that appears in the task text, or that holds a
    digit (ids, counts, dates), varies from task to task and becomes ``<name>``."""
    task_words = " " + " ".join(words(task)) + " "
    steps = []
    for call in calls:
        args = []
        for name, value in call.args:
            key = " ".join(words(value))
            varies = bool(_VARIES.search(value)) or (key and f" {key} " in task_words)
            args.append((name, placeholder(name) if varies else value))
        steps.append(Step(call.tool, tuple(args)))
    return tuple(steps)


def merge_steps(old: Sequence[Step], new: Sequence[Step]) -> tuple[Step, ...]:
    """Same tools in the same order: an argument whose value differs (or that only
    one side has) becomes ``<name>``."""
    out = []
    for a, b in zip(old, new, strict=True):
        va, vb = dict(a.args), dict(b.args)
        names = list(va) + [n for n in vb if n not in va]
        out.append(
            Step(
                a.tool,
                tuple((n, va[n] if va.get(n) == vb.get(n) else placeholder(n)) for n in names),
            )
        )
    return tuple(out)


# -- writing ------------------------------------------------------------------------
def remember_procedure(
    layer: MemoryLayer,
    scope: str | Sequence[str],
    task: str,
    steps: Sequence[ToolCall | Step],
    *,
    success: bool = True,
    outcome: str = "ok",
    provenance: Sequence[str] = (),
    source: Source | str = Source.AGENT,
    created_at: float | None = None,
) -> MemoryRecord:
    """Store a procedure that worked (or record that it failed); return the record.

    ``steps`` are ``ToolCall``s (generalized with ``generalize``) or ``Step``s (kept
    as given). A stored procedure of the same scope with the same tool sequence
    (and content cosine >= ``merge_similarity``) is updated in place: counts add up,
    differing values become placeholders, the task phrasing is added. A failure
    with no matching procedure stores one with 0 successes and 1 failure.

    ``scope`` may be a list of layered scopes: the procedure goes to the layer the
    layer's ``LayerPolicy`` names for procedural records.

    Raises:
        InputError: an empty task, no steps, a bad scope or source.
        StoreError: the layer is closed.
    """
    # called directly (and by ProcedureRecorder), not only through the layer's
    # method: a closed layer over an InMemoryStore took the write
    layer._check_open()
    policy = layer.procedures
    target = layer.write_scope(scope, MemoryKind.PROCEDURAL)
    if not isinstance(task, str) or not task.strip():
        raise InputError(f"remember_procedure needs the task it solved (scope {target!r})")
    check_text(task, "remember_procedure: task")
    if isinstance(steps, str | bytes) or not isinstance(steps, Sequence):
        raise InputError(
            f"remember_procedure: steps must be a list of ToolCalls or Steps, got "
            f"{type(steps).__name__}"
        )
    if not steps:
        raise InputError(f"remember_procedure needs at least one step (scope {target!r})")
    check_bool(success, "remember_procedure: success")
    check_text(outcome, "remember_procedure: outcome", empty=True)
    provenance = check_strings(provenance, "remember_procedure: provenance")
    created_at = check_time(created_at, "remember_procedure: created_at", none=True)
    src = as_source(source)
    task = " ".join(task.split())
    calls = [s for s in steps if isinstance(s, ToolCall)]
    if calls and len(calls) != len(steps):
        raise InputError("remember_procedure: give either ToolCalls or Steps, not a mix")
    if calls:
        new_steps = generalize(calls, task)
    else:
        checked = []
        for i, s in enumerate(steps):
            if not isinstance(s, Step):
                raise InputError(
                    f"remember_procedure: a step must be a ToolCall or Step, got {s!r}"
                )
            # Checked as ToolCall checks its own: Step(5) was stored as the tool "5",
            # and arguments given as a dict were a bare ValueError when rendered.
            if not isinstance(s.tool, str) or not _NAME.match(s.tool):
                raise InputError(
                    f"remember_procedure: steps[{i}] tool name {s.tool!r:.60} is not a name "
                    "(letters, digits, _ . - /, starting with a letter or _)"
                )
            checked.append(Step(s.tool, _as_args(s.args, s.tool)))
        new_steps = tuple(checked)
    for i, step in enumerate(new_steps):
        # named here: a lone surrogate was reported by the embedder as "texts[0]"
        for name, value in step.args:
            check_text(name, f"remember_procedure: steps[{i}] {step.tool} argument name")
            check_text(value, f"remember_procedure: steps[{i}] {step.tool} {name}", empty=True)
    now = layer.clock() if created_at is None else float(created_at)
    fresh = Procedure(
        task=task,
        steps=new_steps,
        outcome=outcome if success else "",
        successes=int(success),
        failures=int(not success),
        tasks=(task,),
    )
    content = fresh.render()
    vector = _embed(layer, content)
    old = _near_duplicate(layer, target, fresh, vector, src.trusted) if policy.merge else None
    if old is None:
        record = MemoryRecord(
            id=new_id(),
            content=content,
            embedding=vector,
            kind=MemoryKind.PROCEDURAL,
            scope=target,
            salience=_salience(layer, src, fresh),
            tokens=layer.count_tokens(content),
            created_at=now,
            last_accessed_at=now,
            source=src,
            provenance=tuple(dict.fromkeys(provenance)),
            meta={META_KEY: fresh.to_meta()},
        )
    else:
        record, proc = old
        if success:  # what worked last time, in its latest phrasing
            merged = Procedure(
                task=task,
                steps=merge_steps(proc.steps, new_steps),
                outcome=outcome,
                successes=proc.successes + 1,
                failures=proc.failures,
                tasks=tuple(dict.fromkeys((task, *proc.tasks)))[: policy.max_tasks],
            )
        else:  # a failure only counts against it
            merged = dataclasses.replace(proc, failures=proc.failures + 1)
        record = _rewritten(layer, record, merged, provenance)
    layer.store.put(record.validate())
    return record


def record_outcome(
    layer: MemoryLayer, scope: str, record_id: str, *, success: bool, outcome: str = "ok"
) -> MemoryRecord:
    """Count one more success or failure of a stored procedure; its salience follows.

    Raises:
        InputError: no procedure with this id in ``scope``, or a ``success`` that is
            not a bool or an ``outcome`` that is not a string (nothing is written).
        StoreError: the layer is closed.
    """
    layer._check_open()
    check_scope(scope)
    # Checked as remember_procedure checks them: success="yes" was a bare
    # ValueError from int(), and outcome=5 was stored as the procedure's outcome.
    check_bool(success, "record_outcome: success")
    check_text(outcome, "record_outcome: outcome", empty=True)
    record = layer.store.get(scope, record_id)
    proc = procedure_of(record) if record is not None else None
    if record is None or proc is None:
        raise InputError(f"no procedure with id {record_id!r} in scope {scope!r}")
    updated = Procedure(
        task=proc.task,
        steps=proc.steps,
        outcome=outcome if success else proc.outcome,
        successes=proc.successes + int(success),
        failures=proc.failures + int(not success),
        tasks=proc.tasks,
    )
    new = _rewritten(layer, record, updated, ())
    layer.store.put(new.validate())
    return new


def _rewritten(
    layer: MemoryLayer, record: MemoryRecord, proc: Procedure, provenance: Sequence[str]
) -> MemoryRecord:
    """``record`` holding ``proc``: its text, embedding, salience and tokens follow.

    An approved (reviewed) untrusted procedure stays approved, and uncapped, while
    its task and steps are the ones reviewed (an outcome only counts); a write that
    changes them drops the approval, as the reviewer never saw the new steps.
    """
    content = proc.render()
    meta = dict(record.meta)
    old = procedure_of(record)
    reviewed = REVIEWED_KEY in meta and (
        old is not None and (old.task, old.steps) == (proc.task, proc.steps)
    )
    if not reviewed:
        meta.pop(REVIEWED_KEY, None)
    meta[META_KEY] = proc.to_meta()
    # A success or failure is an explicit write of a new salience: the floor
    # follows it (see memlab.memory.evict), and cold decay counts idle time from
    # now (from the last recall or decay, the next maintain cut the new salience
    # for the months the procedure sat unused before this outcome).
    meta.pop("salience_written", None)
    meta["decayed_at"] = float(layer.clock())
    return record.copy(
        content=content,
        embedding=_embed(layer, content),
        salience=_salience(layer, record.source, proc, reviewed=reviewed),
        tokens=layer.count_tokens(content),
        provenance=(
            tuple(dict.fromkeys((*record.provenance, *provenance)))[-64:]
            if provenance
            else record.provenance
        ),
        meta=meta,
    )


def _embed(layer: MemoryLayer, text: str) -> np.ndarray:
    emb = layer.embedder
    return check_embeddings(emb.embed([text]), 1, emb.dims, emb.name)[0]


def _salience(
    layer: MemoryLayer, source: Source, proc: Procedure, *, reviewed: bool = False
) -> float:
    value = layer.procedures.salience(proc.successes, proc.failures)
    if not source.trusted and not reviewed:
        value = min(value, layer.untrusted_salience_cap)
    return value


def _near_duplicate(
    layer: MemoryLayer, scope: str, fresh: Procedure, vector: np.ndarray, trusted: bool
) -> tuple[MemoryRecord, Procedure] | None:
    """The scope's most similar active procedure with the same tool sequence, of the
    same trust: a tool's or the web's write never merges into a trusted procedure
    (its text would take the trusted record's source and salience), and a trusted
    write does not merge into an untrusted one."""
    cands = layer.store.candidates(scope, vector, kinds=[MemoryKind.PROCEDURAL])
    if len(cands) == 0 or not cands.mask.any():
        return None
    sims = cands.dot(vector)
    rows = [
        int(r) for r in np.flatnonzero(cands.mask & (sims >= layer.procedures.merge_similarity))
    ]
    rows.sort(key=lambda r: -float(sims[r]))
    for record in layer.store.get_many(scope, [cands.ids[r] for r in rows]):
        try:
            proc = procedure_of(record)
        except InputError as exc:
            # put into the store by hand or by an older version: say which record
            # stops the scope's procedures from being written, and how to go on
            raise InputError(
                f"procedural record {record.id!r} in scope {scope!r}: {exc}. Forget it "
                "(MemoryLayer.forget) or rewrite its meta['procedure'], then write the "
                "procedure again"
            ) from None
        if (
            proc is not None
            and proc.signature == fresh.signature
            and record.source.trusted == trusted
        ):
            return record, proc
    return None


__all__ = [
    "META_KEY",
    "Procedure",
    "ProcedurePolicy",
    "Step",
    "ToolCall",
    "generalize",
    "merge_steps",
    "outcome_ok",
    "parse_tool_call",
    "procedure_of",
    "record_outcome",
    "remember_procedure",
]
