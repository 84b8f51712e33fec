"""memlab.memory.update_tokens: tokens, comparison keys, loose text and value types."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.memory.update_text import contains
from memlab.memory.update_tokens import (
    TOKEN,
    key,
    looks_like_value,
    loose,
    token_breaks,
    tokens,
    value_class,
    value_type,
)


@pytest.mark.parametrize(
    ("a", "b"),
    [("hosted", "host"), ("logs", "log"), ("capped", "cap"), ("escalate", "escalation"),
     ("pages", "page")],
)  # fmt: skip
def test_inflections_share_a_key(a: str, b: str) -> None:
    assert key(a) == key(b)


def test_tokens_with_digits_keep_their_whole_key() -> None:
    assert key("europe-west1") != key("europe-west4")


def test_loose_text_tests_whole_words() -> None:
    assert " 7 " in loose("Renewal is on the 7th.")
    assert " host " not in loose("We are hosted on Gitea.")


def test_token_breaks_are_where_punctuation_follows() -> None:
    text = "btw, only touch prod during our window, tuesday 01:00 — thanks"
    toks = tuple(tokens(text))
    assert [toks[i] for i in sorted(token_breaks(text, toks))] == ["btw", "window", "01:00"]
    # a clause's tokens, a leading word dropped: indices are into those
    assert sorted(token_breaks(text, toks[1:])) == [5, 7]
    assert token_breaks(text, ("nothing", "here")) == frozenset()


def test_values_stay_one_token() -> None:
    text = "Send invoices to billing@acme.io, not ap@acme.io — fly.io's europe-west1 at $30,000."
    assert tokens(text) == [
        "send", "invoices", "to", "billing@acme.io", "not", "ap@acme.io", "fly.io",
        "europe-west1", "at", "$30,000",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("token", "vtype", "vclass"),
    [
        ("billing@acme.io", "email@acme.io", "email"),  # one slot per domain
        ("inv-5321", "id:inv", "id"),
        ("#ops-alerts", "channel", "channel"),
        ("america/new_york", "area/city", "area/city"),
        ("https://x.io/a", "url:x.io", "url"),
        ("02:00", "clock", "number"),
        ("$50,000", "money", "number"),
        ("7th", None, "number"),
        ("heroku", None, "name"),
        ("tuesdays", None, "date"),  # when, not what
        ("october", None, "date"),
    ],
)
def test_value_types_and_classes(token: str, vtype: str | None, vclass: str) -> None:
    assert value_type(token) == vtype
    assert value_class(token, token) == vclass


def test_values_look_cased_or_symbolic_in_cased_text() -> None:
    assert looks_like_value("GitLab", True)  # mixed case, even first
    assert looks_like_value("$40", False) and looks_like_value("two", False)
    assert not looks_like_value("Heroku", True)  # only the sentence's capital
    assert looks_like_value("Heroku", False) and not looks_like_value("read", False)


def test_keys_tokens_and_value_types() -> None:
    assert tokens("Email vendor-payments@acme.co, #ops-desk or Fly.io at 9:30 ($7,500).") == [
        "email", "vendor-payments@acme.co", "#ops-desk", "or", "fly.io", "at", "9:30", "$7,500",
    ]  # fmt: skip
    assert key("escalation") == key("escalate") and key("hosting") == key("hosted")
    assert key("pages") == key("page") and key("capped") == "cap"
    assert key("europe-west1") != key("europe-west4")
    assert value_type("ap@acme.io") == "email@acme.io" and value_type("sup-123") == "id:sup"
    assert value_type("#ops") == "channel" and value_type("asia/jakarta") == "area/city"
    assert value_type("europe-west1") == value_type("europe-west4") != value_type("us-east-1")
    assert value_type("heroku") is None
    assert contains(loose("We deploy on GKE."), "gke") and not contains(loose("GKE2"), "gke")


# The tokenizer's pattern as one regex (its e-mail branch tried from every position
# of a run of dots was quadratic: 100,000 dots took 28 s).
_TOKEN_BEFORE = re.compile(TOKEN.pattern)
_TOKEN_PIECES = ["a", "Zé", "1", "42", ".", "+", "-", "_", "@", "b@c.io", "x.y", " ", "'",
                 "’", "#", "$", "€", "/", "&", ":", ",", "%", "http://h/p", "\n"]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_TOKEN_PIECES), max_size=24))
def test_token_finds_what_it_found_before(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert [m.span() for m in TOKEN.finditer(text)] == [
        m.span() for m in _TOKEN_BEFORE.finditer(text)
    ]


def test_a_run_of_dots_tokenizes_in_linear_time() -> None:
    """remember('.' * 100,000) with the rule consolidator took 28 s in TOKEN."""
    assert TOKEN.findall("." * 200_000 + " ops@acme.io") == ["ops@acme.io"]
    assert TOKEN.findall("+-" * 100_000) == []
    assert TOKEN.findall("a@b.io" + "." * 200_000 + "x") == ["a@b.io", "x"]
