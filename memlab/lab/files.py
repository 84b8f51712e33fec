"""Writing result files: atomically (temp file + rename) and with the user's umask.

``tempfile.mkstemp`` creates files readable by their owner only (0600); a result
file replaced by such a temp file would lose the permissions every other file
gets. ``atomic_write`` sets the mode a plain ``open(path, "w")`` would give.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from memlab.errors import OutputError

MAX_STEM_BYTES = 200
"""The longest file-name stem (in UTF-8 bytes) made from an id: file systems allow
255 bytes per name, and the suffix (``.json``, ``.sqlite-wal``) and a ``-2`` need room."""


def short_stem(stem: str, key: str) -> str:
    """``stem``, or when it is longer than ``MAX_STEM_BYTES`` its start and a short
    hash of ``key`` (the id it was made from), so that a long id still names one
    file that the file system accepts ("File name too long" otherwise)."""
    if len(stem.encode("utf-8")) <= MAX_STEM_BYTES:
        return stem
    digest = hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    head = stem.encode("utf-8")[: MAX_STEM_BYTES - len(digest) - 1].decode("utf-8", "ignore")
    return f"{head}-{digest}"


def umask() -> int:
    """The process's umask, read without changing it where the OS allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    # Elsewhere: set and restore (a brief window in which another thread's new
    # files would get mode 022).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: 0666 minus the umask."""
    return 0o666 & ~umask()


def atomic_write(
    path: str | os.PathLike[str],
    write: Callable[[IO[Any]], object],
    *,
    binary: bool = False,
    fsync: bool = False,
) -> Path:
    """Write a file through a temp file in the same folder, then rename it into place,
    so a reader sees the old file or the whole new one, never a part.

    Args:
        path: the file to (re)place; its folder is created if missing.
        write: called with the open temp file.
        binary: open the temp file in binary mode (default: UTF-8 text).
        fsync: flush the data to disk before the rename.

    Raises:
        OutputError: the folder or the file cannot be written (nothing is left behind).
    """
    p = Path(path)
    tmp: str | None = None
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
        os.chmod(tmp, file_mode())
        f: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with f:
            write(f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, p)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        # mkdir under a file says "File exists", of a file that does not exist
        blocker = next((a for a in p.parents if a.is_file()), None)
        if blocker is not None:
            raise OutputError(
                f"cannot write {p}: {blocker} is a file, not a folder; choose another path"
            ) from None
        raise OutputError(f"cannot write {p}: {exc.strerror or exc}") from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return p


def atomic_write_text(path: str | os.PathLike[str], text: str, *, fsync: bool = False) -> Path:
    """``atomic_write`` of a text (UTF-8)."""
    return atomic_write(path, lambda f: f.write(text), fsync=fsync)


def writable_folder(folder: str | os.PathLike[str], what: str) -> Path:
    """Check that ``folder`` can be created (or exists) and is writable, before any
    work starts.

    Raises:
        OutputError: naming ``what`` (e.g. "hydra.run.dir"), the folder and the reason.
    """
    p = Path(folder)
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise OutputError(f"{what} {p}: {probe} is a file, not a folder; choose another folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutputError(f"{what} {p}: {probe} is not writable; choose another folder")
    return p
