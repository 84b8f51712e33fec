"""`make bench`: embedding throughput (hash, MiniLM) and the embedding cache's effect.

Figures printed:
- texts/s of HashEmbedder and MiniLMEmbedder (batched; MiniLM also one text per
  call, and with 1 vs the default number of torch threads);
- the cache: the same few thousand texts embedded through ``CachedEmbedder``
  cold (empty cache), warm (same process, new handle) and from a second process
  (as the second job of a sweep would), with the ratio cold / warm.

The cache lives in a temporary folder, never in the user's cache. Results go to
results/bench/embed.csv.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from memlab.bench.workload import flat_lines
from memlab.errors import MissingExtraError
from memlab.memory import CachedEmbedder, Embedder, HashEmbedder, ModelCache

OUT = Path("results/bench")
CHUNK = 100  # texts per embed() call in the cache runs, like remember_many batches


def texts_per_second(
    embed: Callable[[list[str]], object], texts: list[str], per_call: int
) -> float:
    embed(texts[:8])  # warm-up: lazy init, first-call allocations
    t = time.perf_counter()
    for i in range(0, len(texts), per_call):
        embed(texts[i : i + per_call])
    return len(texts) / (time.perf_counter() - t)


def make_embedder(kind: str, threads: int | None = None) -> Embedder:
    if kind == "hash":
        return HashEmbedder(384)
    from memlab.memory import MiniLMEmbedder

    return MiniLMEmbedder(threads=threads)


def cached_run(emb: Embedder, cache_path: Path, texts: list[str]) -> dict:
    cached = CachedEmbedder(emb, ModelCache(cache_path))
    t = time.perf_counter()
    for i in range(0, len(texts), CHUNK):
        cached.embed(texts[i : i + CHUNK])
    total = time.perf_counter() - t
    s = cached.stats
    cached.close()
    return {
        "seconds": total,
        "hits": s.hits,
        "misses": s.misses,
        "model_s": s.model_seconds,
        "cache_s": s.cache_seconds,
    }


def second_process(kind: str, cache_path: Path, n: int, seed: int) -> dict:
    """The same cached run in a fresh interpreter (model load time excluded)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_embed",
            "--worker",
            kind,
            str(cache_path),
            str(n),
            str(seed),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def worker(kind: str, cache_path: str, n: int, seed: int) -> None:
    emb = make_embedder(kind)
    print(json.dumps(cached_run(emb, Path(cache_path), flat_lines(n, seed))))


def bench_throughput(args: argparse.Namespace, have_minilm: bool) -> list[dict]:
    rows = []
    texts = flat_lines(args.texts, seed=11)
    rate = texts_per_second(HashEmbedder(384).embed, texts, len(texts))
    rows.append(
        {
            "bench": "throughput",
            "embedder": "hash",
            "setting": "one batch",
            "texts": len(texts),
            "texts_per_s": rate,
        }
    )
    print(f"  hash: {rate:,.0f} texts/s", flush=True)
    if have_minilm:
        import torch

        default_threads = torch.get_num_threads()
        mini = make_embedder("minilm")
        texts = flat_lines(args.minilm_texts, seed=12)
        for threads in sorted({1, default_threads}):
            torch.set_num_threads(threads)
            rate = texts_per_second(mini.embed, texts, len(texts))
            rows.append(
                {
                    "bench": "throughput",
                    "embedder": "minilm",
                    "setting": f"batch_size=64, {threads} thread(s)",
                    "texts": len(texts),
                    "texts_per_s": rate,
                }
            )
            print(f"  minilm, {threads} thread(s): {rate:,.0f} texts/s", flush=True)
        torch.set_num_threads(default_threads)
        few = texts[:200]
        rate = texts_per_second(mini.embed, few, 1)
        rows.append(
            {
                "bench": "throughput",
                "embedder": "minilm",
                "setting": f"one text per call, {default_threads} thread(s)",
                "texts": len(few),
                "texts_per_s": rate,
            }
        )
        print(f"  minilm, unbatched: {rate:,.0f} texts/s", flush=True)
    return rows


def bench_cache(args: argparse.Namespace, have_minilm: bool, tmp: Path) -> list[dict]:
    rows = []
    kinds = ["hash"] + (["minilm"] if have_minilm else [])
    for kind in kinds:
        emb = make_embedder(kind)
        seed = 21 if kind == "hash" else 22
        texts = flat_lines(args.cache_texts, seed=seed)
        path = tmp / f"cache-{kind}.sqlite"
        plain = time.perf_counter()
        for i in range(0, len(texts), CHUNK):
            emb.embed(texts[i : i + CHUNK])
        plain = time.perf_counter() - plain
        runs = {
            "no cache": {"seconds": plain, "hits": 0, "misses": len(texts)},
            "cold": cached_run(emb, path, texts),
            "warm": cached_run(emb, path, texts),
            "second process": second_process(kind, path, len(texts), seed),
        }
        size = ModelCache(path).info()["bytes"]
        for run, r in runs.items():
            rows.append(
                {
                    "bench": "cache",
                    "embedder": kind,
                    "setting": run,
                    "texts": len(texts),
                    "seconds": r["seconds"],
                    "hits": r["hits"],
                    "misses": r["misses"],
                    "model_s": r.get("model_s", r["seconds"]),
                    "cache_s": r.get("cache_s", 0.0),
                    "texts_per_s": len(texts) / r["seconds"],
                    "cache_bytes": size,
                }
            )
        print(f"  cache with {kind} done", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--texts", type=int, default=20_000, help="texts for the hash throughput")
    ap.add_argument("--minilm-texts", type=int, default=1_000, help="texts for MiniLM throughput")
    ap.add_argument("--cache-texts", type=int, default=3_000, help="texts for the cache runs")
    ap.add_argument(
        "--worker", nargs=4, metavar=("KIND", "CACHE", "N", "SEED"), help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.worker:
        kind, cache, n, seed = args.worker
        worker(kind, cache, int(n), int(seed))
        return
    try:
        make_embedder("minilm")
        have_minilm = True
    except MissingExtraError as exc:
        print(f"MiniLM skipped: {exc}")
        have_minilm = False
    OUT.mkdir(parents=True, exist_ok=True)
    print("memlab bench: embedders and the embedding cache", flush=True)
    words = sum(len(t.split()) for t in flat_lines(200)) / 200
    print(f"  (texts: seeded support-chat lines of ~{words:.0f} words)", flush=True)
    with tempfile.TemporaryDirectory() as d:
        throughput = pd.DataFrame(bench_throughput(args, have_minilm))
        cache = pd.DataFrame(bench_cache(args, have_minilm, Path(d)))
    pd.concat([throughput, cache]).to_csv(OUT / "embed.csv", index=False)

    print("\nEmbedding throughput:")
    for _, r in throughput.iterrows():
        print(
            f"  {r.embedder:<7} {r.setting:<34} {r.texts_per_s:>10,.0f} texts/s  ({r.texts:,} texts)"
        )
    print(f"\nEmbedding cache ({args.cache_texts:,} texts in calls of {CHUNK}; seconds):")
    for kind, part in cache.groupby("embedder", sort=False):
        by = part.set_index("setting")
        cold, warm = by.loc["cold", "seconds"], by.loc["warm", "seconds"]
        second = by.loc["second process", "seconds"]
        none = by.loc["no cache", "seconds"]
        print(
            f"  {kind:<7} no cache {none:7.3f}   cold {cold:7.3f}   warm {warm:7.3f}   "
            f"2nd process {second:7.3f}   cold/warm {cold / warm:7.1f}x   "
            f"no-cache/2nd-process {none / second:7.1f}x   "
            f"(2nd process: {int(by.loc['second process', 'hits']):,} hits, "
            f"{int(by.loc['second process', 'misses']):,} misses; file {by['cache_bytes'].iloc[0] / 1e6:.1f} MB)"
        )
    print("\nCache runs, split into time in the model and in the cache (seconds):")
    with pd.option_context("display.float_format", "{:,.3f}".format, "display.width", 200):
        print(
            cache[
                ["embedder", "setting", "seconds", "model_s", "cache_s", "hits", "misses"]
            ].to_string(index=False)
        )
    print(f"\nwritten to {OUT / 'embed.csv'}")


if __name__ == "__main__":
    main()
