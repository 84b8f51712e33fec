"""``transcripts=dir``: every format-v1 ``*.json`` transcript of a folder."""

from __future__ import annotations

from memlab.errors import TranscriptError
from memlab.lab.datasets import DATASETS, Dataset
from memlab.lab.transcripts import Transcript, load_dir


def load(
    path: str | None,
    *,
    limit: int | None = None,
    ids: list[str] | None = None,
    progress: bool | None = None,
) -> list[Transcript]:
    """Every transcript of the folder ``path`` (all are validated)."""
    if not path:
        raise TranscriptError("transcripts=dir needs a folder: add transcripts.path=DIR")
    return load_dir(path)


DATASETS.register(
    "dir",
    Dataset(load, reads="folder", description="every *.json format-v1 transcript in a folder"),
)
