"""memlab.memory.update_text: the clauses and typed values the supersession rules
compare (the word level: test_update_tokens.py; the rules: test_clause_rules.py)."""

from __future__ import annotations

import pytest

from memlab.memory.update_text import parse


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
