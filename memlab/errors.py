"""The MemlabError tree: every user-facing failure is one of these.

Each message says what was wrong and what to do about it. The CLI prints the
message on one line, without a traceback, and exits with the error's
``exit_code``: 2 for bad input (a config key, a file, an argument), 3 for an I/O
or environment failure (an unwritable folder, an unreachable server, a missing
optional dependency). Exit code 1 is the gate's "a metric regressed" and nothing
else; 130 is an interrupt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class MemlabError(Exception):
    """Base class of every error memlab reports to a user."""

    exit_code = 2  # bad input; the I/O and environment classes below use 3

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickling rebuilds an exception as type(*args), args being the message
        # alone: the classes below with their own __init__ arguments could not be
        # unpickled, and a worker process that raised one (memlab embed --workers)
        # left the parent waiting for a result forever.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[MemlabError], args: tuple[Any, ...], state: dict[str, Any]) -> MemlabError:
    """A pickled MemlabError, restored without calling its ``__init__``."""
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class EnvironmentFailure(MemlabError):
    """Not the user's input but the machine: a folder, a server, a dependency."""

    exit_code = 3


class OutputError(EnvironmentFailure):
    """A result file or folder cannot be written (permissions, a full disk, a file
    where a folder should be)."""


class InputError(MemlabError, ValueError):
    """A value passed to the library is invalid (empty content, bad scope, ...)."""


class DimensionMismatch(InputError):
    """An embedding does not have the dimensions the store or embedder expects."""

    def __init__(self, expected: int, got: int, where: str) -> None:
        self.expected = expected
        self.got = got
        super().__init__(
            f"{where}: embedding has {got} dimensions but {expected} are expected; "
            "use the same embedder (and dims) the store was created with, or a new store"
        )


class ConfigError(MemlabError):
    """A configuration key or value is invalid."""


class MissingExtraError(EnvironmentFailure):
    """An optional dependency is not installed."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        self.extra = extra
        super().__init__(
            f"{feature} needs the optional dependency '{module}', which is not installed; "
            f"install it with: pip install 'memlab[{extra}]'"
        )


class StoreError(MemlabError):
    """A memory store cannot be opened, read or written."""

    exit_code = 3


class StoreCorrupted(StoreError):
    """A store's data on disk is damaged. The file is left untouched."""

    def __init__(self, path: str | Path, line: int | None, detail: str) -> None:
        self.path = str(path)
        self.line = line
        where = f"{path}, line {line}" if line is not None else str(path)
        super().__init__(
            f"memory store is corrupted at {where}: {detail}. The file was not modified; "
            "restore it from a backup, or move it aside to start an empty store"
        )


class StoreLocked(StoreError):
    """Another process holds the store's lock for too long."""


class StoreUnavailable(StoreError):
    """A database server cannot be reached, refused the login, or lacks a feature."""


class EmbedderError(MemlabError):
    """An embedder failed or returned something unusable."""

    exit_code = 3


class SummarizerError(MemlabError):
    """A summarizer failed or returned something unusable."""

    exit_code = 3


class ChatModelError(MemlabError):
    """The agent's chat model returned something unusable (not a string)."""


class TurnMaintenanceError(MemlabError):
    """An agent turn was stored, but the maintenance after it failed.

    Attributes:
        result: the turn's ``TurnResult`` (reply, hits, stored ids, gate
            decisions; ``maintenance`` None), so a caller keeps the reply and does
            not run, and store, the turn again.
    """

    exit_code = 3

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result


class CacheError(MemlabError):
    """The embedding/summary cache cannot be opened, read or written."""

    exit_code = 3


class CacheCorrupted(CacheError):
    """The cache file is damaged or is not a memlab cache. The file is left untouched.

    Args:
        path: the cache file.
        detail: what is wrong with it.
        elsewhere: how to use another cache instead, by the setting that chose
            ``path`` (``MEMLAB_CACHE_DIR`` for the default file; the path given
            explicitly otherwise).
    """

    def __init__(
        self,
        path: str | Path,
        detail: str,
        *,
        elsewhere: str = "point MEMLAB_CACHE_DIR at another folder",
    ) -> None:
        self.path = str(path)
        super().__init__(
            f"embedding cache {path} is unusable: {detail}. The file was not modified; "
            f"delete {path} or move it aside (memlab then starts an empty cache), or "
            f"{elsewhere}"
        )


class TranscriptError(MemlabError):
    """A transcript file is invalid; the message names the file, turn id and field."""


class ErrataError(MemlabError):
    """An errata file is invalid or does not fit the transcripts; the message names
    the file, the entry and the field."""


class ChatEndpointError(MemlabError):
    """A chat model's endpoint (a reader's or a judge's) failed, is unreachable, or
    answered something unusable."""

    exit_code = 3


def require(module: str, *, feature: str, extra: str) -> Any:
    """Import an optional dependency or raise MissingExtraError naming the extra.

    Args:
        module: the module to import, e.g. ``"psycopg"``.
        feature: what needs it, for the message (``"the pgvector store"``).
        extra: the ``memlab[...]`` extra that installs it.

    Returns:
        The imported module.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(feature, extra, module) from exc
