"""memlab demo (a short tour of the memory layer) and memlab bench (the store benchmark)."""

from __future__ import annotations

from memlab.cli.common import BAD_INPUT, OK, ArgumentParser, target_of


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
    if target_of("bench", args, BENCH_USAGE, ("store",)) is None:
        return OK
    from memlab.bench.store import main as bench_store

    try:
        return bench_store(args[1:])
    except SystemExit as exc:  # its argparse: --help (0) or a bad option (2)
        return exc.code if isinstance(exc.code, int) else BAD_INPUT
