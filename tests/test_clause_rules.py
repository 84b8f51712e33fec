"""memlab.memory.clause_rules: the decision on one pair of clauses (the whole
consolidator, with candidates and echoes, is tested in test_consolidate.py)."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.errors import InputError
from memlab.memory import MemoryKind, MemoryRecord, Source
from memlab.memory.clause_rules import (
    Candidate,
    RulePolicy,
    explicit,
    keys_of,
    may_be_explicit,
    may_differ,
    value_diff,
)
from memlab.memory.clause_slots import named_apart
from memlab.memory.consolidate import CUE_DIFF, EXPLICIT, VALUE_DIFF
from memlab.memory.update_cues import BROAD_KINDS as BROAD
from memlab.memory.update_text import parse


def rec(rid: str, text: str, t: float) -> MemoryRecord:
    return MemoryRecord(rid, text, np.ones(4, np.float32) / 2, MemoryKind.EPISODIC, "alice", 0.5,
                        8, t, t, source=Source.USER)  # fmt: skip


def pair(old: str, new: str):
    o, n = rec("o", old, 1.0), rec("n", new, 2.0)
    oc = next(c for c in parse(old).clauses if c.states)
    nc = next(c for c in parse(new).clauses if c.states or c.olds)
    return o, oc, n, nc, Candidate(o, parse(old), 0.5, rank=1)


def test_explicit_names_the_old_value() -> None:
    o, oc, n, nc, _ = pair("Our CI is Jenkins.", "We dropped Jenkins for GitHub Actions.")
    hit = explicit(n, nc, o, oc, set())
    assert hit is not None
    decision, old_keys, new_keys = hit
    assert decision.reason == EXPLICIT and decision.old_value == "jenkins"
    assert old_keys == keys_of("jenkins") and new_keys == keys_of("github actions")
    o, oc, n, nc, _ = pair("Our CI is CircleCI.", "We dropped Jenkins for GitHub Actions.")
    assert explicit(n, nc, o, oc, set()) is None  # the old clause does not state Jenkins


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("Code's all in Azure Repos.", "Code's all in Gitea.", VALUE_DIFF),
        ("Builds run on Tekton.", "Builds run on CircleCI.", VALUE_DIFF),
        ("Standup is at 9:30.", "Actually, standup is at 10:00 now.", CUE_DIFF),
        ("Send invoices to billing@acme.io.", "Put down ap@acme.io as our invoice email.",
         VALUE_DIFF),
        # one fact named by its owner, each statement with its own value
        ("$7,500 a month isn't our spend cap anymore, it's $1,200 a month.",
         "On file, our spend cap should read $30,000 a month.", VALUE_DIFF),
        ("Quick correction on our ticket: it's SUP-56431 now.",
         "SUP-81973 is our new ticket, just so you know.", CUE_DIFF),
        # a weekday by another, a date by another
        ("Standup is on Mondays.", "Standup moved to Thursdays now.", CUE_DIFF),
        ("Renewal is October 31.", "Actually the renewal is May 31 now.", CUE_DIFF),
    ],
)  # fmt: skip
def test_value_diff_fires(old: str, new: str, reason: str) -> None:
    o, oc, n, nc, cand = pair(old, new)
    hit = value_diff(RulePolicy(), n, nc, o, oc, cand)
    assert hit is not None and hit[0].reason == reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The EU team deploys to eu-west-1.", "The US team deploys to us-east-1."),
        ("Invoice INV-5321 was charged twice.", "Invoice INV-7790 was charged twice."),
        ("Send the invoices to billing@acme.io.", "Security reports go to security@acme.io."),
        ("the primary database is aurora postgres.", "our primary region is ap-southeast-2."),
        ("Our CI is Jenkins.", "Our CI is slow today."),  # no new value
        ("Our ticket is OPS-1182.", "Our ticket OPS-2290 is about billing."),  # two ids
        # when is not where: a weekday is not replaced by a platform's name
        ("We prefer to deploy on Tuesday mornings.", "We deploy on Fly.io now."),
        ("Deploys should happen on Tuesday mornings, as usual.", "We deploy on Fly.io now."),
    ],
)
def test_value_diff_holds_back(old: str, new: str) -> None:
    o, oc, n, nc, cand = pair(old, new)
    assert value_diff(RulePolicy(), n, nc, o, oc, cand) is None


def test_policy_checks_its_fields() -> None:
    with pytest.raises(InputError):
        RulePolicy(max_value_words=0)


def test_value_diff_names_the_words_that_look_like_values() -> None:
    o, oc, n, nc, cand = pair(
        "Hard cap on spend: $50,000 a month.",
        "Change on our side: $800 a month has taken over as our spend cap.",
    )
    hit = value_diff(RulePolicy(), n, nc, o, oc, cand)
    assert hit is not None
    # not "hard", the first word only the old statement has
    assert (hit[0].old_value, hit[0].new_value) == ("$50,000", "$800")


def test_a_topic_decides_only_values_of_one_kind() -> None:
    o, oc, n, nc, cand = pair("We keep logs for 90 days.", "Our log retention is 14 days.")
    hit = value_diff(RulePolicy(), n, nc, o, oc, cand)
    assert hit is not None and (hit[0].old_value, hit[0].new_value) == ("90", "14")
    assert hit[0].reason == VALUE_DIFF
    # a date is not the value of "our subscription"
    o, oc, n, nc, cand = pair("The subscription renews on May 3.", "Our subscription is Pro.")
    assert value_diff(RulePolicy(), n, nc, o, oc, cand) is None


def test_a_time_zone_is_one_setting_whatever_it_is_called() -> None:
    o, oc, n, nc, cand = pair(
        "My calendar is set to Europe/Lisbon.", "My time zone is America/Chicago now."
    )
    assert named_apart(oc, nc)
    hit = value_diff(RulePolicy(), n, nc, o, oc, cand)
    assert hit is not None and hit[0].new_value == "america/chicago"
    # two other facts named apart with one kind of value are not
    o, oc, n, nc, cand = pair(
        "My call window is 10:00 to 12:00.", "Our deploy freeze is at 16:00 now."
    )
    assert value_diff(RulePolicy(), n, nc, o, oc, cand) is None


def test_explicit_finds_nothing_for_a_clause_may_be_explicit_rules_out() -> None:
    # the consolidator skips explicit() for such clauses: every pair of the
    # hand-written cases where it is skipped must give None
    from tests.consolidate_cases import CASES

    texts = [t for c in CASES for _, t in (*c.earlier, c.new)]
    recs = [
        MemoryRecord(f"r{i}", t, np.ones(4, np.float32) / 2, MemoryKind.EPISODIC, "s", 0.5, 8,
                     float(i), float(i))
        for i, t in enumerate(texts)
    ]  # fmt: skip
    skipped = 0
    for new in recs:
        for nc in parse(new.content).clauses:
            if may_be_explicit(nc):
                continue
            for old in recs:
                for oc in parse(old.content).stating:
                    skipped += 1
                    assert explicit(new, nc, old, oc, set()) is None
    assert skipped > 1000


def test_value_diff_finds_nothing_for_a_pair_may_differ_rules_out() -> None:
    # the consolidator skips value_diff() for such pairs: every pair of the
    # hand-written cases and the bench lines where it is skipped must give None,
    # with a candidate that the cue-and-nearest rule would take (rank 1, cosine 0.9)
    from memlab.bench.workload import flat_lines
    from tests.consolidate_cases import CASES

    texts = [t for c in CASES for _, t in (*c.earlier, c.new)] + flat_lines(150, seed=5)
    recs = [rec(f"r{i}", t, float(i)) for i, t in enumerate(texts)]
    policy = RulePolicy()
    skipped = cued = 0
    for new in recs:
        for nc in parse(new.content).clauses:
            for old in recs:
                p = parse(old.content)
                cand = Candidate(old, p, 0.9, rank=1, kind_ranks=dict.fromkeys(BROAD, 1))
                for oc in p.stating:
                    if may_differ(nc, oc):
                        cued += bool(nc.cues) and nc.word_keys.isdisjoint(oc.word_keys)
                        continue
                    skipped += 1
                    assert value_diff(policy, new, nc, old, oc, cand) is None, (oc.text, nc.text)
    assert skipped > 10_000 and cued > 1_000
