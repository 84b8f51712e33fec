"""The constructor half of the bad-argument corpus (memlab.reliability.badargs_constructors)."""

from __future__ import annotations

from pathlib import Path

from memlab.reliability.badargs import Env, cases, check
from memlab.reliability.badargs_constructors import construction_cases


def test_every_constructor_case_is_refused_naming_its_argument(tmp_path: Path) -> None:
    env = Env.open(tmp_path)
    try:
        outcomes = [check(case, env) for case in construction_cases()]
    finally:
        env.close()
    assert len(outcomes) >= 70
    assert [f"{o.case}: {o.what}" for o in outcomes if not o.ok] == []


def test_the_constructor_cases_reach_every_kind_of_entry_point() -> None:
    names = [case.name for case in construction_cases()]
    assert len(names) == len(set(names))
    for entry in (
        "JsonlStore(",
        "SqliteStore(",
        "MemoryLayer(",
        "SummarizePolicy(",
        "NeighborPolicy(",
        "EvictionPolicy(",
        "RankWeights(",
        "HalfLives(",
        "HashEmbedder",
        "ExtractiveSummarizer(",
        "parse_time(",
        "estimate_salience(",
        "format_memory(",
        "find_quotes(",
        "estimate_tokens(",
        "MemoryQuestionRewriter.",
    ):
        assert any(name.startswith(entry) for name in names), entry


def test_the_corpus_includes_the_constructor_cases_once() -> None:
    corpus = [case.name for case in cases(["memory"])]
    constructors = [case.name for case in construction_cases()]
    assert all(corpus.count(name) == 1 for name in constructors)
