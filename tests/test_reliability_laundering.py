"""Laundering through the reply: measured with and without quote tracking."""

from __future__ import annotations

from memlab.reliability import laundering


def test_quote_tracking_keeps_copied_injections_out_of_summaries() -> None:
    for style in ("verbatim", "sentence", "reformatted"):
        made, tainted = laundering.session(style, 0, quote_words=None)
        assert made > 0 and tainted > 0  # what happens without it
        made, tainted = laundering.session(style, 0, quote_words=6)
        assert made > 0 and tainted == 0


def test_the_rows_separate_the_target_from_the_limit() -> None:
    guarded, limit = laundering.run(sessions_per_style=1)
    assert guarded.guarded and guarded.failures == 0 and guarded.operations > 0
    assert not limit.guarded
