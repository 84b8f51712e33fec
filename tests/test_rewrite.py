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


def test_the_tail_pattern_never_reads_more_than_the_end_of_a_long_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # _TAIL is anchored at the end only: over a whole 48k-character message of
    # " again" repeated it was tried from every position (98 s for one rewrite)
    import memlab.memory.rewrite as rewrite

    seen: list[int] = []
    real = rewrite._TAIL

    class Spy:
        def sub(self, repl: str, text: str) -> str:
            seen.append(len(text))
            return real.sub(repl, text)

    monkeypatch.setattr(rewrite, "_TAIL", Spy())
    worst = " again" * 2000 + " x"  # no tail: every position scanned to the end
    assert MemoryQuestionRewriter().rewrite(worst) == worst
    long = "what is our wifi password" + " again" * 8000
    out = MemoryQuestionRewriter().rewrite(long)
    assert max(seen) <= rewrite.TAIL_WINDOW
    # what it strips comes from the window (the phrases before it are kept)
    assert 0 < len(long) - len(out) <= rewrite.TAIL_WINDOW and long.startswith(out)
    assert MemoryQuestionRewriter().rewrite("Where do we deploy, if you recall?") == (
        "Where do we deploy"
    )


def test_a_long_run_of_spaces_is_no_catastrophic_backtracking() -> None:
    # the tail pattern had "\s*" twice side by side: 1,000 spaces before the last
    # word took a minute (the run split between them every way at every step)
    import time

    text = "where do we deploy" + " " * 1000 + "x"
    start = time.perf_counter()
    assert MemoryQuestionRewriter().rewrite(text) == text
    assert time.perf_counter() - start < 5.0  # about 0.2 s; a minute before
    assert MemoryQuestionRewriter().rewrite("Where do we deploy , again ?!") == "Where do we deploy"
