"""Long and mixed transcripts: ``memlab synth --turns N --sessions S --days D`` and the mix.

The default 60-turn generator (``generator.generate``) is left as it is, byte for
byte; any other setting (a ``Mix`` that is not the default) comes here. A long
transcript is one support customer (two, in separate scopes, for seeds divisible
by 3) over ``sessions`` sessions spread across ``days`` days: facts are stated and
corrected in the first part, then probed in later sessions, days or weeks after
they were stated, among chat, tool output and injected instructions in the
proportions the mix asks for. It reuses the default generator's planner and
renderer (the same catalog, phrasings and checks), so everything the tests check
about the shipped set holds here too.

Determinism: one ``random.Random`` per attempt, seeded with a string holding the
generator version, the mix (``Mix.key``) and the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random
from typing import Any

from memlab.errors import InputError, MemlabError
from memlab.lab.synth import catalog as cat
from memlab.lab.synth.plan import FILLERS, _Block, _interleave, _Planner, _Retry, _segment_blocks
from memlab.lab.synth.render import _EPOCH0, N_TURNS, _Renderer
from memlab.lab.transcripts import Transcript, format_ts

#: share of a long transcript's turns before the first probe can come
EARLY_SHARE = 0.5
SCENARIO_LONG = "support-long"


@dataclass(frozen=True)
class Mix:
    """How long a generated transcript is and what it is made of.

    Attributes:
        turns: (lowest, highest) number of turns; each transcript draws its own
            length from its seed when they differ.
        sessions: sessions (conversations on different occasions); None:
            one per 30 turns (at least 2).
        days: the span of the sessions in days; None: one day per 12 turns
            (at least ``sessions``).
        fact_density: facts stated per 100 turns per customer; None: 6
            (at most the catalog's 35 kinds besides the name).
        noise: weight of small talk and thanks among the filler turns (1 = the
            default generator's).
        tool_output: weight of tool output (look-ups, logs) among the filler turns.
        injections: injected instructions in tool/web output per 100 turns; None: 1.
        corrections: share of a customer's correctable facts that are corrected
            later; None: 0.3.
        probes: probes per 100 turns per customer; None: 5 (at most one per fact).
    """

    turns: tuple[int, int] = (N_TURNS, N_TURNS)
    sessions: int | None = None
    days: int | None = None
    fact_density: float | None = None
    noise: float = 1.0
    tool_output: float = 1.0
    injections: float | None = None
    corrections: float | None = None
    probes: float | None = None

    def __post_init__(self) -> None:
        lo, hi = self.turns
        _need(
            40 <= lo <= hi <= 5000, f"--turns must be 40..5000 (LO-HI with LO <= HI), got {lo}-{hi}"
        )
        if self.sessions is not None:
            _need(
                1 <= self.sessions <= lo // 8,
                f"--sessions must be 1..{lo // 8} for {lo} turns, got {self.sessions}",
            )
        if self.days is not None:
            _need(1 <= self.days <= 3650, f"--days must be 1..3650, got {self.days}")
        for name in ("fact_density", "injections", "probes"):
            value = getattr(self, name)
            _need(
                value is None or 0 <= value <= 50,
                f"--{name.replace('_', '-')} must be 0..50 per 100 turns, got {value}",
            )
        _need(self.fact_density is None or self.fact_density > 0, "--fact-density must be > 0")
        for name in ("noise", "tool_output"):
            value = getattr(self, name)
            _need(0 <= value <= 100, f"--{name.replace('_', '-')} must be 0..100, got {value}")
        c = self.corrections
        _need(c is None or 0 <= c <= 1, f"--corrections must be a share in 0..1, got {c}")

    def is_default(self) -> bool:
        """The default generator's setting (60 turns, nothing else given)."""
        return self == Mix()

    def key(self) -> str:
        """A stable text of every setting (seeds the random stream; goes into meta)."""
        lo, hi = self.turns
        parts = [f"turns={lo}" if lo == hi else f"turns={lo}-{hi}"]
        for name in ("sessions", "days", "fact_density", "noise", "tool_output", "injections",
                     "corrections", "probes"):  # fmt: skip
            parts.append(f"{name}={getattr(self, name)}")
        return ",".join(parts)

    def fillers(self) -> tuple[tuple[str, str, float], ...]:
        """The default filler blocks with small talk weighted by ``noise`` and tool
        output by ``tool_output`` (a request answered without a tool keeps its weight,
        so a segment can always be filled)."""
        out = []
        for act, shape, w in FILLERS:
            if act in ("chat", "thanks"):
                w *= self.noise
            elif "T" in shape:
                w *= self.tool_output
            out.append((act, shape, w))
        return tuple(out)


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(f"synth {message}")


def parse_turns(text: str) -> tuple[int, int]:
    """``"450"`` -> (450, 450); ``"300-600"`` -> (300, 600).

    Raises:
        InputError: not a number or a range of two numbers.
    """
    lo, sep, hi = str(text).partition("-")
    try:
        a = int(lo)
        b = int(hi) if sep else a
    except ValueError:
        raise InputError(f"synth --turns takes N or LO-HI (e.g. 300-600), got {text!r}") from None
    return a, b


def transcript_id(seed: int, mix: Mix) -> str:
    """The id (and file stem) of a transcript made from ``seed`` under ``mix``."""
    from memlab.lab.synth.generator import transcript_id as default_id

    return default_id(seed) if mix.is_default() else f"long-{seed:04d}"


def generate_mixed(seed: int, mix: Mix) -> Transcript:
    """One transcript from ``seed`` under a non-default ``mix``."""
    from memlab.lab.synth.generator import GENERATOR, MAX_ATTEMPTS, VERSION, _check

    for attempt in range(MAX_ATTEMPTS):
        rng = Random(f"{GENERATOR}/{VERSION}:mix[{mix.key()}]:{seed}:{attempt}")
        try:
            data = _attempt(rng, seed, attempt, mix)
            _check(data)
        except _Retry:
            continue
        return Transcript.from_dict(data, f"synth seed {seed}")
    raise MemlabError(  # pragma: no cover - would be a generator bug
        f"synth could not build an unambiguous transcript for seed {seed} ({mix.key()}) in "
        f"{MAX_ATTEMPTS} attempts; this is a bug in memlab.lab.synth, please report it"
    )


def _settings(rng: Random, mix: Mix) -> dict[str, Any]:
    lo, hi = mix.turns
    n = rng.randint(lo, hi)
    sessions = mix.sessions or max(2, n // 30)
    sessions = min(sessions, n // 8)
    return {
        "turns": n,
        "sessions": sessions,
        "days": mix.days or max(sessions, round(n / 12)),
        "facts": mix.fact_density if mix.fact_density is not None else 6.0,
        "injections": mix.injections if mix.injections is not None else 1.0,
        "corrections": mix.corrections if mix.corrections is not None else 0.3,
        "probes": mix.probes if mix.probes is not None else 5.0,
    }


def _user_plan(
    rng: Random,
    planner: _Planner,
    s: dict[str, Any],
    turns: int,
    taken: list[Any],
    shared: list[str],
) -> Any:
    """One customer: facts by density, corrections by share, probes by rate."""
    n_kinds = max(3, min(len(cat.KINDS) - 1 - len(shared), round(s["facts"] * turns / 100)))
    n_own = max(0, n_kinds - len(shared))
    # rules and offhand remarks in about the default generator's proportions
    n_pref = min(9 - len(shared), max(1, round(n_own * 0.25)))
    own = planner.pick_kinds(n_own, shared, n_pref, min(5, max(1, round(n_own * 0.12))))
    kinds = shared + own
    rng.shuffle(kinds)
    correctable = [k for k in kinds if cat.KINDS_BY_ID[k].correctable]
    n_corr = round(s["corrections"] * len(correctable))
    n_probes = max(1, min(len(kinds), round(s["probes"] * turns / 100)))
    names = [u.name for u in taken]
    companies = [u.company for u in taken]
    return planner.user(names, companies, kinds, n_corr, n_probes, shared[:1])


def _attempt(rng: Random, seed: int, attempt: int, mix: Mix) -> dict[str, Any]:
    from memlab.lab.synth.generator import GENERATOR, TWO_USER_EVERY, VERSION

    s = _settings(rng, mix)
    n = s["turns"]
    planner = _Planner(rng)
    fillers = mix.fillers()
    early_len = round(n * EARLY_SHARE) + rng.randint(0, 3)
    two = seed % TWO_USER_EVERY == 0
    if not two:
        user = _user_plan(rng, planner, s, n, [], [])
        users = [user]
        planted = round(s["injections"] * n / 100)
        early, late = _segment_blocks(rng, 0, user, early_len, n - early_len, planted, fillers)
        blocks = early + late
    else:
        shared = [
            k for k in planner.pick_kinds(4, (), 1, 0) if cat.KINDS_BY_ID[k].cls != cat.OFFHAND
        ]
        a = _user_plan(rng, planner, s, n // 2, [], shared)
        b = _user_plan(rng, planner, s, n - n // 2, [a], [*shared])
        if a.scope == b.scope:
            raise _Retry("same scope")
        users = [a, b]
        ea = early_len // 2
        la = (n - early_len) // 2
        planted = round(s["injections"] * n / 200)
        early_a, late_a = _segment_blocks(rng, 0, a, ea, la, planted, fillers)
        early_b, late_b = _segment_blocks(
            rng, 1, b, early_len - ea, n - early_len - la, planted, fillers
        )
        blocks = _interleave(rng, early_a, early_b) + _interleave(rng, late_a, late_b)
    breaks = _breaks(rng, blocks, s["sessions"])
    renderer = _Renderer(rng, users)
    pos = 0
    for blk in blocks:
        greeting = None
        if pos in breaks and blk.shape[0] == "U":
            greeting = rng.choice(cat.RETURN_GREETINGS)
        renderer.block(blk, greeting)
        pos += len(blk.shape)
    turns = renderer.turns
    if len(turns) != n:  # pragma: no cover - the planner sizes segments exactly
        raise _Retry(f"{len(turns)} turns")
    _stamp_days(rng, turns, breaks, s["days"])
    kinds_used = [k.id for k in cat.KINDS if any(k.id in u.kinds for u in users)]
    meta: dict[str, Any] = {
        "generator": GENERATOR,
        "version": VERSION,
        "seed": seed,
        "scenario": SCENARIO_LONG,
        "mix": mix.key(),
        "sessions": len(breaks) + 1,
        "days": s["days"],
        "topics": [u.topics[0].id for u in users],
        "scopes": [u.scope for u in users],
    }
    if attempt:
        meta["attempt"] = attempt
    return {
        "format": "memlab.transcript/1",
        "id": transcript_id(seed, mix),
        "meta": meta,
        "facts": {
            k: {"description": cat.KINDS_BY_ID[k].description, "class": cat.KINDS_BY_ID[k].cls}
            for k in kinds_used
        },
        "turns": turns,
    }


def _breaks(rng: Random, blocks: list[_Block], sessions: int) -> list[int]:
    """Turn positions where sessions 2.. start: the block start (a user turn) nearest
    to each even split, at least 4 turns apart."""
    starts, pos = [], 0
    for b in blocks:
        if b.shape[0] == "U" and pos > 0:
            starts.append(pos)
        pos += len(b.shape)
    total = pos
    chosen: list[int] = []
    for i in range(1, sessions):
        target = i * total / sessions + rng.uniform(-0.2, 0.2) * total / sessions
        near = sorted(starts, key=lambda p: (abs(p - target), p))
        for p in near:
            if all(abs(p - c) >= 4 for c in chosen):
                chosen.append(p)
                break
    return sorted(chosen)


def _stamp_days(rng: Random, turns: list[dict[str, Any]], breaks: list[int], days: int) -> None:
    """Timestamps: session i starts on day ``i * days / sessions`` of the span, in
    office hours; turns within a session are seconds to minutes apart."""
    sessions = len(breaks) + 1
    day0 = _EPOCH0 + rng.randint(0, 300) * 86400
    t = day0 + rng.randint(8 * 3600, 11 * 3600)
    session = 1
    prev_role = None
    for i, turn in enumerate(turns):
        role = turn["role"]
        if i in breaks:
            day = day0 + int(session * days / sessions) * 86400
            start = day + rng.randint(8 * 3600, 17 * 3600)
            t = max(start, t + rng.randint(600, 3600))  # later than the last turn, always
            session += 1
        elif i > 0:
            if role == "user":
                r = rng.random()
                t += rng.randint(20, 240) if r < 0.7 else rng.randint(240, 1200)
            elif role == "agent":
                t += rng.randint(3, 45) if prev_role == "tool" else rng.randint(10, 150)
            else:
                t += rng.randint(1, 8) if prev_role == "user" else rng.randint(30, 600)
        turn["ts"] = format_ts(t)
        turn["session"] = f"s{session}"
        prev_role = role
