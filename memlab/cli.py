"""The memlab command line. The only module that reads Hydra configs and
instantiates ``_target_`` objects; everything it calls takes plain objects."""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from memlab.errors import ConfigError, InputError, MemlabError

USAGE = """usage: memlab <command> [args]

commands:
  run [overrides]   replay transcripts through memory strategies (Hydra; -m for sweeps)
  report DIR        rebuild tables and charts from a run or multirun folder
  convert DATASET FILE --out DIR
                    write a benchmark file (locomo, longmemeval) as format-v1 transcripts
  tune [overrides]  search ranking weights and half-lives (Optuna), score on held-apart transcripts
  gate --baseline SUMMARY RUN_DIR
                    compare a run with a baseline; exit 1 when a metric regressed
  demo              a short tour of the memory layer (two users, recall under a budget)
  synth             generate support transcripts: memlab synth --n 50 --seed 1 --out DIR
  bench store       compare the store backends (memory, jsonl, sqlite, pgvector) on one
                    seeded workload -> results/bench/store.csv, store.png (--help)

`memlab run --help` lists the config groups; README documents every key.
"""


def conf_dir() -> Path:
    """conf/ of a source checkout, or memlab/conf inside an installed wheel."""
    here = Path(__file__).resolve().parent
    for c in (here / "conf", here.parent / "conf"):
        if (c / "config.yaml").exists():
            return c
    raise ConfigError("memlab's config folder is missing; reinstall memlab")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    warnings.formatwarning = _format_warning
    try:
        if command == "run":
            return run(rest)
        if command == "report":
            return report(rest)
        if command == "convert":
            return convert(rest)
        if command == "tune":
            return tune(rest)
        if command == "gate":
            return gate(rest)
        if command == "demo":
            from memlab.demo import main as demo

            demo()
            return 0
        if command == "synth":
            return synth(rest)
        if command == "bench":
            if rest[:1] != ["store"]:
                print(
                    f"memlab: 'bench' needs a target: memlab bench store\n\n{USAGE}",
                    file=sys.stderr,
                )
                return 2
            from memlab.bench.store import main as bench_store

            return bench_store(rest[1:])
        print(f"memlab: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    except MemlabError as exc:
        print(f"memlab: error: {exc}", file=sys.stderr)
        return exc.exit_code


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


# -- run --------------------------------------------------------------------------
def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    lines = [
        ln
        for ln in lines
        if not ln.startswith(("Set the environment", "full_key:", "object_type", "reference_type"))
    ]
    return "; ".join(ln.split("; reference_type")[0] for ln in lines) or type(exc).__name__


def group_options(group: str) -> list[str]:
    """The YAML options of a config group (schemas excluded)."""
    folder = conf_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def explain_compose_error(exc: BaseException) -> str:
    """Turn Hydra's multi-line composition errors into one line that says what to do."""
    import re

    text = str(exc)
    m = re.search(r"Could not override '([^']+)'", text)
    if m:
        key = m.group(1)
        cause = str(exc.__cause__ or "")
        detail = (
            "it does not exist"
            if "not in struct" in cause or "To append" in text
            else _one_line(exc.__cause__ or exc)
        )
        return f"config key '{key}': {detail}; check the spelling (memlab run --cfg job prints every key)"
    m = re.search(r"Could not (?:find|load) '([^'/]+)/([^']+)'", text)
    if m:
        group, option = m.groups()
        options = ", ".join(group_options(group)) or "(none)"
        return f"config group '{group}' has no option '{option}'; choose one of: {options}"
    m = re.search(r"Error merging override (\S+)", text)
    if m:
        return f"config override {m.group(1)}: {_one_line(exc.__cause__ or exc)}"
    return _one_line(exc)


def first_of_sweeps(overrides: list[str]) -> list[str]:
    """The overrides with each sweep (``a=1,2``) replaced by its first value, so a
    multirun's config can be checked once before any job starts."""
    return sweep_variants(overrides)[0]


def sweep_variants(overrides: list[str], params: dict[str, str] | None = None) -> list[list[str]]:
    """Override lists that together check every value of every sweep.

    The first list takes each sweep's first value; each further list changes one
    swept key to another of its values. ``params`` (``hydra.sweeper.params``,
    e.g. from an experiment preset) count as sweeps unless the command line
    sets the same key. Intervals (``interval(a, b)``, an Optuna search range)
    have no values to list: they are left to the trials.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep

    parser = OverridesParser.create()
    parsed = parser.parse_overrides(overrides)
    given = {o.get_key_element().lstrip("+~") for o in parsed}
    extra = [f"{k}={v}" for k, v in (params or {}).items() if str(k).lstrip("+~") not in given]
    parsed += parser.parse_overrides(extra)
    base: list[str] = []
    sweeps: list[tuple[str, list[str]]] = []
    for o in parsed:
        if o.is_sweep_override():
            if isinstance(o.value(), IntervalSweep):
                continue
            key, values = o.get_key_element(), list(o.sweep_string_iterator())
            sweeps.append((key, values))
            if values:
                base.append(f"{key}={values[0]}")
        else:
            base.append(o.input_line or f"{o.get_key_element()}={o.get_value_element_as_str()}")
    variants = [base]
    for key, values in sweeps:
        others = [b for b in base if not b.startswith(f"{key}=")]
        variants += [[*others, f"{key}={v}"] for v in values[1:]]
    return variants


def _compose(overrides: list[str], config_name: str, with_hydra: bool = False) -> Any:
    return _compose_all([overrides], config_name, with_hydra)[0]


def _compose_all(
    variants: list[list[str]], config_name: str, with_hydra: bool = False
) -> list[Any]:
    """Compose one config per override list (one Hydra initialization for all).

    Raises:
        ConfigError: a composition error as one line; MissingExtraError for a
            launcher whose extra is not installed.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(conf_dir()), version_base="1.3"):
            return [
                compose(config_name, overrides=v, return_hydra_config=with_hydra) for v in variants
            ]
    except MemlabError:
        raise
    except Exception as exc:  # Hydra/OmegaConf composition errors
        if "submitit" in str(exc):
            from memlab.errors import require

            require(
                "hydra_plugins.hydra_submitit_launcher",
                feature="the submitit/SLURM launcher",
                extra="cluster",
            )
        raise ConfigError(explain_compose_error(exc)) from None
    finally:
        GlobalHydra.instance().clear()


@dataclass
class Plan:
    """What a ``memlab run``/``tune`` command line will do, checked before Hydra starts."""

    cfg: Any  # the first job's composed config
    multirun: bool
    sweep_dir: Path | None
    sweep_dir_given: bool
    jobs_checked: int


def plan_run(overrides: list[str], config_name: str = "config") -> Plan:
    """Compose and validate the config of every swept value before Hydra runs anything.

    Raises:
        ConfigError: one line naming the bad key or value.
    """
    from memlab.config import register, validate

    register()
    flags = [o for o in overrides if o.startswith("-")]
    args = [o for o in overrides if not o.startswith("-")]
    hydra_args = [o for o in args if o.startswith(("hydra.", "hydra/"))]
    task = [o for o in args if o not in hydra_args]
    try:
        first = first_of_sweeps(task)
    except Exception as exc:  # the override grammar's parse errors
        raise ConfigError(
            f"cannot parse the overrides: {_one_line(exc).split('; See https')[0]} "
            "(quote values with special characters: key='value')"
        ) from None
    full = _compose([*first, *hydra_args], config_name, with_hydra=True)
    h = full.hydra
    multirun = bool({"-m", "--multirun"} & set(flags)) or str(h.mode).endswith("MULTIRUN")
    if not multirun and first != task:
        swept = next(a for a, b in zip(task, first, strict=True) if a != b)
        raise ConfigError(f"{swept} is a sweep; add -m to run one job per value")
    params = {}
    if multirun and h.sweeper.get("params"):
        params = {str(k): str(v) for k, v in h.sweeper.params.items()}
    variants = sweep_variants(task, params) if multirun else [task]
    configs = _compose_all([[*v, *hydra_args] for v in variants], config_name)
    for composed in configs:
        validate(composed)
        check_store_path(composed.store)
    cfg = configs[0]
    sweep_dir = Path(str(h.sweep.dir)) if multirun else None
    given = any(a.startswith("hydra.sweep.dir=") for a in hydra_args)
    if multirun and sweep_dir is not None and sweep_dir.is_dir():
        from memlab.lab.report import failed_jobs, job_dirs

        if job_dirs(sweep_dir) or failed_jobs(sweep_dir):
            raise ConfigError(
                f"hydra.sweep.dir {sweep_dir} already holds a multirun; choose another folder "
                "so that no job overwrites an earlier one"
            )
    return Plan(cfg, multirun, sweep_dir, given, len(variants))


def precheck(overrides: list[str]) -> Any:
    """Compose and validate the config before Hydra runs anything (every swept
    value of a multirun is checked); return the first job's config.

    Raises:
        ConfigError: one line naming the bad key or value.
    """
    return plan_run(overrides).cfg


HELP_FLAGS = {"--help", "-h", "--hydra-help", "--info", "--cfg", "-c", "--resolve"}


def _asks_for_help(overrides: list[str]) -> bool:
    return any(o in HELP_FLAGS or o.startswith(("--cfg", "--info")) for o in overrides)


def _override_value(path: Path) -> str:
    text = str(path)
    if all(c.isalnum() or c in "_./-:" for c in text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _hydra_app(config_name: str, prog: str, argv: list[str]) -> None:
    """Run ``_run_job`` as a Hydra app; job failures surface as MemlabError."""
    import hydra

    saved_argv, saved_env = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    sys.argv = [prog, *argv]
    # Let a failed job's MemlabError reach main(), which prints it on one line.
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


def run(overrides: list[str]) -> int:
    """``memlab run [overrides]``: a Hydra app (``-m`` sweeps, launchers, ...).

    A multirun is checked value by value first, and its report (one table over
    all jobs, the Pareto front, heatmaps) is written when the jobs are done.
    """
    from memlab.config import register

    register()
    if _asks_for_help(overrides):
        _hydra_app("config", "memlab run", overrides)
        return 0
    plan = plan_run(overrides)
    argv = list(overrides)
    if plan.multirun and plan.sweep_dir is not None:
        from memlab.lab.transcripts import load_source

        t = plan.cfg.transcripts
        # fail before any job starts
        load_source(t.name, t.path, limit=t.limit, ids=t.ids, progress=False)
        if not plan.sweep_dir_given:
            argv.append(f"hydra.sweep.dir={_override_value(plan.sweep_dir)}")
    try:
        _hydra_app("config", "memlab run", argv)
    except MemlabError as exc:
        if plan.multirun and plan.sweep_dir is not None:
            raise MemlabError(
                f"{exc} (finished jobs are in {plan.sweep_dir}; `memlab report "
                f"{plan.sweep_dir}` tables them)"
            ) from None
        raise
    if plan.multirun and plan.sweep_dir is not None:
        from memlab.lab.report import sweep_report

        print()
        for line in sweep_report(plan.sweep_dir, draw=bool(plan.cfg.report.charts)):
            print(line)
    return 0


def _run_job(cfg: Any) -> Any:
    """One Hydra job: replay, score, write tables and charts, print the summary.

    A ``tune`` trial replays the tuning transcripts and returns its objective.
    In a multirun a failure is raised as a plain MemlabError naming the job (it
    may cross a process boundary); a single run prints it and exits.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    try:
        out = Path(hc.runtime.output_dir)
        if cfg.get("tune") is not None:
            return run_trial(cfg, out)
        run_experiment_from_config(cfg, out)
        return None
    except MemlabError as exc:
        if hc.mode == RunMode.MULTIRUN:
            err = MemlabError(f"job {hc.job.num} ({' '.join(hc.overrides.task)}): {exc}")
            err.exit_code = exc.exit_code
            raise err from None
        print(f"memlab: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


def run_experiment_from_config(
    cfg: Any, out: Path, *, quiet: bool = False, transcripts: list[Any] | None = None
) -> dict[str, Any]:
    """Run the experiment a composed config describes and write it to ``out``:
    probes.csv, turns.csv, summary.csv, config.yaml, fingerprint.json, charts.

    Args:
        cfg: a composed run config.
        out: the run folder.
        quiet: print one line instead of the summary table.
        transcripts: already loaded transcripts (default: load what
            ``cfg.transcripts`` names).
    """
    import pandas as pd
    from omegaconf import OmegaConf

    from memlab.config import validate
    from memlab.lab import fingerprint
    from memlab.lab.replay import ReplaySettings, run_experiment
    from memlab.lab.report import charts, format_table, summarize, summary_table, write_tables
    from memlab.lab.transcripts import load_source
    from memlab.memory import MemoEmbedder

    started = time.perf_counter()
    run_cfg = validate(cfg)
    check_store_path(cfg.store)
    t = run_cfg.transcripts
    if transcripts is None:
        transcripts = load_source(
            t.name, t.path, limit=t.limit, ids=t.ids, progress=run_cfg.progress
        )
    embedder, summarizer, cached = model_components(cfg, run_cfg.cache)
    memo = MemoEmbedder(embedder)

    def before_transcript(transcript: Any) -> None:
        # One batched embedding call per transcript instead of one per turn; the
        # memo is dropped between transcripts so memory stays bounded.
        memo.clear()
        memo.prefetch([turn.text for turn in transcript.turns])

    factories = {
        name: strategy_factory(cfg, name, out, memo, summarizer) for name in run_cfg.strategies
    }
    settings = ReplaySettings(
        budget=run_cfg.budget,
        prompt_overhead_tokens=run_cfg.prompt_overhead_tokens,
        price_per_1k_tokens=run_cfg.price_per_1k_tokens,
        far_turns=run_cfg.report.far_turns,
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    plain = OmegaConf.to_container(cfg, resolve=True)
    fingerprint.write(out, fingerprint.fingerprint(transcripts, plain))  # type: ignore[arg-type]
    try:
        probes, turns = run_experiment(
            transcripts,
            factories,
            settings,
            progress=run_cfg.progress,
            before_transcript=before_transcript,
        )
    finally:
        for component in (embedder, summarizer):
            close = getattr(component, "close", None)
            if close is not None:
                close()
    summary = summarize(probes, turns, n_boot=run_cfg.report.bootstrap, seed=run_cfg.seed)
    write_tables(out, probes, turns, summary)
    written = charts(probes, turns, summary, out / "charts") if run_cfg.report.charts else []
    elapsed = time.perf_counter() - started
    n_probes = len(probes) // max(1, len(factories))
    if quiet:
        print(f"{out}: {len(transcripts)} transcripts, {n_probes} probes, {elapsed:.1f} s")
        return {"out": str(out), "summary": summary}
    table = summary_table(summary)
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print(
            f"\n{len(transcripts)} transcripts, {n_probes} probes, "
            f"{len(factories)} strategies, budget {run_cfg.budget} tokens, {elapsed:.1f} s\n"
        )
        print(format_table(table))
    for label, component in cached.items():
        print(f"\n{label} cache: {component.stats}")
    print(
        f"\nresults: {out}/ (summary.csv, probes.csv, turns.csv, config.yaml, fingerprint.json"
        f"{', charts/*.png' if written else ''})"
    )
    return {"out": str(out), "summary": summary}


def model_components(cfg: Any, cache_cfg: Any) -> tuple[Any, Any, dict[str, Any]]:
    """The configured embedder and summarizer, wrapped in the persistent model cache
    where caching pays (not for the hash embedder or the extractive summarizer,
    which are faster than a lookup).

    Returns:
        (embedder, summarizer, {label: cached component}) for reporting hit rates.
    """
    from memlab.memory import (
        CachedEmbedder,
        CachedSummarizer,
        ExtractiveSummarizer,
        HashEmbedder,
        ModelCache,
    )

    embedder = _instantiate(cfg.embedder, "embedder")
    summarizer = _instantiate(cfg.summarizer, "summarizer")
    cached: dict[str, Any] = {}
    wrap_embedder = cache_cfg.embeddings and not isinstance(embedder, HashEmbedder)
    wrap_summarizer = cache_cfg.summaries and not isinstance(summarizer, ExtractiveSummarizer)
    if wrap_embedder or wrap_summarizer:
        cache = ModelCache(cache_cfg.path)
        if wrap_embedder:
            embedder = cached["embedding"] = CachedEmbedder(embedder, cache)
        if wrap_summarizer:
            summarizer = cached["summary"] = CachedSummarizer(summarizer, cache)
    return embedder, summarizer, cached


STORE_PLACEHOLDERS = ("{run_dir}", "{strategy}", "{transcript}")


def check_store_path(node: Any) -> None:
    """A file store's path must hold {run_dir}, {strategy} and {transcript}, so every
    replay, and every job of a sweep running in parallel, gets a fresh file.

    Raises:
        ConfigError: naming store.path and the missing placeholders.
    """
    if node is None or "path" not in node or node.path is None:
        return
    missing = [p for p in STORE_PLACEHOLDERS if p not in str(node.path)]
    if missing:
        raise ConfigError(
            f"config key 'store.path': {node.path!r} lacks {', '.join(missing)}; every replay "
            "(and every job of a sweep) needs its own fresh store file, e.g. "
            "'{run_dir}/stores/{strategy}/{transcript}.db'"
        )


def _instantiate(node: Any, group: str, **kwargs: Any) -> Any:
    from hydra.utils import instantiate

    try:
        return instantiate(node, **kwargs)
    except MemlabError:
        raise
    except Exception as exc:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        if isinstance(cause, MemlabError):
            raise cause from None
        raise ConfigError(f"config group '{group}': {_one_line(cause)}") from None


def strategy_factory(
    cfg: Any, name: str, out: Path, embedder: Any, summarizer: Any
) -> Callable[[Any], Any]:
    """A function that builds a fresh strategy (and store) for one transcript."""
    from memlab.config import strategy_memory
    from memlab.lab.strategies import MemoryStrategy, SlidingWindow, StuffAll, salience_function
    from memlab.memory import (
        EvictionPolicy,
        HalfLives,
        MemoryQuestionRewriter,
        NeighborPolicy,
        RankWeights,
        SummarizePolicy,
    )

    s = cfg.strategies[name]
    if s.kind == "stuff_all":
        return lambda t: StuffAll(name, context_limit=s.context_limit)
    if s.kind == "sliding_window":
        return lambda t: SlidingWindow(
            name, window_turns=s.window_turns, window_tokens=s.window_tokens
        )
    m = strategy_memory(cfg, name)
    weights = RankWeights(**vars(m.weights))
    half_life = HalfLives(**vars(m.half_life))
    summarize = None
    if m.summarize.enabled:
        summarize = SummarizePolicy(
            trigger_tokens=m.summarize.trigger_tokens,
            chunk_tokens=m.summarize.chunk_tokens,
            keep_recent=m.summarize.keep_recent,
            max_gap_hours=m.summarize.max_gap_hours,
            min_records=m.summarize.min_records,
        )
    e = m.eviction
    eviction = (
        EvictionPolicy(
            e.episodic_ttl,
            e.max_records,
            e.salience_floor,
            e.cold_decay,
            e.cold_after,
            e.untrusted_ttl,
        )
        if e.enabled
        else None
    )
    salience = salience_function(m.salience, m.fixed_salience)
    n = m.neighbors
    neighbors = (
        NeighborPolicy(n.before, n.after, n.top, n.max_tokens) if (n.before or n.after) else None
    )

    def make(transcript: Any) -> MemoryStrategy:
        return MemoryStrategy(
            name,
            make_store(cfg.store, out, name, transcript.id, embedder.dims),
            embedder,
            weights=weights,
            half_life=half_life,
            summarizer=summarizer if summarize is not None else None,
            summarize=summarize,
            eviction=eviction,
            salience=salience,
            untrusted_salience_cap=m.untrusted_salience_cap,
            pool=m.pool,
            remember_agent=m.remember_agent,
            remember_tools=m.remember_tools,
            max_hits=m.max_hits,
            min_score_ratio=m.min_score_ratio,
            fusion=m.fusion,
            rrf_k=m.rrf_k,
            rewriter=MemoryQuestionRewriter() if m.rewrite == "memory_question" else None,
            neighbors=neighbors,
            drop_store=bool(cfg.store.get("drop_after", False)),
        )

    return make


def _short_hash(*parts: str) -> str:
    import hashlib

    return hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:10]


def make_store(
    node: Any, out: Path, strategy: str, transcript: str, dims: int | None = None
) -> Any:
    """Instantiate the configured store for one (strategy, transcript) replay.

    Placeholders in ``store.path`` (file stores) and ``store.table`` /
    ``store.schema`` (pgvector): ``{run_dir}``, ``{strategy}``, ``{transcript}``,
    ``{key}`` (a short hash of strategy and transcript) and ``{run_key}`` (a short
    hash of the run folder). ``store.dims: null`` takes the embedder's dims; the
    key ``drop_after`` is for the lab (see MemoryStrategy) and not passed on.
    """
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in transcript)
    values = {
        "run_dir": out,
        "strategy": strategy,
        "transcript": safe,
        "key": _short_hash(strategy, transcript),
        "run_key": _short_hash(str(out.resolve())),
    }
    kwargs: dict[str, Any] = {}
    for key in ("path", "table", "schema"):
        if key in node and node[key] is not None:
            try:
                kwargs[key] = str(node[key]).format(**values)
            except (KeyError, IndexError, ValueError) as exc:
                raise ConfigError(
                    f"config key 'store.{key}': bad placeholder ({exc}); use "
                    "{run_dir}, {strategy}, {transcript}, {key}, {run_key}"
                ) from None
    if "path" in kwargs and Path(kwargs["path"]).exists():
        raise ConfigError(
            f"store file {kwargs['path']} already exists; a replay needs a fresh store "
            "(an earlier run wrote into this folder): choose a new hydra.run.dir or remove it"
        )
    if "path" in kwargs:
        kwargs["create_dirs"] = True  # each replay's store lives in a fresh subfolder
    if "dims" in node and node.dims is None and dims is not None:
        kwargs["dims"] = dims
    if "drop_after" in node:
        kwargs["drop_after"] = None  # removed below: not a constructor argument
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(node, resolve=True)
    assert isinstance(plain, dict)
    plain.pop("drop_after", None)
    kwargs.pop("drop_after", None)
    return _instantiate(OmegaConf.create(plain), "store", **kwargs)


# -- report -----------------------------------------------------------------------
def report(args: list[str]) -> int:
    """``memlab report DIR``: rebuild tables and charts from a run or multirun folder."""
    import argparse

    from memlab.lab.report import rebuild

    parser = argparse.ArgumentParser(prog="memlab report", description=report.__doc__)
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
    ns = parser.parse_args(args)
    if not ns.dir.is_dir():
        raise MemlabError(f"{ns.dir} is not a folder; pass a run or multirun folder")
    heatmap = None
    if ns.heatmap is not None:
        keys = [k.strip() for k in ns.heatmap.split(",") if k.strip()]
        if len(keys) != 2:
            raise MemlabError(f"--heatmap takes two swept keys, KEY1,KEY2; got {ns.heatmap!r}")
        heatmap = (keys[0], keys[1])
    for line in rebuild(
        ns.dir,
        n_boot=ns.bootstrap,
        seed=ns.seed,
        draw=not ns.no_charts,
        heatmap=heatmap,
        metric=ns.metric,
        strategy=ns.strategy,
    ):
        print(line)
    return 0


# -- synth ------------------------------------------------------------------------
class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises InputError instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise InputError(
            f"{self.prog.removeprefix('memlab ')}: {message}\n{self.format_usage().strip()}"
        )


def synth(args: list[str]) -> int:
    """``memlab synth --n N --seed S --out DIR [--force]``: write generated transcripts."""
    from memlab.lab import synth as generator

    parser = _ArgumentParser(
        prog="memlab synth",
        description="Generate seeded 60-turn support-agent transcripts (format v1). "
        "Seeds seed .. seed+n-1 give files support-<seed>.json; the same seed always "
        "gives the same bytes.",
    )
    parser.add_argument("--n", type=int, default=20, help="how many transcripts (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument(
        "--force", action="store_true", help="replace existing files whose content differs"
    )
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    result = generator.write(ns.out, ns.n, ns.seed, force=ns.force, progress=True)
    first, last = generator.transcript_id(ns.seed), generator.transcript_id(ns.seed + ns.n - 1)
    print(
        f"{ns.n} transcripts ({first} .. {last}) in {result.folder}: "
        f"{len(result.written)} written, {len(result.replaced)} replaced, "
        f"{len(result.unchanged)} unchanged"
    )
    return 0


# -- convert ----------------------------------------------------------------------
DATASETS = ("locomo", "longmemeval")


def convert(args: list[str]) -> int:
    """``memlab convert locomo|longmemeval FILE --out DIR``: write a benchmark file
    as format-v1 transcripts (one JSON file per transcript) for inspection."""
    from memlab.lab.datasets import check_path
    from memlab.lab.transcripts import load_source, save

    parser = _ArgumentParser(prog="memlab convert", description=convert.__doc__)
    parser.add_argument("dataset", choices=DATASETS, help="the benchmark the file comes from")
    parser.add_argument("file", type=Path, help="the upstream JSON file (e.g. locomo10.json)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--limit", type=int, default=None, help="only the first N transcripts")
    parser.add_argument("--ids", nargs="+", default=None, help="only these transcript ids")
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    if ns.limit is not None and ns.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {ns.limit}")
    if ns.out.exists() and not ns.out.is_dir():
        raise MemlabError(f"--out {ns.out} is a file; pass a folder")
    check_path(ns.file, ns.dataset)
    transcripts = load_source(ns.dataset, str(ns.file), limit=ns.limit, ids=ns.ids)
    names: set[str] = set()
    turns = probes = 0
    for t in transcripts:
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in t.id) or "transcript"
        name, n = stem, 2
        while name in names:  # ids that differ only in unsafe characters
            name, n = f"{stem}-{n}", n + 1
        names.add(name)
        save(t, ns.out / f"{name}.json")
        turns += len(t.turns)
        probes += len(t.probes)
    print(
        f"wrote {len(transcripts)} transcripts ({turns} turns, {probes} probes) to {ns.out}/; "
        f"replay them with: memlab run transcripts=dir transcripts.path={ns.out}"
    )
    return 0


# -- tune -------------------------------------------------------------------------
def tune(overrides: list[str]) -> int:
    """``memlab tune [overrides]``: Optuna (TPE) over ranking weights and half-lives
    on the tuning transcripts, then the best config as a preset and its score on
    the held-apart transcripts (conf/tune.yaml documents every key)."""
    from memlab.config import register
    from memlab.errors import require

    require("optuna", feature="memlab tune", extra="tune")
    require("hydra_plugins.hydra_optuna_sweeper", feature="memlab tune", extra="tune")
    register()
    if _asks_for_help(overrides):
        _hydra_app("tune", "memlab tune", overrides)
        return 0
    from memlab.lab.transcripts import load_source

    plan = plan_run(overrides, "tune")
    if plan.sweep_dir is None:
        raise ConfigError("config key 'hydra.mode': memlab tune runs a sweep; keep it MULTIRUN")
    cfg = plan.cfg
    t, tc = cfg.transcripts, cfg.tune
    transcripts = load_source(t.name, t.path, limit=t.limit, ids=t.ids, progress=cfg.progress)
    tuning, holdout = _split(transcripts, tc)
    print(
        f"memlab tune: maximize {'' if _direction(tc.metric) > 0 else '-'}{tc.metric} of "
        f"{tc.strategy} (group {tc.group}) over {tc.n_trials} trials (seed {tc.seed})"
        + (f", mean prompt tokens <= {tc.max_prompt_tokens:g}" if tc.max_prompt_tokens else "")
        + f"\n  tuning set ({len(tuning)}): {', '.join(tuning)}"
        + f"\n  held apart ({len(holdout)}): {', '.join(holdout)}\n  trials: {plan.sweep_dir}",
        flush=True,
    )
    argv = list(overrides)
    if not plan.sweep_dir_given:
        argv.append(f"hydra.sweep.dir={_override_value(plan.sweep_dir)}")
    _hydra_app("tune", "memlab tune", argv)
    from memlab.lab.report import sweep_report

    trials = sweep_report(plan.sweep_dir, draw=bool(cfg.report.charts))
    print(trials[-1].strip())
    for line in finish_tune(overrides, plan.sweep_dir, transcripts, tuning, holdout):
        print(line)
    return 0


def _direction(metric: str) -> int:
    from memlab.lab.gate import direction

    return direction(metric)


def _split(transcripts: list[Any], tc: Any) -> tuple[list[str], list[str]]:
    from memlab.lab.tune import split_ids

    return split_ids(
        [x.id for x in transcripts],
        holdout_fraction=tc.holdout_fraction,
        seed=tc.split_seed,
        tuning_ids=list(tc.tuning_ids) if tc.tuning_ids is not None else None,
        holdout_ids=list(tc.holdout_ids) if tc.holdout_ids is not None else None,
    )


def _metric_row(summary: Any, strategy: str, group: str, metric: str) -> Any:
    sub = summary[
        (summary["strategy"] == strategy)
        & (summary["group"] == group)
        & (summary["metric"] == metric)
    ]
    if sub.empty:
        raise MemlabError(
            f"strategy {strategy!r}, group {group!r} has no {metric!r} on these transcripts; "
            "choose another tune.metric or tune.group"
        )
    return sub.iloc[0]


def run_trial(cfg: Any, out: Path) -> float:
    """One tuning trial: replay the tuning transcripts, write the run folder and
    ``trial.json``, and return the objective (see memlab.lab.tune.objective)."""
    import json

    from omegaconf import OmegaConf

    from memlab.lab.transcripts import load_source
    from memlab.lab.tune import objective

    tc, t = cfg.tune, cfg.transcripts
    transcripts = load_source(t.name, t.path, limit=t.limit, ids=t.ids, progress=False)
    tuning, _ = _split(transcripts, tc)
    chosen = [x for x in transcripts if x.id in set(tuning)]
    trial_cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    trial_cfg.report.bootstrap = 0  # trials need means; the evaluation draws intervals
    trial_cfg.report.charts = False
    result = run_experiment_from_config(trial_cfg, out, quiet=True, transcripts=chosen)
    summary = result["summary"]
    value = float(_metric_row(summary, tc.strategy, tc.group, tc.metric)["mean"])
    tokens = float(_metric_row(summary, tc.strategy, tc.group, "prompt_tokens")["mean"])
    score = objective(
        value,
        tokens,
        direction=_direction(tc.metric),
        max_prompt_tokens=tc.max_prompt_tokens,
        penalty=tc.penalty,
    )
    feasible = tc.max_prompt_tokens is None or tokens <= tc.max_prompt_tokens
    (out / "trial.json").write_text(
        json.dumps(
            {
                "metric": tc.metric,
                "value": value,
                "prompt_tokens": tokens,
                "feasible": feasible,
                "objective": score,
            },
            indent=1,
        )
        + "\n"
    )
    print(
        f"  {tc.metric} {value:.4f}, prompt tokens {tokens:.0f}"
        + ("" if feasible else " (over tune.max_prompt_tokens)")
        + f", objective {score:.4f}",
        flush=True,
    )
    return score


def finish_tune(
    overrides: list[str],
    sweep_dir: Path,
    transcripts: list[Any],
    tuning: list[str],
    holdout: list[str],
) -> list[str]:
    """After the trials: write the best config as an experiment preset, score the
    default and the tuned config on the tuning and the held-apart transcripts,
    and write ``tune_report.csv``/``.md``; return lines to print."""
    import pandas as pd
    from omegaconf import OmegaConf

    from memlab.lab.report import format_table
    from memlab.lab.tune import best_overrides, gain_table, preset_yaml

    results = sweep_dir / "optimization_results.yaml"
    if not results.exists():
        raise MemlabError(f"the tuning sweep wrote no {results}; see the trials in {sweep_dir}")
    best = OmegaConf.to_container(OmegaConf.load(results))
    assert isinstance(best, dict)
    task = [o for o in overrides if not o.startswith(("-", "hydra.", "hydra/"))]
    # Search ranges given on the command line (budget='int(interval(200,800))') are
    # the sweep itself, not a setting of the default config.
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(task)
    task = [t for t, o in zip(task, parsed, strict=True) if not o.is_sweep_override()]
    base = _compose(task, "tune")
    tc = base.tune
    weights = OmegaConf.to_container(base.memory.weights)
    values = best_overrides(best["best_params"], weights)  # type: ignore[arg-type]
    tuned = _compose(task + [f"{k}={v}" for k, v in values.items()], "tune")
    groups = {k for k in values if (conf_dir() / k).is_dir()}
    conf = (sweep_dir / "conf").resolve()
    use = f"memlab run +experiment={tc.preset} 'hydra.searchpath=[file://{conf}]'"
    header = (
        f"memlab tune: best of {tc.n_trials} trials (TPE, seed {tc.seed}) maximizing "
        f"{tc.metric} of strategy {tc.strategy}, group {tc.group}"
        + (f", mean prompt tokens <= {tc.max_prompt_tokens:g}" if tc.max_prompt_tokens else "")
        + f".\nTuned on: {', '.join(tuning)}\nHeld apart: {', '.join(holdout)}\nUse: {use}"
    )
    preset = conf / "experiment" / f"{tc.preset}.yaml"
    preset.parent.mkdir(parents=True, exist_ok=True)
    tmp = preset.with_suffix(".tmp")
    tmp.write_text(preset_yaml(values, groups, header))
    os.replace(tmp, preset)
    if not any(o.lstrip("+~").startswith("experiment=") for o in task):
        # The preset file itself must reproduce the tuned config.
        via_preset = _compose(
            [*task, f"+experiment={tc.preset}", f"hydra.searchpath=[file://{conf}]"], "tune"
        )
        for k in values:
            if k not in groups and OmegaConf.select(via_preset, k) != OmegaConf.select(tuned, k):
                raise MemlabError(f"the written preset {preset} does not set {k}; please report")
    by_id = {x.id: x for x in transcripts}
    rows = []
    for name, cfg in (("default", base), ("tuned", tuned)):
        for set_name, ids in (("tuning", tuning), ("held-apart", holdout)):
            run_cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
            run_cfg.tune = None
            run_cfg.report.charts = False
            run_cfg.progress = False
            out = sweep_dir / "eval" / f"{name}_{set_name}"
            summary = run_experiment_from_config(
                run_cfg, out, quiet=True, transcripts=[by_id[i] for i in ids]
            )["summary"]
            row = _metric_row(summary, tc.strategy, tc.group, tc.metric)
            tokens = _metric_row(summary, tc.strategy, tc.group, "prompt_tokens")
            rows.append(
                {
                    "set": set_name,
                    "config": name,
                    "transcripts": len(ids),
                    "value": row["mean"],
                    "ci_low": row["ci_low"],
                    "ci_high": row["ci_high"],
                    "prompt_tokens": tokens["mean"],
                }
            )
            if tc.max_prompt_tokens is not None:
                rows[-1]["feasible"] = bool(tokens["mean"] <= tc.max_prompt_tokens)
    table = gain_table(rows, tc.metric)
    table.to_csv(sweep_dir / "tune_report.csv", index=False)
    shown = table.set_index("set")
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        text = format_table(shown[[c for c in shown.columns if not c.endswith("_ci")]])
    params = "\n".join(f"  {k}: {v}" for k, v in values.items())
    md = (
        f"# memlab tune\n\n{header.replace(chr(10), '  ' + chr(10))}\n\n"
        f"Best parameters:\n\n```yaml\n{preset.read_text()}```\n\n"
        + "| "
        + " | ".join(["set", *table.columns[1:]])
        + " |\n|"
        + "---|" * len(table.columns)
        + "\n"
        + "\n".join(
            "| " + " | ".join(format_cell(v) for v in r) + " |"
            for r in table.itertuples(index=False)
        )
        + "\n"
    )
    (sweep_dir / "tune_report.md").write_text(md)
    return [
        f"\nbest trial: objective {float(best['best_value']):.4f} on the tuning set; parameters:",
        params,
        f"\n{tc.metric} of {tc.strategy} (group {tc.group}), default vs tuned:",
        text,
        f"\npreset: {preset}\nuse it: {use}\nreport: {sweep_dir / 'tune_report.md'}",
    ]


def format_cell(v: Any) -> str:
    if isinstance(v, float):
        from memlab.lab.report import format_value

        return format_value(v)
    return str(v)


# -- gate -------------------------------------------------------------------------
def gate(args: list[str]) -> int:
    """``memlab gate --baseline BASELINE RUN_DIR``: fail (exit 1) when a metric of the
    run moved the wrong way beyond its tolerance; exit 2 when the run cannot be
    compared (missing metric, different transcripts or config)."""
    import argparse

    from memlab.lab import fingerprint
    from memlab.lab.gate import (
        GateRules,
        Margin,
        compare,
        load_rules,
        parse_margin,
        read_summary,
        to_markdown,
        to_text,
    )

    parser = argparse.ArgumentParser(prog="memlab gate", description=gate.__doc__)
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
    base_file = ns.baseline / "summary.csv" if ns.baseline.is_dir() else ns.baseline
    run_dir = ns.run
    if not (run_dir / "summary.csv").exists():
        raise MemlabError(
            f"{run_dir} is not a run folder (no summary.csv); pass `memlab run`'s folder"
        )
    md_path = ns.markdown or run_dir / "gate.md"
    baseline_df = read_summary(base_file, "baseline")
    run_df = read_summary(run_dir, "run")

    def publish(text: str) -> None:
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text(text, encoding="utf-8")
        step = os.environ.get("GITHUB_STEP_SUMMARY")
        if step:
            with open(step, "a", encoding="utf-8") as f:
                f.write(text + "\n")

    diffs = fingerprint.differences(
        fingerprint.load(base_file.parent, "baseline"),
        fingerprint.load(run_dir, "run"),
        allow=ns.allow_config,
    )
    if diffs:
        msg = (
            f"the run is not the baseline's experiment ({len(diffs)} differences): "
            + "; ".join(diffs[:5])
            + ("; ..." if len(diffs) > 5 else "")
            + ". Run the baseline's config on its transcripts, pass --allow-config KEY for a "
            "deliberate difference, or regenerate the baseline (make baseline)"
        )
        publish(
            "## memlab gate\n\n**ERROR: different experiment**\n\n"
            + "\n".join(f"- {d}" for d in diffs)
            + "\n"
        )
        raise MemlabError(msg)
    kwargs: dict[str, Any] = load_rules(ns.rules) if ns.rules else {}
    default = kwargs.get("margin", Margin(abs=0.0, rel=0.01))
    kwargs["margin"] = Margin(
        abs=ns.margin_abs if ns.margin_abs is not None else default.abs,
        rel=ns.margin_rel if ns.margin_rel is not None else default.rel,
    )
    per = dict(kwargs.get("per_metric", {}))
    per.update(parse_margin(m) for m in ns.margin)
    kwargs["per_metric"] = per
    kwargs["exclude"] = [*kwargs.get("exclude", []), *ns.exclude]
    if ns.include_latency:
        kwargs["include_latency"] = True
    if ns.groups:
        kwargs["groups"] = [g.strip() for g in ns.groups.split(",") if g.strip()]
    if ns.strategies:
        kwargs["strategies"] = [s.strip() for s in ns.strategies.split(",") if s.strip()]
    result = compare(baseline_df, run_df, GateRules(**kwargs))
    notes = [f"allowed config differences under: {', '.join(ns.allow_config)}"] * bool(
        ns.allow_config
    )
    publish(to_markdown(result, baseline=str(base_file), run=str(run_dir), notes=notes))
    result.table.to_csv(run_dir / "gate.csv", index=False)
    print(to_text(result))
    print(f"\nreport: {md_path}")
    if result.missing:
        raise MemlabError(
            f"{len(result.missing)} baseline metrics are missing from the run, e.g. "
            + ", ".join(result.missing[:3])
            + "; a missing metric is an error, not a pass"
        )
    return 0 if result.passed else 1


if __name__ == "__main__":
    os.environ.setdefault("HYDRA_FULL_ERROR", "0")
    sys.exit(main())
