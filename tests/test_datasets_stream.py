"""The streaming JSON reader and the helpers the benchmark adapters share
(memlab.lab.datasets.stream)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.errors import TranscriptError
from memlab.lab.datasets import (
    DatasetWarning,
    Quirks,
    answer_text,
    dedupe_id,
    iter_json_array,
    select,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(
    items=st.lists(json_values, max_size=8),
    chunk=st.integers(min_value=1, max_value=40),
    indent=st.sampled_from([None, 1, 3]),
)
def test_streaming_reader_matches_json_loads(
    tmp_path_factory: pytest.TempPathFactory, items: list, chunk: int, indent: int | None
) -> None:
    f = tmp_path_factory.mktemp("arr") / "items.json"
    f.write_text(json.dumps(items, indent=indent, ensure_ascii=False), encoding="utf-8")
    assert list(iter_json_array(f, progress=False, chunk_chars=chunk)) == items


def test_numbers_cut_by_a_chunk_boundary_are_read_whole(tmp_path: Path) -> None:
    f = tmp_path / "n.json"
    f.write_text("[12345678, 3.25e10, -7]")
    for chunk in range(1, 12):
        assert list(iter_json_array(f, progress=False, chunk_chars=chunk)) == [
            12345678,
            3.25e10,
            -7,
        ]


def test_utf8_bom_and_multibyte_characters_split_across_reads(tmp_path: Path) -> None:
    f = tmp_path / "u.json"
    f.write_bytes("\ufeff".encode() + json.dumps([{"t": "café ☕ 😀"}]).encode())
    assert list(iter_json_array(f, progress=False, chunk_chars=1)) == [{"t": "café ☕ 😀"}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ('{"a": 1}', "expected a JSON array"),
        ('[{"a": 1}, {"a": 2}', "ends inside the top-level array"),
        ('[{"a": 1} {"a": 2}]', "expected ',' or ']' after item #0"),
        ('[{"a": 1}, {"a": }]', "item #1 is not valid JSON"),
        ('[{"a": 1},', "ends after a ','"),
        ("[1] [2]", "unexpected data after the closing"),
    ],
)
def test_bad_files_raise_transcript_errors_naming_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    f = tmp_path / "bad.json"
    f.write_text(text)
    with pytest.raises(TranscriptError, match=message):
        list(iter_json_array(f, progress=False, chunk_chars=4))


def test_non_utf8_and_missing_files(tmp_path: Path) -> None:
    f = tmp_path / "latin1.json"
    f.write_bytes('["caf\xe9"]'.encode("latin-1"))
    with pytest.raises(TranscriptError, match="not UTF-8"):
        list(iter_json_array(f, progress=False))
    with pytest.raises(TranscriptError, match="cannot read"):
        list(iter_json_array(tmp_path / "missing.json", progress=False))


def test_reading_stops_when_the_caller_stops(tmp_path: Path) -> None:
    f = tmp_path / "big.json"
    f.write_text("[" + ", ".join(json.dumps({"i": i}) for i in range(1000)) + ", {broken")
    first = []
    for item in iter_json_array(f, progress=False, chunk_chars=64):
        first.append(item["i"])
        if len(first) == 3:
            break
    assert first == [0, 1, 2]  # the broken tail was never parsed


def test_select_by_ids_and_limit_stops_early() -> None:
    seen: list[str] = []

    def items():  # type: ignore[no-untyped-def]
        for i in "abcdef":
            seen.append(i)
            yield i, i.upper()

    assert list(select(items(), None, 2)) == [("a", "A"), ("b", "B")]
    seen.clear()
    assert list(select(items(), ["c", "b"], None)) == [("b", "B"), ("c", "C")]
    assert seen == ["a", "b", "c"]  # stopped once every wanted id was found


def test_quirks_make_one_warning_with_counts_and_examples() -> None:
    q = Quirks("f.json")
    for i in range(5):
        q.add("things repaired", f"#{i}")
    q.add("other things")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        q.warn()
        Quirks("clean.json").warn()
    assert len(w) == 1 and issubclass(w[0].category, DatasetWarning)
    msg = str(w[0].message)
    assert msg.startswith("f.json: 5 things repaired (e.g. #0; #1; #2), 1 other things")


def test_dedupe_id() -> None:
    assert dedupe_id("a", set()) == "a"
    assert dedupe_id("a", {"a", "a#2"}) == "a#3"


def test_answer_text() -> None:
    assert answer_text(3) == "3" and answer_text(" a ") == "a"
    assert answer_text(["x", 2]) == "x, 2"
    assert answer_text(None) is None and answer_text("  ") is None and answer_text([]) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, " + "[" * 100_000 + "]" * 100_000 + "]", r"item #1 nests .* too deeply"),
        ('[{"a": ' + "9" * 5000 + "}]", r"item #0 holds a value that cannot be read"),
    ],
)
def test_items_python_cannot_hold_are_transcript_errors(
    tmp_path: Path, text: str, message: str
) -> None:
    # A RecursionError and the int-digits ValueError escaped as internal errors.
    f = tmp_path / "hostile.json"
    f.write_text(text)
    for chunk in (4, 1 << 20):
        with pytest.raises(TranscriptError, match=message):
            list(iter_json_array(f, progress=False, chunk_chars=chunk))
