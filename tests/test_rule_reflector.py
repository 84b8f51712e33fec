"""The rule reflector: what it lifts from a turn (statements, not reactions,
pleasantries or questions), how it labels preferences and constraints, folds
repeats, bundles a pass's facts and covers echoes."""

from __future__ import annotations

import pytest

from memlab.errors import InputError
from memlab.memory import (
    MemoryKind,
    RuleReflector,
    Source,
)
from memlab.memory.reflect import META_KEY
from memlab.memory.reflect_sentences import sentences
from tests.conftest import Clock
from tests.reflection_helpers import labels, make_layer, reflections, say, statements


def test_rule_reflector_lifts_preferences_and_folds_repeats() -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    eps = say(
        layer,
        clock,
        "alice",
        [
            ("user", "Hi there!"),
            ("user", "We deploy on Fly.io in the Frankfurt region."),
            ("agent", "Got it."),
            ("user", "Please always answer in British English."),
            ("user", "Just to repeat: we deploy on Fly.io in the Frankfurt region."),
            ("user", "What time is it?"),
        ],
    )
    report = layer.end_session("alice").reflection
    assert report is not None
    got = {r.content: r for r in reflections(layer, "alice")}
    assert set(got) == {
        "Please always answer in British English.",
        "Just to repeat: we deploy on Fly.io in the Frankfurt region.",
    }
    pref = got["Please always answer in British English."]
    assert pref.meta[META_KEY]["label"] == "preference" and pref.salience >= 0.85
    fact = got["Just to repeat: we deploy on Fly.io in the Frankfurt region."]
    assert fact.meta[META_KEY]["count"] == 2
    # provenance to the episodes read: both statements' turns
    assert set(fact.provenance) == set(eps[1].provenance + eps[4].provenance)
    assert fact.meta[META_KEY]["sources"] == [eps[1].id, eps[4].id]
    assert fact.source is Source.USER
    # covered episodes are archived; the question is content-free, so covered too
    active = {r.id for r in layer.store.list("alice", kinds=[MemoryKind.EPISODIC])}
    assert eps[1].id not in active and eps[3].id not in active and eps[2].id not in active
    assert set(report.read) == {e.id for e in eps}


def test_restating_a_known_reflection_replaces_it() -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    say(layer, clock, "alice", [("user", "Our staging database is Postgres 15 on Neon.")])
    layer.end_session("alice")
    (first,) = reflections(layer, "alice")
    say(layer, clock, "alice", [("user", "Our staging database is Postgres 15 on Neon, as said.")])
    report = layer.end_session("alice").reflection
    assert report is not None and report.retired == [first.id]
    (second,) = reflections(layer, "alice")
    assert second.meta[META_KEY]["count"] == 2
    assert set(first.provenance) <= set(second.provenance)


def test_greetings_to_the_user_are_covered_not_kept() -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    eps = say(layer, clock, "alice", [("agent", "Welcome back, Maya."),
                                      ("user", "We deploy on Fly.io."), ("agent", "Talk soon!")])  # fmt: skip
    report = layer.end_session("alice").reflection
    assert report is not None and set(report.archived) == {e.id for e in eps}


def test_an_echo_of_a_fact_reflected_in_an_earlier_pass_is_covered() -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    say(layer, clock, "alice", [("user", "Our CDN is Fastly.")])
    layer.end_session("alice")
    (echo,) = say(layer, clock, "alice", [("agent", "Saved: Fastly.")])
    (other,) = say(layer, clock, "alice", [("agent", "Noted: Akamai.")])
    report = layer.end_session("alice").reflection
    assert report is not None and echo.id in report.archived  # Fastly was reflected before
    assert other.id not in report.archived  # Akamai never was


def test_a_pass_bundles_its_facts_and_keeps_preferences_apart() -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    eps = say(layer, clock, "alice", [
        ("user", "We deploy on Fly.io."),
        ("user", "Please always answer in British English."),
        ("user", "Our CI is Buildkite."),
    ])  # fmt: skip
    layer.end_session("alice")
    got = sorted(reflections(layer, "alice"), key=lambda r: r.meta[META_KEY]["label"])
    assert [(r.meta[META_KEY]["label"], r.content) for r in got] == [
        ("fact", "We deploy on Fly.io. Our CI is Buildkite."),
        ("preference", "Please always answer in British English."),
    ]
    assert got[0].meta[META_KEY]["sources"] == [eps[0].id, eps[2].id]
    assert got[0].meta[META_KEY]["count"] == 2
    # one record per statement without bundles
    plain = make_layer(clock, RuleReflector(bundle_words=0), every=None, trigger_tokens=None)
    say(plain, clock, "alice", [("user", "We deploy on Fly.io."), ("user", "Our CI is Buildkite.")])
    plain.end_session("alice")
    assert sorted(r.content for r in reflections(plain, "alice")) == [
        "Our CI is Buildkite.",
        "We deploy on Fly.io.",
    ]


def test_a_bundle_holds_at_most_bundle_words() -> None:
    clock = Clock()
    layer = make_layer(clock, RuleReflector(bundle_words=8), every=None, trigger_tokens=None)
    say(layer, clock, "alice", [
        ("user", "We deploy on Fly.io."),  # 4 words
        ("user", "Our CI is Buildkite."),  # 4
        ("user", "Our pager is Opsgenie."),  # 4: a new bundle
    ])  # fmt: skip
    layer.end_session("alice")
    assert sorted(r.content for r in reflections(layer, "alice")) == [
        "Our pager is Opsgenie.",
        "We deploy on Fly.io. Our CI is Buildkite.",
    ]


def test_a_word_for_word_repeat_of_a_bundled_statement_is_not_written_again() -> None:
    clock = Clock()
    layer = make_layer(clock, RuleReflector(bundle_words=8), every=None, trigger_tokens=None)
    say(layer, clock, "alice", [("user", "We deploy on Fly.io."), ("user", "Our CI is Buildkite.")])
    layer.end_session("alice")
    before = {r.id for r in reflections(layer, "alice")}
    eps = say(layer, clock, "alice", [("user", "our ci is buildkite")])
    report = layer.end_session("alice").reflection
    assert report is not None and report.written == [] and report.archived == [eps[0].id]
    assert {r.id for r in reflections(layer, "alice")} == before


def test_a_statement_without_a_cue_word_is_lifted_or_kept() -> None:
    clock = Clock()
    text = "give me a sec. we're bound by fedramp, so keep that in mind."
    layer = make_layer(clock, every=None, trigger_tokens=None)
    (ep,) = say(layer, clock, "alice", [("user", text)])
    layer.end_session("alice")
    assert "we're bound by fedramp, so keep that in mind." in statements(layer, "alice")
    # with a cue score required, the statement is not lifted and its episode stays
    strict = make_layer(clock, RuleReflector(min_score=1), every=None, trigger_tokens=None)
    (ep,) = say(strict, clock, "alice", [("user", text)])
    report = strict.end_session("alice").reflection
    assert report is not None and ep.id not in report.archived
    assert strict.store.get("alice", ep.id).archived_at is None  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "64"])
def test_bundle_words_is_checked(bad: object) -> None:
    with pytest.raises(InputError, match="bundle_words"):
        RuleReflector(bundle_words=bad)  # type: ignore[arg-type]


REACTIONS = [
    "Brilliant, that's what I needed.",
    "Ok, that rules one thing out.",
    "Perfect, thanks, I'll pass that on.",
    "ah great",
    "fine by me.",
    "Hey, me again.",
    "Alright, that's progress at least.",  # "at least" bounds nothing here
]
# each opens like a reaction but states something to keep


NOT_REACTIONS = [
    "Oh, and send invoices to finance@wavecrest.travel.",  # "oh, and ..." leads in
    "oh wait, pages should come through incident.io now",
    "Thanks, the deadline is Friday.",  # a name
    "thanks, the deadline is friday",  # no capitals: no names can be seen, too long
    "ok, we're bound by fedramp",  # the speaker's own side
    "Oh, I'm a single parent.",
    "Ok, the budget is 40k a month.",  # a number
    "Great, always page me on Zenduty.",  # a preference
]


@pytest.mark.parametrize("text", REACTIONS)
def test_a_reaction_is_covered_not_lifted(text: str) -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    (fact, reaction) = say(layer, clock, "alice", [("user", "Our CDN is Fastly."), ("user", text)])
    report = layer.end_session("alice").reflection
    assert report is not None and {fact.id, reaction.id} <= set(report.archived)
    assert statements(layer, "alice") == ["Our CDN is Fastly."]


@pytest.mark.parametrize("text", NOT_REACTIONS)
def test_a_statement_behind_an_interjection_is_lifted(text: str) -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    say(layer, clock, "alice", [("user", text)])
    layer.end_session("alice")
    assert [s.rstrip(".") for s in statements(layer, "alice")] == [text.rstrip(".")]


def test_a_question_that_names_something_keeps_its_episode() -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    named, plain = say(layer, clock, "alice", [
        ("user", "I'm visiting my sister Emily in Denver soon, any kid-friendly tips?"),
        ("user", "which of our queries are the slowest?"),
    ])  # fmt: skip
    report = layer.end_session("alice").reflection
    assert report is not None
    assert named.id not in report.archived  # the facts in it stay recallable
    assert plain.id in report.archived  # a question that names nothing says nothing
    assert statements(layer, "alice") == []  # neither is lifted as a statement


def test_an_agents_echo_archived_with_a_reflection_stays_cited() -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    fact, echo, ack = say(layer, clock, "alice", [
        ("user", "Our CDN is Fastly."), ("agent", "Saved: Fastly."), ("agent", "Ok, noted."),
    ])  # fmt: skip
    report = layer.end_session("alice").reflection
    assert report is not None and {fact.id, echo.id, ack.id} <= set(report.archived)
    (refl,) = reflections(layer, "alice")
    assert refl.source is Source.USER  # the echo is cited, not a source of its trust
    assert set(echo.provenance) <= set(refl.provenance)  # what cited the echo still finds it
    assert not set(ack.provenance) & set(refl.provenance)  # "Ok, noted." names nothing


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("We need at least two reviewers on every change.", "preference"),
        ("Keep at most 5 replicas in staging.", "preference"),
        ("No more than $500 a month on the sandbox.", "preference"),
        ("The new dashboard works now, at least.", "fact"),  # the adverb bounds nothing
        ("Our build got faster at least", "fact"),
    ],
)
def test_a_bound_is_a_constraint_only_with_its_quantity(text: str, label: str) -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    say(layer, clock, "alice", [("user", text)])
    layer.end_session("alice")
    assert labels(layer, "alice") == [(label, text)]


def test_a_rule_that_leans_back_is_kept_with_what_it_rules_on() -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    say(layer, clock, "alice", [
        ("user", "Hard cap on spend: $1,200 a month. Never exceed it. We deploy on Fly.io."),
        ("user", "Unacked alerts go to the SRE lead after 25 minutes. Always."),
    ])  # fmt: skip
    layer.end_session("alice")
    assert labels(layer, "alice") == [
        ("fact", "We deploy on Fly.io."),
        ("preference", "Hard cap on spend: $1,200 a month. Never exceed it."),
        ("preference", "Unacked alerts go to the SRE lead after 25 minutes. Always."),
    ]
    # the rule restated with a new value replaces the old one: the value in force
    say(layer, clock, "alice", [("user", "Hard cap on spend: $30,000 a month. Never exceed it.")])
    layer.end_session("alice")
    assert ("preference", "Hard cap on spend: $30,000 a month. Never exceed it.") in labels(
        layer, "alice"
    )
    assert not any("1,200" in s for s in statements(layer, "alice"))


@pytest.mark.parametrize(
    "turn",
    [
        "Always.",  # nothing before it in the turn: an answer to the agent, kept as said
        "Do you copy me on those? Always.",  # a question is not what a rule rules on
        "Never email me. Always page me on Zenduty.",  # both stand on their own
    ],
)
def test_a_rule_that_stands_alone_or_follows_no_statement_is_not_joined(turn: str) -> None:
    clock = Clock()
    layer = make_layer(clock, every=None, trigger_tokens=None)
    say(layer, clock, "alice", [("user", turn)])
    layer.end_session("alice")
    kept = [s for s in sentences(turn) if not s.endswith("?")]
    assert sorted(c for _, c in labels(layer, "alice")) == sorted(kept)
