"""Errata: published corrections to a benchmark's ground truth, applied before a run.

``transcripts.errata=FILE`` applies an errata file to the transcripts a run
loads, whatever their dataset. The format, defined here once, is the one the
public LoCoMo audit publishes (so its file is used as is):

    [
      {"question_id": "locomo_0_qa1", "error_type": "WRONG_CITATION",
       "correct_evidence": ["D1:14"], "question": "When did Melanie paint a sunrise?"},
      {"question_id": "locomo_1_qa31", "error_type": "TEMPORAL_ERROR",
       "correct_answer": "five months", "action": "answer"},
      ...
    ]

A JSON list of objects, one per erratum:

- ``question_id`` (required): the question, as the dataset's adapter names it
  (``memlab.lab.transcripts.question_id``: LoCoMo ``locomo_<c>_qa<i>``,
  LongMemEval its ``question_id``, other transcripts ``<transcript id>/<turn id>``).
- ``error_type`` (required): what is wrong; it picks the default ``action``.
- ``action`` (optional): what memlab does, overriding the type's default
  (``ACTIONS``).
- ``correct_evidence`` (a list of turn ids of the transcript) and
  ``correct_answer`` (a string, or a number such as 2022): the corrections, when the action uses them.
- ``question`` (optional): the question's text; when given it must match the
  probe's (whitespace and case aside), which catches ids that name another
  question (LoCoMo's ids are positions in the file).
- Any other field (``reasoning``, ``golden_answer``, ``cited_evidence``, ...) is
  kept in the report and otherwise ignored.

Actions (``ACTIONS``) and the default of each error type (``ERROR_TYPES``):

============  =====================================================  =====================
action        what changes                                           default for
============  =====================================================  =====================
evidence      the evidence turns become ``correct_evidence``         WRONG_CITATION
drop_answer   the gold answer is removed (the answer metrics lose    HALLUCINATION,
              the question); evidence becomes ``correct_evidence``   TEMPORAL_ERROR,
              when given                                             ATTRIBUTION_ERROR,
                                                                     INCOMPLETE
answer        the gold answer becomes ``correct_answer``; evidence   (none: ask for it)
              becomes ``correct_evidence`` when given
exclude       the question leaves every scored group (as an          AMBIGUOUS
              unscored question, still visible)
============  =====================================================  =====================

Why drop rather than correct the answer by default: the audit's corrected
answers are explanations ("2022 (but the book title ... is fabricated)"), not
answers a metric or a judge can grade against; an errata file with clean
corrected answers can ask for ``"action": "answer"``.

An erratum whose question is not among the loaded transcripts is skipped (a
user passes the full file and replays a few conversations); a file none of
whose errata matches a loaded question is an error (ids of another dataset, or
of another file's order). Applying the same errata twice is an error. Each
changed probe keeps what it was in ``probe.meta.errata`` (so a run scores it
both ways, and the report says how many questions each metric lost or
changed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.errors import ErrataError
from memlab.lab.transcripts import Probe, Transcript, Turn, question_id

ACTIONS = {
    "evidence": "evidence corrected",
    "drop_answer": "gold answer dropped",
    "answer": "gold answer corrected",
    "exclude": "question excluded",
}
"""What an erratum does, and how the report says it."""

ERROR_TYPES = {
    "WRONG_CITATION": "evidence",
    "HALLUCINATION": "drop_answer",
    "TEMPORAL_ERROR": "drop_answer",
    "ATTRIBUTION_ERROR": "drop_answer",
    "INCOMPLETE": "drop_answer",
    "AMBIGUOUS": "exclude",
}
"""The LoCoMo audit's error types and the action each gets by default."""

META_KEY = "errata"
"""``probe.meta[META_KEY]``: what an erratum changed (its type, action and the
probe's original evidence, answer and scored flag)."""

TRANSCRIPT_KEY = "errata_sha256"
"""``transcript.meta[TRANSCRIPT_KEY]``: the errata file applied to it."""

ANSWER_METRICS = ("answer_accuracy",)
"""Metrics set after the replay from the gold answer (a judge's grade)."""


@dataclass(frozen=True)
class Erratum:
    """One checked entry of an errata file."""

    index: int
    question_id: str
    error_type: str
    action: str
    correct_evidence: tuple[str, ...] | None = None
    correct_answer: str | None = None
    question: str | None = None


@dataclass(frozen=True)
class Errata:
    """A checked errata file."""

    path: Path
    sha256: str
    entries: tuple[Erratum, ...]


@dataclass(frozen=True)
class Applied:
    """What applying errata did: the probes changed, and the entries skipped."""

    transcripts: list[Transcript]
    changed: list[dict[str, Any]]
    skipped: list[str]

    @property
    def count(self) -> int:
        return len(self.changed)


def load(path: str | Path) -> Errata:
    """Read and check an errata file (the format is in the module docstring).

    Raises:
        ErrataError: the file is missing or not JSON, or an entry is invalid
            (naming the entry and the field).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ErrataError(f"errata file {p} does not exist (transcripts.errata)") from None
    except OSError as exc:
        raise ErrataError(f"errata file {p}: cannot read it ({exc.strerror})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ErrataError(f"errata file {p} is not JSON text ({exc})") from None
    if not isinstance(data, list):
        raise ErrataError(
            f"errata file {p}: must be a JSON list of errata objects, got {type(data).__name__}"
        )
    entries: list[Erratum] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(data):
        entry = _entry(p, i, item)
        if entry.question_id in seen:
            raise ErrataError(
                f"errata file {p}: entries #{seen[entry.question_id]} and #{i} both correct "
                f"question {entry.question_id!r}; keep one"
            )
        seen[entry.question_id] = i
        entries.append(entry)
    return Errata(p, hashlib.sha256(raw).hexdigest(), tuple(entries))


def _entry(path: Path, i: int, item: Any) -> Erratum:
    def bad(field: str, problem: str) -> ErrataError:
        qid = item.get("question_id") if isinstance(item, dict) else None
        who = f"entry #{i}" + (f" ({qid})" if isinstance(qid, str) else "")
        return ErrataError(f"errata file {path}, {who}, field {field!r}: {problem}")

    if not isinstance(item, dict):
        raise ErrataError(f"errata file {path}, entry #{i}: must be an object")
    qid = item.get("question_id")
    if not isinstance(qid, str) or not qid.strip():
        raise bad("question_id", "missing or not a non-empty string")
    error_type = item.get("error_type")
    if not isinstance(error_type, str) or not error_type.strip():
        raise bad("error_type", "missing or not a non-empty string")
    action = item.get("action", ERROR_TYPES.get(error_type))
    if action is None:
        raise bad(
            "error_type",
            f'{error_type!r} has no default action; add "action": one of {sorted(ACTIONS)} '
            f"(known types: {', '.join(ERROR_TYPES)})",
        )
    if action not in ACTIONS:
        raise bad("action", f"must be one of {sorted(ACTIONS)}, got {action!r}")
    evidence = item.get("correct_evidence")
    if evidence is not None and (
        not isinstance(evidence, list) or not all(isinstance(e, str) and e for e in evidence)
    ):
        raise bad("correct_evidence", "must be a list of turn ids (strings)")
    answer = item.get("correct_answer")
    # A number is a LoCoMo answer (2022); true or NaN would become the gold "True" / "nan".
    numeric = isinstance(answer, int | float) and not isinstance(answer, bool)
    if answer is not None and not (isinstance(answer, str) or (numeric and math.isfinite(answer))):
        raise bad("correct_answer", f"must be a string (or a finite number), got {answer!r}")
    question = item.get("question")
    if question is not None and not isinstance(question, str):
        raise bad("question", "must be a string")
    if action == "evidence" and not evidence:
        raise bad("correct_evidence", f"action 'evidence' ({error_type}) needs the evidence")
    if action == "answer" and (answer is None or not str(answer).strip()):
        raise bad("correct_answer", "action 'answer' needs the corrected answer")
    return Erratum(
        index=i,
        question_id=qid.strip(),
        error_type=error_type.strip(),
        action=str(action),
        correct_evidence=tuple(evidence) if evidence is not None else None,
        correct_answer=str(answer).strip() if answer is not None else None,
        question=question,
    )


def _same_question(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def apply(transcripts: Sequence[Transcript], errata: Errata) -> Applied:
    """The transcripts with the errata applied (new objects; the given ones are not
    changed), the probes changed and the entries skipped.

    Raises:
        ErrataError: an erratum's question text or evidence does not fit its probe,
            no erratum names a loaded question, or these errata were applied already.
    """
    where: dict[str, tuple[int, int]] = {}
    for ti, t in enumerate(transcripts):
        if t.meta.get(TRANSCRIPT_KEY):
            raise ErrataError(
                f"transcript {t.id!r} already has errata applied ({t.meta[TRANSCRIPT_KEY][:12]}); "
                "apply an errata file once"
            )
        for i, turn in enumerate(t.turns):
            if turn.probe is not None:
                where.setdefault(question_id(t, turn), (ti, i))
    matched = [e for e in errata.entries if e.question_id in where]
    skipped = [e.question_id for e in errata.entries if e.question_id not in where]
    if errata.entries and not matched:
        ours = sorted(where)[:3]
        raise ErrataError(
            f"errata file {errata.path}: none of its {len(errata.entries)} errata names a "
            f"question of these transcripts (its ids look like "
            f"{[e.question_id for e in errata.entries[:3]]}, these questions' like {ours}); "
            "is it the errata of this dataset, and of this file (LoCoMo's ids are positions "
            "in locomo10.json)?"
        )
    turns = {ti: list(t.turns) for ti, t in enumerate(transcripts)}
    changed: list[dict[str, Any]] = []
    for e in matched:
        ti, i = where[e.question_id]
        t = transcripts[ti]
        turn = turns[ti][i]
        turns[ti][i], change = _corrected(errata.path, e, t, i, turn)
        changed.append(change)
    out = []
    for ti, t in enumerate(transcripts):
        if turns[ti] == t.turns:
            out.append(t)
            continue
        meta = {**t.meta, TRANSCRIPT_KEY: errata.sha256}
        out.append(Transcript(id=t.id, turns=turns[ti], facts=t.facts, meta=meta, path=t.path))
    return Applied(out, changed, skipped)


def _corrected(
    path: Path, e: Erratum, t: Transcript, index: int, turn: Turn
) -> tuple[Turn, dict[str, Any]]:
    probe = turn.probe
    assert probe is not None
    who = f"errata file {path}, entry #{e.index} ({e.question_id})"
    if e.question is not None and not _same_question(e.question, turn.text):
        raise ErrataError(
            f"{who}: its question {e.question!r} is not this run's question {turn.text!r} "
            f"(transcript {t.id!r}, probe {turn.id!r}); the ids name other questions here "
            "(LoCoMo's ids are positions in locomo10.json: pass the file the errata were "
            "written for)"
        )
    evidence = probe.evidence
    if e.correct_evidence is not None and e.action != "exclude":
        earlier = {x.id for x in t.turns[:index]}
        unknown = [x for x in e.correct_evidence if x not in earlier]
        if unknown:
            raise ErrataError(
                f"{who}, field 'correct_evidence': {unknown} name no earlier turn of "
                f"transcript {t.id!r}"
            )
        evidence = tuple(dict.fromkeys(e.correct_evidence))
    answer, scored = probe.answer, probe.scored
    if e.action == "drop_answer":
        answer = None
    elif e.action == "answer":
        answer = e.correct_answer
    elif e.action == "exclude":
        scored = False
    if not (evidence or answer or probe.needs):
        raise ErrataError(
            f"{who}: the corrected question would have no evidence, answer or needed fact "
            "left; give correct_evidence, or use action 'exclude'"
        )
    record = {
        "error_type": e.error_type,
        "action": e.action,
        "evidence": list(probe.evidence),
        "answer": probe.answer,
        "scored": probe.scored,
    }
    meta = {**probe.meta, META_KEY: record}
    fixed = dataclasses.replace(probe, evidence=evidence, answer=answer, scored=scored, meta=meta)
    change = {
        "question_id": e.question_id,
        "transcript": t.id,
        "probe": turn.id,
        "error_type": e.error_type,
        "action": e.action,
        "change": describe(record, fixed),
    }
    return dataclasses.replace(turn, probe=fixed), change


def describe(record: Mapping[str, Any], fixed: Probe) -> str:
    """What an erratum changed, in a few words."""
    parts = [ACTIONS[record["action"]]]
    if list(fixed.evidence) != list(record["evidence"]):
        parts.append(f"evidence {record['evidence']} -> {list(fixed.evidence)}")
    if fixed.answer != record["answer"] and fixed.answer is not None:
        parts.append(f"answer {record['answer']!r} -> {fixed.answer!r}")
    return "; ".join(parts)


def original(turn: Turn) -> Turn | None:
    """The probe turn as it was before its erratum (None if it has none)."""
    probe = turn.probe
    record = probe.meta.get(META_KEY) if probe is not None else None
    if probe is None or not isinstance(record, Mapping):
        return None
    meta = {k: v for k, v in probe.meta.items() if k != META_KEY}
    before = dataclasses.replace(
        probe,
        evidence=tuple(record["evidence"]),
        answer=record["answer"],
        scored=bool(record["scored"]),
        meta=meta,
    )
    return dataclasses.replace(turn, probe=before)


def applied(transcripts: Iterable[Transcript]) -> pd.DataFrame:
    """The errata applied to these transcripts, one row per changed probe (from
    each probe's ``meta.errata``): question_id, transcript, probe, error_type,
    action, change."""
    rows = []
    for t in transcripts:
        for turn in t.probes:
            assert turn.probe is not None
            record = turn.probe.meta.get(META_KEY)
            if isinstance(record, Mapping):
                rows.append(
                    {
                        "question_id": question_id(t, turn),
                        "transcript": t.id,
                        "probe": turn.id,
                        "error_type": record["error_type"],
                        "action": record["action"],
                        "change": describe(record, turn.probe),
                    }
                )
    return pd.DataFrame(rows, columns=APPLIED_COLUMNS)


APPLIED_COLUMNS = ["question_id", "transcript", "probe", "error_type", "action", "change"]


# -- what the errata did to the metrics -----------------------------------------------
def before_row(scores: Mapping[str, float], turn: Turn) -> str:
    """The ``errata_before`` cell of a probe row: the metrics the probe's context
    scored against its original ground truth, and whether it was scored and had
    a gold answer (JSON)."""
    record = turn.probe.meta.get(META_KEY, {}) if turn.probe is not None else {}
    values = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in scores.items()}
    values["_scored"] = bool(record.get("scored", True))
    values["_answer"] = record.get("answer") is not None
    return json.dumps(values, sort_keys=True)


IMPACT_COLUMNS = [
    "strategy", "metric", "errata_probes", "lost", "gained", "changed", "unchanged",
    "mean_before", "mean_after",
]  # fmt: skip


def impact(probes: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """How many questions each metric lost or changed because of the errata, per
    strategy: over the probes with an erratum, ``lost`` = scored with a value
    before and without one after (or no longer scored), ``gained`` = the reverse,
    ``changed`` / ``unchanged`` = a value both times that differs / does not;
    ``mean_before`` / ``mean_after`` average the metric over the probes scored
    with a value at that time. A judge's grade (``answer_accuracy``) is not
    re-asked against the original answer: a dropped answer or an excluded
    question counts as lost, a corrected answer as changed. No errata probes:
    an empty table."""
    if probes.empty or "errata_before" not in probes:
        return pd.DataFrame(columns=IMPACT_COLUMNS)
    hit = probes[probes["errata_before"].notna() & (probes["errata_before"] != "")]
    rows = []
    for strategy, mine in hit.groupby("strategy", sort=False):
        befores = [json.loads(x) for x in mine["errata_before"]]
        actions = [str(a).rpartition(":")[2] for a in mine["errata"]]
        scored = mine["scored"].astype(bool).tolist()
        for m in metrics:
            afters = mine[m].astype(float).tolist() if m in mine else [math.nan] * len(mine)
            pairs = [
                _before_after(m, b, a, action, now)
                for b, a, action, now in zip(befores, afters, actions, scored, strict=True)
            ]
            counts = {"lost": 0, "gained": 0, "changed": 0, "unchanged": 0}
            for old, new, regraded in pairs:
                if old is not None and new is None:
                    counts["lost"] += 1
                elif new is not None and old is None:
                    counts["gained"] += 1
                elif old is not None and new is not None:
                    differs = regraded or (not math.isnan(old) and abs(old - new) > 1e-12)
                    counts["changed" if differs else "unchanged"] += 1
            was = [old for old, _, _ in pairs if old is not None and not math.isnan(old)]
            now = [new for _, new, _ in pairs if new is not None]
            if not (was or now or counts["lost"]):
                continue
            rows.append(
                {
                    "strategy": strategy,
                    "metric": m,
                    "errata_probes": len(pairs),
                    **counts,
                    "mean_before": sum(was) / len(was) if was else math.nan,
                    "mean_after": sum(now) / len(now) if now else math.nan,
                }
            )
    return pd.DataFrame(rows, columns=IMPACT_COLUMNS)


def _before_after(
    metric: str, before: Mapping[str, Any], after: float, action: str, scored: bool
) -> tuple[float | None, float | None, bool]:
    """(the value before the erratum, after it, whether a grade was re-asked) of one
    probe; None where it has no value in a scored group, NaN where it had one that
    is not known (a judge's grade against a gold answer that was replaced)."""
    new = after if scored and not math.isnan(after) else None
    if metric not in ANSWER_METRICS:
        value = before.get(metric)
        return (float(value) if value is not None and before["_scored"] else None), new, False
    # A grade is not re-asked against the original answer. The gold answer did not
    # change (evidence, exclude): the grade stood as it is. It was dropped: the
    # question had a grade (not known) and has none now. It was replaced: it had a
    # grade (not known) and was graded again.
    if action == "drop_answer":
        new = None
    if not (before["_answer"] and before["_scored"]):
        return None, new, False
    if action in ("drop_answer", "answer"):
        return math.nan, new, action == "answer"
    return (after if not math.isnan(after) else None), new, False


__all__ = [
    "ACTIONS",
    "APPLIED_COLUMNS",
    "ERROR_TYPES",
    "IMPACT_COLUMNS",
    "Applied",
    "Errata",
    "Erratum",
    "applied",
    "apply",
    "before_row",
    "impact",
    "load",
    "original",
]
