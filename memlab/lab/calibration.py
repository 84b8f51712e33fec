"""Judge calibration: how often a judge accepts answers known to be right, and
answers known to be wrong (``memlab judge calibrate``).

A judge is graded on three sets of answers to the same questions:

- ``golden``: the gold answer itself. The judge should accept it; the share it
  accepts is its **true-accept rate**.
- ``specific``: specific but wrong answers (every detail shifted: "12 April
  2023" for "7 May 2023").
- ``vague``: vague but topical answers (no falsifiable detail: "sometime in the
  spring of 2023").

The judge should reject both wrong sets; the share of each it accepts is its
**false-accept rate** on that kind of error. The wrong answers come from the
public LoCoMo audit (``wrong_answers_v1_*.json``: specific,
``wrong_answers_v2_*.json``: vague; fields ``question_id``, ``question``,
``golden_answer``, ``generated_answer``, ``category``). Each rate is reported per
LoCoMo category and overall with its Wilson 95% interval. An answer is accepted
when the judge's score is at least ``threshold`` (0.5: a model judge says 1 or 0;
the F1 judge's score is graded); an answer the judge could not grade (an
unreadable reply) is counted apart and left out of the rate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pandas as pd

from memlab.errors import InputError
from memlab.lab.answering import grade_all
from memlab.lab.datasets.locomo import CATEGORIES
from memlab.lab.judges import Judge, Question

SETS = {
    "golden": ("true-accept", "the gold answer: should be accepted"),
    "specific": ("false-accept", "specific but wrong: should be rejected"),
    "vague": ("false-accept", "vague but topical: should be rejected"),
}
"""The answer sets, what their acceptance rate is, and what it should be."""
FILES = {"specific": "wrong_answers_v1*.json", "vague": "wrong_answers_v2*.json"}
"""How the audit names its two wrong-answer files (in ``--audit DIR``)."""
GRADED_COLUMNS = [
    "set", "question_id", "category", "question", "gold", "answer", "score", "verdict",
    "accepted", "judge_text",
]  # fmt: skip
SUMMARY_COLUMNS = [
    "set", "rate", "category", "n", "accepted", "ungraded", "accept_rate", "ci_low", "ci_high",
]  # fmt: skip


@dataclass(frozen=True)
class Item:
    """One answer to grade."""

    set: str
    question_id: str
    category: str
    question: str
    gold: str
    answer: str


def find_audit(folder: Path) -> dict[str, Path]:
    """The two wrong-answer files of an audit folder (``FILES``).

    Raises:
        InputError: a file is missing or ambiguous.
    """
    if not folder.is_dir():
        raise InputError(f"judge calibrate: --audit {folder} is not a folder")
    out = {}
    for name, pattern in FILES.items():
        found = sorted(folder.glob(pattern))
        if len(found) != 1:
            what = "no" if not found else f"{len(found)}"
            raise InputError(
                f"judge calibrate: {folder} holds {what} {pattern} files; pass the files "
                "with --specific FILE --vague FILE"
            )
        out[name] = found[0]
    return out


def _category(value: Any) -> str:
    try:
        return CATEGORIES.get(int(value), str(value))
    except (TypeError, ValueError):
        return str(value or "unknown")


def load_answers(specific: Path, vague: Path) -> list[Item]:
    """The three answer sets from the two wrong-answer files: the golden set is the
    gold answer of every question either file names (first file first).

    Raises:
        InputError: a file is missing, not JSON, or an entry lacks a field.
    """
    items: list[Item] = []
    golden: dict[str, Item] = {}
    for name, path in (("specific", specific), ("vague", vague)):
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"judge calibrate: {path} does not exist") from None
        except (OSError, ValueError) as exc:
            raise InputError(f"judge calibrate: {path} is not a JSON file ({exc})") from None
        if not isinstance(data, list):
            raise InputError(f"judge calibrate: {path} must be a JSON list of answers")
        for i, entry in enumerate(data):
            fields = ("question_id", "question", "golden_answer", "generated_answer")
            missing = [f for f in fields if not isinstance(entry, dict) or entry.get(f) is None]
            if missing:
                raise InputError(f"judge calibrate: {path}, entry #{i}: missing {missing}")
            qid = str(entry["question_id"])
            cat = _category(entry.get("category"))
            gold = str(entry["golden_answer"])
            items.append(Item(name, qid, cat, str(entry["question"]), gold,
                              str(entry["generated_answer"])))  # fmt: skip
            golden.setdefault(qid, Item("golden", qid, cat, str(entry["question"]), gold, gold))
    return list(golden.values()) + items


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n. n = 0: (NaN, NaN).

    Formula: (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), p = k/n,
    z the normal quantile of (1 + level) / 2."""
    if n == 0:
        return math.nan, math.nan
    z = NormalDist().inv_cdf((1 + level) / 2)
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    den = 1 + z * z / n
    lo = 0.0 if k == 0 else max(0.0, (centre - half) / den)
    hi = 1.0 if k == n else min(1.0, (centre + half) / den)
    return lo, hi


def check_threshold(threshold: float) -> None:
    """Check an acceptance threshold: a number in (0, 1] (a judge's scores lie in
    [0, 1]; 0 would accept a score of 0, above 1 or NaN would accept nothing).

    Raises:
        InputError: it is not such a number.
    """
    ok = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if not ok or not 0 < threshold <= 1:
        raise InputError(
            f"judge calibrate: --threshold must be a number in (0, 1] (a score of at least "
            f"it accepts an answer), got {threshold!r}"
        )


def grade(
    judge: Judge,
    items: Sequence[Item],
    *,
    threshold: float = 0.5,
    concurrency: int = 16,
    max_usd: float | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Every item graded (``GRADED_COLUMNS``): the judge's score, verdict, whether it
    accepted the answer (NaN: ungraded, or left ungraded by ``max_usd``) and its
    reply.

    Raises:
        InputError: ``threshold`` is not in (0, 1] (nothing is graded).
        MemlabError: a judge call failed for good.
    """
    check_threshold(threshold)
    questions = [
        Question(question=it.question, answer=it.answer, gold=it.gold, category=it.category,
                 dataset="locomo", id=f"{it.set}/{it.question_id}")
        for it in items
    ]  # fmt: skip
    verdicts = grade_all(
        judge, questions, concurrency=concurrency, max_usd=max_usd, progress=progress
    )
    rows = []
    for it, v in zip(items, verdicts, strict=True):
        score = v.score if v is not None else math.nan
        accepted = math.nan if math.isnan(score) else float(score >= threshold)
        rows.append(
            dict(set=it.set, question_id=it.question_id, category=it.category,
                 question=it.question, gold=it.gold, answer=it.answer, score=score,
                 verdict=v.label if v is not None else "not graded (max cost)",
                 accepted=accepted, judge_text=v.text if v is not None else "")
        )  # fmt: skip
    return pd.DataFrame(rows, columns=GRADED_COLUMNS)


def summarize(graded: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Acceptance rate per set and category (and ``all``), with its Wilson interval;
    ``rate`` says whether it is a true-accept or a false-accept rate."""
    rows = []
    for name in SETS:
        mine = graded[graded["set"] == name]
        if mine.empty:
            continue
        cats = [c for c in dict.fromkeys(CATEGORIES.values()) if c in set(mine["category"])]
        cats += sorted(set(mine["category"]) - set(cats))
        for cat in [*cats, "all"]:
            sub = mine if cat == "all" else mine[mine["category"] == cat]
            judged = sub["accepted"].dropna()
            k, n = int(judged.sum()), len(judged)
            lo, hi = wilson(k, n, level)
            rows.append(
                dict(set=name, rate=SETS[name][0], category=cat, n=n, accepted=k,
                     ungraded=len(sub) - n, accept_rate=k / n if n else math.nan,
                     ci_low=lo, ci_high=hi)
            )  # fmt: skip
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per set (category ``all``): the rate with its interval, as text."""
    sub = summary[summary["category"] == "all"]
    return pd.DataFrame(
        {
            "answers": [f"{s} ({SETS[s][1]})" for s in sub["set"]],
            "rate": sub["rate"].tolist(),
            "accepted": [
                f"{r['accept_rate']:.1%} [{r['ci_low']:.1%}, {r['ci_high']:.1%}] of {r['n']}"
                if r["n"]
                else "-"
                for r in sub.to_dict("records")
            ],
            "ungraded": sub["ungraded"].tolist(),
        }
    )


def write(
    out: Path, graded: pd.DataFrame, summary: pd.DataFrame, provenance: dict[str, Any]
) -> list[Path]:
    """graded.csv (every answer and verdict), summary.csv (the rates),
    provenance.json (the judge's name, model and prompt hash, the answer files'
    SHA-256) and calibration.md; returns the files.

    Raises:
        OutputError: the folder cannot be written.
    """
    from memlab.lab.files import atomic_write, atomic_write_text
    from memlab.lab.report import markdown_table

    def table(frame: pd.DataFrame) -> str:
        return markdown_table(frame)

    judge = provenance.get("judge") or {}
    lines = [
        "# Judge calibration",
        "",
        f"- judge: `{judge.get('name')}` (model: {judge.get('model') or 'none, a rule'}; "
        f"prompt sha256 `{str(judge.get('prompt_sha256'))[:12]}`)",
    ]
    lines += [f"- {k} answers: `{v['file']}` (sha256 `{v['sha256'][:12]}`)"
              for k, v in provenance.get("answers", {}).items()]  # fmt: skip
    lines += [
        f"- an answer is accepted when the judge's score is at least {provenance.get('threshold')}",
        "",
        table(headline(summary)),
        "By category (Wilson 95% intervals):",
        "",
        table(summary),
    ]
    written = [
        atomic_write(out / "graded.csv", lambda f: graded.to_csv(f, index=False)),
        atomic_write(out / "summary.csv", lambda f: summary.to_csv(f, index=False)),
        atomic_write_text(out / "provenance.json", json.dumps(provenance, indent=1) + "\n"),
        atomic_write_text(out / "calibration.md", "\n".join(lines)),
    ]
    return written


__all__ = [
    "FILES",
    "GRADED_COLUMNS",
    "SETS",
    "SUMMARY_COLUMNS",
    "Item",
    "check_threshold",
    "find_audit",
    "grade",
    "headline",
    "load_answers",
    "summarize",
    "wilson",
    "write",
]
