"""The memlab command line: argv -> command -> print.

Every command hands its work to the lab (``memlab.lab.experiment``,
``sweep``, ``tune``, ``gate``, ``report``...) and prints what comes back.
Exit codes: 0 success, 1 the gate found a regression (and nothing else), 2 bad
input (config, file, argument), 3 an I/O or environment failure (an unwritable
folder, an unreachable server, a missing extra) or an internal error, 130
interrupted (Ctrl-C). Every failure is one line on stderr without a traceback
(``MEMLAB_DEBUG=1`` shows the traceback of an internal error).
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence

from memlab import __version__
from memlab.cli.common import (
    BAD_INPUT,
    FAILURE,
    INTERRUPTED,
    OK,
    REGRESSED,
    _Exit,
    _JobFailed,
    _silence_stdout,
    echo,
    fail,
)
from memlab.cli.data import convert, embed, synth
from memlab.cli.hydra_apps import run, tune
from memlab.cli.results import compare, gate, judge, report
from memlab.cli.tools import bench, demo

__all__ = [
    "BAD_INPUT",
    "COMMANDS",
    "FAILURE",
    "INTERRUPTED",
    "OK",
    "REGRESSED",
    "USAGE",
    "bench",
    "compare",
    "convert",
    "demo",
    "embed",
    "gate",
    "judge",
    "main",
    "report",
    "run",
    "synth",
    "tune",
]
from memlab.errors import MemlabError

USAGE = """usage: memlab <command> [args]        (memlab <command> --help for each)

commands:
  run [overrides]   replay transcripts through memory strategies (Hydra; -m for sweeps);
                    reader=openai judge=llm: a model answers every probe (--dry-run, --max-cost)
  report DIR        rebuild tables and charts from a run or multirun folder, with how far to
                    trust them (differences against --reference with paired CIs, ...)
  compare RUN_A RUN_B
                    run B against run A on the same probes (paired bootstrap CIs)
  embed [overrides] [--workers N]
                    pre-warm the embedding cache for the transcripts a run would replay
                    (same keys as run: transcripts=..., embedder=...); resumable
  convert DATASET FILE --out DIR
                    write a benchmark file (locomo, longmemeval) as format-v1 transcripts
  tune [overrides]  search ranking weights and half-lives (Optuna), score on held-apart transcripts
  judge calibrate [judge=NAME judge.KEY=VALUE ...] --audit DIR
                    a judge's acceptance of gold and of known-wrong answers, with 95% intervals
  gate --baseline SUMMARY RUN_DIR
                    compare a run with a baseline; exit 1 when a metric regressed
  demo              a short tour of the memory layer (two users, recall under a budget)
  synth             generate support transcripts: memlab synth --n 50 --seed 1 --out DIR
                    (--turns 300-600 --days 40 ...: long multi-week ones;
                    --scenario sessions: multi-session, repeated tool-use tasks)
  bench store       compare the store backends on one seeded workload
                    -> results/bench/store.csv, store.png

options: --version, --help

exit codes: 0 ok, 1 gate regression, 2 bad input, 3 I/O, environment or internal
failure, 130 interrupted."""


# -- main -----------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run one memlab command; return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if not args or args[0] in {"-h", "--help", "help"}:
            echo(USAGE)
            return OK
        if args[0] in {"--version", "-V"}:
            echo(f"memlab {__version__}")
            return OK
        command, rest = args[0], args[1:]
        handler = COMMANDS.get(command)
        if handler is None:
            fail(f"error: unknown command {command!r}; run `memlab --help` for the commands")
            return BAD_INPUT
        warnings.formatwarning = _format_warning
        try:
            return handler(rest)
        except _JobFailed as failed:
            raise failed.error from None
    except _Exit as done:
        return done.code
    except MemlabError as exc:
        fail(f"error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        fail("interrupted")
        return INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return OK
    except OSError as exc:
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        fail(f"error: I/O failure{where}: {exc.strerror or exc}")
        return FAILURE
    except Exception as exc:
        if os.environ.get("MEMLAB_DEBUG"):
            traceback.print_exc()
        detail = " ".join(str(exc).split())[:300]
        fail(
            f"internal error: {type(exc).__name__}: {detail} (set MEMLAB_DEBUG=1 for the "
            "traceback, and please report it)"
        )
        return FAILURE


_default_formatwarning = warnings.formatwarning


def _format_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """memlab's own warnings (repaired benchmark data, torn log lines) read as
    one line, without the source line that raised them."""
    if category.__module__.startswith("memlab."):
        return f"memlab: warning: {message}\n"
    return _default_formatwarning(message, category, filename, lineno, line)


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "run": run,
    "report": report,
    "compare": compare,
    "judge": judge,
    "embed": embed,
    "convert": convert,
    "tune": tune,
    "gate": gate,
    "demo": demo,
    "synth": synth,
    "bench": bench,
}
