"""The composition root: a validated config becomes objects, and they run.

``run(cfg, out)`` is what ``memlab run`` does for one job: check the config,
build the reader and judge (``READERS``, ``JUDGES``; with a reader, its
endpoints are checked before anything else happens), load the transcripts,
build the embedder and summarizer (behind the persistent model cache where it
pays), a fresh store and strategy per replay through the registries
(``STORES``, ``EMBEDDERS``, ``SUMMARIZERS``, ``STRATEGIES``), replay, score,
answer and judge, and write the run folder. The command line, the tuner, the
benchmarks and the tests all come through here; nothing else builds these
objects.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.errors import ConfigError, InputError
from memlab.lab import errata, fingerprint
from memlab.lab.answering import Answering, Answers
from memlab.lab.config import LAB_ARGUMENTS, Plugin, Validated, answer_settings, validate
from memlab.lab.files import atomic_write, atomic_write_text
from memlab.lab.judges import Judge
from memlab.lab.readers import NO_READER
from memlab.lab.replay import ReplaySettings, run_experiment
from memlab.lab.schema import build, parameters
from memlab.lab.strategies import Components, StrategyFactory
from memlab.lab.summary import summarize, write_tables
from memlab.lab.transcripts import Transcript
from memlab.memory import (
    CachedEmbedder,
    CachedSummarizer,
    Consolidator,
    Embedder,
    ExtractiveSummarizer,
    HashEmbedder,
    MemoEmbedder,
    MemoryStore,
    ModelCache,
    StaticEmbedder,
    Summarizer,
)

STORE_TEMPLATES = ("path", "table", "schema")
ERRATA_FILE = "errata.csv"
ERRATA_IMPACT_FILE = "errata_impact.csv"


# -- plug-ins -------------------------------------------------------------------------
def instantiate(p: Plugin, **overrides: Any) -> Any:
    """The plug-in's class built from its checked arguments (``overrides`` win);
    a class with a ``settings`` dataclass gets one built from them.

    Raises:
        ConfigError: the class rejected a value (naming ``<group>.<key>``).
    """
    settings = getattr(p.cls, "settings", None)
    if dataclasses.is_dataclass(settings) and isinstance(settings, type):
        return p.cls(build(settings, {**p.kwargs, **overrides}, p.group))
    return build(p.cls, {**p.kwargs, **overrides}, p.group)


@dataclass
class Models:
    """The run's embedder, summarizer and consolidator, and the cached ones (for
    hit rates)."""

    embedder: Embedder
    summarizer: Summarizer
    consolidator: Consolidator | None = None
    cached: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        for component in (self.embedder, self.summarizer, self.consolidator):
            close = getattr(component, "close", None)
            if close is not None:
                close()

    def cache_stats(self) -> dict[str, str]:
        """``{"embedding": "<hits/misses>", ...}`` for the cached models."""
        return {label: str(c.stats) for label, c in self.cached.items()}


def models(v: Validated) -> Models:
    """The configured embedder and summarizer, wrapped in the persistent model
    cache where caching pays (not for the hash and static embedders or the
    extractive summarizer, which are faster than a lookup)."""
    embedder = instantiate(v.plugins["embedder"])
    summarizer = instantiate(v.plugins["summarizer"])
    node = v.plugins["consolidator"]
    extra = {}
    if "cache" in LAB_ARGUMENTS["consolidator"] and "cache" in parameters(node.cls):
        extra["cache"] = ModelCache(v.run.cache.path) if v.run.cache.decisions else None
    out = Models(embedder, summarizer, instantiate(node, **extra))
    cache_cfg = v.run.cache
    # hash and static embed faster than a cache lookup answers.
    wrap_embedder = cache_cfg.embeddings and not isinstance(embedder, HashEmbedder | StaticEmbedder)
    wrap_summarizer = cache_cfg.summaries and not isinstance(summarizer, ExtractiveSummarizer)
    if wrap_embedder or wrap_summarizer:
        cache = ModelCache(cache_cfg.path)
        if wrap_embedder:
            out.embedder = out.cached["embedding"] = CachedEmbedder(embedder, cache)
        if wrap_summarizer:
            out.summarizer = out.cached["summary"] = CachedSummarizer(summarizer, cache)
    return out


def answering(v: Validated, progress: bool | None = None) -> Answering | None:
    """The run's reader and judge behind the probe hook, or None for ``reader=none``.

    The reader and judge share the persistent model cache (``cache.answers``).
    Their endpoints are not checked here (``Answering.check``).

    Raises:
        ConfigError: a reader, judge or ``reader.*`` lab key rejected its value.
    """
    reader_node, judge_node = v.plugins["reader"], v.plugins["judge"]
    if reader_node.name == NO_READER:
        return None
    settings = answer_settings(reader_node)
    cache = ModelCache(v.run.cache.path) if v.run.cache.answers else None
    reader = instantiate(reader_node, cache=cache)
    try:
        judge_extra = {"cache": cache} if "cache" in parameters(judge_node.cls) else {}
        judge = instantiate(judge_node, **judge_extra)
    except BaseException:
        reader.close()
        raise
    shown = v.run.progress if progress is None else progress
    return Answering(reader, judge, settings, progress=shown)


def calibration_judge(overrides: Sequence[str]) -> Judge:
    """The judge ``memlab judge calibrate`` grades with: the ``judge`` config group
    and its keys as a run would build it (``judge=llm judge.prompt=locomo_strict
    judge.model=...``), behind the model cache (``cache.*``). Its endpoint is not
    checked here (``Judge.check``).

    Raises:
        InputError: an override that is not a judge or cache key.
        ConfigError: an unknown judge, key or value.
    """
    from memlab.lab.compose import compose
    from memlab.lab.config import CacheConfig, plugin
    from memlab.lab.schema import structured

    others = [o for o in overrides if not o.lstrip("+~").startswith(("judge", "cache."))]
    if others:
        raise InputError(
            f"judge calibrate takes judge=NAME, judge.KEY=VALUE and cache.KEY=VALUE "
            f"overrides, not {others}"
        )
    cfg = compose(list(overrides))
    node = plugin("judge", cfg.get("judge"))
    cache_cfg: CacheConfig = structured(CacheConfig, cfg.get("cache") or {}, "cache")
    cache = ModelCache(cache_cfg.path) if cache_cfg.answers else None
    extra = {"cache": cache} if "cache" in parameters(node.cls) else {}
    judge: Judge = instantiate(node, **extra)
    return judge


def _short_hash(*parts: str) -> str:
    return hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:10]


def store_name(transcript: str) -> str:
    """The ``{transcript}`` of a store template: the id with the characters unsafe in
    a file name as ``_`` and, only when that changed it, a short hash of the id.
    Ids that differ only in those characters (``acme/x``, ``acme_x``) would
    otherwise share one store; a plain id keeps its file name (earlier runs' and
    golden files' names do not move). An id too long for a file name keeps its
    start and a hash (``files.short_stem``)."""
    from memlab.lab.files import short_stem

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in transcript)
    return short_stem(
        safe if safe == transcript else f"{safe}-{_short_hash(transcript)}", transcript
    )


def make_store(
    store: Plugin, out: Path, strategy: str, transcript: str, dims: int | None = None
) -> MemoryStore:
    """A fresh store for one (strategy, transcript) replay.

    Placeholders in ``store.path`` (file stores) and ``store.table`` /
    ``store.schema`` (pgvector): ``{run_dir}``, ``{strategy}``, ``{transcript}``
    (``store_name``: the id, made safe for a file name), ``{key}`` (a short hash of strategy and transcript) and ``{run_key}`` (a short
    hash of the run folder). ``store.dims: null`` takes the embedder's dims.

    Raises:
        ConfigError: a bad placeholder, or a store file that already exists.
    """
    values = {
        "run_dir": out,
        "strategy": strategy,
        "transcript": store_name(transcript),
        "key": _short_hash(strategy, transcript),
        "run_key": _short_hash(str(out.resolve())),
    }
    kwargs: dict[str, Any] = {}
    for key in STORE_TEMPLATES:
        template = store.kwargs.get(key)
        if template is not None:
            try:
                kwargs[key] = str(template).format(**values)
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
    if "dims" in store.kwargs and store.kwargs["dims"] is None and dims is not None:
        kwargs["dims"] = dims
    if "path" in kwargs and "create_dirs" in parameters(store.cls):
        kwargs["create_dirs"] = True  # each replay's store lives in a fresh subfolder
    store_obj: MemoryStore = instantiate(store, **kwargs)
    return store_obj


def strategy_factories(
    v: Validated,
    out: Path,
    embedder: Embedder,
    summarizer: Summarizer,
    consolidator: Consolidator | None = None,
) -> dict[str, StrategyFactory]:
    """One factory per configured strategy; each builds a fresh strategy (and
    store) for one transcript."""
    store = v.plugins["store"]

    def open_store(strategy: str, transcript: str) -> MemoryStore:
        return make_store(store, out, strategy, transcript, embedder.dims)

    parts = Components(
        embedder=embedder,
        summarizer=summarizer,
        consolidator=consolidator,
        open_store=open_store,
        drop_store=bool(store.lab.get("drop_after", False)),
    )
    return {
        name: kind.factory(name, settings, parts) for name, (kind, settings) in v.strategies.items()
    }


def replay_settings(v: Validated) -> ReplaySettings:
    r = v.run
    return ReplaySettings(
        budget=r.budget,
        prompt_overhead_tokens=r.prompt_overhead_tokens,
        price_per_1k_tokens=r.price_per_1k_tokens,
        far_turns=r.report.far_turns,
        benchmark_metrics=r.report.benchmark_metrics,
        abstain_below=r.report.abstain_below,
    )


# -- running --------------------------------------------------------------------------
@dataclass
class RunResult:
    """What ``run`` wrote and measured."""

    out: Path
    summary: pd.DataFrame
    probes: pd.DataFrame
    turns: pd.DataFrame
    transcripts: int
    strategies: int
    budget: int
    seconds: float
    charts: list[Path]
    cache_stats: dict[str, str]
    answers: Answers | None = None
    errata: pd.DataFrame | None = None

    @property
    def probes_per_strategy(self) -> int:
        return len(self.probes) // max(1, self.strategies)


def load_transcripts(v: Validated, progress: bool | None = None) -> list[Transcript]:
    """The transcripts the config names (``transcripts.*``), with the errata file
    ``transcripts.errata`` applied (``memlab.lab.errata``).

    Raises:
        TranscriptError: the transcripts cannot be loaded.
        ErrataError: the errata file is invalid or does not fit them.
    """
    from memlab.lab.datasets import load_source

    t = v.run.transcripts
    shown = v.run.progress if progress is None else progress
    loaded = load_source(t.name, t.path, limit=t.limit, ids=t.ids, progress=shown)
    if t.errata:
        loaded = errata.apply(loaded, errata.load(t.errata)).transcripts
    return loaded


def provenance(v: Validated, asking: Answering | None) -> dict[str, Any]:
    """What the run's numbers rest on (``fingerprint.provenance``): the dataset's
    SHA-256, the errata file's (and how many errata it holds), the judge's
    identity (with a reader).

    Raises:
        TranscriptError: the dataset cannot be read to hash it.
        ErrataError: the errata file cannot be read.
    """
    from memlab.lab.datasets import dataset_sha256
    from memlab.lab.judges import provenance as judge_provenance

    t = v.run.transcripts
    fixes = None
    if t.errata:
        loaded = errata.load(t.errata)
        fixes = {"file": Path(t.errata).name, "sha256": loaded.sha256,
                 "entries": len(loaded.entries)}  # fmt: skip
    judge = judge_provenance(asking.judge) if asking is not None else None
    return fingerprint.provenance(t.name, dataset_sha256(t.name, t.path), fixes, judge)


def run(
    cfg: Any,
    out: Path,
    *,
    transcripts: list[Transcript] | None = None,
    overrides: Mapping[str, Any] | None = None,
    on_transcript: Callable[[Transcript], None] | None = None,
    on_scored: Callable[[Transcript, list[dict[str, Any]]], None] | None = None,
) -> RunResult:
    """Run the experiment a composed config describes and write it to ``out``:
    probes.csv, turns.csv, summary.csv (last, sealing fingerprint.json),
    config.yaml, charts.

    With a reader, its and the judge's endpoints are checked first (unless
    ``reader.preflight`` is off), every probe is answered and judged, and the
    answer columns join probes.csv. A ``reader.dry_run`` replays in a scratch
    folder, sends nothing and writes nothing: ``RunResult.answers.tally`` holds
    the calls, tokens and cost a run would make. A run stopped by
    ``reader.max_usd`` writes what it did and marks its fingerprint incomplete.

    Args:
        cfg: a composed run config (DictConfig or plain mapping).
        out: the run folder.
        transcripts: already loaded transcripts (default: what ``transcripts``
            names).
        overrides: dotted keys set on top of ``cfg`` (e.g.
            ``{"report.charts": False}``).
        on_transcript: called before each transcript is replayed.
        on_scored: called after each transcript with its probe rows (every
            strategy's); an exception it raises ends the run before any table
            is written.

    Raises:
        ConfigError: the config is invalid, or ``out`` already holds a run (nothing
            was written).
        ChatEndpointError: a reader's or judge's endpoint is unreachable
            (nothing was written), or failed for good during the run.
        MemlabError: the transcripts, a model or a store failed.
    """
    started = time.perf_counter()
    v = validate(_with(cfg, overrides))
    asking = answering(v)
    if asking is None or not asking.settings.dry_run:
        check_fresh(out)
    try:
        if asking is not None:
            asking.check()  # an unreachable endpoint fails before anything is written
        if transcripts is None:
            transcripts = load_transcripts(v)
        if asking is not None and asking.settings.dry_run:
            with tempfile.TemporaryDirectory(prefix="memlab-dry-run-") as scratch:
                return _run(
                    v, Path(scratch), transcripts, asking, on_transcript, on_scored, started
                )
        return _run(v, out, transcripts, asking, on_transcript, on_scored, started)
    except BaseException:
        if asking is not None:
            asking.close(wait=False)  # Ctrl-C or a failure: do not wait for requests in flight
        raise
    finally:
        if asking is not None:
            asking.close()
            asking.reader.close()
            asking.judge.close()


RUN_FILES = (fingerprint.FILENAME, fingerprint.SUMMARY, *fingerprint.ROWS)
"""What a run writes into its folder that an earlier run's folder holds too."""


def check_fresh(out: Path) -> None:
    """A run folder must not hold another run: the new run would overwrite its
    config.yaml and fingerprint.json first, and a new run that then failed or was
    interrupted would leave the earlier summary.csv under a config it does not
    belong to (and the earlier run unreadable).

    Raises:
        ConfigError: ``out`` holds a run's files (finished or not).
    """
    found = [name for name in RUN_FILES if (out / name).exists()]
    if found:
        raise ConfigError(
            f"the run folder {out} already holds a run ({', '.join(found)}); choose another "
            "folder (hydra.run.dir=...) or remove it first, so that no run overwrites an "
            "earlier one"
        )


def _run(
    v: Validated,
    out: Path,
    transcripts: list[Transcript],
    asking: Answering | None,
    on_transcript: Callable[[Transcript], None] | None,
    on_scored: Callable[[Transcript, list[dict[str, Any]]], None] | None,
    started: float,
) -> RunResult:
    dry_run = asking is not None and asking.settings.dry_run
    m = models(v)
    try:
        if isinstance(m.embedder, CachedEmbedder):
            # The whole dataset's missing texts in one length-sorted pass: far
            # fewer padded tokens than embedding transcript by transcript.
            from memlab.lab.embed import dataset_texts, prewarm

            prewarm(m.embedder, dataset_texts(transcripts), progress=v.run.progress)
        memo = MemoEmbedder(m.embedder)

        def before_transcript(transcript: Transcript) -> None:
            # One batched embedding call per transcript instead of one per turn; the
            # memo is dropped between transcripts so memory stays bounded.
            memo.clear()
            memo.prefetch([turn.text for turn in transcript.turns])
            if on_transcript is not None:
                on_transcript(transcript)

        factories = strategy_factories(v, out, memo, m.summarizer, m.consolidator)
        if not dry_run:
            _write_config(out, v, transcripts, provenance(v, asking))
        probes, turns = run_experiment(
            transcripts,
            factories,
            replay_settings(v),
            progress=v.run.progress,
            before_transcript=before_transcript,
            on_probe=asking,
            stop=asking.stop_requested if asking is not None else None,
            after_transcript=on_scored,
        )
        answers = asking.finish() if asking is not None else None
    finally:
        m.close()
    stats = m.cache_stats()
    if asking is not None:
        stats.update(_answer_cache_stats(asking))
    summary, written = pd.DataFrame(), []
    impact = None
    if not dry_run:
        if answers is not None:
            probes = answers.merge(probes)
            _mark_incomplete(out, answers, probes, len(transcripts))
        summary = summarize(probes, turns, n_boot=v.run.report.bootstrap, seed=v.run.seed)
        if v.run.transcripts.errata:
            impact = errata_impact(probes)
            atomic_write(out / ERRATA_IMPACT_FILE, lambda f: impact.to_csv(f, index=False))
        write_tables(out, probes, turns, summary)
        if v.run.report.charts:
            from memlab.lab.charts import charts

            written = charts(probes, turns, summary, out / "charts")
    return RunResult(
        out=out,
        summary=summary,
        probes=probes,
        turns=turns,
        transcripts=len(transcripts),
        strategies=len(factories),
        budget=v.run.budget,
        seconds=time.perf_counter() - started,
        charts=written,
        cache_stats=stats,
        answers=answers,
        errata=impact,
    )


def errata_impact(probes: pd.DataFrame) -> pd.DataFrame:
    """``errata.impact`` over every per-probe metric with a direction."""
    from memlab.lab.metrics import metrics

    names = [m.name for m in metrics("probe") if m.direction != 0 and m.name in probes]
    return errata.impact(probes, names)


def _answer_cache_stats(asking: Answering) -> dict[str, str]:
    out = {}
    for label, part in (("answer", asking.reader), ("judge", asking.judge)):
        stats = getattr(part, "stats", None)
        value = stats() if callable(stats) else None
        if value is not None:
            out[label] = str(value)
    return out


def _mark_incomplete(out: Path, answers: Answers, probes: pd.DataFrame, total: int) -> None:
    """Record in fingerprint.json that the run stopped early (the gate refuses it)."""
    incomplete = answers.incomplete()
    if incomplete is None:
        return
    fp = fingerprint.load(out)
    replayed = int(probes["transcript"].nunique()) if len(probes) else 0
    fp["incomplete"] = {**incomplete, "transcripts_replayed": replayed, "transcripts": total}
    fingerprint.write(out, fp)


def _with(cfg: Any, overrides: Mapping[str, Any] | None) -> Any:
    if not overrides:
        return cfg
    from omegaconf import OmegaConf

    plain = OmegaConf.create(
        OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)
    )
    for key, value in overrides.items():
        OmegaConf.update(plain, key, value, force_add=True)
    return plain


def _write_config(
    out: Path, v: Validated, transcripts: list[Transcript], origin: Mapping[str, Any]
) -> None:
    """config.yaml (the effective config), an unsealed fingerprint.json with the
    run's provenance, and errata.csv when errata were applied."""
    from omegaconf import OmegaConf

    atomic_write_text(out / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(v.config)))
    fingerprint.write(out, fingerprint.fingerprint(transcripts, v.config, origin))
    if v.run.transcripts.errata:
        table = errata.applied(transcripts)
        atomic_write(out / ERRATA_FILE, lambda f: table.to_csv(f, index=False))


def effective_config(cfg: Any) -> dict[str, Any]:
    """The effective config of a composed config (what config.yaml records)."""
    return validate(cfg).config
