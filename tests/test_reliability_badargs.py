"""The bad-argument corpus over the public API (issue 13, defect 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.errors import InputError
from memlab.reliability.badargs import Case, Env, cases, check, run


def test_every_bad_call_is_a_memlab_error_naming_its_argument(tmp_path: Path) -> None:
    """Defect 10: 170 calls that should be refused gave 36 raw Python exceptions and
    32 silent acceptances; now each raises a MemlabError that names the argument,
    and leaves every store as it was."""
    outcomes = run(folder=tmp_path)
    assert len(outcomes) >= 170
    failures = [f"{o.case}: {o.what}" for o in outcomes if not o.ok]
    assert failures == []


def test_the_corpus_reaches_pgvector_too(dsn: str, tmp_path: Path) -> None:
    outcomes = run(dsn=dsn, folder=tmp_path)
    pg = [o for o in outcomes if o.case.startswith("pgvector.")]
    assert len(pg) > 100
    assert [f"{o.case}: {o.what}" for o in outcomes if not o.ok] == []


def test_the_judge_fails_raw_errors_acceptance_silence_and_mutation(tmp_path: Path) -> None:
    env = Env.open(tmp_path)
    try:
        raw = check(Case("raw", "x", lambda e: int("x")), env)
        assert not raw.ok and raw.what.startswith("raw ValueError")
        accepted = check(Case("accepted", "x", lambda e: None), env)
        assert not accepted.ok and accepted.what == "accepted"

        def unnamed(e: Env) -> None:
            raise InputError("something was wrong")

        assert check(Case("unnamed", "salience", unnamed), env).what.startswith("unnamed")

        def mutates(e: Env) -> None:
            e.layers["memory"].remember("alice", "sneaked in")
            raise InputError("salience is wrong")

        assert check(Case("mutates", "salience", mutates), env).what.startswith("mutated")
    finally:
        env.close()


def test_cases_cover_every_store_and_have_unique_names() -> None:
    names = [c.name for c in cases(["memory", "jsonl", "sqlite"])]
    assert len(names) == len(set(names))
    for store in ("memory", "jsonl", "sqlite"):
        assert sum(n.startswith(f"{store}.") for n in names) > 100


@pytest.mark.parametrize(
    "name", ["RecallQuery(kinds='semantic')", "run_turn(tool_results='HTTP 200')"]
)
def test_named_cases_exist(name: str) -> None:
    assert name in {c.name for c in cases([])}
