"""LoCoMo (Maharana et al., ACL 2024; snap-research/locomo, ``data/locomo10.json``)
as format-v1 transcripts.

Each sample becomes one transcript whose scope and id are its ``sample_id``:

- every turn of every ``session_N`` that exists, sessions in numeric order; turn
  id = ``dia_id``, role and source ``user`` (both speakers are people), text
  ``"<speaker>: <text>"`` plus ``" [shares a photo: <blip_caption>]"`` when the
  turn shared an image, ``session`` = ``session_N``;
- time from ``session_N_date_time`` ("1:56 pm on 8 May, 2023", read as UTC);
  the turns of a session are one second apart so their order is kept;
- each QA item becomes a probe turn (id ``Q<n>``, n = 1-based position in
  ``qa``) asked after the whole conversation, one hour after its last turn and
  one second apart, *detached* (strategies answer it but never remember it):
  ``evidence`` = the dia_ids, ``answer`` = the answer as a string (category 5:
  ``adversarial_answer``), ``category`` = its name, ``meta.question_id`` =
  ``locomo_<c>_qa<i>`` (c: the sample's 0-based position in the file, i: the
  item's 0-based index in ``qa``; the ids of the public LoCoMo audit and of errata
  files, when the file is the official ``locomo10.json``). Category 5
  (adversarial) is kept with ``scored: false`` and ``meta.abstention: true``:
  the right answer is that the conversation does not say.

Upstream quirks are repaired or skipped and counted in one ``DatasetWarning``
per file: evidence strings holding several ids ("D8:6; D9:17") are split, ids
with leading zeros ("D3:05") are matched to the turn they name, ids that name
no turn ("D", "D40:1") are dropped; a missing or unparseable session date
falls back to one hour after the previous session, and a date earlier than the
previous session's is moved to just after it (the original is kept in the
turn's ``meta.date``).
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

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
UNSCORED = frozenset({5})
SESSION_KEY = re.compile(r"session_(\d+)")
DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")
QUESTION_DELAY = 3600.0  # probes come one hour after the last turn
FALLBACK_GAP = 3600.0  # a session without a usable date starts an hour after the last
MAX_SESSION_DIGITS = 18  # session_N numbers; far more than any conversation has


def question_id(position: int, index: int) -> str:
    """``locomo_<c>_qa<i>``: the id the public LoCoMo audit (and its errata) give the
    ``index``-th QA item (0-based, every category counted) of the sample at
    ``position`` (0-based) in ``locomo10.json``."""
    return f"locomo_{position}_qa{index}"


def parse_date(value: Any) -> float | None:
    """``"1:56 pm on 8 May, 2023"`` -> epoch seconds (UTC), None if unreadable or
    outside the years 1000-9998 (``stream.usable_year``)."""
    if not isinstance(value, str):
        return None
    text = " ".join(value.replace(",", ", ").split()).replace(" ,", ",")
    for fmt in DATE_FORMATS:
        try:
            when = datetime.strptime(text, fmt)
        except ValueError:
            continue
        # Year 9999 ran past year 10000 (an internal ValueError); year 1 made
        # timestamps the transcript format cannot read.
        return when.replace(tzinfo=UTC).timestamp() if usable_year(when.year) else None
    return None


def load(
    path: str | os.PathLike[str] | None,
    *,
    limit: int | None = None,
    ids: Iterable[str] | None = None,
    progress: bool | None = None,
) -> list[Transcript]:
    """Read a LoCoMo file (e.g. upstream ``locomo10.json``) as transcripts.

    Args:
        path: the JSON file.
        limit: stop after this many samples.
        ids: only these ``sample_id``s.
        progress: show a progress bar (None: only on a terminal).

    Raises:
        TranscriptError: the file is not a LoCoMo file (naming the sample and field).

    Warns:
        DatasetWarning: once per file, counting what was repaired or skipped.
    """
    p = check_path(path, "locomo")
    quirks = Quirks(str(p))
    out = [
        convert_sample(sample, quirks, source=str(p), position=position)
        for _, (position, sample) in select(_samples(p, progress), ids, limit)
    ]
    quirks.warn()
    return out


def _samples(p: Any, progress: bool | None) -> Iterator[tuple[str, Any]]:
    seen: dict[str, int] = {}  # sample_id -> position, so a repeated id is refused
    for i, sample in enumerate(iter_json_array(p, progress=progress, desc="locomo")):
        if not isinstance(sample, dict):
            raise TranscriptError(f"{p}: sample #{i} is not an object; is this a LoCoMo file?")
        sid = sample.get("sample_id")
        if not isinstance(sid, str | int) or isinstance(sid, bool) or str(sid) == "":
            raise TranscriptError(
                f"{p}: sample #{i} has no 'sample_id'; is this a LoCoMo file (locomo10.json)?"
            )
        # Two samples with one id would be one transcript id (and one converted
        # file, the second overwriting the first): refused, as a folder's are.
        if str(sid) in seen:
            raise TranscriptError(
                f"{p}: sample #{i} has the same sample_id {str(sid)!r} as sample "
                f"#{seen[str(sid)]}; give each sample its own id"
            )
        seen[str(sid)] = i
        yield str(sid), (i, sample)


def convert_sample(
    sample: dict[str, Any], quirks: Quirks, source: str = "<locomo>", position: int = 0
) -> Transcript:
    """One LoCoMo sample -> one validated transcript (see the module docstring);
    ``position``: the sample's 0-based place in its file (its question ids')."""
    sid = str(sample["sample_id"])
    where = f"{source}: sample {sid!r}"
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        raise TranscriptError(f"{where}, field 'conversation': missing or not an object")
    sessions = []
    for k in conv:
        if (m := SESSION_KEY.fullmatch(k)) and isinstance(conv[k], list):
            # int() refuses more than 4300 digits; no real file numbers sessions so.
            if len(m.group(1).lstrip("0")) > MAX_SESSION_DIGITS:
                raise TranscriptError(
                    f"{where}, field 'conversation': session key {k[:40]!r}... has a number "
                    f"of more than {MAX_SESSION_DIGITS} digits; number sessions session_1, "
                    "session_2, ..."
                )
            sessions.append((int(m.group(1)), k))
    sessions.sort()
    if not sessions:
        raise TranscriptError(f"{where}, field 'conversation': holds no session_N turn lists")
    known_dates = [t for n, _ in sessions if (t := parse_date(conv.get(f"session_{n}_date_time")))]
    turns: list[dict[str, Any]] = []
    taken: set[str] = set()
    last = (min(known_dates) - FALLBACK_GAP) if known_dates else 0.0
    for _, key in sessions:
        raw_date = conv.get(f"{key}_date_time")
        start = parse_date(raw_date)
        if start is None:
            quirks.add(
                "sessions without a readable date (placed an hour after the previous one)",
                f"{sid} {key}: {raw_date!r}",
            )
            start = last + FALLBACK_GAP
        elif start <= last and turns:
            quirks.add(
                "sessions dated before the previous session (moved just after it)",
                f"{sid} {key}: {raw_date}",
            )
            start = last + 1.0
        for j, raw in enumerate(conv[key]):
            turn = _turn(raw, f"{where}, {key}[{j}]", quirks, sid)
            dia_id = turn["id"]
            turn["id"] = dedupe_id(dia_id, taken)
            if turn["id"] != dia_id:
                quirks.add("duplicate dia_ids (renamed with #2...)", f"{sid} {dia_id}")
            taken.add(turn["id"])
            time = start + j
            turn.update(ts=format_ts(time), scope=sid, session=key)
            if j == 0 and isinstance(raw_date, str):
                turn.setdefault("meta", {})["date"] = raw_date
            turns.append(turn)
            last = time
    if not turns:
        raise TranscriptError(f"{where}: its sessions hold no turns")
    lookup = _id_lookup(taken)
    qa = sample.get("qa", [])
    if not isinstance(qa, list):
        raise TranscriptError(f"{where}, field 'qa': must be a list of question objects")
    t_q = last + QUESTION_DELAY
    for i, item in enumerate(qa):
        probe = _probe(item, i, sid, lookup, quirks, f"{where}, qa[{i}]")
        if probe is not None:
            probe["meta"]["question_id"] = question_id(position, i)
        if probe is None:
            continue
        turns.append(
            {
                "id": f"Q{i + 1}",
                "ts": format_ts(t_q + i),
                "scope": sid,
                "role": "user",
                "source": "user",
                "text": probe.pop("text"),
                "probe": probe,
            }
        )
    meta = {
        "dataset": "locomo",
        "source": os.path.basename(source),
        "speaker_a": conv.get("speaker_a"),
        "speaker_b": conv.get("speaker_b"),
    }
    data = {"format": "memlab.transcript/1", "id": sid, "meta": meta, "turns": turns}
    return Transcript.from_dict(data, where)


def _turn(raw: Any, where: str, quirks: Quirks, sid: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TranscriptError(f"{where}: a turn must be an object")
    dia_id = raw.get("dia_id")
    if not isinstance(dia_id, str) or not dia_id.strip():
        raise TranscriptError(f"{where}, field 'dia_id': missing")
    speaker = str(raw.get("speaker") or "").strip() or "someone"
    text = raw.get("text")
    text = text.strip() if isinstance(text, str) else ""
    caption = raw.get("blip_caption")
    line = f"{speaker}: {text}" if text else f"{speaker}:"
    if isinstance(caption, str) and caption.strip():
        line += f" [shares a photo: {caption.strip()}]"
    elif not text:
        quirks.add("turns with no text", f"{sid} {dia_id}")
        line += " (no text)"
    meta: dict[str, Any] = {"speaker": speaker}
    for extra in ("img_url", "query"):
        if raw.get(extra):
            meta[extra] = raw[extra]
    return {"id": dia_id.strip(), "role": "user", "source": "user", "text": line, "meta": meta}


def _numbers(session: str, turn: str) -> tuple[int, int] | None:
    """A dia_id's (session, turn) numbers, None when one is too long to be a number
    any conversation has (int() refuses more than 4300 digits)."""
    if max(len(session.lstrip("0")), len(turn.lstrip("0"))) > MAX_SESSION_DIGITS:
        return None
    return int(session), int(turn)


def _id_lookup(ids: Iterable[str]) -> dict[tuple[int, int], str]:
    """(session, turn) numbers -> dia_id, so "D3:05" finds the turn "D3:5"."""
    out: dict[tuple[int, int], str] = {}
    for i in ids:
        m = DIA_ID.fullmatch(i)
        if m and (key := _numbers(m.group(1), m.group(2))) is not None:
            out.setdefault(key, i)
    return out


def repair_evidence(
    raw: Any, lookup: dict[tuple[int, int], str]
) -> tuple[list[str], list[str], bool]:
    """Turn LoCoMo evidence strings into dia_ids of existing turns.

    Returns:
        (ids found, strings dropped, whether a string had to be split or respelled).
    """
    values = raw if isinstance(raw, list) else [raw] if raw is not None else []
    found: list[str] = []
    dropped: list[str] = []
    repaired = False
    for v in values:
        if not isinstance(v, str):
            dropped.append(repr(v))
            continue
        matches = DIA_ID.findall(v)
        keys = [_numbers(a, b) for a, b in matches]
        hits = [lookup.get(k) if k is not None else None for k in keys]
        good = [h for h in hits if h is not None]
        if not good:
            dropped.append(v)
            continue
        if len(matches) > 1 or good[0] != v or len(good) < len(matches):
            repaired = True
        if len(good) < len(matches):
            dropped.append(v)
        for g in good:
            if g not in found:
                found.append(g)
    return found, dropped, repaired


def _probe(
    item: Any,
    i: int,
    sid: str,
    lookup: dict[tuple[int, int], str],
    quirks: Quirks,
    where: str,
) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        raise TranscriptError(f"{where}: a QA item must be an object")
    question = item.get("question")
    if not isinstance(question, str) or not question.strip():
        quirks.add("questions without text (skipped)", f"{sid} Q{i + 1}")
        return None
    raw_cat = item.get("category")
    cat = raw_cat if isinstance(raw_cat, int) and not isinstance(raw_cat, bool) else None
    if cat not in CATEGORIES:
        quirks.add("questions with an unknown category (kept as 'unknown')", f"{sid} Q{i + 1}")
    meta: dict[str, Any] = {"qa_index": i}
    if cat in UNSCORED:
        answer = answer_text(item.get("adversarial_answer"))
        if answer is None:
            answer = answer_text(item.get("answer"))
        elif item.get("answer") is not None:
            meta["answer"] = answer_text(item.get("answer"))
    else:
        answer = answer_text(item.get("answer"))
    evidence, dropped, repaired = repair_evidence(item.get("evidence"), lookup)
    if repaired:
        quirks.add("evidence strings split or respelled", f"{sid} Q{i + 1}: {item.get('evidence')}")
    if dropped:
        quirks.add("evidence ids naming no turn (dropped)", f"{sid} Q{i + 1}: {dropped}")
        meta["evidence_dropped"] = dropped
    if answer is None and not evidence:
        quirks.add("questions with no answer and no usable evidence (skipped)", f"{sid} Q{i + 1}")
        return None
    probe: dict[str, Any] = {
        "text": question.strip(),
        "category": CATEGORIES.get(cat, "unknown") if cat is not None else "unknown",
        "detached": True,
        "meta": meta,
    }
    if evidence:
        probe["evidence"] = evidence
    if answer is not None:
        probe["answer"] = answer
    if cat in UNSCORED:
        probe["scored"] = False
        meta["abstention"] = True  # the right answer: the conversation does not say
    return probe


DATASETS.register(
    "locomo",
    Dataset(
        load,
        reads="file",
        description="LoCoMo (snap-research/locomo data/locomo10.json): one transcript per sample",
    ),
)
