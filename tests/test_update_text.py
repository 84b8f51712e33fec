"""memlab.memory.update_text: the clauses and typed values the supersession rules
compare (the word level: test_update_tokens.py; the rules: test_clause_rules.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.memory.update_cues import OLD_VALUE_PATTERNS
from memlab.memory.update_text import (
    _PATTERN_NEEDS,
    _SENTENCE,
    _VALUE_TRIGGER,
    _cuts,
    _cuts_linear,
    _looks_like_code,
    parse,
    parse_said,
)


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


@pytest.mark.parametrize(
    "text, old, new",
    [
        ("We moved off Heroku to Fly.io last week.", "heroku", "fly io"),
        ("i moved from halifax to dublin last month.", "halifax", "dublin"),
        ("please change the invoice address from ap@x.io to fin@x.io.", "ap@x io", "fin@x io"),
        ("We dropped Jenkins for GitHub Actions.", "jenkins", "github actions"),
        ("We replaced Datadog with Grafana Cloud.", "datadog", "grafana cloud"),
        ("Instead of RabbitMQ we now use Kafka.", "rabbitmq", ""),
        ("SUP-41777 was closed by mistake, use SUP-73923 instead", "sup 41777", ""),
        ("30-minute first response became four-hour first response", "30 minute first response",
         "four hour first response"),
        ("We renamed #oncall-hq to #prod-triage.", "#oncall hq", "#prod triage"),
        ("We don't use Slack anymore.", "slack", ""),
        ("We used to be on Heroku, now we're on Render.", "heroku", ""),
        ("Standup is back to 9:30.", "", "9 30"),
    ],
)  # fmt: skip
def test_named_old_and_new_values(text: str, old: str, new: str) -> None:
    clause = next(c for c in parse(text).clauses if c.olds or c.news)
    assert (clause.olds[0] if clause.olds else "") == old
    assert (clause.news[0] if clause.news else "") == new


@pytest.mark.parametrize(
    "text, kind",
    [
        ("if we moved to Lisbon, would the invoices change?", "question"),
        ("We're thinking about moving the office to Lisbon.", "hypothetical"),
        ("My colleague's office is in Oslo.", "other"),
        ("We also opened an office in Porto.", "addition"),
        ("We used to be in Halifax.", "history"),
        ("do our builds run on circleci now", "question"),
        ("please kill the contractor's api tokens now", "request"),
        ("The SAML test fails with AccessDenied.", "problem"),
        ("Apparently the office moved to Oslo.", "reported"),
        ("There's talk of moving the office to Oslo.", "hypothetical"),
        ("Oslo for the office, nothing final.", "hypothetical"),
        ("Before the reorg, the office was in Oslo.", "history"),
    ],
)
def test_markers(text: str, kind: str) -> None:
    assert kind in parse(text).clauses[0].markers


@pytest.mark.parametrize(
    "text",
    [
        "if a page isn't acknowledged, escalate to the team lead after 15 minutes.",
        "Not sure if it matters, but we deploy on GKE.",
        "I would like invoices sent to ap@acme.io.",
        "Also, we deploy everything on GKE.",
        "Please send the weekly recaps in French from now on.",
        "Before I forget, our office is in Oslo.",  # "before" an event is history only
    ],
)
def test_no_false_markers(text: str) -> None:
    assert parse(text).clauses[0].markers == {}


def test_history_before_an_event_is_only_the_clause_in_the_past() -> None:
    clauses = parse("Before the reorg the office was in Bergen; now it's in Oslo.").clauses
    assert [("history" in c.markers) for c in clauses] == [True, False]
    # what holds now, said in the same clause, makes it a correction
    assert (
        parse("Before the reorg we were on Bergen, the office is in Oslo now.").clauses[-1].markers
        == {}
    )


def test_a_dash_before_a_back_reference_does_not_end_the_clause() -> None:
    one = parse("Small update on our log retention — it's 13 months going forward.")
    assert [c.text for c in one.clauses] == [
        "Small update on our log retention — it's 13 months going forward."
    ]
    two = parse("The export broke again — we lost rows. Our region is fra.")
    assert len(two.clauses) == 3
    # a short value after a dash, ending the sentence, is the clause's value
    value = parse("Heads-up, our log retention is different now — two years. We use Slack.")
    assert [c.text for c in value.clauses] == [
        "Heads-up, our log retention is different now — two years.",
        "We use Slack.",
    ]


def test_a_cue_only_clause_lends_its_cue() -> None:
    clauses = parse("Correction: our primary region is us-east-2.").clauses
    assert len(clauses) == 1 and "correction" in clauses[0].cues
    clauses = parse("Scratch that. Standup is at 10:00.").clauses
    assert [c.keys for c in clauses] == [("stand", "10:00")] and "scratch that" in clauses[0].cues


def test_parse_said_blanks_the_speaker_tag_and_bracketed_asides() -> None:
    text = "Caroline: Our CDN is Fastly. [shares a photo: a dog on a beach] We use Jira."
    p = parse_said(text, "Caroline")
    assert [c.text for c in p.clauses] == ["Our CDN is Fastly.", "We use Jira."]
    assert all(text[c.start : c.end].strip() == c.text for c in p.clauses)  # offsets hold
    assert "carol" in parse(text).clauses[0].keys  # plain parse keeps the name
    assert parse_said("Melanie: Our CDN is Fastly.", "Caroline").clauses[0].keys[0] == "melan"


def test_went_to_after_a_person_is_a_trip_not_a_change() -> None:
    assert parse("Last week I went to a pride parade.").clauses[0].olds == ()
    assert parse("Standup became 10:00.").clauses[0].olds == ("standup",)


def test_code_is_no_statement() -> None:
    assert parse('$("#posts").append(card);').clauses == ()
    assert parse('var card = `<div class="card">`').clauses == ()
    assert len(parse("Our SLA (the contract one) is 4 hours.").clauses) == 1


def test_every_value_pattern_has_its_needed_literals() -> None:
    # _VALUE_TRIGGER is the union of the needs: a pattern without an entry would
    # never run on a clause that holds none of the others' literals
    assert set(_PATTERN_NEEDS) == {name for name, _ in OLD_VALUE_PATTERNS}


@pytest.mark.parametrize("name", sorted(_PATTERN_NEEDS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_pattern_never_matches_without_its_needed_literal(name: str, data: st.DataObject) -> None:
    # _values skips a pattern whose literals are all absent: every string the pattern
    # matches (generated from the pattern itself) must hold one of them
    pattern = dict(OLD_VALUE_PATTERNS)[name]
    text = data.draw(st.from_regex(pattern))
    assert pattern.search(text)
    assert any(n in text for n in _PATTERN_NEEDS[name]), text
    assert _VALUE_TRIGGER.search(text), text  # the first test lets it through too


@pytest.mark.parametrize(
    ("text", "old", "new"),
    [
        # "got" is no word of a hand-written trigger: the first test missed both
        ("Jenkins got superseded with GitHub Actions.", "jenkins", "github actions"),
        ("The change to Fly.io got undone.", "fly io", ""),
    ],
)
def test_a_value_pattern_runs_whatever_words_the_clause_lacks(
    text: str, old: str, new: str
) -> None:
    (clause,) = parse(text).clauses
    assert clause.olds == (old,)
    assert clause.news == ((new,) if new else ())


def test_code_marks_are_counted_as_before() -> None:
    # two marks or four with parentheses (counted per character, any order)
    assert _looks_like_code("a = b;")
    assert not _looks_like_code("a = b")
    assert _looks_like_code("f(g(x))")
    assert not _looks_like_code("f(x)")


def test_blocks_is_blocked_against_looked_up() -> None:
    # every clause pair of the hand-written supersession cases (every false-correction
    # kind: markers on one side, on both, on neither)
    from tests.consolidate_cases import CASES, STEPS

    texts = [t for c in CASES for _, t in (*c.earlier, c.new)]
    texts += [t for s in STEPS for _, t in s.records]
    clauses = [cl for t in texts for cl in parse(t).clauses]
    marked = sum(bool(cl.markers) for cl in clauses)
    assert marked >= 20  # the cases exercise the markers
    for new in clauses:
        for old in clauses:
            assert new.blocks(old) == bool(new.blocked_against(old)), (new.text, old.text)


# The clause cuts are _SENTENCE's, but a text with a long whitespace run is cut by
# _cuts_linear (the regex's dash branch is quadratic in a run's length).
_CUT_PIECES = [" ", "  ", "\n", "\n\n", "\t", "\u00a0", "\u2028", "—", "–", ".", ";", "!",
               "?", "a", "B", "it", "it's", "that is", "They", "which will", "x", ",", "7"]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_CUT_PIECES), max_size=30))
def test_linear_cuts_are_the_regexs(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert _cuts_linear(text) == [m.span() for m in _SENTENCE.finditer(text)]
    long = text.replace(" ", " " * 70)  # _cuts takes the linear path then
    assert _cuts(long) == [m.span() for m in _SENTENCE.finditer(long)]


@pytest.mark.parametrize(
    "text",
    [
        "We moved to Rome — two years ago. Then\n — Oslo",
        "a \n — B",
        "ok.  \n\n  — now Lisbon",
        "the plan — it's Pro now — Team next",
        "",
        "   ",
        "x — \n y",
    ],
)
def test_cuts_on_hand_written_texts(text: str) -> None:
    assert _cuts_linear(text) == [m.span() for m in _SENTENCE.finditer(text)]


def test_a_long_whitespace_run_is_cut_in_linear_time() -> None:
    """remember('5' + 100,000 spaces + 'x') with the rule consolidator took about 200 s
    in the regex; these parse at once (and a hung parse fails the run's timeout)."""
    spaces = "5" + " " * 200_000 + "x"
    assert _cuts(spaces) == []
    assert [(c.text[0], c.text[-1]) for c in parse(spaces).clauses] == [("5", "x")]
    lines = "5" + " \n" * 100_000 + "x — Oslo"
    cuts = _cuts(lines)
    assert len(cuts) == 100_001 and lines[cuts[-1][0] : cuts[-1][1]] == " — "
    assert parse(lines).clauses[-1].text == "x — Oslo"  # a short value after a dash joins
