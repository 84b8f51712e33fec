"""LongMemEval (Wu et al., ICLR 2025; xiaowu0162/LongMemEval) as format-v1
transcripts. Works on the oracle, S and M files (the file is streamed).

Each question becomes one transcript whose id and scope are its
``question_id``:

- its haystack sessions in the listed order, each turn with id
  ``<session id>_<n>`` (n = 1-based position in the session, as upstream's
  turn-level corpus ids), role ``user`` or ``agent`` (upstream ``assistant``),
  ``session`` = the haystack session id, time = the session's
  ``haystack_dates`` entry ("2023/05/28 (Sun) 19:47", read as UTC) plus one
  second per turn;
- then the question as a detached probe (id ``question``) at ``question_date``:
  ``evidence`` = the turns marked ``has_answer``, ``evidence_sessions`` =
  ``answer_session_ids``, ``answer`` as a string, ``category`` =
  ``question_type``, ``meta.question_id`` = ``question_id`` (the key of errata
  files). Abstention questions (id ending in ``_abs``) are kept with
  ``scored: false`` and ``meta.abstention: true``, as upstream leaves them out of
  its averages.

Quirks of the real files are repaired and counted in one ``DatasetWarning`` per
file: some haystack dates are earlier than the session before them (sessions
stay in the listed order, and such a session is moved to just after the
previous one), some questions are dated before their last session (the probe
is moved after it), unreadable dates fall back to one hour after the previous
session, empty turns are skipped and answer session ids missing from the
haystack are dropped. The original date string is kept in the first turn's
``meta.date`` (and the probe's ``meta.question_date``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from memlab.errors import TranscriptError
from memlab.lab.datasets import (
    DATASETS,
    Dataset,
    Quirks,
    answer_text,
    check_path,
    dedupe_id,
    iter_json_array,
    select,
)
from memlab.lab.datasets.stream import usable_year
from memlab.lab.transcripts import Transcript, format_ts

ROLES = {"user": "user", "assistant": "agent"}
DATE = re.compile(r"\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*")
FALLBACK_GAP = 3600.0
PROBE_ID = "question"
REQUIRED = {
    "question_id": str,
    "question": str,
    "haystack_dates": list,
    "haystack_session_ids": list,
    "haystack_sessions": list,
}


def parse_date(value: Any) -> float | None:
    """``"2023/05/28 (Sun) 19:47"`` -> epoch seconds (UTC), None if unreadable or
    outside the years 1000-9998 (``stream.usable_year``)."""
    if not isinstance(value, str):
        return None
    m = DATE.fullmatch(value)
    if not m:
        return None
    try:
        y, mo, d, h, mi = (int(g) for g in m.groups())
        if not usable_year(y):  # too close to year 10000 for the turns after it
            return None
        return datetime(y, mo, d, h, mi, tzinfo=UTC).timestamp()
    except ValueError:
        return None


def is_abstention(question_id: str) -> bool:
    return question_id.endswith("_abs")


def load(
    path: str | os.PathLike[str] | None,
    *,
    limit: int | None = None,
    ids: Iterable[str] | None = None,
    progress: bool | None = None,
) -> list[Transcript]:
    """Read a LongMemEval file (``longmemeval_oracle.json``, ``_s``, ``_m``).

    Args:
        path: the JSON file.
        limit: stop after this many questions (the rest of the file is not read).
        ids: only these ``question_id``s.
        progress: show a progress bar over the bytes read (None: on a terminal).

    Raises:
        TranscriptError: the file is not a LongMemEval file (naming the item and field).

    Warns:
        DatasetWarning: once per file, counting what was repaired or skipped.
    """
    p = check_path(path, "longmemeval")
    quirks = Quirks(str(p))
    out = []
    for _, item in select(_items(p, progress), ids, limit):
        t = convert_question(item, quirks, source=str(p))
        if t is not None:
            out.append(t)
    quirks.warn()
    return out


def _items(p: Any, progress: bool | None) -> Iterator[tuple[str, dict[str, Any]]]:
    seen: dict[str, int] = {}  # question_id -> position, so a repeated id is refused
    for i, item in enumerate(iter_json_array(p, progress=progress, desc="longmemeval")):
        where = f"{p}: item #{i}"
        if not isinstance(item, dict):
            raise TranscriptError(f"{where} is not an object; is this a LongMemEval file?")
        qid = item.get("question_id")
        if isinstance(qid, str) and qid:
            where += f" (question_id {qid!r})"
        for key, kind in REQUIRED.items():
            if not isinstance(item.get(key), kind) or (kind is str and not item[key].strip()):
                raise TranscriptError(
                    f"{where}, field {key!r}: missing or not a {kind.__name__}; "
                    "is this a LongMemEval file (longmemeval_s.json, _m or _oracle)?"
                )
        n = len(item["haystack_sessions"])
        for key in ("haystack_dates", "haystack_session_ids"):
            if len(item[key]) != n:
                raise TranscriptError(
                    f"{where}, field {key!r}: has {len(item[key])} entries for {n} haystack sessions"
                )
        # Two questions with one id would be one transcript id (and one errata
        # key, one converted file): refused, as a folder's are.
        if item["question_id"] in seen:
            raise TranscriptError(
                f"{where}: has the same question_id as item #{seen[item['question_id']]}; "
                "give each question its own id"
            )
        seen[item["question_id"]] = i
        yield item["question_id"], item


def convert_question(
    item: dict[str, Any], quirks: Quirks, source: str = "<longmemeval>"
) -> Transcript | None:
    """One LongMemEval question -> one validated transcript (see the module
    docstring); None for a question with neither an answer nor an evidence turn."""
    qid: str = item["question_id"]
    where = f"{source}: question {qid!r}"
    dates = [parse_date(d) for d in item["haystack_dates"]]
    known = [d for d in dates if d is not None]
    last = (min(known) - FALLBACK_GAP) if known else 0.0
    turns: list[dict[str, Any]] = []
    taken_sessions: set[str] = set()
    listed: list[str] = []  # the haystack's session ids once unique, in its order
    evidence: list[str] = []
    renamed: dict[str, str] = {}
    for k, (raw_sid, raw_date, start, session) in enumerate(
        zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            dates,
            item["haystack_sessions"],
            strict=True,
        )
    ):
        if not isinstance(session, list):
            raise TranscriptError(f"{where}, field 'haystack_sessions[{k}]': must be a list")
        sid = str(raw_sid).strip() if raw_sid is not None else ""
        if not sid:
            sid = f"session{k + 1}"
            quirks.add("haystack sessions without an id (named session<N>)", f"{qid} #{k}")
        unique = dedupe_id(sid, taken_sessions)
        if unique != sid:
            quirks.add("repeated haystack session ids (renamed with #2...)", f"{qid} {sid}")
            renamed.setdefault(sid, unique)
        taken_sessions.add(unique)
        listed.append(unique)
        if start is None:
            quirks.add(
                "haystack dates that cannot be read (placed an hour after the previous session)",
                f"{qid} {sid}: {raw_date!r}",
            )
            start = last + FALLBACK_GAP
        elif start <= last and turns:
            quirks.add(
                "haystack sessions dated before the session listed before them "
                "(kept in the listed order, moved just after it)",
                f"{qid} {sid}: {raw_date}",
            )
            start = last + 1.0
        first = True
        for j, raw in enumerate(session):
            if not isinstance(raw, dict):
                raise TranscriptError(
                    f"{where}, field 'haystack_sessions[{k}][{j}]': a turn must be an object"
                )
            raw_role = raw.get("role")
            # Only a string is looked up: a list or object is unhashable.
            role = ROLES.get(raw_role) if isinstance(raw_role, str) else None
            if role is None:
                raise TranscriptError(
                    f"{where}, field 'haystack_sessions[{k}][{j}].role': must be 'user' or "
                    f"'assistant', got {raw.get('role')!r}"
                )
            content = raw.get("content")
            tid = f"{unique}_{j + 1}"
            if not isinstance(content, str) or not content.strip():
                quirks.add("empty turns (skipped)", f"{qid} {tid}")
                continue
            time = start + j
            turn: dict[str, Any] = {
                "id": tid,
                "ts": format_ts(time),
                "scope": qid,
                "role": role,
                "source": role,
                "text": content,
                "session": unique,
            }
            if first and isinstance(raw_date, str):
                turn["meta"] = {"date": raw_date}
                first = False
            if raw.get("has_answer") is True:
                evidence.append(tid)
            turns.append(turn)
            last = time
    if not turns:
        raise TranscriptError(f"{where}: its haystack holds no turns")
    probe = _probe(item, qid, evidence, listed, renamed, last, quirks, source)
    if probe is None:
        return None
    turns.append(probe)
    meta = {
        "dataset": "longmemeval",
        "source": os.path.basename(source),
        "question_type": item.get("question_type"),
    }
    data = {"format": "memlab.transcript/1", "id": qid, "meta": meta, "turns": turns}
    return Transcript.from_dict(data, where)


def _probe(
    item: dict[str, Any],
    qid: str,
    evidence: list[str],
    sessions: list[str],
    renamed: dict[str, str],
    last: float,
    quirks: Quirks,
    source: str,
) -> dict[str, Any] | None:
    raw_date = item.get("question_date")
    when = parse_date(raw_date)
    if when is None:
        quirks.add("question dates that cannot be read (asked after the last session)", qid)
        when = last + 1.0
    elif when <= last:
        quirks.add(
            "questions dated before their last haystack session (asked just after it)",
            f"{qid}: {raw_date}",
        )
        when = last + 1.0
    answer_sessions: list[str] = []
    raw_ids = item.get("answer_session_ids")
    # A string would be read character by character, a number not at all.
    if raw_ids is not None and not isinstance(raw_ids, list):
        raise TranscriptError(
            f"{source}: question {qid!r}, field 'answer_session_ids': must be a list of "
            f"haystack session ids, got {type(raw_ids).__name__}"
        )
    for raw_sid in raw_ids or []:
        sid = str(raw_sid).strip()
        if sid in sessions:
            answer_sessions.append(sid)
            if sid in renamed:  # a repeated id: every copy holds the answer
                # In haystack order: a set's order changes with the process's hash
                # seed, and with it the transcript's content hash in the fingerprint.
                answer_sessions += [s for s in sessions if s.startswith(f"{sid}#")]
        else:
            quirks.add("answer session ids missing from the haystack (dropped)", f"{qid} {sid}")
    qtype = item.get("question_type")
    meta: dict[str, Any] = {"question_date": raw_date, "question_id": qid}
    probe: dict[str, Any] = {
        "category": str(qtype) if qtype else "unknown",
        "detached": True,
        "meta": meta,
    }
    answer = answer_text(item.get("answer"))
    if answer is not None:
        probe["answer"] = answer
    if evidence:
        probe["evidence"] = evidence
    if answer_sessions:
        probe["evidence_sessions"] = list(dict.fromkeys(answer_sessions))
    if is_abstention(qid):
        probe["scored"] = False
        meta["abstention"] = True
    if not (answer or evidence):
        quirks.add("questions with no answer and no evidence turn (skipped)", qid)
        return None
    return {
        "id": PROBE_ID,
        "ts": format_ts(when),
        "scope": qid,
        "role": "user",
        "source": "user",
        "text": item["question"].strip(),
        "probe": probe,
    }


DATASETS.register(
    "longmemeval",
    Dataset(
        load,
        reads="file",
        description="LongMemEval (xiaowu0162/LongMemEval): one transcript per question",
    ),
)
