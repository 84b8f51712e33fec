"""memlab.memory.checks: the shared argument checks."""

from __future__ import annotations

import pytest

from memlab.errors import InputError
from memlab.memory.checks import check_id, check_meta, check_strings, check_text, check_unicode
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
