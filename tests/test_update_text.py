"""memlab.memory.update_text: the keys, loose text and typed values the
supersession rules compare (the rules themselves: test_clause_rules.py)."""

from __future__ import annotations

import pytest

from memlab.memory.update_text import key, loose, parse, token_breaks, tokens


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


@pytest.mark.parametrize(
    ("text", "typed"),
    [
        ("Logs stay for 30 days.", [("duration", "30 days")]),
        ("We keep them for two years.", [("duration", "two years")]),
        ("Escalate to the CTO after an hour.", [("duration", "an hour")]),
        # a rate, not a duration: the sum is the value
        ("We pay $40 an hour for support.", [("money", "$40")]),
        ("The cap is $50,000 a month.", [("money", "$50,000")]),
        ("Renewal is on March 31.", [("date", "march 31")]),
        ("Give me a minute.", []),
    ],
)
def test_typed_values(text: str, typed: list) -> None:
    assert list(parse(text).clauses[0].typed) == typed


def test_token_breaks_are_where_punctuation_follows() -> None:
    text = "btw, only touch prod during our window, tuesday 01:00 — thanks"
    toks = tuple(tokens(text))
    assert [toks[i] for i in sorted(token_breaks(text, toks))] == ["btw", "window", "01:00"]
    # a clause's tokens, a leading word dropped: indices are into those
    assert sorted(token_breaks(text, toks[1:])) == [5, 7]
    assert token_breaks(text, ("nothing", "here")) == frozenset()


def test_a_clause_states_its_keys_without_the_values_it_names_as_old() -> None:
    (clause,) = parse("We moved the code from AWS CodeCommit to Sourcehut.").clauses
    assert "aws" not in clause.stated_keys and "codec" not in clause.stated_keys
    assert set(clause.stated_keys) < set(clause.keys)
    assert clause.token_set == frozenset(clause.tokens)
    # the cached values leave equality to the fields: a clause parsed again (another
    # instance, nothing cached yet) is equal to the one that cached them
    again = parse.__wrapped__("We moved the code from AWS CodeCommit to Sourcehut.").clauses[0]
    assert again is not clause and again == clause
    (plain,) = parse("Our code lives on Sourcehut.").clauses
    assert plain.stated_keys == plain.keys
