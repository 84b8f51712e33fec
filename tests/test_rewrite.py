"""Query rewriting for questions about memory itself."""

from __future__ import annotations

import pytest

from memlab.memory import MemoryQuestionRewriter, NoRewrite, QueryRewriter


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did I tell you about our billing email?", "our billing email"),
        ("Quick one: what did I tell you about the on-call rotation?", "the on-call rotation"),
        ("What was it that I told you about the escalation policy?", "the escalation policy"),
        ("What do you remember about my coffee order?", "my coffee order"),
        ("Do you remember where we deploy?", "we deploy"),
        ("Could you recall what we decided on the region?", "we decided on the region"),
        ("Remind me of our SLA", "our SLA"),
        ("What did I say my coding setup was?", "my coding setup was"),
        ("Where do we deploy, if you recall?", "Where do we deploy"),
        ("Sanity check: where am I physically, per what I told you?", "where am I physically"),
    ],
)
def test_frames_and_fillers_are_removed(query: str, expected: str) -> None:
    assert MemoryQuestionRewriter().rewrite(query) == expected


@pytest.mark.parametrize(
    "query", ["When did Caroline go to the LGBTQ support group?", "hi", "?", "What did"]
)
def test_untouched_queries_keep_their_exact_text(query: str) -> None:
    assert MemoryQuestionRewriter().rewrite(query) == query


def test_protocol() -> None:
    assert isinstance(MemoryQuestionRewriter(), QueryRewriter)
    assert NoRewrite().rewrite("What did I tell you about X?") == "What did I tell you about X?"
