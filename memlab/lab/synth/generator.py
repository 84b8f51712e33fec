"""``generate(seed)``: one transcript; ``write``: many, as files; ``stats``: figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from random import Random
from typing import Any

from memlab.errors import InputError, MemlabError
from memlab.lab.synth import catalog as cat
from memlab.lab.synth.mix import Mix, generate_mixed
from memlab.lab.synth.mix import transcript_id as mixed_id
from memlab.lab.synth.plan import _interleave, _Planner, _Retry, _segment_blocks
from memlab.lab.synth.render import N_TURNS, _Renderer, _sessions, _stamp
from memlab.lab.synth.updates import PHRASINGS
from memlab.lab.synth.words import PARAPHRASE_MAX_OVERLAP, contains_value, normalize, word_overlap
from memlab.lab.transcripts import Transcript, dumps, save

GENERATOR = "memlab.synth"
VERSION = 2
SCENARIO = "support"
SCENARIO_TWO_USERS = "support-two-users"
#: probes go in the last third: turn index >= LATE_START
LATE_START = N_TURNS - N_TURNS // 3
#: the sliding window probes are meant to reach beyond (turns of the probe's scope)
WINDOW = 10
#: seeds divisible by this give two-user transcripts (a third of any seed range)
TWO_USER_EVERY = 3
MAX_ATTEMPTS = 25


def transcript_id(seed: int) -> str:
    """The id (and file stem) of the transcript made from ``seed``."""
    return f"support-{seed:04d}"


def generate(seed: int, mix: Mix | None = None, *, phrasings: str = "all") -> Transcript:
    """Generate one transcript from ``seed`` (same seed, same bytes, on any machine).

    ``mix`` (length, sessions, days, fact density, noise, tool output,
    injections, corrections): anything but the default comes from
    ``memlab.lab.synth.mix``; the default is the 60-turn support transcript.

    ``phrasings`` picks the half of the update phrasings (``memlab.lab.synth.updates``)
    that corrections and false corrections of the 60-turn transcript are drawn
    from: ``all`` (the shipped transcripts), ``dev`` (for developing rules; also
    the catalog's own correction templates), ``heldout`` (the held-out half, looked
    at since), ``fresh`` (written later; looked at since 2 December 2026),
    ``blind`` (its failures never read; measured in aggregate since round five)
    or ``sealed`` (for reporting figures: phrasings no rule was developed on).
    The later sets, like ``heldout``, leave out the catalog's correction templates.
    A non-default ``mix`` takes ``all``.

    Raises:
        InputError: ``seed`` is not a non-negative integer, or unknown ``phrasings``.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"synth seed must be a non-negative integer, got {seed!r}")
    if phrasings not in PHRASINGS:
        raise InputError(f"synth phrasings must be one of {list(PHRASINGS)}, got {phrasings!r}")
    if mix is not None and not mix.is_default():
        if phrasings != "all":
            sets = "|".join(p for p in PHRASINGS if p != "all")
            raise InputError(
                f"synth --phrasings {sets} applies to the 60-turn transcripts only; "
                "drop the length and mix options, or --phrasings"
            )
        return generate_mixed(seed, mix)
    for attempt in range(MAX_ATTEMPTS):
        salt = "" if phrasings == "all" else f"/{phrasings}"
        rng = Random(f"{GENERATOR}/{VERSION}{salt}:{seed}:{attempt}")
        try:
            data = _attempt(rng, seed, attempt, phrasings)
            _check(data)
        except _Retry:
            continue
        return Transcript.from_dict(data, f"synth seed {seed}")
    raise MemlabError(  # pragma: no cover - would be a generator bug
        f"synth could not build an unambiguous transcript for seed {seed} in "
        f"{MAX_ATTEMPTS} attempts; this is a bug in memlab.lab.synth, please report it"
    )


def _attempt(rng: Random, seed: int, attempt: int, phrasings: str = "all") -> dict[str, Any]:
    planner = _Planner(rng, phrasings)
    two = seed % TWO_USER_EVERY == 0
    early_len = LATE_START + rng.randint(0, 3)
    late_len = N_TURNS - early_len
    if not two:
        n = rng.randint(8, 11)
        kinds = planner.pick_kinds(n, (), rng.randint(2, 3), rng.randint(1, 2))
        user = planner.user(
            [], [], kinds, rng.randint(2, 3), rng.randint(4, 6), n_false=1 + (rng.random() < 0.3)
        )
        users = [user]
        early, late = _segment_blocks(rng, 0, user, early_len, late_len, rng.choice((0, 1, 1, 2)))
        blocks = early + late
    else:
        # two customers of the same support desk, talking about the same kinds of
        # things with different values: a scope leak would surface a wrong value
        shared_n = rng.randint(3, 4)
        shared = planner.pick_kinds(shared_n, (), rng.randint(1, 2), 0)
        shared = [k for k in shared if cat.KINDS_BY_ID[k].cls != cat.OFFHAND]
        n_a, n_b = rng.randint(6, 8), rng.randint(5, 7)
        n_b = max(n_b, 8 - n_a + len(shared))
        own_a = planner.pick_kinds(n_a - len(shared), shared, 1, 1)
        own_b = planner.pick_kinds(n_b - len(shared), shared + own_a, rng.randint(0, 1), 1)
        kinds_a = shared + own_a
        kinds_b = shared + own_b
        rng.shuffle(kinds_a)
        rng.shuffle(kinds_b)
        n_corr_a = rng.randint(1, 2)
        must_a = [rng.choice(shared)]
        a = planner.user([], [], kinds_a, n_corr_a, 3, must_a)
        must_b = [rng.choice(shared)]
        b = planner.user(
            [a.name], [a.company], kinds_b, max(1, 2 - len(a.corrected)) + rng.randint(0, 1),
            3, must_b,
        )  # fmt: skip
        if a.scope == b.scope:
            raise _Retry("same scope")
        users = [a, b]
        ea = early_len // 2 + rng.randint(-2, 2)
        la = late_len // 2 + rng.randint(-1, 1)
        early_a, late_a = _segment_blocks(rng, 0, a, ea, la, rng.choice((0, 1)))
        early_b, late_b = _segment_blocks(
            rng, 1, b, early_len - ea, late_len - la, rng.choice((0, 1, 1))
        )
        blocks = _interleave(rng, early_a, early_b)
        blocks += _interleave(rng, *((late_a, late_b) if rng.random() < 0.5 else (late_b, late_a)))
    if not any(b.act == "planted" for b in blocks) and rng.random() < 0.75:
        # most transcripts carry at least one injected instruction
        for blk in blocks:
            if blk.act == "request" and "T" in blk.shape:
                blk.act = "planted"
                break

    breaks = _sessions(rng, blocks)
    renderer = _Renderer(rng, users, phrasings)
    pos = 0
    for blk in blocks:
        greeting = None
        if pos in breaks and blk.shape[0] == "U":
            greeting = rng.choice(cat.RETURN_GREETINGS)
        renderer.block(blk, greeting)
        pos += len(blk.shape)
    turns = renderer.turns
    if len(turns) != N_TURNS:  # pragma: no cover - the planner sizes segments exactly
        raise _Retry(f"{len(turns)} turns")
    _stamp(rng, turns, breaks)

    kinds_used = [k.id for k in cat.KINDS if any(k.id in u.kinds for u in users)]
    meta: dict[str, Any] = {
        "generator": GENERATOR,
        "version": VERSION,
        "seed": seed,
        "scenario": SCENARIO_TWO_USERS if two else SCENARIO,
        "topics": [u.topics[0].id for u in users],
        "scopes": [u.scope for u in users],
    }
    if phrasings != "all":
        meta["phrasings"] = phrasings
    if attempt:
        meta["attempt"] = attempt
    return {
        "format": "memlab.transcript/1",
        "id": transcript_id(seed),
        "meta": meta,
        "facts": {
            k: {"description": cat.KINDS_BY_ID[k].description, "class": cat.KINDS_BY_ID[k].cls}
            for k in kinds_used
        },
        "turns": turns,
    }


def _check(data: dict[str, Any]) -> None:
    """Reject an attempt whose values could be matched where they are not stated."""
    values: list[tuple[str, str]] = []
    for turn in data["turns"]:
        for m in turn.get("mentions", []):
            if (m["fact"], m["value"]) not in values:
                values.append((m["fact"], m["value"]))
    for turn in data["turns"]:
        text = turn["text"]
        stated = {m["fact"] for m in turn.get("mentions", [])}
        for m in turn.get("mentions", []):
            if normalize(m["value"]) not in normalize(text):
                raise _Retry(f"{turn['id']}: mention not verbatim")
        for fact, value in values:
            if contains_value(text, value) and fact not in stated:
                raise _Retry(f"{turn['id']}: {value!r} appears without a mention")


@dataclass
class WriteResult:
    """What ``write`` did: paths written, left unchanged (same bytes), replaced."""

    folder: Path
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    replaced: list[Path] = field(default_factory=list)


def write(
    out: str | Path,
    n: int,
    seed: int,
    *,
    force: bool = False,
    progress: bool | None = False,
    mix: Mix | None = None,
    phrasings: str = "all",
    scenario: str = SCENARIO,
) -> WriteResult:
    """Generate ``n`` transcripts from seeds ``seed .. seed+n-1`` into ``out``
    (``phrasings``: see ``generate``).

    Files are named ``support-<seed>.json`` (``long-<seed>.json`` under a
    non-default ``mix``; ``sessions-<seed>.json`` for ``scenario="sessions"``,
    see ``memlab.lab.synth.sessions``, which takes no mix). A file that already exists with the
    same bytes is left alone; one with different content is an error unless
    ``force`` (checked for every file before anything is written).

    Raises:
        InputError: bad ``n`` or ``seed``, ``out`` is not a folder, or an existing
            file differs and ``force`` is false.
        OutputError: a file cannot be written.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"synth --n must be a positive integer, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"synth --seed must be a non-negative integer, got {seed!r}")
    if phrasings not in PHRASINGS:
        raise InputError(f"synth --phrasings must be one of {list(PHRASINGS)}, got {phrasings!r}")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"synth --out {folder} exists and is not a folder; choose a folder")
    result = WriteResult(folder)
    seeds = range(seed, seed + n)
    conflicts: list[Path] = []
    name = transcript_id if mix is None else partial(mixed_id, mix=mix)
    make: Callable[[int], Transcript] = partial(generate, mix=mix, phrasings=phrasings)
    if scenario == "sessions":
        from memlab.lab.synth import sessions

        if (mix is not None and not mix.is_default()) or phrasings != "all":
            raise InputError(
                "synth --scenario sessions takes no length, mix or --phrasings options"
            )
        name, make = sessions.transcript_id, sessions.generate
    elif scenario != SCENARIO:
        raise InputError(f"synth --scenario must be support or sessions, got {scenario!r}")
    for s in seeds:
        p = folder / f"{name(s)}.json"
        if p.exists() or p.is_symlink():
            if not p.is_file():
                raise InputError(f"{p} exists and is not a file; remove it or choose another --out")
            try:
                same = p.read_bytes() == dumps(make(s)).encode("utf-8")
            except OSError as exc:
                raise InputError(f"cannot read {p}: {exc.strerror}") from None
            (result.unchanged if same else conflicts).append(p)
    if conflicts and not force:
        shown = ", ".join(str(p) for p in conflicts[:5])
        more = f" and {len(conflicts) - 5} more" if len(conflicts) > 5 else ""
        raise InputError(
            f"{len(conflicts)} file(s) in {folder} already exist with different content "
            f"({shown}{more}); pass --force to replace them, or choose another --out"
        )
    from memlab.progress import bar

    for s in bar(seeds, progress=progress, desc="synth", unit="transcript"):
        p = folder / f"{name(s)}.json"
        if p in result.unchanged:
            continue
        save(make(s), p)  # OutputError when the folder cannot be written
        (result.replaced if p in conflicts else result.written).append(p)
    return result


def stats(transcripts: Sequence[Transcript]) -> dict[str, Any]:
    """Figures about a set of transcripts (for the README and reports).

    Returns a dict with per-transcript lists (``facts``, ``corrections``,
    ``probes``) and totals: probes beyond the window, paraphrased probes, their
    mean overlap, two-scope transcripts, planted instructions.
    """
    facts, corrections, probes, beyond, para, overlaps, para_overlaps = [], [], [], 0, 0, [], []
    planted, two_scope, corrected_probes = 0, 0, 0
    for t in transcripts:
        facts.append(len(t.facts))
        n_corr = 0
        for scope in t.scopes:
            state = t.fact_state(len(t.turns), scope)
            n_corr += sum(1 for s in state.values() if s.stale)
        corrections.append(n_corr)
        probes.append(len(t.probes))
        two_scope += len(t.scopes) > 1
        planted += sum(1 for x in t.turns if x.meta.get("planted"))
        for i, turn in enumerate(t.turns):
            if turn.probe is None:
                continue
            ev = " ".join(t.turns[t.index[e]].text for e in turn.probe.evidence)
            o = word_overlap(turn.text, ev)
            overlaps.append(o)
            if o <= PARAPHRASE_MAX_OVERLAP:
                para += 1
                para_overlaps.append(o)
            scope_turns = [j for j, x in enumerate(t.turns[:i]) if x.scope == turn.scope]
            last = max(t.index[e] for e in turn.probe.evidence)
            if len(scope_turns) - scope_turns.index(last) > WINDOW:
                beyond += 1
            corrected_probes += turn.probe.category == "corrected"
    n_probes = sum(probes)

    def mean(xs: Sequence[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    return {
        "transcripts": len(transcripts),
        "facts": facts,
        "corrections": corrections,
        "probes": probes,
        "probes_total": n_probes,
        "probes_beyond_window": beyond,
        "probes_on_corrected_facts": corrected_probes,
        "paraphrased": para,
        "paraphrased_share": para / n_probes if n_probes else 0.0,
        "mean_overlap": mean(overlaps),
        "mean_overlap_paraphrased": mean(para_overlaps),
        "two_scope": two_scope,
        "planted": planted,
        "transcripts_with_planted": sum(
            1 for t in transcripts if any(x.meta.get("planted") for x in t.turns)
        ),
    }
