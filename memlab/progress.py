"""Progress bars that show on a terminal only.

Every long command (replay, tune, sweeps, synth, convert, bench store) draws its
bars through ``bar``: with ``progress`` True or None a bar appears when stderr is
a terminal and never in logs or pipes; with ``progress`` False (``progress=false``,
``--no-progress``) it never appears.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")


def disabled(progress: bool | None) -> bool | None:
    """tqdm's ``disable`` for a progress setting: None means "only on a terminal"."""
    return True if progress is False else None


def bar(iterable: Iterable[T] | None = None, *, progress: bool | None = None, **kw: Any) -> Any:
    """A tqdm bar (over ``iterable``, or a manual one) shown only on a terminal,
    and never when ``progress`` is False."""
    return tqdm(iterable, disable=disabled(progress), **kw)
