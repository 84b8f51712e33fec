"""File mechanics the file-backed stores share.

A file is created or replaced whole (``write_whole``: written to
``<path>.<kind>-<pid>``, fsynced, then linked or renamed into place, and the
directory fsynced), so a crash leaves either the old file or the new one and at
most a temporary file named after the process that wrote it.
``remove_dead_temp_files`` removes those of processes that no longer run (call it
under the store's lock). Failures of the operating system become a ``StoreError``
that names the file and says what to do (``io_error``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from pathlib import Path

from memlab.errors import StoreError

__all__ = [
    "fsync_dir",
    "io_error",
    "pid_alive",
    "pread_all",
    "remove_dead_temp_files",
    "temp_files",
    "write_whole",
]

_TEMP = re.compile(r"\.(compact|create)-(\d+)$")


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (a zombie counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def io_error(path: Path, what: str, exc: OSError) -> StoreError:
    """A ``StoreError`` for an OS failure while doing ``what`` to the store at ``path``."""
    hint = (
        " (the disk or the file size limit is full)"
        if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
        else ""
    )
    return StoreError(
        f"cannot {what} memory store {path}: {exc.strerror or exc}{hint}; nothing was "
        "changed, free some space (or fix the file's permissions) and retry"
    )


def write_whole(path: Path, kind: str, lines: list[bytes], *, link: bool) -> int:
    """Write ``lines`` to ``<path>.<kind>-<pid>``, fsync it and move it to ``path``.

    Args:
        path: the store's file.
        kind: ``"create"`` or ``"compact"`` (names the temporary file).
        lines: the file's whole content.
        link: only if ``path`` does not exist yet (a hard link, so a file another
            program created meanwhile is never overwritten); else replace it,
            keeping its permission bits.

    Returns:
        An fd of the new file, open for appending; the caller owns it.

    Raises:
        StoreError: the write failed (no temporary file is left) or, with ``link``,
            another program created ``path`` meanwhile.
    """
    tmp = path.with_name(f"{path.name}.{kind}-{os.getpid()}")
    fd = -1
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
        if not link:
            # The new file takes the old one's place: a store the user made private
            # (chmod 600) or shared with a group (660) must stay so.
            with contextlib.suppress(FileNotFoundError):
                os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode))
        view = memoryview(b"".join(lines))
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.ENOSPC, "short write")
            view = view[n:]
        os.fsync(fd)
        if link:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise StoreError(
                    f"memory store {path} was created by another program while "
                    "memlab held its lock; retry"
                ) from None
            except OSError:  # a file system without hard links
                os.replace(tmp, path)
            tmp.unlink(missing_ok=True)
        else:
            os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise io_error(path, "create" if link else "compact", exc) from None
        raise
    return fd


def temp_files(path: Path) -> list[tuple[Path, int]]:
    """The temporary files ``write_whole`` left beside ``path``, with their writer's pid."""
    prefix = path.name
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    out = []
    for name in names:
        if name.startswith(prefix + "."):
            m = _TEMP.search(name)
            if m is not None and name == f"{prefix}.{m.group(1)}-{m.group(2)}":
                out.append((path.parent / name, int(m.group(2))))
    return out


def remove_dead_temp_files(path: Path) -> int:
    """Remove the temporary files of processes that no longer run; returns how many.

    Call it under the store's lock: a live writer's file is never touched.
    """
    removed = 0
    for tmp, pid in temp_files(path):
        if not pid_alive(pid):
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed += 1
    return removed


def pread_all(fd: int, n: int, offset: int) -> bytes:
    """Up to ``n`` bytes of ``fd`` from ``offset`` (fewer only at the end of the file)."""
    chunks = []
    while n > 0:
        chunk = os.pread(fd, n, offset)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def fsync_dir(folder: Path) -> None:
    """Make a rename or link inside ``folder`` durable."""
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
