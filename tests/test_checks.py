"""memlab.memory.checks: the shared argument checks."""

from __future__ import annotations

import pytest

from memlab.errors import InputError
from memlab.memory.checks import (
    MAX_EPOCH,
    MIN_EPOCH,
    check_id,
    check_meta,
    check_strings,
    check_text,
    check_time,
    check_unicode,
)
from memlab.memory.explain import iso
from tests.conftest import make_record


@pytest.mark.parametrize("text", ["plain ascii", "café ☕ 東京", "emoji 🙂", ""])
def test_valid_unicode_passes_unchanged(text: str) -> None:
    assert check_unicode(text, "x") is text


@pytest.mark.parametrize("text", ["\ud800", "ok \udc80 then", "é\udfff"])
def test_a_lone_surrogate_is_an_input_error_naming_the_field(text: str) -> None:
    with pytest.raises(InputError, match="content is not valid unicode"):
        check_unicode(text, "content")
    with pytest.raises(InputError, match="not valid unicode"):
        check_text("a " + text, "content")
    with pytest.raises(InputError, match=r"texts\[1\] is not valid unicode"):
        check_strings(["fine", "a " + text], "texts")
    with pytest.raises(InputError, match="not valid unicode"):
        check_id("id" + text)
    with pytest.raises(InputError, match="not valid unicode"):
        check_meta({"note": text})


def test_a_record_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(InputError, match="content is not valid unicode"):
        make_record(id="r1", content="we moved to \ud800 Lisbon").validate()
    make_record(id="r1", content="we moved to Lisbon, café ☕").validate()


def test_a_time_is_epoch_seconds_that_a_datetime_can_show() -> None:
    assert check_time(0, "t") == 0.0 and isinstance(check_time(0, "t"), float)
    assert check_time(None, "t", none=True) is None
    assert iso(check_time(MIN_EPOCH, "t")) == "0001-01-01T00:00:00Z"
    assert iso(check_time(MAX_EPOCH, "t")) == "9999-12-31T23:59:59Z"
    for bad in [MAX_EPOCH + 1, MIN_EPOCH - 1, 1e300, float("nan"), float("inf"), "now", True]:
        with pytest.raises(InputError, match="created_at"):
            check_time(bad, "created_at")
    with pytest.raises(InputError):
        check_time(None, "t")


def test_iso_shows_a_time_no_datetime_holds_as_the_number() -> None:
    # records and queries never hold one (check_time); a prompt still never fails
    assert iso(1e13) == "10000000000000.0 (epoch seconds)"
    assert iso(float("nan")) == "nan (epoch seconds)"
