"""Where transcripts come from: the dataset registry and ``load_source``.

Every source of transcripts registers itself in ``DATASETS`` under the name the
``transcripts`` config group uses (``transcripts.name``): ``synthetic`` (the
shipped transcripts), ``dir`` (a folder of format-v1 files), ``locomo``
(Maharana et al., ACL 2024) and ``longmemeval`` (Wu et al., ICLR 2025), which
read the upstream JSON file from a path the user gives; nothing is downloaded.
A new dataset is one module here (or a plug-in's, entry-point group
``memlab.dataset``) plus one YAML in conf/transcripts/.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from memlab.errors import ConfigError, TranscriptError
from memlab.lab.datasets.stream import (
    DatasetWarning,
    Quirks,
    answer_text,
    check_path,
    dedupe_id,
    iter_json_array,
    select,
)
from memlab.lab.transcripts import Transcript
from memlab.registry import Registry


class Loader(Protocol):
    def __call__(
        self,
        path: str | None,
        *,
        limit: int | None = None,
        ids: list[str] | None = None,
        progress: bool | None = None,
    ) -> list[Transcript]:
        """Load transcripts. A loader may stop early once it has ``limit``
        transcripts or every id of ``ids`` (``load_source`` checks, orders and
        cuts the result either way); ``progress``: a bar on a terminal (None),
        or none (False)."""
        ...


@dataclass(frozen=True)
class Dataset:
    """A registered source of transcripts.

    Attributes:
        load: the loader.
        reads: what ``transcripts.path`` names: ``"file"`` (an upstream file:
            ``memlab convert`` offers it), ``"folder"``, or None (no path needed).
        description: one line for help texts.
    """

    load: Loader | Callable[..., list[Transcript]]
    reads: str | None
    description: str


DATASETS: Registry[Dataset] = Registry("dataset", "memlab.lab.datasets", error=ConfigError)
"""Sources of transcripts by name (``transcripts.name``)."""


def load_source(
    name: str,
    path: str | None = None,
    *,
    limit: int | None = None,
    ids: Iterable[str] | None = None,
    progress: bool | None = None,
) -> list[Transcript]:
    """Load transcripts from a registered dataset.

    Args:
        name: a name in ``DATASETS``.
        path: the folder or file the dataset reads.
        limit: keep only the first N transcripts (after ``ids``).
        ids: keep only these transcript ids, in this order (every id must exist,
            once).
        progress: a progress bar on a terminal (None or True), or none (False).

    Raises:
        ConfigError: an unknown dataset.
        TranscriptError: a missing path, bad files, unknown or repeated ids, or no
            transcript at all (an empty ``ids``, a file with no usable item).
    """
    ds = DATASETS.get(name)
    if ds.reads is not None and not path:
        raise TranscriptError(f"transcripts={name} needs a path: add transcripts.path=...")
    if path and not Path(path).exists():
        raise TranscriptError(f"transcripts.path {path} does not exist")
    wanted = list(ids) if ids is not None else None
    if wanted is not None:
        # An empty list would replay nothing and a repeated id would replay a
        # transcript twice, counting its probes twice: both look like a result.
        if not wanted:
            raise TranscriptError(
                "transcripts.ids is empty; name at least one id, or drop the key for all"
            )
        repeated = sorted({i for i in wanted if wanted.count(i) > 1})
        if repeated:
            raise TranscriptError(
                f"transcripts.ids names {repeated} more than once; name each once"
            )
    loaded: list[Transcript] = ds.load(path or None, limit=limit, ids=wanted, progress=progress)
    if wanted is not None:
        by_id = {t.id: t for t in loaded}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            where = f"{name} ({path})" if path else name
            others = sorted(set(by_id) - set(wanted))[:5]
            hint = f" (it has e.g. {others})" if others else ""
            raise TranscriptError(f"transcripts.ids: {missing} not found in {where}{hint}")
        loaded = [by_id[i] for i in wanted]
    if limit is not None:
        loaded = loaded[:limit]
    if not loaded:
        where = f"{name} ({path})" if path else name
        raise TranscriptError(
            f"{where} holds no transcripts to replay; is it the right file or folder?"
        )
    return loaded


def dataset_sha256(name: str, path: str | None = None) -> str | None:
    """SHA-256 of the data a dataset reads: the file's bytes, or for a folder (and a
    dataset with no path, whose shipped folder ``transcripts/<name>`` is read) the
    hash of each ``*.json`` file's name and SHA-256, in name order. None when no
    file or folder is known.

    Raises:
        TranscriptError: the file or folder cannot be read.
    """
    if path:
        p = Path(path)
    else:
        from memlab.lab.datasets.synthetic import shipped_dir

        try:
            p = shipped_dir(name)
        except TranscriptError:
            return None
    try:
        stat = p.stat()
        return _sha256(str(p.resolve()), stat.st_mtime_ns, stat.st_size, p.is_dir())
    except OSError as exc:
        raise TranscriptError(f"cannot read {p} to hash it: {exc.strerror or exc}") from None


@lru_cache(maxsize=32)
def _sha256(path: str, mtime_ns: int, size: int, folder: bool) -> str:
    # Cached by modification time and size: a sweep's jobs hash a large file once.
    from memlab.lab.fingerprint import file_sha256

    if not folder:
        return file_sha256(Path(path))
    h = hashlib.sha256()
    for f in sorted(Path(path).glob("*.json")):
        h.update(f"{f.name}\0{file_sha256(f)}\n".encode())
    return h.hexdigest()


__all__ = [
    "DATASETS",
    "Dataset",
    "DatasetWarning",
    "Loader",
    "Quirks",
    "answer_text",
    "check_path",
    "dataset_sha256",
    "dedupe_id",
    "iter_json_array",
    "load_source",
    "select",
]
