"""``transcripts=synthetic`` and ``transcripts=synthetic_long``: the transcripts
shipped with memlab (``memlab synth`` regenerates them byte for byte)."""

from __future__ import annotations

from pathlib import Path

import memlab
from memlab.errors import TranscriptError
from memlab.lab.datasets import DATASETS, Dataset
from memlab.lab.transcripts import Transcript, load_dir


def shipped_dir(name: str = "synthetic") -> Path:
    """The folder of transcripts shipped with memlab (source checkout or wheel)."""
    package = Path(memlab.__file__).resolve().parent
    candidates = [
        package / "transcripts" / name,  # installed wheel: memlab/transcripts
        package.parent / "transcripts" / name,  # source checkout
    ]
    for c in candidates:
        if c.is_dir():
            return c
    raise TranscriptError(
        f"the shipped '{name}' transcripts are missing (looked in {', '.join(map(str, candidates))}); "
        "reinstall memlab or pass transcripts=dir transcripts.path=DIR"
    )


def load(
    path: str | None = None,
    *,
    limit: int | None = None,
    ids: list[str] | None = None,
    progress: bool | None = None,
) -> list[Transcript]:
    """The shipped transcripts (or a folder given as ``path``)."""
    return load_dir(path or shipped_dir("synthetic"))


def load_long(
    path: str | None = None,
    *,
    limit: int | None = None,
    ids: list[str] | None = None,
    progress: bool | None = None,
) -> list[Transcript]:
    """The shipped long transcripts (or a folder given as ``path``)."""
    return load_dir(path or shipped_dir("synthetic_long"))


DATASETS.register(
    "synthetic",
    Dataset(load, reads=None, description="the 20 shipped transcripts (transcripts/synthetic)"),
)
DATASETS.register(
    "synthetic_long",
    Dataset(
        load_long,
        reads=None,
        description="16 shipped multi-week transcripts of 300-600 turns "
        "(transcripts/synthetic_long)",
    ),
)


def load_sessions(
    path: str | None = None,
    *,
    limit: int | None = None,
    ids: list[str] | None = None,
    progress: bool | None = None,
) -> list[Transcript]:
    """The shipped multi-session transcripts (or a folder given as ``path``)."""
    return load_dir(path or shipped_dir("sessions"))


DATASETS.register(
    "sessions",
    Dataset(
        load_sessions,
        reads=None,
        description="12 shipped multi-session transcripts with repeated tool-use tasks "
        "(transcripts/sessions)",
    ),
)
