"""Time expressions in a query, resolved against the query's "now".

"What did I say last week?", "in May 2023", "two days ago", "on 8 May, 2023":
such a question asks about a period, and "newer is better" is the wrong prior
for it. ``parse_time`` turns the first expression it recognizes into a window
``[start, end)`` of epoch seconds (UTC); the ranker then scores records by how
close they were made to that window (see ``time_signal``). Deterministic, no
dependencies, English only. Relative to events ("before the move") it does not
resolve; such queries keep the recency prior.
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from memlab.memory.checks import check_text, check_time

DAY = 86400.0
MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
MONTHS["sept"] = 9
WEEKDAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "couple of": 2, "a few": 3, "few": 3, "several": 4,
}  # fmt: skip
_MONTH = r"(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_NUM = r"(\d+|" + "|".join(sorted((re.escape(k) for k in NUMBERS), key=len, reverse=True)) + r")"


@dataclass(frozen=True)
class TimeWindow:
    """A period a query names: ``[start, end)`` in epoch seconds, and the words."""

    start: float
    end: float
    expression: str

    @property
    def width(self) -> float:
        return self.end - self.start


def _day_start(dt: datetime) -> datetime:
    return dt.replace(hour=0, minute=0, second=0, microsecond=0)


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _window(start: datetime, end: datetime, expression: str) -> TimeWindow:
    return TimeWindow(start.timestamp(), end.timestamp(), expression)


def _number(text: str) -> int:
    return int(text) if text.isdigit() else NUMBERS[text]


def parse_time(text: str, now: float) -> TimeWindow | None:
    """The period the first time expression in ``text`` names, or None.

    Recognized (case-insensitive): ISO dates (2023-05-08); "8 May 2023",
    "May 8, 2023", "May 2023", "in May" (the latest May not after now), "in 2023";
    "today", "this morning", "tonight", "yesterday", "the day before yesterday";
    "this/last week", "this/last month", "this/last year", "last weekend",
    "last <weekday>"; "N days/weeks/months/years ago" (N a number or a word such
    as "two", "a couple of", "a few"); "recently", "lately" (the last 14 days).

    A period that reaches outside the years 1..9999 (what ``datetime``, and so
    every record's time, can hold: "December 9999", "yesterday" on 1 January of
    year 1) is no period here: None, so the recall keeps its recency prior.

    Raises:
        InputError: ``text`` is not a string or ``now`` is not finite epoch seconds.
    """
    check_text(text, "text", empty=True)
    now = check_time(now, "now")
    try:
        return _parse(text.lower(), now)
    except (OverflowError, ValueError):
        # datetime's range ends at years 1 and 9999: a query's own words ("what did I
        # say on 9999-12-31?") failed every recall with a bare OverflowError
        return None


def _parse(s: str, now: float) -> TimeWindow | None:
    """``parse_time`` of lower-cased, checked text."""
    now_dt = datetime.fromtimestamp(now, tz=UTC)
    today = _day_start(now_dt)

    m = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", s)
    if m:
        try:
            d = datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC)
            return _window(d, d + timedelta(days=1), m[0])
        except ValueError:
            pass
    m = re.search(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", s)
    if m:
        try:
            d = datetime(int(m[3]), MONTHS[m[2]], int(m[1]), tzinfo=UTC)
            return _window(d, d + timedelta(days=1), m[0])
        except ValueError:
            pass
    m = re.search(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", s)
    if m:
        try:
            d = datetime(int(m[3]), MONTHS[m[1]], int(m[2]), tzinfo=UTC)
            return _window(d, d + timedelta(days=1), m[0])
        except ValueError:
            pass
    m = re.search(rf"\b{_MONTH},?\s+(?:of\s+)?(\d{{4}})\b", s)
    if m:
        return _window(*_month(int(m[2]), MONTHS[m[1]]), m[0])
    m = re.search(r"\bthe day before yesterday\b", s)
    if m:
        return _window(today - timedelta(days=2), today - timedelta(days=1), m[0])
    m = re.search(r"\byesterday\b", s)
    if m:
        return _window(today - timedelta(days=1), today, m[0])
    m = re.search(r"\b(today|this morning|this afternoon|this evening|tonight|earlier today)\b", s)
    if m:
        return _window(today, today + timedelta(days=1), m[0])
    m = re.search(rf"\b{_NUM}\s+(day|week|month|year)s?\s+ago\b", s)
    if m:
        n = _number(m[1])
        unit = {"day": 1, "week": 7, "month": 30.44, "year": 365.25}[m[2]]
        centre = now - n * unit * DAY
        half = max(unit / 2, 1.0) * DAY
        return TimeWindow(centre - half, centre + half, m[0])
    m = re.search(r"\blast weekend\b", s)
    if m:
        saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
        return _window(saturday, saturday + timedelta(days=2), m[0])
    m = re.search(r"\blast (" + "|".join(WEEKDAYS) + r")\b", s)
    if m:
        back = (today.weekday() - WEEKDAYS[m[1]]) % 7 or 7
        d = today - timedelta(days=back)
        return _window(d, d + timedelta(days=1), m[0])
    m = re.search(r"\b(this|last|past|previous) (week|month|year)\b", s)
    if m:
        if m[2] == "week":
            start = today - timedelta(days=today.weekday())
            if m[1] == "this":
                return _window(start, today + timedelta(days=1), m[0])
            return _window(start - timedelta(days=7), start, m[0])
        if m[2] == "month":
            if m[1] == "this":
                return _window(
                    *_month(today.year, today.month)[:1], today + timedelta(days=1), m[0]
                )
            prev = (today.year - (today.month == 1), (today.month - 2) % 12 + 1)
            return _window(*_month(*prev), m[0])
        year = today.year if m[1] == "this" else today.year - 1
        return _window(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), m[0])
    m = re.search(rf"\b(?:in|during|since|from|back in)\s+{_MONTH}\b(?!\s+\d)", s)
    if m:
        month = MONTHS[m[1]]
        year = today.year if month <= today.month else today.year - 1
        return _window(*_month(year, month), m[0])
    m = re.search(r"\b(?:in|during|since|from|back in)\s+((?:19|20)\d{2})\b", s)
    if m:
        year = int(m[1])
        return _window(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), m[0])
    m = re.search(r"\b(recently|lately|these days)\b", s)
    if m:
        return TimeWindow(now - 14 * DAY, now + 1.0, m[0])
    return None


def time_signal(created_at: np.ndarray, window: TimeWindow) -> np.ndarray:
    """1 inside the window, halving for every window-width (at least a day) outside."""
    scale = max(window.width, DAY)
    distance = np.maximum(window.start - created_at, 0.0) + np.maximum(created_at - window.end, 0.0)
    return np.exp(-math.log(2.0) * distance / scale)
