"""`make bench`: embedding throughput (hash, static, MiniLM on ONNX and PyTorch) and
the embedding cache's effect.

Figures printed:
- texts/s of HashEmbedder and MiniLMEmbedder (batched; MiniLM also one text per
  call, and with 1 vs the default number of torch threads);
- MiniLM backends against today's PyTorch path on the same texts in the same
  process (``backend_rounds``): short texts (seeded chat lines) and long ones
  (LongMemEval_S turns when ../shared has them, else ten lines joined); each
  round runs every path once, in alternating order, and the ratio to PyTorch is
  taken within a round (same machine load), then the median. "run order" embeds
  in calls of 256 in dataset order (how a replay embedded before ``prewarm``);
  "sorted" sorts the whole set by length first (``memlab embed`` and a run's
  prewarm);
- the cache: the same few thousand texts embedded through ``CachedEmbedder``
  cold (empty cache), warm (same process, new handle) and from a second process
  (as the second job of a sweep would), with the ratio cold / warm.

The cache lives in a temporary folder, never in the user's cache. Results go to
results/bench/embed.csv.
"""

from __future__ import annotations

import argparse
import json
import os
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

    return MiniLMEmbedder(backend="torch", threads=threads)


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


BACKENDS = {
    # label: (MiniLMEmbedder kwargs, or "static" / "hash", whole-set sorted?)
    "torch, run order (today)": ({"backend": "torch"}, False),
    "torch, sorted": ({"backend": "torch"}, True),
    "onnx fp32, run order": ({"backend": "onnx"}, False),
    "onnx fp32, sorted": ({"backend": "onnx"}, True),
    "onnx int8, sorted": ({"backend": "onnx", "variant": "int8"}, True),
    "torch bf16, sorted": ({"backend": "torch", "variant": "bf16"}, True),
    "static, sorted": ("static", True),
}
BASE = "torch, run order (today)"
HEADLINE = "onnx fp32, sorted"
INT8 = "onnx int8, sorted"
# tests/test_minilm_onnx.py prints these for the recipe in use
INT8_PARITY = "cosine to PyTorch: mean 0.995, worst 0.978 of 298"
RUN_CHUNK = 256  # MemoEmbedder's prefetch chunk: a replay's calls before prewarm


def long_texts(n: int, seed: int) -> tuple[str, list[str]]:
    """LongMemEval_S dev6 turns when ../shared has them, else joined chat lines."""
    import json
    import random

    path = (
        Path(__file__).resolve().parents[2] / "shared/datasets/longmemeval/longmemeval_s_dev6.json"
    )
    if path.is_file():
        data = json.loads(path.read_text())
        turns = list(
            dict.fromkeys(t["content"] for q in data for s in q["haystack_sessions"] for t in s)
        )
        return "LongMemEval_S dev6 turns", random.Random(seed).sample(turns, min(n, len(turns)))
    lines = flat_lines(n * 10, seed)
    return "10 chat lines joined", [" ".join(lines[i : i + 10]) for i in range(0, n * 10, 10)]


def backend_rounds(args: argparse.Namespace) -> list[dict]:
    """Texts/s of each MiniLM path on the same texts, rounds alternating order."""
    import numpy as np

    from memlab.memory import MiniLMEmbedder, StaticEmbedder

    models: dict[str, Embedder] = {}
    for kw, _ in BACKENDS.values():
        if str(kw) not in models:
            models[str(kw)] = StaticEmbedder() if kw == "static" else MiniLMEmbedder(**kw)  # type: ignore[arg-type]

    def path(label: str) -> Callable[[list[str]], object]:
        kw, whole = BACKENDS[label]
        emb = models[str(kw)]

        def run(texts: list[str]) -> object:
            if whole:
                texts = sorted(texts, key=len, reverse=True)
            for i in range(0, len(texts), RUN_CHUNK):
                emb.embed(texts[i : i + RUN_CHUNK])
            return None

        return run

    paths = {label: path(label) for label in BACKENDS}
    for fn in paths.values():
        fn(flat_lines(16, seed=30))  # warm-up
    what, long = long_texts(args.long_texts, seed=31)
    sets = {
        f"short (chat lines, {args.short_texts})": flat_lines(args.short_texts, seed=32),
        f"long ({what}, {len(long)})": long,
    }
    rows = []
    for set_name, texts in sets.items():
        times: dict[str, list[float]] = {k: [] for k in paths}
        for r in range(args.rounds):
            order = list(paths) if r % 2 == 0 else list(reversed(paths))
            for label in order:
                t = time.perf_counter()
                paths[label](texts)
                times[label].append(time.perf_counter() - t)
        for label, ts in times.items():
            ratios = [b / t for b, t in zip(times[BASE], ts, strict=True)]
            rows.append({
                "bench": "backends", "embedder": label, "setting": set_name,
                "texts": len(texts), "texts_per_s": len(texts) / float(np.median(ts)),
                "ratio": float(np.median(ratios)), "ratio_min": min(ratios),
                "ratio_max": max(ratios), "rounds": args.rounds,
            })  # fmt: skip
        print(f"  backends on {set_name} done", flush=True)
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
    ap.add_argument("--short-texts", type=int, default=512, help="short texts, backend rounds")
    ap.add_argument("--long-texts", type=int, default=256, help="long texts, backend rounds")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the backend comparison")
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
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        throughput = pd.DataFrame(bench_throughput(args, have_minilm))
        backends = pd.DataFrame(backend_rounds(args) if have_minilm else [])
        cache = pd.DataFrame(bench_cache(args, have_minilm, Path(d)))
    pd.concat([throughput, backends, cache]).to_csv(OUT / "embed.csv", index=False)
    if len(backends):
        print(
            f"\nMiniLM paths against today's PyTorch path (same texts, same process, "
            f"{args.rounds} rounds; load average {load:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end):"
        )
        for set_name, part in backends.groupby("setting", sort=False):
            print(f"  {set_name}")
            for _, r in part.iterrows():
                print(
                    f"    {r.embedder:<26} {r.texts_per_s:>9,.1f} texts/s   x{r.ratio:6.2f} "
                    f"(rounds {r.ratio_min:.2f}-{r.ratio_max:.2f})"
                )
            by = part.set_index("embedder")
            for label, what in ((HEADLINE, "PyTorch's vectors"), (INT8, INT8_PARITY)):
                ratio = by.loc[label].ratio
                print(
                    f"  -> throughput ratio {label} ({what}) / {BASE}: x{ratio:.2f} "
                    f"(target x3: {'MET' if ratio >= 3 else 'MISSED'})"
                )

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
