"""The data the supersession benchmark replays: transcripts and LongMemEval haystacks.

Both read into ``Episode``s of ``Turn``s (``load_transcripts``, ``load_longmemeval``);
``has_value`` is the lab's matching rule for a value in a text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "transcripts" / "synthetic"


@dataclass
class Turn:
    id: str
    time: float
    scope: str
    role: str
    source: str
    text: str
    mentions: dict[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    probe: bool = False
    evidence: bool = False
    act: str = ""


@dataclass
class Episode:
    """One transcript (or one LongMemEval question's haystack)."""

    id: str
    turns: list[Turn]
    kind: str = "transcript"  # or a LongMemEval question type
    answer: str = ""


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z@#$%]+", " ", text.casefold()).split())


def has_value(text: str, value: str) -> bool:
    """The lab's matching rule: the value occurs in the text (casefolded, either
    with whitespace collapsed or with punctuation turned into spaces)."""
    a = " ".join(value.casefold().split())
    if a and a in " ".join(text.casefold().split()):
        return True
    b = _norm(value)
    return bool(b) and f" {b} " in f" {_norm(text)} "


def load_transcripts(folder: Path) -> list[Episode]:
    from datetime import datetime

    out = []
    for path in sorted(Path(folder).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        turns = []
        for t in data["turns"]:
            probe = t.get("probe") or {}
            turns.append(
                Turn(
                    id=t["id"],
                    time=datetime.fromisoformat(t["ts"].replace("Z", "+00:00")).timestamp(),
                    scope=t["scope"],
                    role=t["role"],
                    source=t["source"],
                    text=t["text"],
                    mentions={m["fact"]: m["value"] for m in t.get("mentions") or []},
                    needs=tuple(probe.get("needs") or ()),
                    probe=bool(t.get("probe")),
                    act=(t.get("meta") or {}).get("act", ""),
                )
            )
        out.append(Episode(data["id"], turns))
    return out


def load_longmemeval(path: Path) -> list[Episode]:
    from datetime import UTC, datetime

    out = []
    for item in json.loads(Path(path).read_text(encoding="utf-8")):
        turns = []
        last = 0.0
        for sid, date, session in zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        ):
            m = re.match(r"(\d+)/(\d+)/(\d+) \(\w+\) (\d+):(\d+)", date)
            if m:
                y, mo, d, h, mi = (int(g) for g in m.groups())
                start = datetime(y, mo, d, h, mi, tzinfo=UTC).timestamp()
            else:
                start = last + 3600
            start = max(start, last + 1)
            for j, raw in enumerate(session):
                if not isinstance(raw.get("content"), str) or not raw["content"].strip():
                    continue
                role = "user" if raw["role"] == "user" else "agent"
                turns.append(
                    Turn(
                        id=f"{sid}_{j + 1}",
                        time=start + j,
                        scope=item["question_id"],
                        role=role,
                        source=role,
                        text=raw["content"],
                        evidence=raw.get("has_answer") is True,
                    )
                )
                last = start + j
        out.append(Episode(item["question_id"], turns, item["question_type"], str(item["answer"])))
    return out


__all__ = [
    "ROOT",
    "SHIPPED",
    "Episode",
    "Turn",
    "has_value",
    "load_longmemeval",
    "load_transcripts",
]
