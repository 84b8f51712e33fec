"""What every memlab command shares: exit codes, one-line output and errors, and
an argparse whose errors are InputErrors."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from memlab.errors import InputError

OK, REGRESSED, BAD_INPUT, FAILURE, INTERRUPTED = 0, 1, 2, 3, 130


# -- output -------------------------------------------------------------------------
def echo(*parts: Any) -> None:
    """print() for command output; a reader that closed the pipe (``| head``) ends
    the output quietly, not the command."""
    try:
        print(*parts, flush=True)
    except BrokenPipeError:
        _silence_stdout()


def _silence_stdout() -> None:
    # Python's recipe: point stdout at devnull so the interpreter's final flush
    # does not raise again.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


MAX_MESSAGE_CHARS = 1000
"""How long the one line of a failure may grow before the rest is counted, not shown."""


def one_line(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A message of several lines (a folder's bad transcripts, a file's problems) as
    one line: its lines joined with "; ", and past ``limit`` characters the lines
    left out counted instead of shown."""
    parts = [ln.strip().removeprefix("- ") for ln in message.splitlines() if ln.strip()]
    if not parts:
        return message.strip()
    text = parts[0] if len(parts[0]) <= limit else parts[0][:limit] + "..."
    shown = 1
    for part in parts[1:]:
        sep = " " if text.endswith(":") else "; "
        if len(text) + len(sep) + len(part) > limit:
            break
        text += sep + part
        shown += 1
    left = len(parts) - shown
    if left:
        text += f"; ... and {left} more line{'s' if left != 1 else ''} of problems"
    return text


def fail(message: str) -> None:
    """Exactly one line on stderr."""
    print(f"memlab: {one_line(message)}", file=sys.stderr, flush=True)


class _Exit(Exception):
    """argparse finished (help printed): end the command with this code."""

    def __init__(self, code: int) -> None:
        self.code = code


class _JobFailed(BaseException):
    """A single run's failure on its way out of Hydra (which logs every Exception a
    job raises, adding lines to the one-line message; it lets this through)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class OneLineErrors(argparse.ArgumentParser):
    """argparse whose errors are one-line InputErrors (not its usage and a line);
    ``--help`` exits as argparse does (for a module also run on its own)."""

    def error(self, message: str) -> NoReturn:
        raise InputError(f"{self.prog.removeprefix('memlab ')}: {message} (see {self.prog} --help)")


class ArgumentParser(OneLineErrors):
    """argparse whose errors are one-line InputErrors and whose --help returns."""

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            print(message, file=sys.stderr, end="")
        raise _Exit(status)


def _no_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="never draw progress bars (they appear only on a terminal anyway)",
    )


def names(text: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def target_of(command: str, args: list[str], usage: str, targets: tuple[str, ...]) -> str | None:
    """The target of a command with targets (``memlab judge calibrate``): the first
    argument when it names one; None after printing ``usage`` for ``--help``.

    Raises:
        InputError: no target, or an unknown one.
    """
    if not args or args[0] in {"-h", "--help"}:
        if args:
            echo(usage)
            return None
        raise InputError(
            f"{command} needs a target: memlab {command} {targets[0]} (memlab {command} --help)"
        )
    if args[0] not in targets:
        raise InputError(
            f"{command} has no target {args[0]!r}; the target is: {', '.join(targets)}"
        )
    return args[0]
