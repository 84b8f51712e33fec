"""The memlab command line. The only module that reads Hydra configs and
instantiates ``_target_`` objects; everything it calls takes plain objects."""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from memlab.errors import ConfigError, InputError, MemlabError

USAGE = """usage: memlab <command> [args]

commands:
  run [overrides]   replay transcripts through memory strategies (Hydra; -m for sweeps)
  report DIR        rebuild tables and charts from a run or multirun folder
  convert DATASET FILE --out DIR
                    write a benchmark file (locomo, longmemeval) as format-v1 transcripts
  demo              a short tour of the memory layer (two users, recall under a budget)
  synth             generate support transcripts: memlab synth --n 50 --seed 1 --out DIR

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
        if command == "demo":
            from memlab.demo import main as demo

            demo()
            return 0
        if command == "synth":
            return synth(rest)
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
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    out = []
    for o in parsed:
        if o.is_sweep_override():
            first = next(iter(o.sweep_string_iterator()))
            out.append(f"{o.get_key_element()}={first}")
        else:
            out.append(o.input_line or "")
    return out


def precheck(overrides: list[str]) -> Any:
    """Compose and validate the config before Hydra runs anything.

    Raises:
        ConfigError: one line naming the bad key or value.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from memlab.config import register, validate

    register()
    plain = [o for o in overrides if not o.startswith(("hydra.", "hydra/", "-"))]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(conf_dir()), version_base="1.3"):
            cfg = compose("config", overrides=first_of_sweeps(plain))
    except MemlabError:
        raise
    except Exception as exc:  # Hydra/OmegaConf composition errors
        raise ConfigError(explain_compose_error(exc)) from None
    finally:
        GlobalHydra.instance().clear()
    validate(cfg)
    return cfg


def run(overrides: list[str]) -> int:
    """``memlab run [overrides]``: a Hydra app (``-m`` sweeps, launchers, ...)."""
    import hydra

    from memlab.config import register

    register()
    if not any(
        o in {"--help", "-h", "--hydra-help", "--info", "--cfg", "-c"} or o.startswith("--cfg")
        for o in overrides
    ):
        precheck(overrides)
    saved = sys.argv
    sys.argv = ["memlab run", *overrides]
    try:
        hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")(
            _run_job
        )()
    finally:
        sys.argv = saved
    return 0


def _run_job(cfg: Any) -> dict[str, Any] | None:
    """One Hydra job: replay, score, write tables and charts, print the summary."""
    from hydra.core.hydra_config import HydraConfig

    try:
        out = Path(HydraConfig.get().runtime.output_dir)
        return run_experiment_from_config(cfg, out)
    except MemlabError as exc:
        print(f"memlab: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


def run_experiment_from_config(cfg: Any, out: Path) -> dict[str, Any]:
    """Run the experiment a composed config describes and write it to ``out``."""
    import pandas as pd
    from omegaconf import OmegaConf

    from memlab.config import validate
    from memlab.lab.replay import ReplaySettings, run_experiment
    from memlab.lab.report import charts, format_table, summarize, summary_table, write_tables
    from memlab.lab.transcripts import load_source
    from memlab.memory import MemoEmbedder

    started = time.perf_counter()
    run_cfg = validate(cfg)
    t = run_cfg.transcripts
    transcripts = load_source(t.name, t.path, limit=t.limit, ids=t.ids, progress=run_cfg.progress)
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
    table = summary_table(summary)
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print(
            f"\n{len(transcripts)} transcripts, {len(probes) // max(1, len(factories))} probes, "
            f"{len(factories)} strategies, budget {run_cfg.budget} tokens, {elapsed:.1f} s\n"
        )
        print(format_table(table))
    for label, component in cached.items():
        print(f"\n{label} cache: {component.stats}")
    print(
        f"\nresults: {out}/ (summary.csv, probes.csv, turns.csv, config.yaml"
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
            make_store(cfg.store, out, name, transcript.id),
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
        )

    return make


def make_store(node: Any, out: Path, strategy: str, transcript: str) -> Any:
    """Instantiate the configured store for one (strategy, transcript) replay,
    filling ``{run_dir}``, ``{strategy}`` and ``{transcript}`` in its path."""
    kwargs: dict[str, Any] = {}
    if "path" in node and node.path is not None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in transcript)
        try:
            kwargs["path"] = str(node.path).format(run_dir=out, strategy=strategy, transcript=safe)
        except (KeyError, IndexError) as exc:
            raise ConfigError(
                f"config key 'store.path': unknown placeholder {exc}; use {{run_dir}}, {{strategy}}, {{transcript}}"
            ) from None
    return _instantiate(node, "store", **kwargs)


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
    ns = parser.parse_args(args)
    if not ns.dir.is_dir():
        raise MemlabError(f"{ns.dir} is not a folder; pass a run or multirun folder")
    for line in rebuild(ns.dir, n_boot=ns.bootstrap, seed=ns.seed, draw=not ns.no_charts):
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


if __name__ == "__main__":
    os.environ.setdefault("HYDRA_FULL_ERROR", "0")
    sys.exit(main())
