"""The synthetic transcript generator (memlab.lab.synth and its word lists).

Most tests run on the 20 shipped transcripts (``transcripts/synthetic``), which a
test regenerates byte-for-byte; a property test repeats the structural checks on
arbitrary seeds.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.errors import InputError
from memlab.lab import metrics, synth
from memlab.lab.synth import catalog as cat
from memlab.lab.synth import updates as upd
from memlab.lab.transcripts import Transcript, Turn, dumps, load_dir

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "transcripts" / "synthetic"
SHIPPED_SEEDS = range(1, 21)


@pytest.fixture(scope="module")
def shipped() -> list[Transcript]:
    return load_dir(SHIPPED)


def sample_values(kind: cat.FactKind, n: int = 300) -> list[str]:
    """The kind's static values, or a large sample of its generated ones."""
    if kind.make is None:
        return list(kind.values)
    rng = Random(kind.id)
    out: list[str] = []
    for company in cat.COMPANIES:
        for _ in range(n // len(cat.COMPANIES) + 1):
            out.append(kind.make(rng, company))
    return list(dict.fromkeys(out))


def all_static_values() -> list[tuple[str, str]]:
    return [(k.id, v) for k in cat.KINDS for v in k.values]


def user_turns(t: Transcript) -> list[Turn]:
    return [x for x in t.turns if x.role == "user"]


def probes(t: Transcript) -> Iterator[tuple[int, Turn]]:
    for i, x in enumerate(t.turns):
        if x.probe is not None:
            yield i, x


def values_used(t: Transcript) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for x in t.turns:
        for m in x.mentions:
            if (m.fact, m.value) not in out:
                out.append((m.fact, m.value))
    return out


def scope_distance(t: Transcript, i: int, j: int) -> int:
    """Turns of the probe's scope from turn j (evidence) to turn i (probe)."""
    scope = t.turns[i].scope
    positions = [k for k in range(i) if t.turns[k].scope == scope]
    return len(positions) - positions.index(j)


# ---------------------------------------------------------------------------
# The catalog
# ---------------------------------------------------------------------------


def test_catalog_has_at_least_30_kinds_of_every_class() -> None:
    assert len(cat.KINDS) >= 30
    assert len({k.id for k in cat.KINDS}) == len(cat.KINDS)
    by_class = {c: [k for k in cat.KINDS if k.cls == c] for c in cat.CLASSES}
    assert all(len(v) >= 4 for v in by_class.values()), {c: len(v) for c, v in by_class.items()}
    for k in cat.KINDS:
        assert k.cls in cat.CLASSES and k.description and k.topic


@pytest.mark.parametrize("kind", cat.KINDS, ids=lambda k: k.id)
def test_each_kind_has_many_distinct_values_and_phrasings(kind: cat.FactKind) -> None:
    values = sample_values(kind)
    assert len(values) >= 8
    assert len(set(values)) == len(values)
    assert len(kind.state) >= 3
    assert len(kind.ask) >= 2 and kind.ask_direct
    for tpl in kind.state:
        assert tpl.count("{v}") == 1 and "{old}" not in tpl, tpl
    for tpl in kind.fix_both:
        assert "{old}" in tpl and "{new}" in tpl, tpl
    for tpl in kind.fix_new:
        assert "{new}" in tpl and "{old}" not in tpl, tpl
    for q in (*kind.ask, *kind.ask_direct):
        assert q.endswith("?") and "{" not in q, q


def test_no_value_is_a_substring_of_another_value() -> None:
    """So the value in force is unambiguous under (normalized) substring matching,
    within a kind and across kinds."""
    values = all_static_values() + [
        (k.id, v) for k in cat.KINDS if k.make for v in sample_values(k, 60)
    ]
    by_norm: dict[str, tuple[str, str]] = {}
    for fact, v in values:
        assert synth.normalize_loose(v), v
        other = by_norm.setdefault(synth.normalize_loose(v), (fact, v))
        assert other == (fact, v) or other[1] == v, (other, (fact, v))
    clashes = [
        (a, b)
        for a, b in itertools.combinations(values, 2)
        if a[1] != b[1]
        and synth._clash(a[1], b[1])
        # generated values of one kind share a shape; they are drawn to differ per transcript
        and not (a[0] == b[0] and cat.KINDS_BY_ID[a[0]].make)
    ]
    assert not clashes, clashes[:10]


def catalog_texts() -> list[str]:
    """Every fixed text the generator can emit apart from the values themselves."""
    texts: list[str] = []
    for k in cat.KINDS:
        texts += [t.replace("{v}", " ").replace("{old}", " ").replace("{new}", " ") for t in
                  (*k.state, *k.fix_both, *k.fix_new)]  # fmt: skip
        texts += [*k.ask, *k.ask_direct, k.topic]
    for topic in cat.TOPICS:
        texts += list(topic.opening)
        for requests, tool, reply in topic.exchanges:
            texts += [*requests, tool, reply]
    texts += [c.name for c in cat.COMPANIES]
    for pool in (
        cat.GREETINGS, cat.INTRO_WHO, cat.RETURN_GREETINGS, cat.THANKS_HEAD, cat.THANKS_TAIL,
        cat.SMALL_TALK, cat.CLOSINGS, cat.AGENT_WELCOME, cat.AGENT_SMALL, cat.AGENT_ACK,
        cat.AGENT_ECHO, cat.AGENT_FIX, cat.AGENT_FIX_ECHO, cat.AGENT_ANSWER, cat.AGENT_PLANTED,
        cat.AGENT_INTRO, cat.AGENT_FOLLOW, cat.AGENT_RETURN, cat.TOOL_NOISE, cat.STATUSES,
        *cat.KB, cat.PLANTED, cat.ATTACKER_NAMES,
        cat.ATTACKER_EMAILS, cat.STATE_LEADS, cat.FIX_LEADS, cat.PROBE_LEADS, cat.REQUEST_LEADS,
        cat.ENDPOINTS, cat.WHENS, cat.CODES,
    ):  # fmt: skip
        texts += list(pool)
    return texts


def test_no_fixed_text_contains_a_value() -> None:
    """Templates, noise, planted instructions and lead-ins never state a value, so
    a value found in a turn's text is always one the turn mentions."""
    texts = catalog_texts()
    hits = [
        (fact, v, text)
        for fact, v in all_static_values()
        for text in texts
        if synth.contains_value(re.sub(r"\{\w+\}", " ", text), v)
    ]
    assert not hits, hits[:10]


def test_word_overlap() -> None:
    statement = "We deploy everything on GKE in europe-west1."
    assert synth.word_overlap("Where did I say our workloads run again?", statement) == 0.0
    assert synth.word_overlap("Where do we deploy everything?", statement) == 1.0
    # inflections count as the same word (the measure errs towards "not paraphrased")
    assert synth.word_overlap("What got deployed?", statement) == 1.0
    assert synth.word_overlap("Which hosts?", "Source is hosted on Gitea.") == 1.0
    assert synth.word_overlap("", statement) == 0.0
    assert synth.word_overlap("What is it?", statement) == 0.0  # no content words
    assert synth.content_words("Remind me again, which region?") == ["region"]


# ---------------------------------------------------------------------------
# Determinism and the shipped files
# ---------------------------------------------------------------------------


def test_shipped_transcripts_regenerate_byte_for_byte() -> None:
    files = sorted(SHIPPED.glob("*.json"))
    assert [f.name for f in files] == [f"support-{s:04d}.json" for s in SHIPPED_SEEDS]
    for f, seed in zip(files, SHIPPED_SEEDS, strict=True):
        assert f.read_bytes() == dumps(synth.generate(seed)).encode("utf-8"), f


def test_same_bytes_in_other_processes_whatever_the_hash_seed() -> None:
    code = (
        "import hashlib, sys; from memlab.lab.synth import generate; "
        "from memlab.lab.transcripts import dumps; "
        "print(hashlib.sha256(''.join(dumps(generate(s)) for s in (3, 7, 123456)).encode())"
        ".hexdigest())"
    )
    here = hashlib.sha256(
        "".join(dumps(synth.generate(s)) for s in (3, 7, 123456)).encode()
    ).hexdigest()
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == here


def test_generate_rejects_bad_seeds() -> None:
    for bad in (-1, "3", 1.5, True, None):
        with pytest.raises(InputError, match="seed"):
            synth.generate(bad)  # type: ignore[arg-type]


def test_different_seeds_differ() -> None:
    texts = {dumps(synth.generate(s)) for s in range(30, 40)}
    assert len(texts) == 10


def test_meta(shipped: list[Transcript]) -> None:
    for seed, t in zip(SHIPPED_SEEDS, shipped, strict=True):
        assert t.id == synth.transcript_id(seed)
        assert t.meta["generator"] == synth.GENERATOR
        assert t.meta["version"] == synth.VERSION
        assert t.meta["seed"] == seed
        assert t.meta["scenario"] in (synth.SCENARIO, synth.SCENARIO_TWO_USERS)
        assert t.meta["scopes"] == sorted(t.scopes, key=t.meta["scopes"].index)
        assert set(t.meta["scopes"]) == set(t.scopes)


# ---------------------------------------------------------------------------
# Requirements, checked on the shipped set
# ---------------------------------------------------------------------------


def test_sixty_turns_of_users_agents_and_tools(shipped: list[Transcript]) -> None:
    for t in shipped:
        assert len(t.turns) == synth.N_TURNS
        roles = {x.role for x in t.turns}
        assert roles == {"user", "agent", "tool"}, t.id
        assert [x.id for x in t.turns] == [f"t{i}" for i in range(synth.N_TURNS)]


def test_at_least_8_facts_from_the_catalog_mixing_rules_and_offhand(
    shipped: list[Transcript],
) -> None:
    for t in shipped:
        used = {f for f, _ in values_used(t)}
        assert len(t.facts) >= 8 and used == set(t.facts), t.id
        assert used <= set(cat.KINDS_BY_ID)
        classes = {cat.KINDS_BY_ID[f].cls for f in used}
        assert classes == set(cat.CLASSES), (t.id, classes)
    kinds_seen = {f for t in shipped for f in t.facts}
    assert len(kinds_seen) >= 25  # the set exercises most of the catalog


def test_at_least_two_corrections_some_stating_both_values(shipped: list[Transcript]) -> None:
    both = only_new = 0
    for t in shipped:
        n = 0
        for scope in t.scopes:
            state = t.fact_state(len(t.turns), scope)
            for s in state.values():
                n += len(s.stale)
        assert n >= 2, t.id
        for x in t.turns:
            if x.meta.get("act") != "correction":
                continue
            (m,) = x.mentions
            old = [v for f, v in values_used(t) if f == m.fact and v != m.value]
            if any(synth.contains_value(x.text, v) for v in old):
                both += 1
            else:
                only_new += 1
    assert both >= 10 and only_new >= 10, (both, only_new)


def test_probes_are_late_far_and_mostly_paraphrased(shipped: list[Transcript]) -> None:
    n = beyond = paraphrased = 0
    overlaps: list[float] = []
    for t in shipped:
        assert len(t.probes) >= 4, t.id
        for i, p in probes(t):
            assert p.probe is not None
            n += 1
            assert i >= synth.LATE_START, (t.id, p.id)
            evidence = " ".join(t.turns[t.index[e]].text for e in p.probe.evidence)
            overlap = synth.word_overlap(p.text, evidence)
            overlaps.append(overlap)
            paraphrased += overlap <= synth.PARAPHRASE_MAX_OVERLAP
            last = max(t.index[e] for e in p.probe.evidence)
            beyond += scope_distance(t, i, last) > synth.WINDOW
            assert p.probe.meta["distance"] == scope_distance(t, i, last)
            assert p.probe.meta["overlap"] == round(overlap, 3)
    assert beyond / n >= 0.75, (beyond, n)
    assert paraphrased / n >= 0.75, (paraphrased, n)
    assert sum(overlaps) / n <= 0.15
    # and a few direct questions, so both kinds can be compared
    assert n - paraphrased >= 5


def test_probe_ground_truth_is_the_value_in_force(shipped: list[Transcript]) -> None:
    corrected = 0
    for t in shipped:
        assert any(p.probe and p.probe.category == "corrected" for _, p in probes(t)), t.id
        for i, p in probes(t):
            assert p.probe is not None
            (need,) = p.probe.needs
            state = t.fact_state(i, p.scope)[need]
            assert p.probe.answer == state.current
            corrected += bool(state.stale)
            assert (p.probe.category == "corrected") == bool(state.stale)
            # evidence: exactly the turns of this scope stating the value since it came in force
            expected: list[str] = []
            for tid in reversed(state.turns):
                turn = t.turns[t.index[tid]]
                if not any(m.fact == need and m.value == state.current for m in turn.mentions):
                    break
                expected.insert(0, tid)
            assert list(p.probe.evidence) == expected, (t.id, p.id)
            for e in p.probe.evidence:
                turn = t.turns[t.index[e]]
                assert any(m.fact == need and m.value == state.current for m in turn.mentions)
            # the question never gives the answer (or a stale answer) away
            for v in [state.current, *state.stale]:
                assert v is not None and not synth.contains_value(p.text, v), (t.id, p.id)
    assert corrected >= 20


def test_planted_instructions_state_no_facts(shipped: list[Transcript]) -> None:
    planted = 0
    with_planted = 0
    for t in shipped:
        values = values_used(t)
        n = 0
        for x in t.turns:
            if x.role == "tool":
                assert not x.mentions and x.salience_hint is None
                assert x.source in ("tool", "web")
            if x.meta.get("planted"):
                n += 1
                assert x.role == "tool"
                assert re.search(r"ignore|authori[sz]e|approved|must now|update your memory|"
                                 r"disable|grant", x.text, re.I), x.text  # fmt: skip
                assert not any(synth.contains_value(x.text, v) for _, v in values)
        planted += n
        with_planted += n > 0
    assert with_planted >= 12 and planted >= 15


def test_two_user_transcripts_disagree_on_shared_kinds(shipped: list[Transcript]) -> None:
    two = [t for t in shipped if len(t.scopes) == 2]
    assert 4 <= len(two) <= 10
    for t in two:
        assert t.meta["scenario"] == synth.SCENARIO_TWO_USERS
        vals = {
            s: {f: v for f, v in _scope_values(t, s)} for s in t.scopes
        }  # scope -> fact -> set of values
        a, b = t.scopes
        shared = [f for f in vals[a] if f in vals[b]]
        assert len(shared) >= 3, t.id
        for f in shared:
            assert not (vals[a][f] & vals[b][f]), (t.id, f)
        for s in t.scopes:
            probed = [p for _, p in probes(t) if p.scope == s]
            assert len(probed) >= 3
            assert any(p.probe and p.probe.needs[0] in shared for p in probed)


def _scope_values(t: Transcript, scope: str) -> list[tuple[str, set[str]]]:
    out: dict[str, set[str]] = {}
    for x in t.turns:
        if x.scope == scope:
            for m in x.mentions:
                out.setdefault(m.fact, set()).add(m.value)
    return list(out.items())


def test_mentions_are_verbatim_and_every_stated_value_is_mentioned(
    shipped: list[Transcript],
) -> None:
    for t in shipped:
        values = values_used(t)
        for x in t.turns:
            for m in x.mentions:
                assert m.value.casefold() in x.text.casefold(), (t.id, x.id, m)
            stated = {m.fact for m in x.mentions}
            for fact, v in values:
                if synth.contains_value(x.text, v):
                    assert fact in stated, (t.id, x.id, v)
            # and the lab's own matcher (whole words after NFKC/punctuation folding) agrees
            text = metrics.normalize(x.text)
            for m in x.mentions:
                assert metrics.contains(text, m.value), (t.id, x.id, m)
            for fact, v in values:
                assert not metrics.contains(text, v) or fact in stated, (t.id, x.id, v)
        # within a transcript, values never contain one another (any scope, any fact)
        for (_, a), (_, b) in itertools.combinations(values, 2):
            assert not synth._clash(a, b), (t.id, a, b)


def test_salience_hints(shipped: list[Transcript]) -> None:
    for t in shipped:
        for x in t.turns:
            if x.role != "user":
                assert x.salience_hint is None
                continue
            h = x.salience_hint
            assert h is not None, (t.id, x.id)
            act = x.meta["act"]
            if act in ("statement", "correction"):
                lo, hi = max(cat.SALIENCE[cat.KINDS_BY_ID[m.fact].cls] for m in x.mentions)
                assert lo <= h <= hi, (t.id, x.id, h)
            elif act in ("thanks", "closing"):
                assert h <= 0.07
            else:
                assert h <= 0.55
    # hard preferences are the most salient user turns of each transcript
    for t in shipped:
        top = max(user_turns(t), key=lambda x: x.salience_hint or 0.0)
        assert top.mentions and any(
            cat.KINDS_BY_ID[m.fact].cls == cat.PREFERENCE for m in top.mentions
        )


def test_timestamps_and_sessions(shipped: list[Transcript]) -> None:
    multi = 0
    for t in shipped:
        times = [x.time for x in t.turns]
        assert all(b > a for a, b in itertools.pairwise(times)), t.id
        assert all(x.ts.endswith("Z") for x in t.turns)
        span = times[-1] - times[0]
        assert 3600 <= span <= 8 * 86400, (t.id, span)
        sessions = [x.session for x in t.turns]
        order = list(dict.fromkeys(sessions))
        assert order == [f"s{i}" for i in range(1, len(order) + 1)]
        for a, b in itertools.pairwise(t.turns):
            if a.session != b.session:
                assert b.time - a.time >= 6 * 3600
            else:
                assert b.time - a.time < 6 * 3600
        multi += len(order) > 1
    assert multi >= 10


def test_no_two_transcripts_read_alike(shipped: list[Transcript]) -> None:
    lines = [{x.text for x in user_turns(t)} for t in shipped]
    shares = [len(a & b) / min(len(a), len(b)) for a, b in itertools.combinations(lines, 2)]
    assert max(shares) <= 0.2, max(shares)
    assert sum(shares) / len(shares) <= 0.05
    assert len({t.turns[0].text for t in shipped}) == len(shipped)
    assert len({tuple(x.meta["act"] for x in t.turns) for t in shipped}) == len(shipped)
    assert len({t.meta["scopes"][0] for t in shipped}) >= 12


# ---------------------------------------------------------------------------
# Any seed
# ---------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_any_seed_gives_a_valid_transcript_meeting_the_requirements(seed: int) -> None:
    t = synth.generate(seed)
    again = Transcript.from_dict(t.to_dict())  # validates
    assert dumps(again) == dumps(t)
    assert len(t.turns) == synth.N_TURNS and len(t.facts) >= 8
    stale = sum(len(s.stale) for sc in t.scopes for s in t.fact_state(len(t.turns), sc).values())
    assert stale >= 2
    values = values_used(t)
    for i, p in probes(t):
        assert p.probe is not None and i >= synth.LATE_START
        state = t.fact_state(i, p.scope)[p.probe.needs[0]]
        assert p.probe.answer == state.current
    for x in t.turns:
        stated = {m.fact for m in x.mentions}
        for fact, v in values:
            assert not synth.contains_value(x.text, v) or fact in stated
        if x.role == "tool":
            assert not x.mentions


def test_write_reports_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "t"
    r = synth.write(out, 3, 40)
    assert [p.name for p in r.written] == [f"support-00{s}.json" for s in (40, 41, 42)]
    r = synth.write(out, 4, 40)
    assert len(r.unchanged) == 3 and [p.name for p in r.written] == ["support-0043.json"]
    victim = out / "support-0041.json"
    victim.write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="--force"):
        synth.write(out, 6, 40)
    assert victim.read_text(encoding="utf-8") == "{}"
    assert not (out / "support-0044.json").exists()  # nothing written when refusing
    r = synth.write(out, 2, 40, force=True)
    assert r.replaced == [victim] and r.unchanged == [out / "support-0040.json"]
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="not a folder"):
        synth.write(tmp_path / "file", 1, 1)
    for n, seed in ((0, 1), (-2, 1), (1, -1)):
        with pytest.raises(InputError):
            synth.write(out, n, seed)


# -- phrasing sets -------------------------------------------------------------------
def _pools() -> list[upd.Pool]:
    pools = [upd.IMPLICIT, upd.UNLIKE, upd.EXPLICIT, upd.REVERT, upd.TOOL_ASKS]
    return pools + list(upd.FALSE.values())


def _template_re(template: str) -> re.Pattern[str]:
    """A template as a case-insensitive pattern, each slot any text."""
    parts = re.split(r"\{\{|\}\}|\{\w+\}", template)
    return re.compile(".+?".join(re.escape(p) for p in parts), re.I)


def _distinctive(template: str) -> bool:
    return len(re.findall(r"[A-Za-z']+", re.sub(r"\{\w+\}", "", template))) >= 4


def test_phrasing_sets_are_disjoint_and_all_is_dev_plus_heldout() -> None:
    for pool in _pools():
        later = (pool.fresh, pool.blind, pool.sealed)
        assert pool.dev and pool.heldout and all(later)
        seen = set(pool.dev) | set(pool.heldout)
        for phrasings in later:
            assert not seen & set(phrasings)
            seen |= set(phrasings)
        assert not set(pool.dev) & set(pool.heldout)
        assert pool.get("all") == pool.dev + pool.heldout  # the shipped set: no later set
        assert pool.get("fresh") == pool.fresh
        assert pool.get("blind") == pool.blind
        assert pool.get("sealed") == pool.sealed


@pytest.mark.parametrize("phrasings", ["dev", "heldout", "fresh", "blind", "sealed"])
def test_a_phrasing_set_draws_only_its_own_templates(phrasings: str) -> None:
    own = [_template_re(t) for p in _pools() for t in p.get(phrasings) if _distinctive(t)]
    others = [
        _template_re(t)
        for other in ("dev", "heldout", "fresh", "blind", "sealed")
        if other != phrasings
        for p in _pools()
        for t in p.get(other)
        if _distinctive(t)
    ]
    texts = [
        x.text
        for seed in range(9001, 9007)
        for x in synth.generate(seed, phrasings=phrasings).turns
        if x.source in ("user", "tool")
    ]
    assert any(r.search(t) for r in own for t in texts)
    assert not [t for t in texts if any(r.search(t) for r in others)]
    assert synth.generate(9001, phrasings=phrasings).meta["phrasings"] == phrasings


def test_fresh_phrasings_are_rejected_with_a_mix() -> None:
    with pytest.raises(InputError, match="fresh"):
        synth.generate(1, synth.Mix(turns=(100, 100)), phrasings="fresh")
