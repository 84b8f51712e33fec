"""memlab.memory.frames: one statement with one replaced span."""

from __future__ import annotations

import pytest

from memlab.memory.frames import same_frame
from memlab.memory.update_text import parse


def frame(old: str, new: str, max_value_words: int = 4):
    return same_frame(parse(old).clauses[0], parse(new).clauses[0], max_value_words)


def test_two_word_value_replaced():
    f = frame("Code's all in Azure Repos.", "Code's all in Gitea.")
    assert f is not None
    assert (f.old_value, f.new_value) == ("azure repos", "gitea")
    assert f.frame == ("code", "all", "in")


def test_value_that_shares_a_stem_with_the_frame():
    # "sourcehut" and "source" share the five-letter key "sourc"
    f = frame("source is hosted on aws codecommit", "source is hosted on sourcehut")
    assert f is not None and f.new_value == "sourcehut"


def test_slot_at_the_start():
    f = frame("Hiroshi Sato is on call this week.", "Valentina Russo is on call this week.")
    assert f is not None and f.old_value == "hiroshi sato"


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("It is in Lisbon.", "It is in Porto.", "frame without a content word"),
        ("Our office was in Lisbon.", "Our office is in Lisbon.", "tense, no value"),
        ("Our staging DB is Postgres.", "Our production DB is Postgres.", "no value shape"),
        ("aws ecs took its place.", "$800 a month took its place.", "a name for money"),
        ("Page us in #ops quickly.", "Page us in 20 minutes quickly.", "two classes"),
        ("Ticket SUP-123 is about SSO.", "Ticket SUP-456 is about SSO.", "two identifiers"),
        ("Staging runs on GKE in Frankfurt.", "Prod runs on GKE in Dublin.", "two spans"),
        ("We use Slack.", "We use Slack.", "nothing differs"),
        ("Logs go to A B C D E now.", "Logs go to F now.", "value longer than the limit"),
    ],
)
def test_not_one_slot(old: str, new: str, why: str):
    assert frame(old, new) is None, why


def test_value_word_limit_is_a_parameter():
    old, new = "Logs go to Alpha Beta Gamma.", "Logs go to Delta."
    assert frame(old, new, max_value_words=3) is not None
    assert frame(old, new, max_value_words=2) is None
