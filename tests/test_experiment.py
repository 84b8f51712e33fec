"""The composition root end to end: a config becomes objects and runs
(memlab.lab.experiment), in-process and through `memlab run`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from memlab.errors import ConfigError
from memlab.lab.compose import compose
from memlab.lab.experiment import run, store_name
from memlab.lab.sweep import plan_run
from tests.conftest import memlab
from tests.transcript_gen import write_transcripts


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_transcripts(tmp_path_factory.mktemp("gen") / "t", range(3), turns=50)


LATENCY = {"recall_ms", "write_ms", "maintain_ms"}


def test_store_paths_are_fresh_per_replay(tmp_path: Path, gen: Path) -> None:
    with pytest.raises(ConfigError, match=r"lacks \{run_dir\}"):
        plan_run(["store=sqlite", f"store.path='{tmp_path}/{{strategy}}/{{transcript}}.db'"])
    with pytest.raises(ConfigError, match="cannot parse the overrides"):
        plan_run(["store=sqlite", "store.path={run_dir}/x.db"])
    args = ["store=jsonl", "strategies=[memory]", "transcripts=dir", f"transcripts.path={gen}"]
    cfg = plan_run([*args, "progress=false", "report.charts=false"]).cfg
    run(cfg, tmp_path / "run")
    for name in ("fingerprint.json", "summary.csv", "probes.csv", "turns.csv"):
        (tmp_path / "run" / name).unlink()  # a folder reused without its results
    with pytest.raises(ConfigError, match="already exists; a replay needs a fresh store"):
        run(cfg, tmp_path / "run")


def test_a_run_folder_that_holds_a_run_is_refused_before_anything_is_written(
    tmp_path: Path, gen: Path
) -> None:
    """A second run into a run's folder overwrote its config.yaml and fingerprint.json
    first; interrupted (or failing, as a file store's did), it left the first run's
    summary.csv under the second's config, and the first run unreadable ('no summary
    seal'). Two default runs started in one second share a folder."""
    args = ["strategies=[sliding_window]", "transcripts=dir", f"transcripts.path={gen}"]
    cfg = plan_run([*args, "progress=false", "report.charts=false"]).cfg
    out = tmp_path / "run"
    run(cfg, out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(ConfigError, match=r"run folder .* already holds a run \(fingerprint.json"):
        run(cfg, out, overrides={"budget": 100})
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    before["memlab.log"] = b""  # Hydra's, empty
    proc = memlab("run", *args, "progress=false", f"hydra.run.dir={out}", cwd=tmp_path)
    assert proc.returncode == 2 and "already holds a run" in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_run_against_an_openai_compatible_server_matches_in_process(tmp_path: Path) -> None:
    """embedder=openai + summarizer=openai against a real local HTTP server give the
    same results as the in-process hash embedder + extractive summarizer."""
    import os

    from tests.fake_openai import FakeOpenAI

    common = [
        "transcripts.limit=3",
        "strategies=[memory,memory_no_summarize]",
        "progress=false",
        "report.charts=false",
    ]
    local = memlab("run", *common, f"hydra.run.dir={tmp_path / 'local'}", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    with FakeOpenAI(api_key="sk-test-123") as server:
        url = server.base_url
        env = {**os.environ, "FAKE_OPENAI_KEY": "sk-test-123"}
        proc = subprocess.run(
            [
                sys.executable, "-m", "memlab.cli", "run", *common,
                "embedder=openai", f"embedder.base_url={server.base_url}", "embedder.model=hash",
                "embedder.dims=384", "embedder.api_key_env=FAKE_OPENAI_KEY",
                "summarizer=openai", f"summarizer.base_url={server.base_url}", "summarizer.model=extractive",
                "summarizer.api_key_env=FAKE_OPENAI_KEY", f"cache.path={tmp_path / 'cache.sqlite'}",
                f"hydra.run.dir={tmp_path / 'remote'}",
            ],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert server.calls("embeddings") and server.calls("chat/completions")
    assert "embedding cache:" in proc.stdout and "summary cache:" in proc.stdout
    a = pd.read_csv(tmp_path / "local" / "summary.csv")
    b = pd.read_csv(tmp_path / "remote" / "summary.csv")
    a, b = (x[~x.metric.isin(LATENCY)].reset_index(drop=True) for x in (a, b))
    pd.testing.assert_frame_equal(a, b)
    assert "sk-test-123" not in (tmp_path / "remote" / "config.yaml").read_text()
    # A second run is served from the cache: the (stopped) server is not needed any more.
    again = subprocess.run(
        [
            sys.executable, "-m", "memlab.cli", "run", *common, "embedder=openai",
            f"embedder.base_url={url}", "embedder.model=hash", "embedder.dims=384",
            "embedder.api_key_env=FAKE_OPENAI_KEY", "embedder.max_retries=0", "summarizer=openai",
            f"summarizer.base_url={url}", "summarizer.model=extractive",
            "summarizer.api_key_env=FAKE_OPENAI_KEY", "summarizer.max_retries=0",
            f"cache.path={tmp_path / 'cache.sqlite'}", f"hydra.run.dir={tmp_path / 'again'}",
        ],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "0 misses" in again.stdout


@pytest.mark.slow
def test_parallel_jobs_share_the_embedding_cache(tmp_path: Path, gen: Path) -> None:
    """Two jobs in two worker processes fill one model cache; a later run is served
    from it entirely."""
    cache = tmp_path / "cache.sqlite"
    common = [
        "embedder=minilm",
        f"cache.path={cache}",
        "transcripts=dir",
        f"transcripts.path={gen}",
        "transcripts.limit=1",
        "strategies=[memory]",
        "progress=false",
        "report.charts=false",
    ]
    sweep = tmp_path / "sweep"
    first = memlab(
        "run", "-m", *common, "budget=40,80", "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.count("embedding cache:") == 2 and cache.exists()
    assert not list(sweep.glob("*/*.sqlite"))  # the cache is not a per-job file
    again = run(plan_run([*common, "budget=60"]).cfg, tmp_path / "again")
    assert " 0 misses" in again.cache_stats["embedding"], again.cache_stats


def test_run_on_pgvector_matches_sqlite_and_drops_its_tables(tmp_path: Path, pg_server) -> None:  # type: ignore[no-untyped-def]
    """`memlab run store=pgvector` gives the same summary as store=sqlite (latency and
    bytes aside) and leaves no replay table behind."""
    import os

    import psycopg

    dsn = pg_server.dsn()
    common = [
        "transcripts.limit=2",
        "strategies=[memory,memory_no_summarize]",
        "progress=false",
        "report.charts=false",
    ]
    sq = memlab("run", *common, "store=sqlite", f"hydra.run.dir={tmp_path / 'sq'}", cwd=tmp_path)
    assert sq.returncode == 0, sq.stderr
    env = {**os.environ, "MEMLAB_PG_DSN": dsn}
    pg = subprocess.run(
        [sys.executable, "-m", "memlab.cli", "run", *common, "store=pgvector", f"hydra.run.dir={tmp_path / 'pg'}"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert pg.returncode == 0, pg.stderr
    skip = {"recall_ms", "write_ms", "maintain_ms", "final_store_bytes"}
    a, b = (pd.read_csv(tmp_path / d / "summary.csv") for d in ("sq", "pg"))
    a, b = (x[~x.metric.isin(skip)].reset_index(drop=True) for x in (a, b))
    pd.testing.assert_frame_equal(a, b)
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname LIKE 'memlab\\_%' AND tablename LIKE 'memory%'"
        ).fetchone()[0]
    assert left == 0


# -- what a run writes ------------------------------------------------------------------------
def test_run_writes_the_effective_config_and_a_sealed_fingerprint(
    tmp_path: Path, gen: Path
) -> None:
    import json

    import yaml

    from memlab.lab import fingerprint

    cfg = compose(["transcripts=dir", f"transcripts.path={gen}", "strategies=[memory,stuff_all]"])
    result = run(cfg, tmp_path / "run", overrides={"report.charts": False, "progress": False})
    assert result.transcripts == 3 and result.strategies == 2 and not result.charts
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert written["strategies"]["stuff_all"] == {"kind": "stuff_all", "context_limit": 128000}
    assert written["memory"]["summarize"]["trigger_tokens"] == 250  # the lab's override
    assert written["store"] == {
        "name": "memory", "drop_after": False,
        "scan": "float32", "scan_rerank": 16384, "scan_min_rows": 20000,
    }  # fmt: skip
    fp = json.loads((tmp_path / "run" / "fingerprint.json").read_text())
    assert fp["format"] == "memlab.fingerprint/3"
    assert fp["summary_sha256"] == fingerprint.file_sha256(tmp_path / "run" / "summary.csv")


def test_ids_that_differ_only_in_unsafe_characters_get_their_own_stores(
    tmp_path: Path, gen: Path
) -> None:
    from memlab.lab.transcripts import load_dir, save

    assert store_name("conv-26") == "conv-26" and store_name("a.b_c") == "a.b_c"  # unchanged
    assert store_name("acme/x") != store_name("acme_x") == "acme_x"
    assert store_name("acme/x").startswith("acme_x-") and store_name("acme/x") != store_name(
        "acme:x"
    )
    folder = tmp_path / "t"
    for i, (t, tid) in enumerate(zip(load_dir(gen), ["acme/x", "acme_x"], strict=False)):
        t.id = tid
        save(t, folder / f"{i}.json")
    args = ["store=jsonl", "strategies=[memory]", "transcripts=dir", f"transcripts.path={folder}"]
    result = run(plan_run([*args, "progress=false", "report.charts=false"]).cfg, tmp_path / "run")
    stores = sorted(p.name for p in (tmp_path / "run" / "stores" / "memory").glob("*.jsonl"))
    assert stores == sorted([f"{store_name('acme/x')}.jsonl", "acme_x.jsonl"])
    assert set(result.probes["transcript"]) == {"acme/x", "acme_x"}


def test_a_transcript_id_too_long_for_a_file_name_gets_a_store(tmp_path: Path, gen: Path) -> None:
    """A 300-character id failed mid-run with a file store ("I/O failure ...: File name
    too long", exit 3), after config.yaml and fingerprint.json were written."""
    from memlab.lab.transcripts import load_dir, save

    long_ids = ["x" * 300, "x" * 299 + "y", "é" * 150]
    names = [store_name(i) for i in long_ids]
    assert len(set(names)) == 3 and all(len(n.encode()) <= 200 for n in names)
    folder = tmp_path / "t"
    for i, (t, tid) in enumerate(zip(load_dir(gen), long_ids[:2], strict=False)):
        t.id = tid
        save(t, folder / f"{i}.json")
    args = ["store=jsonl", "strategies=[memory]", "transcripts=dir", f"transcripts.path={folder}"]
    result = run(plan_run([*args, "progress=false", "report.charts=false"]).cfg, tmp_path / "run")
    assert set(result.probes["transcript"]) == set(long_ids[:2])


def test_a_bad_plugin_value_fails_before_anything_is_written(tmp_path: Path, gen: Path) -> None:
    cfg = compose(["transcripts=dir", f"transcripts.path={gen}", "embedder.dims=4"])
    with pytest.raises(ConfigError, match="config key 'embedder': HashEmbedder dims must be"):
        run(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


# -- a new strategy, metric and dataset: one registration (and one YAML) each ------------------
def test_a_toy_strategy_metric_and_dataset_run_through_their_registries_alone(
    tmp_path: Path, gen: Path
) -> None:
    from dataclasses import dataclass
    from typing import Any

    from memlab.errors import InputError
    from memlab.lab.datasets import DATASETS, Dataset
    from memlab.lab.metrics import METRICS, Metric, direction, register_metric
    from memlab.lab.report import summary_table
    from memlab.lab.strategies import STRATEGIES, Components, Context, SettingsKind, StuffAll
    from memlab.lab.transcripts import load_dir

    class LastTurns(StuffAll):
        """The last `n` turns of the scope."""

        def __init__(self, name: str, n: int) -> None:
            super().__init__(name)
            self.n = n

        def context(self, probe: Any, budget: int) -> Context:
            return Context(self.turns[probe.scope][-self.n :])

    @dataclass
    class LastTurnsSettings:
        n: int = 2

        def __post_init__(self) -> None:
            if self.n < 1:
                raise InputError(f"n must be >= 1, got {self.n}")

        def build(self, name: str, parts: Components) -> Any:
            return lambda t: LastTurns(name, self.n)

    def toy_loader(path: Any, **_: Any) -> list[Any]:
        return load_dir(gen)[:2]

    conf = tmp_path / "conf" / "strategies"
    conf.mkdir(parents=True)
    (conf / "last_three.yaml").write_text(
        "defaults: [/schema/strategy/last_turns@last_three]\nlast_three:\n  n: 3\n"
    )
    (tmp_path / "conf" / "transcripts").mkdir()
    (tmp_path / "conf" / "transcripts" / "toy.yaml").write_text("name: toy\n")
    STRATEGIES.register("last_turns", SettingsKind(LastTurnsSettings))
    register_metric(
        Metric("toy_first_item_tokens", -1, "tokens of the first item", table=True,
               compute=lambda s: float(s.context.items[0].tokens) if s.context.items else 0.0)
    )  # fmt: skip
    DATASETS.register("toy", Dataset(toy_loader, reads=None, description="two transcripts"))
    try:
        args = [
            f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
            "transcripts=toy",
            "strategies=[last_three,sliding_window]",
        ]
        with pytest.raises(ConfigError, match="config key 'strategies.last_three.n': must be >= 1"):
            run(compose([*args, "strategies.last_three.n=0"]), tmp_path / "bad")
        result = run(compose(args), tmp_path / "run", overrides={"report.charts": False})
        summary = result.summary
        assert set(summary.strategy) == {"last_three", "sliding_window"}
        mine = summary[(summary.strategy == "last_three") & (summary.group == "all")]
        assert mine.set_index("metric").loc["context_items", "mean"] <= 3
        assert "toy_first_item_tokens" in set(mine.metric)
        assert "toy_first_item_tokens" in summary_table(summary).columns
        assert direction("toy_first_item_tokens") == -1
        assert set(result.probes.transcript) == {"gen-000", "gen-001"}
    finally:
        STRATEGIES.unregister("last_turns")
        METRICS.unregister("toy_first_item_tokens")
        DATASETS.unregister("toy")
