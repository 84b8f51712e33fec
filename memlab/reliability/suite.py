"""``python -m memlab.reliability``: run every check, print the table, write the CSV.

The full suite is ``make reliability`` (under 15 minutes on 2 cores);
``--quick`` runs a short version of every check (about a minute). PostgreSQL
checks use ``--dsn`` (or ``$MEMLAB_PG_DSN``), else a throw-away embedded server
(``memlab[pg]``); ``--no-pg`` skips them. The exit status is 0 when every
guarded row has 0 failures, 1 when some check failed, 2 on bad arguments and
3 when the suite itself could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from memlab.errors import MemlabError
from memlab.reliability import Row

CHECKS = (
    "kill",
    "corrupt",
    "concurrency",
    "scopes",
    "injection",
    "badargs",
    "diskfull",
    "laundering",
)
COLUMNS = ("check", "store", "trials", "operations", "failures", "target", "detail", "seconds")


@dataclass
class Settings:
    """How much of each check to run."""

    kill_trials: int = 110  # per durable store
    concurrency_records: int = 4000  # per (store, writer count)
    scopes: int = 10_000
    diskfull_trials: int = 6  # per durable store
    laundering_sessions: int = 10  # per reply style
    pg: bool = True
    dsn: str | None = None
    checks: tuple[str, ...] = CHECKS
    progress: bool | None = None

    @classmethod
    def quick(cls, **kw: Any) -> Settings:
        return cls(
            kill_trials=10,
            concurrency_records=400,
            scopes=500,
            diskfull_trials=2,
            laundering_sessions=3,
            **kw,
        )


@contextlib.contextmanager
def postgres(dsn: str | None, folder: Path) -> Iterator[str]:
    """A DSN to test against: ``dsn``, else a throw-away embedded server."""
    if dsn:
        yield dsn
        return
    from memlab.memory.stores.pg.server import EmbeddedPostgres

    server = EmbeddedPostgres(folder / "pg")
    try:
        yield str(server.dsn("memlab"))
    finally:
        server.stop()


def _pg_factory(dsn: str, schema: str) -> Callable[[], Any]:
    from memlab.memory.stores.pg import PgVectorStore

    return lambda: PgVectorStore(dsn, schema=schema)


def _drop(dsn: str, schema: str) -> None:
    with contextlib.suppress(Exception):
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run(
    settings: Settings, folder: Path, report: Callable[[Row], None] = lambda r: None
) -> list[Row]:
    """Run the selected checks in ``folder``; ``report`` sees each row as it is made."""
    rows: list[Row] = []

    def add(new: list[Row]) -> None:
        for row in new:
            rows.append(row)
            report(row)

    checks = settings.checks
    with contextlib.ExitStack() as stack:
        dsn = None
        if settings.pg and ({"scopes", "badargs"} & set(checks)):
            dsn = stack.enter_context(postgres(settings.dsn, folder))
        if "injection" in checks:
            from memlab.reliability import injection

            t0 = time.perf_counter()
            result = injection.run()
            add(
                [
                    Row(
                        "prompt injection: memory block breakouts",
                        "-",
                        result.attempts,
                        result.attempts,
                        len(result.breakouts),
                        "; ".join(f"{n}: {why}" for n, why in result.breakouts[:3])
                        or "every attempt stays inside its item",
                        time.perf_counter() - t0,
                    )
                ]
            )
        if "badargs" in checks:
            from memlab.reliability import badargs

            t0 = time.perf_counter()
            outcomes = badargs.run(dsn=dsn, folder=folder)
            failed = [o for o in outcomes if not o.ok]
            stores = sorted({o.case.split(".")[0] for o in outcomes if "." in o.case.split("(")[0]})
            add(
                [
                    Row(
                        "bad arguments to the public API",
                        "+".join(
                            s for s in stores if s in ("memory", "jsonl", "sqlite", "pgvector")
                        ),
                        len(outcomes),
                        len(outcomes),
                        len(failed),
                        "; ".join(f"{o.case}: {o.what}" for o in failed[:3])
                        or "every call refused with a MemlabError naming the argument, nothing changed",
                        time.perf_counter() - t0,
                    )
                ]
            )
        if "laundering" in checks:
            from memlab.reliability import laundering

            add(laundering.run(settings.laundering_sessions))
        if "corrupt" in checks:
            from memlab.reliability import corrupt

            add(corrupt.run(folder))
        if "diskfull" in checks:
            from memlab.reliability import diskfull

            add(diskfull.run(folder, trials=settings.diskfull_trials))
        if "scopes" in checks:
            from memlab.memory import InMemoryStore, JsonlStore, SqliteStore
            from memlab.reliability import scopes

            factories: dict[str, Callable[[], Any]] = {
                "memory": InMemoryStore,
                "jsonl": lambda: JsonlStore(folder / "scopes.jsonl"),
                "sqlite": lambda: SqliteStore(folder / "scopes.db"),
            }
            schema = f"memlab_reliability_{os.getpid()}"
            if dsn is not None:
                factories["pgvector"] = _pg_factory(dsn, schema)
            try:
                add(scopes.run(factories, n=settings.scopes))
            finally:
                if dsn is not None:
                    _drop(dsn, schema)
        if "concurrency" in checks:
            from memlab.reliability import concurrency

            add(concurrency.run(folder, per_writer=settings.concurrency_records // 2))
        if "kill" in checks:
            from memlab.reliability import kill

            add(kill.run(folder, trials=settings.kill_trials))
    return rows


def table(rows: list[Row]) -> str:
    """The rows as an aligned text table."""
    head = ("check", "store", "trials", "operations", "failures", "seconds")
    body = [
        (
            r.check,
            r.store,
            f"{r.trials:,}",
            f"{r.operations:,}",
            f"{r.failures:,}" + ("" if r.guarded else " (limit)"),
            f"{r.seconds:.0f}",
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for values in body:
        lines.append(
            "  ".join(
                str(v).rjust(w) if i >= 2 else str(v).ljust(w)
                for i, (v, w) in enumerate(zip(values, widths, strict=True))
            )
        )
    return "\n".join(lines)


def markdown(summary: Path) -> str:
    """The summary CSV as the Markdown table in docs/reliability.md."""
    with open(summary, newline="") as f:
        rows = list(csv.DictReader(f))
    out = [
        "| check | store | trials | operations | failures | what was counted |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        failures = f"{int(r['failures']):,}" + ("" if r["target"] == "0" else " (limit)")
        detail = r["detail"].replace("|", "\\|")
        out.append(
            f"| {r['check']} | {r['store']} | {int(r['trials']):,} | {int(r['operations']):,} "
            f"| {failures} | {detail} |"
        )
    return "\n".join(out)


def write_csv(rows: list[Row], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for r in rows:
            d = asdict(r)
            d["target"] = "0" if d.pop("guarded") else "measured"
            d["seconds"] = round(r.seconds, 1)
            writer.writerow(d)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memlab.reliability",
        description="memlab's reliability suite: kill trials, a corruption matrix, concurrent "
        "writers with a compactor, adversarial scopes, prompt injection, bad arguments, a full "
        "disk and laundering through replies. Prints a table; writes summary.csv.",
    )
    parser.add_argument("--quick", action="store_true", help="a short run of every check (~1 min)")
    parser.add_argument("--out", default="results/reliability", help="folder for summary.csv")
    parser.add_argument(
        "--only", default=",".join(CHECKS), help=f"comma-separated checks, of: {','.join(CHECKS)}"
    )
    parser.add_argument("--dsn", default=os.environ.get("MEMLAB_PG_DSN"), help="PostgreSQL to use")
    parser.add_argument("--no-pg", dest="pg", action="store_false", help="skip PostgreSQL")
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None)
    parser.add_argument(
        "--markdown",
        metavar="CSV",
        help="print a summary.csv as the Markdown table of docs/reliability.md, run nothing",
    )
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(Path(args.markdown)))
        return 0
    checks = tuple(c.strip() for c in args.only.split(",") if c.strip())
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        print(
            f"memlab reliability: error: unknown check(s) {unknown}; use {list(CHECKS)}",
            file=sys.stderr,
        )
        return 2
    common = {"pg": args.pg, "dsn": args.dsn, "checks": checks, "progress": args.progress}
    settings = Settings.quick(**common) if args.quick else Settings(**common)
    tty = sys.stderr.isatty() if settings.progress is None else settings.progress
    folder = Path(tempfile.mkdtemp(prefix="memlab-reliability-"))
    t0 = time.perf_counter()

    def report(row: Row) -> None:
        if tty:
            mark = "ok" if row.failures == 0 or not row.guarded else "FAILED"
            print(f"  {mark:6} {row.check} [{row.store}] {row.seconds:.0f} s", file=sys.stderr)

    try:
        rows = run(settings, folder, report)
    except MemlabError as exc:
        print(f"memlab reliability: error: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("memlab reliability: interrupted", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = Path(args.out) / "summary.csv"
    write_csv(rows, out)
    print(table(rows))
    failed = [r for r in rows if r.guarded and r.failures]
    print(
        f"\n{len(rows)} checks in {time.perf_counter() - t0:.0f} s; "
        + (f"{len(failed)} FAILED" if failed else "all at 0 failures")
        + f"; wrote {out}"
    )
    for r in failed:
        print(f"FAILED {r.check} [{r.store}]: {r.detail}")
    return 1 if failed else 0
