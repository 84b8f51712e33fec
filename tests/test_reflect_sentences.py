"""How the rule reflector reads a sentence: splitting, reactions and courtesies,
preferences and bounds, questions that open with a statement, values, and rules
that lean back on the sentence before them."""

from __future__ import annotations

import pytest

from memlab.memory.reflect_sentences import (
    PREFERENCE,
    ended,
    is_courtesy,
    is_reaction,
    leans_back,
    names_something,
    overlap,
    sentences,
    specifics,
    statement_key,
    statements,
    states_before_asking,
)


def test_sentences_split_after_stops_and_at_line_breaks() -> None:
    assert sentences("One. Two!\nThree?") == ["One.", "Two!", "Three?"]
    assert sentences("  \n ") == []
    assert sentences("v1.2 is out") == ["v1.2 is out"]  # no space after the dot


def test_ended_adds_a_full_stop_only_when_missing() -> None:
    assert ended("We deploy on Fly.io") == "We deploy on Fly.io."
    assert ended("Done! ") == "Done!"


def test_overlap_is_jaccard_of_content_words() -> None:
    a, b = statement_key("Our CDN is Fastly."), statement_key("The CDN is Fastly now.")
    assert 0.0 < overlap(a, b) <= 1.0
    assert overlap(a, a) == 1.0
    assert overlap(frozenset(), frozenset()) == 0.0


@pytest.mark.parametrize(
    ("text", "reaction"),
    [
        ("Brilliant, that's what I needed.", True),
        ("ah great", True),
        ("Ok, the budget is 40k a month.", False),  # a number
        ("ok, we're bound by fedramp", False),  # the speaker's own side
        ("Great, always page me on Zenduty.", False),  # a preference
        ("thanks, the deadline is friday", False),  # uncased and too long to tell
        ("ok, and send invoices to finance@acme.io", False),  # "ok, and" leads in
    ],
)
def test_a_reaction_opens_with_an_interjection_and_states_nothing(
    text: str, reaction: bool
) -> None:
    assert is_reaction(text) is reaction


def test_courtesies_are_pleasantries_or_greetings() -> None:
    assert is_courtesy("Welcome back, Maya.")
    assert is_courtesy("Talk soon!")
    assert not is_courtesy("Maya runs the on-call rota.")


@pytest.mark.parametrize(
    ("text", "preference"),
    [
        ("Always page me on Zenduty.", True),
        ("We need at least two reviewers.", True),
        ("Alright, that's progress at least.", False),
        ("at least, that is what I heard", False),
        ("Spend no more than $500 a month.", True),
        ("Our CDN is Fastly.", False),
    ],
)
def test_a_bound_is_a_preference_only_with_its_quantity(text: str, preference: bool) -> None:
    assert bool(PREFERENCE.search(text)) is preference


def test_a_question_that_opens_with_a_statement_states_something() -> None:
    assert states_before_asking("I'm visiting my sister Emily in Denver soon, any tips?")
    assert states_before_asking("our controller wants the charges split by department, doable?")
    assert not states_before_asking("Also, can you check the status page?")
    assert not states_before_asking("Is there a limit?")


def test_specifics_are_numbers_and_names_not_the_first_word() -> None:
    assert specifics("Our CDN is Fastly since 2021.") == {"cdn", "fastly", "2021"}
    assert specifics("Fastly it is.") == set()
    assert names_something("send it to finance@acme.io")  # a value-shaped token
    assert not names_something("never exceed it")


def test_a_rule_that_leans_back_joins_the_sentence_before_it() -> None:
    assert leans_back("Never exceed it.")
    assert leans_back("Always.")
    assert not leans_back("Never page me at night.")  # it names what it rules on
    assert not leans_back("Our cap is $1,200.")  # not a rule
    assert statements(["Hard cap on spend: $1,200 a month.", "Never exceed it."]) == [
        "Hard cap on spend: $1,200 a month. Never exceed it."
    ]
    # after a question or a courtesy there is nothing to lean on
    assert statements(["Can you cap it?", "Always."]) == ["Can you cap it?", "Always."]
    assert statements(["Thanks!", "Always."]) == ["Thanks!", "Always."]
