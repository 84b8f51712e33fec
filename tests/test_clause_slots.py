"""memlab.memory.clause_slots: the facts a clause names by their owner, and how two
clauses' slots relate."""

from __future__ import annotations

import pytest

from memlab.memory.clause_slots import named_apart, shared_slot, slot_topic, slots
from memlab.memory.update_text import parse


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("On file, our spend cap should read $30,000 a month.", {("spend", "cap")}),
        ("$7,500 a month isn't our spend cap anymore.", {("spend", "cap")}),
        ("Wednesday 04:00 UTC is our new maintenance window.", {("maint", "windo")}),
        ("Our CDN became Akamai.", {("cdn",)}),
        ("It's nine engineers on our side.", set()),  # a place, not a fact
        ("Is that on my account?", set()),
        ("Our team is small.", set()),  # a generic word alone
    ],
)
def test_slots_are_the_facts_named_by_their_owner(text: str, named: set) -> None:
    assert slots(parse(text).clauses[0]) == named


@pytest.mark.parametrize(
    ("old", "new", "topic"),
    [
        ("Escalate to the CTO after an hour.", "Our escalation rule is the SRE lead.",
         (("escal", "rule"), ("escal",))),
        ("Source is hosted on Gitea.", "Our code host is Gerrit.",
         (("code", "host"), ("host",))),
        # the old clause names a fact too: it must open with the same word
        ("Our escalation policy: the CTO.", "Our escalation rule: the SRE lead.",
         (("escal", "rule"), ("escal",))),
        ("Our code host is GitLab.", "Our hosting platform is Render.", None),
        ("Our repos live on Gitea.", "Our code host is Gerrit.", None),
        # category and generic words tie nothing
        ("Don't deploy outside the window.", "My call window is 09:00.", None),
        ("The primary database is Postgres.", "Our primary region is Frankfurt.", None),
        ("My team reads those.", "Our team size is ten.", None),
    ],
)  # fmt: skip
def test_slot_topic_is_a_named_fact_the_old_clause_speaks_of(
    old: str, new: str, topic: tuple | None
) -> None:
    assert slot_topic(parse(old).clauses[0], parse(new).clauses[0]) == topic


def test_a_slot_ends_at_punctuation() -> None:
    assert slots(parse("Never deploy outside our window, Sunday 02:00.").clauses[0]) == {("windo",)}
    assert slots(parse("Our escalation policy: the CTO.").clauses[0]) == {("escal", "polic")}


@pytest.mark.parametrize(
    ("old", "new", "apart"),
    [
        ("My call window is 10:00.", "Our maintenance window moved to 23:00.", True),
        ("Outside our window, Sunday 02:00.", "Our maintenance window is 23:00.", False),
        ("Our contract renews on March 31.", "Our renewal date is May 1.", False),
        ("Our CI is Jenkins.", "Our CI system is Buildkite.", False),
        ("Jenkins runs the builds.", "Our CI system is Buildkite.", False),  # no owner
    ],
)  # fmt: skip
def test_named_apart(old: str, new: str, apart: bool) -> None:
    assert named_apart(parse(old).clauses[0], parse(new).clauses[-1]) is apart


def test_a_shared_slot_is_the_longest_fact_both_name() -> None:
    old = parse("My call window is between 14:00 and 17:00.").clauses[0]
    new = parse("My call window has moved to 07:00-09:00.").clauses[0]
    assert shared_slot(old, new) == ("call", "windo")
    assert shared_slot(old, parse("The call window is fine.").clauses[0]) is None
