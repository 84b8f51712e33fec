"""``memlab run`` and ``memlab tune``: the Hydra apps (overrides, sweeps, --help
listing the config groups and plug-ins, the reader's --dry-run and --max-cost)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memlab.cli.common import OK, _JobFailed, echo
from memlab.errors import ConfigError, InputError, MemlabError

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
    from memlab.lab.compose import config_groups, plugin_names

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
        _check_overrides(args, "config")
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
        if plan.multirun:
            with _without_hydras_job_error_line():
                _hydra_app("config", "memlab run", argv)
        else:
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


HYDRA_JOB_ERROR = "Error executing job with overrides:"


class _DropHydraJobError:
    """stderr without the line Hydra's sweeper writes for a failed job: memlab's own
    error line names the job and its overrides, and a failure is one line."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if text.startswith(HYDRA_JOB_ERROR):
            return len(text)
        written: int = self._stream.write(text)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _without_hydras_job_error_line() -> Iterator[None]:
    stderr = sys.stderr
    sys.stderr = _DropHydraJobError(stderr)
    try:
        yield
    finally:
        sys.stderr = stderr


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
            _drop_if_only_hydras(out)
            raise _JobFailed(exc) from None
        if not isinstance(exc, MemlabError):
            raise
        err = MemlabError(f"job {hc.job.num} ({' '.join(hc.overrides.task)}): {exc}")
        err.exit_code = exc.exit_code
        raise err from None
    finally:
        httpx_log.setLevel(level)


HYDRA_FILES = {"config.yaml", "hydra.yaml", "overrides.yaml"}
"""What Hydra writes into a run folder's .hydra/ before the run starts (and memlab.log)."""


def _drop_if_only_hydras(out: Path) -> None:
    """Remove a failed run's folder when it holds only what Hydra wrote before the run
    started (the transcripts could not be loaded, ...), so that results/runs/ gets no
    folder without results; a folder with anything else, or a non-empty log, stays."""
    try:
        entries = {p.name: p for p in out.iterdir()}
        if not entries or set(entries) - {".hydra", "memlab.log"}:
            return
        log = entries.get("memlab.log")
        if log is not None and (not log.is_file() or log.stat().st_size):
            return
        hydra = entries.get(".hydra")
        if hydra is not None and (
            not hydra.is_dir() or {p.name for p in hydra.iterdir()} - HYDRA_FILES
        ):
            return
        if hydra is not None:
            for name in HYDRA_FILES:
                (hydra / name).unlink(missing_ok=True)
            hydra.rmdir()
        if log is not None:
            log.unlink()
        out.rmdir()
    except OSError:
        pass  # an open log on Windows, a folder shared with another process: keep it


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


def _check_overrides(args: Sequence[str], config_name: str) -> None:
    """Compose the overrides of a ``--cfg``/``--info`` command line with memlab's
    error messages first: Hydra's app reports a misspelt key as an internal
    ConfigCompositionException and a missing option as an I/O failure.

    Raises:
        ConfigError: an override that does not compose, as one line.
        InputError: ``-m`` beside them (Hydra takes one of the two).
    """
    from memlab.lab.compose import compose
    from memlab.lab.tune.space import fixed_overrides

    if any(a in ("-m", "--multirun") for a in args):
        raise InputError(
            "--cfg and --info print the config of one run; drop -m (or --multirun) to see "
            "it, with one value of each swept key"
        )
    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    compose(fixed_overrides(overrides), config_name, with_hydra=True)


def _print_config(args: list[str], config_name: str) -> int:
    """``--cfg job``: print the composed config (memlab tune composes without Hydra's app)."""
    from omegaconf import OmegaConf

    from memlab.lab.compose import compose
    from memlab.lab.tune.space import fixed_overrides

    rest = [a for a in args if not (a in HYDRA_FLAGS or a.startswith(("--cfg", "--info")))]
    rest = [a for a in rest if a not in {"job", "hydra", "all"}]
    echo(OmegaConf.to_yaml(compose(fixed_overrides(rest), config_name)))
    return OK
