"""Progress bars: on a terminal only, never when switched off (memlab.progress)."""

from __future__ import annotations

import io

from memlab.progress import bar, disabled


def test_settings_map_to_tqdm() -> None:
    assert disabled(False) is True
    assert disabled(True) is None and disabled(None) is None  # None: on a terminal only


def test_no_bar_into_a_file_or_when_off() -> None:
    out = io.StringIO()  # not a terminal
    assert list(bar(range(3), progress=True, file=out)) == [0, 1, 2]
    assert out.getvalue() == ""
    with bar(total=2, progress=False) as b:
        b.update(2)
    assert b.disable
