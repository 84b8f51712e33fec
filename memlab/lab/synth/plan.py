"""Planning a transcript: users, their facts and corrections, and blocks of turns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from random import Random
from typing import Any

from memlab.lab.synth import catalog as cat
from memlab.lab.synth import updates as upd
from memlab.lab.synth.words import _clash


@dataclass(frozen=True)
class _Style:
    lower: bool
    drop_period: bool
    leads: bool


@dataclass
class _User:
    scope: str
    name: str
    company: cat.Company
    topics: tuple[cat.Topic, cat.Topic]  # the problem that brought them in, then another
    style: _Style
    kinds: list[str]
    values: dict[str, list[str]]  # kind -> [initial, then each update's value]
    corrected: list[str]
    probed: list[str]
    late_stated: list[str]
    # kind -> the style of each update (upd.STYLES; a revert's value is the
    # initial one again)
    steps: dict[str, list[str]] = field(default_factory=dict)
    # kind -> (false-correction kind, the other value it names)
    false: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class _Block:
    user: int
    act: str
    shape: str  # one letter per turn: U user, A agent, T tool
    kinds: tuple[str, ...] = ()
    key: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class _Retry(Exception):
    """This attempt produced something ambiguous; try the next attempt's stream."""


def _weighted(rng: Random, items: Sequence[tuple[Any, float]]) -> Any:
    total = sum(w for _, w in items)
    x = rng.random() * total
    for item, w in items:
        x -= w
        if x < 0:
            return item
    return items[-1][0]


#: how the first update of a corrected fact is phrased: (style, weight).
#: ``named``: the old value is named; ``cued``: a catalog ``fix_new`` template (a
#: cue word, only the new value); ``implicit``/``unlike``: see ``updates``.
FIRST_STYLES = (("named", 0.3), ("cued", 0.15), ("implicit", 0.25), ("unlike", 0.3))
#: share of corrected facts updated twice: a chain A -> B -> C, or a revert A -> B -> A
P_CHAIN = 0.2
P_REVERT = 0.15


class _Planner:
    def __init__(self, rng: Random, phrasings: str = "all") -> None:
        if phrasings not in upd.PHRASINGS:
            raise ValueError(f"phrasings must be one of {upd.PHRASINGS}, got {phrasings!r}")
        self.rng = rng
        self.phrasings = phrasings
        self.used: dict[str, list[str]] = {}  # kind -> values used by anyone
        self.all_values: list[str] = []

    def draw_value(self, kind: cat.FactKind, company: cat.Company) -> str:
        for _ in range(200):
            v = kind.make(self.rng, company) if kind.make else self.rng.choice(kind.values)
            if v in self.used.get(kind.id, []):
                continue
            if any(_clash(v, other) for other in self.all_values):
                continue
            self.used.setdefault(kind.id, []).append(v)
            self.all_values.append(v)
            return v
        raise _Retry(f"no free value for {kind.id}")

    def pick_kinds(self, n: int, exclude: Sequence[str], n_pref: int, n_off: int) -> list[str]:
        rng = self.rng
        n_off = min(n_off, n)
        n_pref = min(n_pref, n - n_off)
        pools = {
            c: [k.id for k in cat.KINDS if k.cls == c and k.id not in exclude] for c in cat.CLASSES
        }
        chosen = rng.sample(pools[cat.PREFERENCE], n_pref) + rng.sample(pools[cat.OFFHAND], n_off)
        chosen += rng.sample(pools[cat.FACT], n - len(chosen))
        rng.shuffle(chosen)
        return chosen

    def user(
        self,
        names_taken: Sequence[str],
        companies_taken: Sequence[cat.Company],
        kinds: list[str],
        n_corr: int,
        n_probes: int,
        must_probe: Sequence[str] = (),
        n_false: int = 1,
    ) -> _User:
        rng = self.rng
        name_kind = cat.KINDS_BY_ID["user_name"]
        name = rng.choice([v for v in name_kind.values if v not in names_taken])
        company = rng.choice([c for c in cat.COMPANIES if c not in companies_taken])
        handle = name.split()[0].lower()
        style = _Style(
            lower=rng.random() < 0.2,
            drop_period=rng.random() < 0.35,
            leads=rng.random() < 0.75,
        )
        values: dict[str, list[str]] = {}
        for k in kinds:
            kind = cat.KINDS_BY_ID[k]
            if k == "user_name":
                if any(_clash(name, o) for o in self.all_values):
                    raise _Retry("name clash")
                self.used.setdefault(k, []).append(name)
                self.all_values.append(name)
                values[k] = [name]
            else:
                values[k] = [self.draw_value(kind, company)]
        correctable = [k for k in kinds if cat.KINDS_BY_ID[k].correctable]
        # offhand corrections are realistic but rare: weight account facts and rules higher
        weighted = [(k, 0.3 if cat.KINDS_BY_ID[k].cls == cat.OFFHAND else 1.0) for k in correctable]
        corrected: list[str] = []
        while len(corrected) < min(n_corr, len(correctable)):
            k = _weighted(rng, [(k, w) for k, w in weighted if k not in corrected])
            corrected.append(k)
        steps: dict[str, list[str]] = {}
        for k in corrected:
            kind = cat.KINDS_BY_ID[k]
            values[k].append(self.draw_value(kind, company))
            steps[k] = [self._style(kind)]
            r = rng.random()
            if r < P_CHAIN:
                values[k].append(self.draw_value(kind, company))
                steps[k].append(self._style(kind))
            elif r < P_CHAIN + P_REVERT:
                values[k].append(values[k][0])
                steps[k].append("revert")
        # probes: at least one corrected fact, the required ones, then a mix of classes
        probed: list[str] = []
        if corrected:
            probed += rng.sample(corrected, rng.randint(1, min(2, len(corrected))))
        for k in must_probe:
            if k not in probed:
                probed.append(k)
        rest = [k for k in kinds if k not in probed]
        rng.shuffle(rest)
        # other corrected facts only when nothing else is left, then offhand remarks last
        rest.sort(key=lambda k: (k in corrected, cat.KINDS_BY_ID[k].cls == cat.OFFHAND))
        if rest and rng.random() < 0.5:
            offhand = [k for k in rest if cat.KINDS_BY_ID[k].cls == cat.OFFHAND]
            if offhand:  # sometimes the one thing needed is an offhand remark
                rest.remove(offhand[0])
                rest.insert(0, offhand[0])
        probed += rest[: max(0, n_probes - len(probed))]
        probed = probed[:n_probes] if len(probed) > n_probes else probed
        first_topic, second_topic = rng.sample(cat.TOPICS, 2)
        unprobed = [k for k in kinds if k not in probed and k not in corrected]
        late_stated = unprobed[:1] if unprobed and rng.random() < 0.4 else []
        # false corrections: sentences that name another value of a probed fact
        # without changing it (the probe then needs the value first stated)
        false: dict[str, tuple[str, str]] = {}
        open_ = [k for k in probed if k not in corrected and k not in late_stated]
        for k in rng.sample(open_, min(len(open_), n_false)):
            kinds_ok = upd.NOUNS[k].false
            false[k] = (rng.choice(kinds_ok), self.draw_value(cat.KINDS_BY_ID[k], company))
        return _User(
            scope=f"{handle}:support",
            name=name,
            company=company,
            topics=(first_topic, second_topic),
            style=style,
            kinds=kinds,
            values=values,
            corrected=corrected,
            probed=probed,
            late_stated=late_stated,
            steps=steps,
            false=false,
        )

    def _style(self, kind: cat.FactKind) -> str:
        """The style of one update of ``kind`` (see FIRST_STYLES); ``cued`` needs the
        catalog's templates, which the held-out and fresh phrasings leave out."""
        options = [
            (s, w)
            for s, w in FIRST_STYLES
            if s != "cued" or (kind.fix_new and self.phrasings not in upd.REPORT_PHRASINGS)
        ]
        style: str = _weighted(self.rng, options)
        return style


def _segment_blocks(
    rng: Random,
    u: int,
    user: _User,
    early_len: int,
    late_len: int,
    n_planted: int,
    fillers: Sequence[tuple[str, str, float]] | None = None,
) -> tuple[list[_Block], list[_Block]]:
    """The blocks of one user's early and late segments, ordered, sized exactly
    (``fillers``: see ``_fit``)."""
    early: list[_Block] = [_Block(u, "intro", rng.choice(("UA", "UTA", "UTA")), key=-1.0)]
    late: list[_Block] = []
    # statements: some messages state two facts at once
    to_state = [k for k in user.kinds if k not in user.late_stated]
    i = 0
    stmt_key: dict[str, float] = {}
    while i < len(to_state):
        n = 2 if i + 1 < len(to_state) and rng.random() < 0.3 else 1
        kinds = tuple(to_state[i : i + n])
        i += n
        needed = any(k in user.probed or k in user.corrected for k in kinds)
        key = rng.uniform(0.0, 0.45) if needed else rng.uniform(0.0, 0.95)
        for k in kinds:
            stmt_key[k] = key
        early.append(_Block(u, "statement", rng.choice(("UA", "UA", "UA", "U")), kinds, key))
    for k in user.corrected:
        lo = max(stmt_key[k] + 0.2, 0.5)
        steps = user.steps[k]
        key = rng.uniform(lo, 0.85 if len(steps) > 1 else 1.0)
        for step, style in enumerate(steps, start=1):
            early.append(_Block(u, "correction", "UA", (k,), key, {"step": step, "style": style}))
            key = rng.uniform(key + 0.02, 1.0)
    for k, (how, _) in user.false.items():
        lo = max(stmt_key[k] + 0.1, 0.3)
        shape = "UTA" if how == "tool" else rng.choice(("UA", "UA", "U"))
        early.append(_Block(u, "false", shape, (k,), rng.uniform(lo, 1.0), {"how": how}))
    for _ in range(rng.randint(1, 2)):
        early.append(
            _Block(u, "request", rng.choice(("UA", "UTA", "UTA")), key=rng.uniform(0.05, 1.0))
        )
    for _ in range(n_planted):
        seg = early if rng.random() < 0.6 else late
        seg.append(_Block(u, "planted", rng.choice(("UTA", "UTA", "T")), key=rng.uniform(0, 0.95)))
    for k in user.late_stated:
        late.append(_Block(u, "statement", "UA", (k,), rng.uniform(0.0, 0.8)))
    for k in user.probed:
        late.append(_Block(u, "probe", "UA", (k,), rng.uniform(0.0, 0.95)))
    if rng.random() < 0.75:
        late.append(_Block(u, "closing", rng.choice(("UA", "U")), key=2.0))
    _fit(rng, u, early, early_len, fillers)
    _fit(rng, u, late, late_len, fillers)
    early.sort(key=lambda b: b.key)
    late.sort(key=lambda b: b.key)
    return early, late


#: how each kind of block can lose optional turns when a segment is over budget
_SMALLER: dict[str, dict[str, str]] = {
    "planted": {"UTA": "T"},
    "request": {"UTTA": "UTA", "UTA": "UA", "UA": "U"},
    "closing": {"UA": "U"},
    "statement": {"UA": "U"},
    "intro": {"UTA": "UA"},
}


#: the blocks that fill a segment: (act, shape, weight)
FILLERS: tuple[tuple[str, str, float], ...] = (
    ("chat", "UA", 3.0), ("chat", "U", 1.0), ("thanks", "UA", 2.0), ("thanks", "U", 0.7),
    ("noise", "T", 2.5), ("request", "UTA", 3.0), ("request", "UA", 1.0),
    ("request", "UTTA", 1.5),
)  # fmt: skip


def _fit(
    rng: Random,
    u: int,
    blocks: list[_Block],
    target: int,
    fillers: Sequence[tuple[str, str, float]] | None = None,
) -> None:
    """Shrink optional turns or add filler blocks (``fillers``, default ``FILLERS``)
    so the blocks hold exactly ``target`` turns."""
    total = sum(len(x.shape) for x in blocks)
    for act in ("planted", "request", "closing", "statement", "intro"):
        for b in blocks:
            if b.act != act:
                continue
            while total > target:
                smaller = _SMALLER[act].get(b.shape)
                if smaller is None:
                    break
                total -= len(b.shape) - len(smaller)
                b.shape = smaller
    total = sum(len(x.shape) for x in blocks)
    if total > target:
        raise _Retry(f"segment needs {total} turns, has {target}")
    while total < target:
        room = target - total
        options = [((a, s), w) for a, s, w in fillers or FILLERS if len(s) <= room and w > 0]
        act, shape = _weighted(rng, options)
        blocks.append(_Block(u, act, shape, key=rng.uniform(0.0, 1.0)))
        total += len(shape)


def _interleave(rng: Random, a: list[_Block], b: list[_Block]) -> list[_Block]:
    out: list[_Block] = []
    queues = [list(a), list(b)]
    turn = 0
    while queues[0] or queues[1]:
        q = queues[turn] if queues[turn] else queues[1 - turn]
        for _ in range(rng.randint(1, 3)):
            if q:
                out.append(q.pop(0))
        turn = 1 - turn
    return out
