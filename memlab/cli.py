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

import argparse
import logging
import os
import re
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from memlab import __version__
from memlab.errors import ConfigError, InputError, MemlabError

OK, REGRESSED, BAD_INPUT, FAILURE, INTERRUPTED = 0, 1, 2, 3, 130

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


def fail(message: str) -> None:
    """One line on stderr."""
    text = " ".join(message.split("\n")) if "\n" in message and len(message) < 400 else message
    print(f"memlab: {text}", file=sys.stderr, flush=True)


class _Exit(Exception):
    """argparse finished (help printed): end the command with this code."""

    def __init__(self, code: int) -> None:
        self.code = code


class _JobFailed(BaseException):
    """A single run's failure on its way out of Hydra (which logs every Exception a
    job raises, adding lines to the one-line message; it lets this through)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one-line InputErrors and whose --help returns."""

    def error(self, message: str) -> NoReturn:
        raise InputError(f"{self.prog.removeprefix('memlab ')}: {message} (see {self.prog} --help)")

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


# -- run and tune (Hydra apps) ------------------------------------------------------------
HYDRA_FLAGS = {"--hydra-help", "--info", "--cfg", "-c", "--resolve", "--package", "-p"}


def _wants_help(args: Sequence[str]) -> bool:
    return any(a in {"-h", "--help"} for a in args)


def _wants_hydra(args: Sequence[str]) -> bool:
    return any(a in HYDRA_FLAGS or a.startswith(("--cfg", "--info")) for a in args)


def _override_value(path: Path) -> str:
    text = str(path)
    if all(c.isalnum() or c in "_./-:" for c in text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _hydra_app(config_name: str, prog: str, argv: list[str]) -> None:
    """Run ``_run_job`` as a Hydra app; job failures surface as exceptions."""
    import hydra

    from memlab.lab.config import conf_dir, register

    register()
    saved_argv, saved_env = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    sys.argv = [prog, *argv]
    # Let a failed job's exception reach main(), which prints it on one line.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name=config_name)(
            _run_job
        )()
    finally:
        sys.argv = saved_argv
        if saved_env is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = saved_env


def _app_help(command: str) -> str:
    from memlab.lab.config import config_groups, plugin_names

    groups = config_groups()
    width = max(len(g) for g in groups) + 1
    flags = " [--dry-run] [--max-cost USD]" if command == "run" else ""
    lines = [
        f"usage: memlab {command} [KEY=VALUE | GROUP=OPTION ...] "
        + ("[-m] [--no-progress]" + flags if command == "run" else "[--force] [--no-progress]"),
        "",
        (
            "Replay transcripts through memory strategies, score every probe and write a run\n"
            "folder (summary.csv, probes.csv, turns.csv, config.yaml, fingerprint.json, charts)."
            if command == "run"
            else "Search the memory layer's ranking weights and half-lives with Optuna on the\n"
            "tuning transcripts; report the best config's gain over the default on the tuning\n"
            "and the held-apart transcripts as paired bootstrap intervals; write it as a preset\n"
            "only when the held-apart gain excludes 0 (conf/tune.yaml documents every key).\n"
            "Search ranges: 'KEY=interval(a,b)', 'KEY=int(interval(a,b))', 'KEY=choice(x,y)'.\n"
            "--force: write the preset anyway. tune.out=DIR: the folder (rerun to resume)."
        ),
        *(
            ["-m sweeps: one job per value (budget=200,400,800) or +experiment=NAME.", ""]
            if command == "run"
            else [""]
        ),
        "config groups (GROUP=OPTION):",
    ]
    lines += [f"  {g + ':':<{width}} {', '.join(opts)}" for g, opts in groups.items()]
    lines += ["", "registered plug-ins:"]
    lines += [f"  {k + ':':<{width}} {', '.join(v)}" for k, v in plugin_names().items()]
    lines += [
        "",
        f"memlab {command} --cfg job     print the composed config: every key and its value",
        *(
            [f"memlab {command} --hydra-help  Hydra's own options (launchers, sweepers, logging)"]
            if command == "run"
            else []
        ),
        "progress=false (or --no-progress): never draw progress bars",
    ]
    if command == "run":
        lines += [
            "--dry-run          with a reader: count the calls, tokens and cost a run would make;",
            "                   send nothing, write nothing (reader.dry_run=true)",
            "--max-cost USD     with a reader: stop making calls once the run would spend more;",
            "                   what was done is kept, marked incomplete (reader.max_usd=USD)",
        ]
    return "\n".join(lines)


def _app_args(args: Sequence[str]) -> list[str]:
    out = [a for a in args if a != "--no-progress"]
    if len(out) != len(args):
        out.append("progress=false")
    return out


def _reader_flags(args: list[str]) -> tuple[list[str], list[str]]:
    """``--dry-run`` and ``--max-cost USD`` as ``reader.*`` overrides: (the other
    arguments, the overrides)."""
    rest: list[str] = []
    extra: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--dry-run":
            extra.append("reader.dry_run=true")
        elif a == "--max-cost" or a.startswith("--max-cost="):
            if a == "--max-cost":
                if i + 1 >= len(args):
                    raise InputError("run: --max-cost needs an amount in US dollars, e.g. 2.50")
                i += 1
                value = args[i]
            else:
                value = a.split("=", 1)[1]
            try:
                usd = float(value)
            except ValueError:
                usd = float("nan")
            if not usd > 0 or usd == float("inf"):
                raise InputError(
                    f"run: --max-cost must be a positive amount of US dollars, got {value!r}"
                )
            extra.append(f"reader.max_usd={usd!r}")
        else:
            rest.append(a)
        i += 1
    return rest, extra


def run(args: list[str]) -> int:
    """``memlab run [overrides]``: a Hydra app (``-m`` sweeps, launchers, ...).

    A multirun is checked value by value first, and its report (one table over
    all jobs, the Pareto front, heatmaps) is written when the jobs are done.
    """
    if _wants_help(args):
        echo(_app_help("run"))
        return OK
    if _wants_hydra(args):
        _hydra_app("config", "memlab run", list(args))
        return OK
    from memlab.lab.sweep import plan_run

    args, reader_flags = _reader_flags(_app_args(args))
    args += reader_flags
    try:
        plan = plan_run(args)
    except ConfigError as exc:
        # reader=none has no such keys: say why instead.
        if reader_flags and re.search(r"'reader\.(max_usd|dry_run)': it does not exist", str(exc)):
            raise InputError(
                "run: --dry-run and --max-cost apply to a reader's calls, but reader=none makes "
                "none; add reader=openai (see docs/answers.md)"
            ) from None
        raise
    dry_run = "reader.dry_run=true" in reader_flags or bool(_reader_get(plan.cfg, "dry_run"))
    if dry_run:
        return _dry_run(args, plan.multirun)
    argv = list(args)
    if plan.multirun:
        from memlab.lab.config import validate
        from memlab.lab.experiment import load_transcripts

        load_transcripts(validate(plan.cfg), progress=False)  # fail before any job starts
        if not plan.output_given:
            argv.append(f"hydra.sweep.dir={_override_value(plan.output)}")
    try:
        _hydra_app("config", "memlab run", argv)
    except MemlabError as exc:
        if plan.multirun:
            err = MemlabError(
                f"{exc} (finished jobs are in {plan.output}; `memlab report "
                f"{plan.output}` tables them)"
            )
            err.exit_code = exc.exit_code
            raise err from None
        raise
    if plan.multirun:
        from memlab.lab.report import sweep_report

        echo()
        for line in sweep_report(plan.output, draw=bool(plan.cfg.report.charts)):
            echo(line)
    return OK


def _reader_get(cfg: Any, key: str) -> Any:
    node = cfg.get("reader") if hasattr(cfg, "get") else None
    return node.get(key) if node is not None and hasattr(node, "get") else None


def _dry_run(args: list[str], multirun: bool) -> int:
    """A dry run in a scratch folder (Hydra's files included), removed afterwards."""
    import shutil
    import tempfile

    scratch = tempfile.mkdtemp(prefix="memlab-dry-run-")
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    argv = [a for a in args if not a.startswith(f"{key}=")]
    argv += [f"{key}={_override_value(Path(scratch))}", "hydra.output_subdir=null"]
    try:
        _hydra_app("config", "memlab run", argv)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return OK


def _run_job(cfg: Any) -> Any:
    """One Hydra job: a run. In a multirun a failure is raised naming the job (it
    may cross a process boundary)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    # httpx logs every request at INFO, which Hydra's job logging would print and file.
    httpx_log = logging.getLogger("httpx")
    level = httpx_log.level
    httpx_log.setLevel(max(level, logging.WARNING))
    try:
        out = Path(hc.runtime.output_dir)
        from memlab.lab.experiment import run as run_experiment

        _print_run(run_experiment(cfg, out))
        return None
    except Exception as exc:
        if hc.mode != RunMode.MULTIRUN:
            raise _JobFailed(exc) from None
        if not isinstance(exc, MemlabError):
            raise
        err = MemlabError(f"job {hc.job.num} ({' '.join(hc.overrides.task)}): {exc}")
        err.exit_code = exc.exit_code
        raise err from None
    finally:
        httpx_log.setLevel(level)


def _quiet(result: Any) -> str:
    return (
        f"{result.out}: {result.transcripts} transcripts, {result.probes_per_strategy} probes, "
        f"{result.seconds:.1f} s"
    )


def _print_run(result: Any) -> None:
    import pandas as pd

    from memlab.lab.report import answers_lines, format_table, summary_table

    answers = result.answers
    if answers is not None and answers.dry_run:
        echo(
            f"\n{result.transcripts} transcripts, {result.probes_per_strategy} probes, "
            f"{result.strategies} strategies, budget {result.budget} tokens"
        )
        for line in answers_lines(answers):
            echo(line)
        return
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        echo(
            f"\n{result.transcripts} transcripts, {result.probes_per_strategy} probes, "
            f"{result.strategies} strategies, budget {result.budget} tokens, "
            f"{result.seconds:.1f} s\n"
        )
        echo(format_table(summary_table(result.summary)))
    if answers is not None:
        echo()
        for line in answers_lines(answers):
            echo(line)
    if result.errata is not None:
        from memlab.lab.run_report import errata_section, to_text

        section = errata_section(result.out)
        for line in to_text([section] if section is not None else []):
            echo(line)
    for label, stats in result.cache_stats.items():
        echo(f"\n{label} cache: {stats}")
    echo(
        f"\nresults: {result.out}/ (summary.csv, probes.csv, turns.csv, config.yaml, "
        f"fingerprint.json{', errata.csv' if result.errata is not None else ''}"
        f"{', charts/*.png' if result.charts else ''})"
    )
    if result.strategies > 1:
        echo(
            f"how far to trust the differences: memlab report {result.out} "
            "(paired intervals against memory, minimum detectable differences)"
        )


def tune(args: list[str]) -> int:
    """``memlab tune [overrides] [--force] [--no-progress]``: Optuna (TPE) over the
    search space on the tuning transcripts, then the paired gain of the best
    config over the default on the tuning and the held-apart transcripts; the
    preset is written only when the held-apart gain excludes 0 (or with --force)."""
    if _wants_help(args):
        echo(_app_help("tune"))
        return OK
    from memlab.errors import require

    require("optuna", feature="memlab tune", extra="tune")
    if _wants_hydra(args):
        return _print_config(args, "tune")
    from memlab.lab.tune import run as run_tune

    force = "--force" in args
    rest = _app_args([a for a in args if a != "--force"])
    unknown = [a for a in rest if a.startswith("-")]
    if unknown:
        raise InputError(f"tune: unknown option {unknown[0]} (see memlab tune --help)")
    run_tune(rest, force=force, echo=echo)
    return OK


def _print_config(args: list[str], config_name: str) -> int:
    """``--cfg job``: print the composed config (memlab tune composes without Hydra's app)."""
    from omegaconf import OmegaConf

    from memlab.lab.config import compose
    from memlab.lab.tune.space import fixed_overrides

    rest = [a for a in args if not (a in HYDRA_FLAGS or a.startswith(("--cfg", "--info")))]
    rest = [a for a in rest if a not in {"job", "hydra", "all"}]
    echo(OmegaConf.to_yaml(compose(fixed_overrides(rest), config_name)))
    return OK


# -- report ---------------------------------------------------------------------------
def report(args: list[str]) -> int:
    """``memlab report DIR``: rebuild tables and charts from a run or multirun folder."""
    from memlab.lab.report import rebuild

    parser = ArgumentParser(prog="memlab report", description=report.__doc__)
    parser.add_argument("dir", type=Path, help="a run folder (results/runs/...) or multirun folder")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-charts", action="store_true")
    parser.add_argument(
        "--heatmap",
        metavar="KEY1,KEY2",
        help="draw METRIC over two swept keys (default: the two keys when exactly two were swept)",
    )
    parser.add_argument(
        "--metric", help="the heatmap's metric (default: fact_recall, else evidence_recall)"
    )
    parser.add_argument(
        "--strategy", help="the heatmap's strategy (default: the only one, else memory)"
    )
    parser.add_argument(
        "--reference",
        metavar="STRATEGY",
        help="a run folder's differences are each strategy minus this one, on the same probes "
        "(default: memory, else the first strategy)",
    )
    parser.add_argument(
        "--differences",
        metavar="METRIC[,METRIC]",
        help="the metrics to compare (default: the run's of fact_recall, evidence_recall, "
        "answer_accuracy, stale_wins, haystack_session_recall_all@5, haystack_turn_ndcg@10, "
        "abstention_proxy)",
    )
    ns = parser.parse_args(args)
    if not ns.dir.is_dir():
        raise InputError(f"{ns.dir} is not a folder; pass a run or multirun folder")
    heatmap = None
    if ns.heatmap is not None:
        keys = [k.strip() for k in ns.heatmap.split(",") if k.strip()]
        if len(keys) != 2:
            raise InputError(f"--heatmap takes two swept keys, KEY1,KEY2; got {ns.heatmap!r}")
        heatmap = (keys[0], keys[1])
    for line in rebuild(
        ns.dir,
        n_boot=ns.bootstrap,
        seed=ns.seed,
        draw=not ns.no_charts,
        heatmap=heatmap,
        metric=ns.metric,
        strategy=ns.strategy,
        reference=ns.reference,
        differences=_names(ns.differences),
    ):
        echo(line)
    return OK


def _names(text: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def compare(args: list[str]) -> int:
    """``memlab compare RUN_A RUN_B``: run B against run A on the same probes: the
    paired bootstrap interval of each difference, per strategy, group and metric."""
    from memlab.lab import run_report

    parser = ArgumentParser(prog="memlab compare", description=compare.__doc__)
    parser.add_argument("run_a", type=Path, help="the run compared against (A)")
    parser.add_argument("run_b", type=Path, help="the run compared (B); differences are B - A")
    parser.add_argument(
        "--strategies",
        metavar="A_NAME:B_NAME[,...]",
        help="strategy pairs to compare (default: every strategy both runs have, with itself)",
    )
    parser.add_argument("--metrics", metavar="METRIC[,METRIC]", help="as report --differences")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-charts", action="store_true")
    parser.add_argument("--out", type=Path, help="where to write compare.md (default: RUN_B)")
    ns = parser.parse_args(args)
    pairs = None
    if ns.strategies:
        pairs = []
        for item in _names(ns.strategies) or []:
            a, sep, b = item.partition(":")
            if not sep or not a or not b:
                raise InputError(f"compare: --strategies takes A_NAME:B_NAME pairs, got {item!r}")
            pairs.append((a, b))
    for folder in (ns.run_a, ns.run_b):
        if not folder.is_dir():
            raise InputError(f"compare: {folder} is not a folder; pass two run folders")
    found = run_report.compare(
        ns.run_a,
        ns.run_b,
        strategies=pairs,
        metrics=_names(ns.metrics),
        n_boot=ns.bootstrap,
        seed=ns.seed,
        draw=not ns.no_charts,
        out=ns.out,
    )
    for line in run_report.to_text(found.sections):
        echo(line)
    echo(f"\nwritten: {', '.join(str(p) for p in found.written)}")
    return OK


# -- synth and convert ----------------------------------------------------------------------
def synth(args: list[str]) -> int:
    """``memlab synth --n N --seed S --out DIR [--turns N|LO-HI] [mix options] [--force]``."""
    from memlab.lab import synth as generator

    parser = ArgumentParser(
        prog="memlab synth",
        description="Generate seeded support-agent transcripts (format v1). Seeds seed .. "
        "seed+n-1 give files support-<seed>.json (60 turns, the shipped default set) or, "
        "with any length or mix option, long-<seed>.json; the same seed and options always "
        "give the same bytes.",
    )
    parser.add_argument("--n", type=int, default=20, help="how many transcripts (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument(
        "--scenario",
        choices=("support", "sessions"),
        default="support",
        help="support (default) or sessions: multi-session conversations with repeated "
        "tool-use tasks, files sessions-<seed>.json (no length or mix options)",
    )
    parser.add_argument(
        "--turns",
        default=None,
        help="turns per transcript: N, or LO-HI for a seeded length per transcript (default 60)",
    )
    parser.add_argument(
        "--sessions", type=int, help="sessions per transcript (default: one per 30 turns)"
    )
    parser.add_argument(
        "--days", type=int, help="days the sessions span (default: one per 12 turns)"
    )
    parser.add_argument(
        "--fact-density", type=float, help="facts stated per 100 turns per customer (default 6)"
    )
    parser.add_argument(
        "--noise", type=float, default=1.0, help="weight of small talk among filler turns (1)"
    )
    parser.add_argument(
        "--tool-output",
        type=float,
        default=1.0,
        help="weight of tool output among filler turns (1)",
    )
    parser.add_argument(
        "--injections", type=float, help="injected instructions per 100 turns (default 1)"
    )
    parser.add_argument(
        "--corrections", type=float, help="share of correctable facts corrected later (0.3)"
    )
    parser.add_argument("--probes", type=float, help="probes per 100 turns per customer (5)")
    parser.add_argument(
        "--force", action="store_true", help="replace existing files whose content differs"
    )
    parser.add_argument(
        "--phrasings",
        choices=["all", "dev", "heldout"],
        default="all",
        help="which half of the update phrasings corrections and false corrections come "
        "from: all (default, the shipped set), dev (for developing rules) or heldout "
        "(for reporting figures on phrasings no rule was developed on)",
    )
    _no_progress(parser)
    ns = parser.parse_args(args)
    mix = generator.Mix(
        turns=generator.parse_turns(ns.turns) if ns.turns else generator.Mix().turns,
        sessions=ns.sessions,
        days=ns.days,
        fact_density=ns.fact_density,
        noise=ns.noise,
        tool_output=ns.tool_output,
        injections=ns.injections,
        corrections=ns.corrections,
        probes=ns.probes,
    )
    result = generator.write(
        ns.out,
        ns.n,
        ns.seed,
        force=ns.force,
        progress=False if ns.no_progress else None,
        mix=mix,
        phrasings=ns.phrasings,
        scenario=ns.scenario,
    )
    if ns.scenario == "sessions":
        from memlab.lab.synth import sessions

        first = sessions.transcript_id(ns.seed)
        last = sessions.transcript_id(ns.seed + ns.n - 1)
    else:
        first = generator.mix.transcript_id(ns.seed, mix)
        last = generator.mix.transcript_id(ns.seed + ns.n - 1, mix)
    echo(
        f"{ns.n} transcripts ({first} .. {last}) in {result.folder}: "
        f"{len(result.written)} written, {len(result.replaced)} replaced, "
        f"{len(result.unchanged)} unchanged"
    )
    return OK


def convert(args: list[str]) -> int:
    """``memlab convert DATASET FILE --out DIR``: write a benchmark file as
    format-v1 transcripts (one JSON file per transcript) for inspection."""
    from memlab.lab.datasets import DATASETS, check_path, load_source
    from memlab.lab.transcripts import save_all

    files = [name for name, d in DATASETS.items() if d.reads == "file"]
    parser = ArgumentParser(prog="memlab convert", description=convert.__doc__)
    parser.add_argument("dataset", choices=files, help="the benchmark the file comes from")
    parser.add_argument("file", type=Path, help="the upstream JSON file (e.g. locomo10.json)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--limit", type=int, default=None, help="only the first N transcripts")
    parser.add_argument("--ids", nargs="+", default=None, help="only these transcript ids")
    _no_progress(parser)
    ns = parser.parse_args(args)
    if ns.limit is not None and ns.limit < 1:
        raise InputError(f"--limit must be >= 1, got {ns.limit}")
    if ns.out.exists() and not ns.out.is_dir():
        raise InputError(f"--out {ns.out} is a file; pass a folder")
    check_path(ns.file, ns.dataset)
    transcripts = load_source(
        ns.dataset,
        str(ns.file),
        limit=ns.limit,
        ids=ns.ids,
        progress=False if ns.no_progress else None,
    )
    save_all(transcripts, ns.out)
    turns = sum(len(t.turns) for t in transcripts)
    probes = sum(len(t.probes) for t in transcripts)
    echo(
        f"wrote {len(transcripts)} transcripts ({turns} turns, {probes} probes) to {ns.out}/; "
        f"replay them with: memlab run transcripts=dir transcripts.path={ns.out}"
    )
    return OK


# -- embed ----------------------------------------------------------------------------------
EMBED_HELP = """usage: memlab embed [KEY=VALUE | GROUP=OPTION ...] [--workers N] [--chunk N] [--no-progress]

Pre-warm the persistent embedding cache with every turn text of the transcripts a
`memlab run` with the same overrides would replay, so that the run starts warm.
The keys are run's: transcripts=... (transcripts.path, .limit, .ids), embedder=...
(embedder.*), cache.path. Missing texts are embedded longest first, one cache
transaction per chunk: Ctrl-C (exit 130) keeps every finished chunk, and the next
`memlab embed` resumes where it stopped.

  --workers N   embedding processes, each with its own model and cores/N threads (default 1)
  --chunk N     texts per chunk and cache transaction (default 256)
  --no-progress no progress bar (it appears only on a terminal anyway)

example: memlab embed transcripts=longmemeval transcripts.path=longmemeval_s.json embedder=minilm"""


def embed(args: list[str]) -> int:
    """``memlab embed [overrides] [--workers N] [--chunk N]``: pre-warm the cache."""
    if _wants_help(args):
        echo(EMBED_HELP)
        return OK
    from memlab.lab.config import compose, validate
    from memlab.lab.embed import DEFAULT_CHUNK, dataset_texts, prewarm
    from memlab.lab.experiment import instantiate, load_transcripts
    from memlab.memory import CachedEmbedder, ModelCache

    numbers = {"--workers": 1, "--chunk": DEFAULT_CHUNK}
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        flag, eq, value = a.partition("=")
        if flag in numbers:
            if not eq:
                if i + 1 >= len(args):
                    raise InputError(f"embed: {flag} needs a number")
                i += 1
                value = args[i]
            try:
                numbers[flag] = int(value)
            except ValueError:
                raise InputError(f"embed: {flag} takes an integer, got {value!r}") from None
            if numbers[flag] < 1:
                raise InputError(f"embed: {flag} must be >= 1, got {numbers[flag]}")
        elif a.startswith("-") and a != "--no-progress":
            raise InputError(f"embed: unknown option {a!r} (see memlab embed --help)")
        else:
            rest.append(a)
        i += 1
    v = validate(compose(_app_args(rest)))
    node = v.plugins["embedder"]
    transcripts = load_transcripts(v)
    texts = dataset_texts(transcripts)
    inner = instantiate(node)
    cached = CachedEmbedder(inner, ModelCache(v.run.cache.path))
    try:
        echo(
            f"memlab embed: {len(transcripts)} transcripts, {len(texts):,} distinct turn texts, "
            f"embedder {inner.name}, cache {cached.cache.path}"
        )
        stored = [0]
        result = prewarm(
            cached,
            texts,
            chunk=numbers["--chunk"],
            workers=numbers["--workers"],
            plugin=node,
            progress=v.run.progress,
            on_chunk=lambda n: stored.__setitem__(0, stored[0] + n),
        )
    except KeyboardInterrupt:
        fail(
            f"interrupted; {stored[0]:,} newly embedded texts are stored in the cache: run the "
            "same command again to resume"
        )
        return INTERRUPTED
    finally:
        cached.close()
    echo(result.line(inner.name))
    return OK


# -- gate -----------------------------------------------------------------------------------
def gate(args: list[str]) -> int:
    """``memlab gate --baseline BASELINE RUN_DIR``: fail (exit 1) when a metric of the
    run moved the wrong way beyond its tolerance; exit 2 when the run cannot be
    compared (missing metric, different transcripts or config, an unfinished run)."""
    from memlab.lab import gate as gating

    parser = ArgumentParser(prog="memlab gate", description=gate.__doc__)
    parser.add_argument("run", type=Path, help="the run folder to check")
    parser.add_argument(
        "--baseline", type=Path, required=True, help="baseline summary.csv (or its run folder)"
    )
    parser.add_argument("--rules", type=Path, help="YAML file of margins and filters")
    parser.add_argument("--margin-abs", type=float, help="absolute margin (default 0)")
    parser.add_argument("--margin-rel", type=float, help="margin relative to |baseline| (0.01)")
    parser.add_argument(
        "--margin",
        action="append",
        default=[],
        metavar="METRIC:abs=X,rel=Y",
        help="margin of one metric (repeatable)",
    )
    parser.add_argument("--include-latency", action="store_true", help="also gate *_ms metrics")
    parser.add_argument("--exclude", action="append", default=[], metavar="METRIC")
    parser.add_argument("--groups", help="comma-separated groups to gate (default: all of them)")
    parser.add_argument("--strategies", help="comma-separated strategies (default: all)")
    parser.add_argument(
        "--allow-config",
        action="append",
        default=[],
        metavar="KEY",
        help="accept a config difference under KEY (e.g. memory.weights) to compare settings",
    )
    parser.add_argument("--markdown", type=Path, help="where to write the report (RUN/gate.md)")
    ns = parser.parse_args(args)

    gate_rules = gating.rules(
        file=ns.rules,
        margin_abs=ns.margin_abs,
        margin_rel=ns.margin_rel,
        margins=ns.margin,
        include_latency=ns.include_latency,
        exclude=ns.exclude,
        groups=_names(ns.groups),
        strategies=_names(ns.strategies),
    )
    outcome = gating.evaluate(ns.baseline, ns.run, gate_rules, allow_config=ns.allow_config)
    if outcome.text:
        echo(outcome.text)
    md = outcome.publish(ns.markdown, os.environ.get("GITHUB_STEP_SUMMARY"))
    if outcome.result is not None:
        echo(f"\nreport: {md}")
    if outcome.error is not None:
        raise outcome.error
    return OK if outcome.passed else REGRESSED


# -- judge calibration -----------------------------------------------------------------------
JUDGE_USAGE = """usage: memlab judge calibrate [options] [judge=NAME judge.KEY=VALUE ... cache.KEY=VALUE]

targets:
  calibrate   grade the gold answers (should be accepted) and two sets of known-wrong
              answers (specific but wrong, vague but topical: should be rejected) with a
              judge; acceptance rates with 95% intervals per category
              (memlab judge calibrate --help lists the options)"""


def judge(args: list[str]) -> int:
    """``memlab judge calibrate``: a judge's true-accept and false-accept rates."""
    if not args or args[0] in {"-h", "--help"}:
        if args:
            echo(JUDGE_USAGE)
            return OK
        raise InputError("judge needs a target: memlab judge calibrate (memlab judge --help)")
    if args[0] != "calibrate":
        raise InputError(f"judge has no target {args[0]!r}; the target is: calibrate")
    import time as clock

    from memlab.lab import calibration
    from memlab.lab.experiment import calibration_judge
    from memlab.lab.fingerprint import file_sha256
    from memlab.lab.judges import provenance

    parser = ArgumentParser(
        prog="memlab judge calibrate",
        description="Grade the gold answers and two known-wrong answer sets of the public "
        "LoCoMo audit with a judge (the judge config group: judge=llm judge.prompt=locomo "
        "judge.model=... ; default judge=exact), and report how often it accepts each, per "
        "category, with Wilson 95%% intervals.",
    )
    parser.add_argument("--audit", type=Path, help="a folder holding the audit's "
                        "wrong_answers_v1*.json (specific) and wrong_answers_v2*.json (vague)")  # fmt: skip
    parser.add_argument("--specific", type=Path, help="the specific-but-wrong answers file")
    parser.add_argument("--vague", type=Path, help="the vague-but-topical answers file")
    parser.add_argument("--out", type=Path, help="output folder (results/calibration/<time>)")
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="accept an answer whose score is at least this (0.5)")  # fmt: skip
    parser.add_argument("--limit", type=int, help="only the first N questions of each file")
    parser.add_argument("--concurrency", type=int, default=16, help="judge calls in flight")
    parser.add_argument("--max-cost", type=float, help="stop making judge calls past USD")
    _no_progress(parser)
    ns, rest = parser.parse_known_args(args[1:])
    flags = [a for a in rest if a.startswith("-")]
    if flags:
        raise InputError(f"judge calibrate: unknown options {flags} (see --help)")
    if ns.audit is not None:
        files = calibration.find_audit(ns.audit)
    elif ns.specific is not None and ns.vague is not None:
        files = {"specific": ns.specific, "vague": ns.vague}
    else:
        raise InputError(
            "judge calibrate: pass --audit DIR, or --specific FILE and --vague FILE "
            "(the public LoCoMo audit's wrong_answers_v1 / v2 files)"
        )
    if ns.limit is not None and ns.limit < 1:
        raise InputError(f"judge calibrate: --limit must be >= 1, got {ns.limit}")
    if ns.max_cost is not None and not ns.max_cost > 0:
        raise InputError(f"judge calibrate: --max-cost must be > 0, got {ns.max_cost}")
    items = calibration.load_answers(files["specific"], files["vague"])
    if ns.limit is not None:
        keep = list(dict.fromkeys(i.question_id for i in items))[: ns.limit]
        items = [i for i in items if i.question_id in set(keep)]
    grader = calibration_judge(rest)
    try:
        grader.check()
        graded = calibration.grade(
            grader,
            items,
            threshold=ns.threshold,
            concurrency=ns.concurrency,
            max_usd=ns.max_cost,
            progress=False if ns.no_progress else None,
        )
        identity = provenance(grader)
    finally:
        grader.close()
    summary = calibration.summarize(graded)
    out = ns.out or Path("results/calibration") / clock.strftime("%Y-%m-%d_%H-%M-%S")
    origin = {
        "judge": identity,
        "threshold": ns.threshold,
        "answers": {k: {"file": str(v), "sha256": file_sha256(Path(v))} for k, v in files.items()},
    }
    written = calibration.write(out, graded, summary, origin)
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        echo(f"judge {identity['name']}: {len(items):,} answers graded")
        echo(calibration.headline(summary).to_string(index=False))
        by = summary.pivot_table(index="category", columns="set", values="accept_rate", sort=False)
        echo("\nacceptance rate by category:\n" + by.to_string(float_format="{:.1%}".format))
    skipped = int(graded["verdict"].eq("not graded (max cost)").sum())
    if skipped:
        echo(f"\nINCOMPLETE: --max-cost stopped the grading; {skipped:,} answers were not graded")
    echo(f"\nwritten: {', '.join(str(p) for p in written)}")
    return OK


# -- demo and bench ----------------------------------------------------------------------------
def demo(args: list[str]) -> int:
    """``memlab demo``: a short tour of the memory layer."""
    parser = ArgumentParser(
        prog="memlab demo",
        description="A short tour of the memory layer: two users, a dozen facts, recall "
        "under a 60-token budget, and why each memory was chosen. Writes nothing.",
    )
    parser.parse_args(args)
    from memlab.demo import main as tour

    tour()
    return OK


BENCH_USAGE = """usage: memlab bench store [options]

targets:
  store   compare the store backends (memory, jsonl, sqlite, pgvector) on one seeded
          workload -> results/bench/store.csv, store_pool.csv, store.png
          (memlab bench store --help lists the options)"""


def bench(args: list[str]) -> int:
    """``memlab bench store [options]``."""
    if not args or args[0] in {"-h", "--help"}:
        if args:
            echo(BENCH_USAGE)
            return OK
        raise InputError("bench needs a target: memlab bench store (memlab bench --help)")
    if args[0] != "store":
        raise InputError(f"bench has no target {args[0]!r}; the target is: store")
    from memlab.bench.store import main as bench_store

    try:
        return bench_store(args[1:])
    except SystemExit as exc:  # its argparse: --help (0) or a bad option (2)
        return exc.code if isinstance(exc.code, int) else BAD_INPUT


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


if __name__ == "__main__":
    sys.exit(main())
