"""Time expressions resolved against the query's now."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from memlab.memory import HashEmbedder, InMemoryStore, MemoryLayer, RankWeights, RecallQuery
from memlab.memory.checks import MAX_EPOCH, MIN_EPOCH
from memlab.memory.timeparse import DAY, TimeWindow, parse_time, time_signal

NOW = datetime(2023, 10, 20, 15, 0, tzinfo=UTC).timestamp()  # a Friday


def day(y: int, m: int, d: int) -> float:
    return datetime(y, m, d, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("What did I say last week?", day(2023, 10, 9), day(2023, 10, 16)),
        ("What happened in May 2023?", day(2023, 5, 1), day(2023, 6, 1)),
        ("on 8 May, 2023", day(2023, 5, 8), day(2023, 5, 9)),
        ("May 7, 2023", day(2023, 5, 7), day(2023, 5, 8)),
        ("2023-05-08", day(2023, 5, 8), day(2023, 5, 9)),
        ("what did we discuss yesterday", day(2023, 10, 19), day(2023, 10, 20)),
        ("the day before yesterday", day(2023, 10, 18), day(2023, 10, 19)),
        ("camping in June", day(2023, 6, 1), day(2023, 7, 1)),
        ("in November", day(2022, 11, 1), day(2022, 12, 1)),  # the latest November not after now
        ("what happened in 2022", day(2022, 1, 1), day(2023, 1, 1)),
        ("last month", day(2023, 9, 1), day(2023, 10, 1)),
        ("last year", day(2022, 1, 1), day(2023, 1, 1)),
        ("last Saturday", day(2023, 10, 14), day(2023, 10, 15)),
        ("last weekend", day(2023, 10, 14), day(2023, 10, 16)),
        ("this morning", day(2023, 10, 20), day(2023, 10, 21)),
    ],
)
def test_windows(text: str, start: float, end: float) -> None:
    w = parse_time(text, NOW)
    assert w is not None and (w.start, w.end) == (start, end)


def test_relative_ago() -> None:
    w = parse_time("two weeks ago", NOW)
    assert w is not None and w.start < NOW - 14 * DAY < w.end and w.width == 7 * DAY
    w = parse_time("a couple of days ago", NOW)
    assert w is not None and w.start <= NOW - 2 * DAY <= w.end
    w = parse_time("3 months ago", NOW)
    assert w is not None and w.start < NOW - 90 * DAY < w.end


@pytest.mark.parametrize(
    "text",
    [
        "Where do we deploy?",
        "before the move",
        "May I ask something?",
        "I may 2 things",
        "In 1850 dollars",
    ],
)
def test_no_time(text: str) -> None:
    assert parse_time(text, NOW) is None


def test_signal_is_one_inside_and_halves_per_width_outside() -> None:
    w = TimeWindow(day(2023, 5, 1), day(2023, 5, 3), "x")
    created = np.array([day(2023, 5, 2), day(2023, 5, 5), day(2023, 4, 29), day(2023, 5, 9)])
    np.testing.assert_allclose(time_signal(created, w), [1.0, 0.5, 0.5, 0.125])


@pytest.mark.parametrize(
    ("text", "now"),
    [
        ("what did I say on 9999-12-31?", NOW),  # its day ends in year 10000
        ("31 December 9999", NOW),
        ("in December 9999", NOW),
        ("this month", MAX_EPOCH),
        ("yesterday", MIN_EPOCH),
        ("last year", MIN_EPOCH),
        ("in May", MIN_EPOCH),
    ],
)
def test_a_period_outside_the_years_1_to_9999_is_no_period(text: str, now: float) -> None:
    # before, a bare OverflowError or ValueError ('year 10000 is out of range') from
    # datetime, and every recall of such a query with the time signal on failed
    assert parse_time(text, now) is None
    layer = MemoryLayer(InMemoryStore(), HashEmbedder(), weights=RankWeights(time=0.3))
    layer.remember("alice", "We deploy on GKE.", created_at=NOW)
    res = layer.recall(RecallQuery("alice", text, now=now), touch=False)
    assert res.window is None and len(res.hits) == 1
