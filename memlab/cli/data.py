"""Commands that make or prepare data: synth, convert and embed."""

from __future__ import annotations

from pathlib import Path

from memlab.cli.common import INTERRUPTED, OK, ArgumentParser, _no_progress, echo, fail
from memlab.cli.hydra_apps import _app_args, _wants_help
from memlab.errors import InputError


# -- synth and convert ----------------------------------------------------------------------
def synth(args: list[str]) -> int:
    """``memlab synth --n N --seed S --out DIR [--turns N|LO-HI] [mix options] [--force]``."""
    from memlab.lab import synth as generator
    from memlab.lab.synth.updates import PHRASINGS

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
        choices=list(PHRASINGS),
        default="all",
        help="which set of update phrasings corrections and false corrections come "
        "from: all (default, the shipped set: dev and heldout), dev or heldout (the two "
        "halves rules were developed on), fresh (written later, developed on since "
        "2026-12-02), blind (never read; measured in aggregate since round five) or "
        "sealed (for reporting figures on phrasings no rule was developed on)",
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
    from memlab.lab.transcripts import file_names, iter_files, save_all

    files = [name for name, d in DATASETS.items() if d.reads == "file"]
    parser = ArgumentParser(prog="memlab convert", description=convert.__doc__)
    parser.add_argument("dataset", choices=files, help="the benchmark the file comes from")
    parser.add_argument("file", type=Path, help="the upstream JSON file (e.g. locomo10.json)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--limit", type=int, default=None, help="only the first N transcripts")
    parser.add_argument("--ids", nargs="+", default=None, help="only these transcript ids")
    parser.add_argument(
        "--force",
        action="store_true",
        help="write into a folder that holds other *.json files (a run replays them too)",
    )
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
    if ns.out.is_dir() and not ns.force:
        # memlab run transcripts=dir replays every *.json of the folder: files of an
        # earlier convert (another dataset, another --limit) would join this one's.
        ours = set(file_names(transcripts))
        others = sorted(p.name for p in iter_files(ns.out) if p.name not in ours)
        if others:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if others[3:] else "")
            raise InputError(
                f"--out {ns.out} already holds {len(others)} other *.json file(s) ({shown}), "
                "which memlab run transcripts=dir would replay with these; choose an "
                "empty folder, or pass --force to write beside them"
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

  --workers N   embedding processes, each with its own model and cores/N threads (default 1,
                at most 64; no more than there are chunks)
  --chunk N     texts per chunk and cache transaction (default 256)
  --no-progress no progress bar (it appears only on a terminal anyway)

example: memlab embed transcripts=longmemeval transcripts.path=longmemeval_s.json embedder=minilm"""


def embed(args: list[str]) -> int:
    """``memlab embed [overrides] [--workers N] [--chunk N]``: pre-warm the cache."""
    if _wants_help(args):
        echo(EMBED_HELP)
        return OK
    from memlab.lab.compose import compose
    from memlab.lab.config import validate
    from memlab.lab.embed import DEFAULT_CHUNK, MAX_WORKERS, dataset_texts, prewarm
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
            if flag == "--workers" and numbers[flag] > MAX_WORKERS:
                raise InputError(
                    f"embed: --workers must be at most {MAX_WORKERS} (each loads its own "
                    f"model), got {numbers[flag]}"
                )
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
