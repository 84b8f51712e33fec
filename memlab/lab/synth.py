"""A seeded generator of 60-turn support-agent transcripts (format v1).

``generate(seed)`` returns a validated :class:`~memlab.lab.transcripts.Transcript`:
a customer (or, for seeds divisible by 3, two customers in separate scopes)
talks to a support agent over one to four sessions. Every transcript states at
least eight facts (of the 36 kinds in ``synth_catalog``): hard preferences,
account facts and offhand remarks, sometimes two in one message.
Some facts are corrected later (sometimes naming the old value too: "we moved
off Heroku to Fly.io"). Probes come in the last third of the conversation,
mostly far beyond a 10-turn window from the statement they need and mostly
paraphrased; each carries ``needs``, ``evidence`` (the turns that state the
value in force) and ``answer`` (that value). Around them: the support problem
itself, tool output (some with planted instructions, which state no facts),
pleasantries and noise.

Determinism: one ``random.Random`` seeded with a string (hashed with SHA-512 by
the stdlib, so independent of ``PYTHONHASHSEED``) drives every choice, and every
choice is made from a tuple or list, never from a set or dict order. The same
seed gives the same bytes on every machine (checked by tests against the shipped
files). ``VERSION`` changes whenever output for a seed changes.

Ground-truth annotations that strategies must not read: ``salience_hint`` on
user turns, and each turn's ``meta`` (``act``: what the turn does; ``planted``:
the turn carries an injected instruction; on probes, ``probe.meta`` holds the
measured word overlap and the distance to the evidence).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from random import Random
from typing import Any

from memlab.errors import InputError, MemlabError
from memlab.lab import synth_catalog as cat
from memlab.lab.transcripts import Transcript, dumps, format_ts, save

GENERATOR = "memlab.synth"
VERSION = 1
SCENARIO = "support"
SCENARIO_TWO_USERS = "support-two-users"
N_TURNS = 60
#: probes go in the last third: turn index >= LATE_START
LATE_START = N_TURNS - N_TURNS // 3
#: the sliding window probes are meant to reach beyond (turns of the probe's scope)
WINDOW = 10
#: a probe is "paraphrased" when at most this share of its content words occur in
#: its evidence (see ``word_overlap``)
PARAPHRASE_MAX_OVERLAP = 0.2
#: seeds divisible by this give two-user transcripts (a third of any seed range)
TWO_USER_EVERY = 3
MAX_ATTEMPTS = 25

# ---------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------

STOPWORDS = frozenset(
    """a about above after again all am an and any are as at be been before being below
    between both but by can could d did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just ll m
    me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own re s same she should so some such t than that the their theirs them then there
    these they this those through to too under until up us ve very was we were what when where
    which while who whom why will with would you your yours yourself yourselves what's i'm
    we're it's don't isn't let lets get got go goes going gone make made want wanted need
    needs also still yet ever""".split()  # noqa: SIM905 - a word list reads better as text
) | frozenset(cat.DISCOURSE)
_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> list[str]:
    """The content words of a text: lowercase alphanumeric tokens that are not
    stopwords or discourse fillers ("remind", "again", "quick"), in order, unique."""
    words = [w for w in _WORD.findall(text.casefold()) if w not in STOPWORDS]
    return list(dict.fromkeys(words))


_SUFFIXES = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _same_word(a: str, b: str) -> bool:
    # Deliberately generous (so "paraphrased" is an honest claim): a word matches
    # its inflections and derivations ("deploy"/"deployed"/"deployment",
    # "host"/"hosts"/"hosted", "service"/"services").
    a, b = _stem(a), _stem(b)
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 4 and long_.startswith(short):
        return True
    return len(short) >= 5 and a[:5] == b[:5]


def word_overlap(probe: str, evidence: str) -> float:
    """Share of the probe's content words that also occur in the evidence text.

    overlap = |{w in C(probe) : w matches some word of C(evidence)}| / |C(probe)|,
    where C is ``content_words`` and two words match when, after stripping one
    suffix (-ing, -ed, -es, -s), they are equal, one (at least 4 letters) is a
    prefix of the other, or they share their first 5 letters.
    Returns 0.0 when the probe has no content words.
    """
    p, e = content_words(probe), content_words(evidence)
    if not p:
        return 0.0
    return sum(1 for w in p if any(_same_word(w, x) for x in e)) / len(p)


def normalize(text: str) -> str:
    """Casefold and collapse whitespace (how a metric matches values in text)."""
    return " ".join(text.casefold().split())


def normalize_loose(text: str) -> str:
    """Casefold, turn punctuation into spaces and collapse whitespace."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.casefold()).split())


def contains_value(text: str, value: str) -> bool:
    """Whether ``value`` occurs in ``text`` under either normalization."""
    return normalize(value) in normalize(text) or (
        bool(normalize_loose(value)) and normalize_loose(value) in normalize_loose(text)
    )


def _clash(a: str, b: str) -> bool:
    """Two values clash if one occurs inside the other (under either normalization)."""
    return contains_value(a, b) or contains_value(b, a)


# ---------------------------------------------------------------------------
# Plan
# ---------------------------------------------------------------------------


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
    values: dict[str, list[str]]  # kind -> [initial, then each correction's value]
    corrected: list[str]
    probed: list[str]
    late_stated: list[str]


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


class _Planner:
    def __init__(self, rng: Random) -> None:
        self.rng = rng
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
        for k in corrected:
            values[k].append(self.draw_value(cat.KINDS_BY_ID[k], company))
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
        )


def _segment_blocks(
    rng: Random, u: int, user: _User, early_len: int, late_len: int, n_planted: int
) -> tuple[list[_Block], list[_Block]]:
    """The blocks of one user's early and late segments, ordered, sized exactly."""
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
        mode = "both" if cat.KINDS_BY_ID[k].fix_both and rng.random() < 0.55 else "new"
        if not cat.KINDS_BY_ID[k].fix_new:
            mode = "both"
        early.append(
            _Block(u, "correction", "UA", (k,), rng.uniform(lo, max(lo, 1.0)), {"mode": mode})
        )
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
    _fit(rng, u, early, early_len)
    _fit(rng, u, late, late_len)
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


def _fit(rng: Random, u: int, blocks: list[_Block], target: int) -> None:
    """Shrink optional turns or add filler blocks so the blocks hold exactly ``target`` turns."""
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
    fillers = (
        ("chat", "UA", 3.0), ("chat", "U", 1.0), ("thanks", "UA", 2.0), ("thanks", "U", 0.7),
        ("noise", "T", 2.5), ("request", "UTA", 3.0), ("request", "UA", 1.0),
        ("request", "UTTA", 1.5),
    )  # fmt: skip
    while total < target:
        room = target - total
        options = [((a, s), w) for a, s, w in fillers if len(s) <= room]
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


# ---------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------

#: per topic, extra fields of the records a tool returns
_TOPIC_FIELDS = {
    "webhooks": lambda r: {"endpoint": r.choice(cat.ENDPOINTS), "attempt": r.randint(1, 12),
                           "response_code": r.choice((500, 502, 503, 504, 200, 410))},
    "billing": lambda r: {"amount": f"{r.randint(40, 9000)}.{r.randint(0, 99):02d}",
                          "kind": r.choice(("charge", "refund", "credit", "adjustment"))},
    "sso": lambda r: {"user": f"usr_{r.getrandbits(32):08x}",
                      "event": r.choice(("login_failed", "assertion_rejected", "scim_create",
                                         "scim_update", "login_ok"))},
    "rate_limits": lambda r: {"key": f"key_{r.getrandbits(24):06x}",
                              "requests": r.randint(100, 90000), "throttled": r.randint(0, 5000)},
    "data_export": lambda r: {"part": r.randint(1, 40), "rows": r.randint(1000, 900000),
                              "bytes": r.randint(10**5, 10**9)},
    "performance": lambda r: {"query": f"q_{r.getrandbits(24):06x}",
                              "p95_ms": r.randint(80, 9000), "rows_scanned": r.randint(10**3, 10**8)},
    "access": lambda r: {"member": f"mem_{r.getrandbits(24):06x}",
                         "role": r.choice(("owner", "admin", "member", "billing", "viewer"))},
}  # fmt: skip


def _iso(rng: Random) -> str:
    return format_ts(_EPOCH0 + rng.randint(0, 330 * 86400))


def _payload(rng: Random, topic: str) -> str:
    """A JSON body like the ones real tools return (ids, statuses, times, counts)."""
    records = [
        {
            "id": f"{topic[:3]}_{rng.getrandbits(40):010x}",
            "status": rng.choice(cat.STATUSES),
            "created_at": _iso(rng),
            "updated_at": _iso(rng),
            "region_id": f"r{rng.randint(1, 9)}",
            "trace": f"{rng.getrandbits(64):016x}",
            **_TOPIC_FIELDS[topic](rng),
        }
        for _ in range(rng.randint(2, 6))
    ]
    body: dict[str, Any] = {
        "request_id": f"req_{rng.getrandbits(48):012x}",
        "duration_ms": rng.randint(3, 2400),
        "data": records,
    }
    if rng.random() < 0.5:
        body["next_cursor"] = f"cur_{rng.getrandbits(32):08x}"
    return json.dumps(body)


def _kb_search(rng: Random, term: str) -> str:
    """A help-center search: the article matching the term first, then unrelated hits."""
    first = next((i for i, k in enumerate(cat.KB) if k[0] == term), None)
    others = [i for i in range(len(cat.KB)) if i != first]
    hits = ([first] if first is not None else []) + rng.sample(others, rng.randint(0, 2))
    if not hits:
        return f"kb.search('{term}') -> 0 articles"
    found = " ".join(f"[KB-{rng.randint(1000, 9999)}] {cat.KB[i][1]}: {cat.KB[i][2]}" for i in hits)
    return f"kb.search('{term}') -> {len(hits)} article{'s' if len(hits) > 1 else ''}: {found}"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _lead(lead: str, template: str) -> str:
    """Prefix a template with a lead-in, lowercasing its first word when that reads right."""
    if not lead:
        return template
    # "We ..." -> "also, we ..."; but "I'm", "IT moved", "CI is", "{v} is" keep their case
    lower = template[:1].isupper() and template[1:2].islower()
    body = template[:1].lower() + template[1:] if lower else template
    return lead + body


class _Renderer:
    def __init__(self, rng: Random, users: list[_User]) -> None:
        self.rng = rng
        self.users = users
        self.turns: list[dict[str, Any]] = []
        # per scope: kind -> (value in force, ids of turns stating it since it came in force)
        self.state: dict[str, dict[str, tuple[str, list[str]]]] = {u.scope: {} for u in users}
        self.scope_pos: dict[str, list[int]] = {u.scope: [] for u in users}
        self.seen_lines: dict[str, list[str]] = {}

    # -- helpers ---------------------------------------------------------
    def pick(self, pool: Sequence[str], bucket: str) -> str:
        """Choose from a pool, avoiding lines already used in this transcript when possible."""
        used = self.seen_lines.setdefault(bucket, [])
        fresh = [p for p in pool if p not in used]
        choice = self.rng.choice(fresh or list(pool))
        used.append(choice)
        return choice

    def slots(self, user: _User) -> dict[str, Any]:
        rng = self.rng
        return {
            "inv": f"INV-{rng.randint(1000, 9999)}",
            "n": rng.randint(3, 400),
            "pct": rng.randint(12, 85),
            "code": rng.choice(cat.CODES),
            "endpoint": rng.choice(cat.ENDPOINTS),
            "when": rng.choice(cat.WHENS),
            "ticket": rng.randint(1000, 9999),
            "ms": rng.randint(3, 400),
            "msg": f"{rng.getrandbits(24):06x}",
            "kb": rng.choice(cat.KB_TERMS),
            "company": user.company.name,
            "evil": rng.choice(cat.ATTACKER_EMAILS),
            "mallory": rng.choice(cat.ATTACKER_NAMES),
        }

    def tool_text(self, topic: str, line: str, p_body: float = 0.85) -> str:
        """A tool call line, usually followed by the body the tool returned."""
        m = re.match(r"kb\.search\('([^']*)'\)", line)
        if m:
            return _kb_search(self.rng, m.group(1))
        if self.rng.random() >= p_body:
            return line
        return f"{line} {_payload(self.rng, topic)}"

    def agent_text(self, text: str, p_follow: float = 0.6) -> str:
        if self.rng.random() < p_follow:
            return f"{text} {self.pick(cat.AGENT_FOLLOW, 'follow')}"
        return text

    def styled(self, user: _User, text: str) -> str:
        if user.style.lower:
            text = text.lower()
        if user.style.drop_period and text.endswith(".") and not text.endswith("..."):
            text = text[:-1]
        return text

    def emit(
        self,
        user: _User,
        role: str,
        text: str,
        act: str,
        mentions: Sequence[tuple[str, str]] = (),
        salience: float | None = None,
        probe: dict[str, Any] | None = None,
        source: str | None = None,
        planted: bool = False,
    ) -> str:
        tid = f"t{len(self.turns)}"
        turn: dict[str, Any] = {
            "id": tid,
            "ts": "",
            "scope": user.scope,
            "role": role,
            "source": source or role,
            "text": text,
        }
        if mentions:
            turn["mentions"] = [{"fact": f, "value": v} for f, v in mentions]
            st = self.state[user.scope]
            for f, v in mentions:
                cur = st.get(f)
                if cur is None or cur[0] != v:
                    st[f] = (v, [tid])
                else:
                    cur[1].append(tid)
        if salience is not None:
            turn["salience_hint"] = round(salience, 2)
        if probe is not None:
            turn["probe"] = probe
        turn["meta"] = {"act": act, **({"planted": True} if planted else {})}
        self.scope_pos[user.scope].append(len(self.turns))
        self.turns.append(turn)
        return tid

    def salience(self, kinds: Iterable[str]) -> float:
        lo, hi = max((cat.SALIENCE[cat.KINDS_BY_ID[k].cls] for k in kinds), key=lambda r: r[0])
        return self.rng.uniform(lo, hi)

    # -- blocks ----------------------------------------------------------
    def block(self, b: _Block, greeting: str | None) -> None:
        user = self.users[b.user]
        handler = getattr(self, f"_b_{b.act}")
        handler(user, b, greeting)

    def user_line(
        self,
        user: _User,
        b: _Block,
        text: str,
        act: str,
        greeting: str | None,
        **kw: Any,
    ) -> None:
        if greeting:
            text = f"{greeting} {text}"
        self.emit(user, "user", self.styled(user, text), act, **kw)

    def _b_intro(self, user: _User, b: _Block, greeting: str | None) -> None:
        rng = self.rng
        s = self.slots(user)
        who = rng.choice(cat.INTRO_WHO).format(**s)
        hello = rng.choice(cat.GREETINGS)
        topic = user.topics[0]
        problem = rng.choice(topic.opening).format(**s)
        self.user_line(
            user, b, f"{hello}, {who}. {problem}", "intro", None, salience=rng.uniform(0.4, 0.55)
        )
        if "T" in b.shape:
            line = rng.choice(topic.tools).format(**s)
            self.emit(user, "tool", self.tool_text(topic.id, line), "tool")
        if "A" in b.shape:
            self.emit(
                user, "agent", self.agent_text(self.pick(cat.AGENT_INTRO, "agent_intro")), "reply"
            )

    def _b_statement(self, user: _User, b: _Block, greeting: str | None) -> None:
        rng = self.rng
        parts, mentions = [], []
        for i, k in enumerate(b.kinds):
            kind = cat.KINDS_BY_ID[k]
            v = user.values[k][0]
            tpl = self.pick(kind.state, f"state:{k}")
            offhand = kind.cls == cat.OFFHAND
            lead = (
                rng.choice(cat.STATE_LEADS) if i == 0 and user.style.leads and not offhand else ""
            )
            parts.append(_lead(lead, tpl).format(v=v))
            mentions.append((k, v))
        self.user_line(
            user, b, " ".join(parts), "statement", greeting,
            mentions=mentions, salience=self.salience(b.kinds),
        )  # fmt: skip
        if "A" in b.shape:
            k = b.kinds[0]
            if len(b.kinds) == 1 and rng.random() < 0.3:
                v = user.values[k][0]
                text = self.pick(cat.AGENT_ECHO, "echo").format(v=v)
                self.emit(user, "agent", text, "ack", mentions=[(k, v)])
            else:
                topic = cat.KINDS_BY_ID[k].topic
                self.emit(user, "agent", self.pick(cat.AGENT_ACK, "ack").format(topic=topic), "ack")

    def _b_correction(self, user: _User, b: _Block, greeting: str | None) -> None:
        rng = self.rng
        k = b.kinds[0]
        kind = cat.KINDS_BY_ID[k]
        old, new = user.values[k][0], user.values[k][1]
        pool = kind.fix_both if b.extra["mode"] == "both" else kind.fix_new
        tpl = self.pick(pool, f"fix:{k}")
        lead = rng.choice(cat.FIX_LEADS) if user.style.leads else ""
        text = _lead(lead, tpl).format(old=old, new=new)
        self.user_line(
            user, b, text, "correction", greeting,
            mentions=[(k, new)], salience=self.salience([k]),
        )  # fmt: skip
        if "A" in b.shape:
            if rng.random() < 0.3:
                text = self.pick(cat.AGENT_FIX_ECHO, "fix_echo").format(new=new)
                self.emit(user, "agent", text, "ack", mentions=[(k, new)])
            else:
                text = self.pick(cat.AGENT_FIX, "fix_ack").format(topic=kind.topic)
                self.emit(user, "agent", text, "ack")

    def _b_probe(self, user: _User, b: _Block, greeting: str | None) -> None:
        rng = self.rng
        k = b.kinds[0]
        kind = cat.KINDS_BY_ID[k]
        value, evidence = self.state[user.scope][k]
        evidence = list(evidence)
        ev_text = " ".join(self.turns[int(t[1:])]["text"] for t in evidence)
        lead = rng.choice(cat.PROBE_LEADS) if user.style.leads else ""
        if rng.random() < 0.2:
            candidates = [_lead(lead, q) for q in rng.sample(kind.ask_direct, len(kind.ask_direct))]
        else:
            asked = self.seen_lines.get("asked", [])
            qs = [q for q in kind.ask if _lead(lead, q) not in asked] or list(kind.ask)
            candidates = [_lead(lead, q) for q in rng.sample(qs, len(qs))]
            candidates.sort(key=lambda q: word_overlap(q, ev_text) > PARAPHRASE_MAX_OVERLAP)
        question = candidates[0]
        self.seen_lines.setdefault("asked", []).append(question)
        text = self.styled(user, f"{greeting} {question}" if greeting else question)
        overlap = word_overlap(text, ev_text)
        pos = self.scope_pos[user.scope]
        last_ev = max(int(t[1:]) for t in evidence)
        distance = len(pos) - pos.index(last_ev)  # scope turns from the evidence to the probe
        probe = {
            "needs": [k],
            "evidence": evidence,
            "answer": value,
            "category": "corrected" if k in user.corrected else kind.cls,
            "meta": {
                "overlap": round(overlap, 3),
                "paraphrased": overlap <= PARAPHRASE_MAX_OVERLAP,
                "distance": distance,
            },
        }
        self.emit(user, "user", text, "probe", salience=rng.uniform(0.1, 0.25), probe=probe)
        if "A" in b.shape:
            answer = self.pick(cat.AGENT_ANSWER, "answer").format(v=value)
            self.emit(user, "agent", answer, "answer", mentions=[(k, value)])

    def _request(self, user: _User, b: _Block, greeting: str | None, planted: bool) -> None:
        rng = self.rng
        s = self.slots(user)
        # the user's own problem first; once its questions run out, their second topic
        used = self.seen_lines.setdefault(f"exchange:{user.scope}", [])
        options = [(topic, i) for topic in user.topics for i in range(len(topic.exchanges))]
        fresh = [(t, i) for t, i in options if f"{t.id}:{i}" not in used]
        primary = [(t, i) for t, i in fresh if t is user.topics[0]]
        topic, i = rng.choice(primary or fresh or options)
        used.append(f"{topic.id}:{i}")
        requests, tool, reply = topic.exchanges[i]
        tool, reply = tool.format(**s), reply.format(**s)
        if "U" in b.shape:
            lead = rng.choice(cat.REQUEST_LEADS) if user.style.leads else ""
            request = _lead(lead, rng.choice(requests)).format(**s)
            self.user_line(user, b, request, "request", greeting, salience=rng.uniform(0.3, 0.5))
        if "T" in b.shape:
            if planted:
                text = self.pick(cat.PLANTED, "planted").format(**s)
                source = "web" if text.startswith(("web.", "search result")) else "tool"
                if rng.random() < 0.5:  # the injection hides after a normal-looking result
                    text = f"{self.tool_text(topic.id, tool, 1.0)} {text}"
                self.emit(user, "tool", text, "tool", source=source, planted=True)
            else:
                self.emit(user, "tool", self.tool_text(topic.id, tool), "tool")
        if b.shape.count("T") == 2:  # a second look-up before answering
            line = f"kb.search('{rng.choice(cat.KB_TERMS)}')"
            self.emit(user, "tool", self.tool_text(topic.id, line), "tool")
        if "A" in b.shape:
            if planted and rng.random() < 0.7:
                reply = self.pick(cat.AGENT_PLANTED, "agent_planted")
            self.emit(user, "agent", self.agent_text(reply), "reply")

    def _b_request(self, user: _User, b: _Block, greeting: str | None) -> None:
        self._request(user, b, greeting, planted=False)

    def _b_planted(self, user: _User, b: _Block, greeting: str | None) -> None:
        self._request(user, b, greeting, planted=True)

    def _b_chat(self, user: _User, b: _Block, greeting: str | None) -> None:
        text = greeting or self.pick(cat.SMALL_TALK, "chat")
        self.user_line(user, b, text, "chat", None, salience=self.rng.uniform(0.08, 0.18))
        if "A" in b.shape:
            pool, bucket = (cat.AGENT_RETURN, "return") if greeting else (cat.AGENT_SMALL, "small")
            self.emit(user, "agent", self.pick(pool, bucket), "reply")

    def _b_thanks(self, user: _User, b: _Block, greeting: str | None) -> None:
        rng = self.rng
        text = greeting or _cap(rng.choice(cat.THANKS_HEAD) + rng.choice(cat.THANKS_TAIL))
        self.user_line(user, b, text, "thanks", None, salience=rng.uniform(0.03, 0.07))
        if "A" in b.shape:
            pool, bucket = (
                (cat.AGENT_RETURN, "return") if greeting else (cat.AGENT_WELCOME, "welcome")
            )
            self.emit(user, "agent", self.pick(pool, bucket), "reply")

    def _b_closing(self, user: _User, b: _Block, greeting: str | None) -> None:
        text = self.pick(cat.CLOSINGS, "closing")
        self.user_line(user, b, text, "closing", greeting, salience=self.rng.uniform(0.03, 0.07))
        if "A" in b.shape:
            self.emit(user, "agent", self.pick(cat.AGENT_WELCOME, "welcome"), "reply")

    def _b_noise(self, user: _User, b: _Block, greeting: str | None) -> None:
        s = self.slots(user)
        line = self.rng.choice(cat.TOOL_NOISE).format(**s)
        self.emit(user, "tool", self.tool_text(user.topics[0].id, line, 0.0), "noise")


# ---------------------------------------------------------------------------
# Time
# ---------------------------------------------------------------------------

_EPOCH0 = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp())


def _sessions(rng: Random, blocks: list[_Block]) -> list[int]:
    """Turn positions where a new session (day) starts, besides 0."""
    n = _weighted(rng, ((1, 0.2), (2, 0.35), (3, 0.3), (4, 0.15)))
    starts, pos = [], 0
    for b in blocks:
        if b.shape[0] == "U" and 8 <= pos <= N_TURNS - 8:
            starts.append(pos)
        pos += len(b.shape)
    chosen: list[int] = []
    for p in rng.sample(starts, len(starts)):
        if len(chosen) == n - 1:
            break
        if all(abs(p - c) >= 8 for c in chosen):
            chosen.append(p)
    return sorted(chosen)


def _stamp(rng: Random, turns: list[dict[str, Any]], breaks: list[int]) -> None:
    t = _EPOCH0 + rng.randint(0, 320) * 86400 + rng.randint(6 * 3600, 17 * 3600)
    session = 1
    prev_role = None
    for i, turn in enumerate(turns):
        role = turn["role"]
        if i in breaks:
            session += 1
            t += rng.randint(9 * 3600, 60 * 3600)
        elif i > 0:
            if role == "user":
                r = rng.random()
                t += rng.randint(20, 240) if r < 0.7 else rng.randint(240, 1200) if r < 0.95 else rng.randint(1200, 3600)  # fmt: skip
            elif role == "agent":
                t += rng.randint(3, 45) if prev_role == "tool" else rng.randint(10, 150)
            else:
                t += rng.randint(1, 8) if prev_role == "user" else rng.randint(30, 600)
        turn["ts"] = format_ts(t)
        turn["session"] = f"s{session}"
        prev_role = role


# ---------------------------------------------------------------------------
# Generate
# ---------------------------------------------------------------------------


def transcript_id(seed: int) -> str:
    """The id (and file stem) of the transcript made from ``seed``."""
    return f"support-{seed:04d}"


def generate(seed: int) -> Transcript:
    """Generate one transcript from ``seed`` (same seed, same bytes, on any machine).

    Raises:
        InputError: ``seed`` is not a non-negative integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"synth seed must be a non-negative integer, got {seed!r}")
    for attempt in range(MAX_ATTEMPTS):
        rng = Random(f"{GENERATOR}/{VERSION}:{seed}:{attempt}")
        try:
            data = _attempt(rng, seed, attempt)
            _check(data)
        except _Retry:
            continue
        return Transcript.from_dict(data, f"synth seed {seed}")
    raise MemlabError(  # pragma: no cover - would be a generator bug
        f"synth could not build an unambiguous transcript for seed {seed} in "
        f"{MAX_ATTEMPTS} attempts; this is a bug in memlab.lab.synth, please report it"
    )


def _attempt(rng: Random, seed: int, attempt: int) -> dict[str, Any]:
    planner = _Planner(rng)
    two = seed % TWO_USER_EVERY == 0
    early_len = LATE_START + rng.randint(0, 3)
    late_len = N_TURNS - early_len
    if not two:
        n = rng.randint(8, 11)
        kinds = planner.pick_kinds(n, (), rng.randint(2, 3), rng.randint(1, 2))
        user = planner.user([], [], kinds, rng.randint(2, 3), rng.randint(4, 6))
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
    renderer = _Renderer(rng, users)
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


# ---------------------------------------------------------------------------
# Many transcripts, files, statistics
# ---------------------------------------------------------------------------


@dataclass
class WriteResult:
    """What ``write`` did: paths written, left unchanged (same bytes), replaced."""

    folder: Path
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    replaced: list[Path] = field(default_factory=list)


def write(
    out: str | Path, n: int, seed: int, *, force: bool = False, progress: bool = False
) -> WriteResult:
    """Generate ``n`` transcripts from seeds ``seed .. seed+n-1`` into ``out``.

    Files are named ``support-<seed>.json``. A file that already exists with the
    same bytes is left alone; one with different content is an error unless
    ``force`` (checked for every file before anything is written).

    Raises:
        InputError: bad ``n`` or ``seed``, ``out`` is not a folder, an existing
            file differs and ``force`` is false, or a file cannot be written.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"synth --n must be a positive integer, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"synth --seed must be a non-negative integer, got {seed!r}")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"synth --out {folder} exists and is not a folder; choose a folder")
    result = WriteResult(folder)
    seeds = range(seed, seed + n)
    conflicts: list[Path] = []
    for s in seeds:
        p = folder / f"{transcript_id(s)}.json"
        if p.exists() or p.is_symlink():
            if not p.is_file():
                raise InputError(f"{p} exists and is not a file; remove it or choose another --out")
            try:
                same = p.read_bytes() == dumps(generate(s)).encode("utf-8")
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
    from tqdm import tqdm

    for s in tqdm(seeds, desc="synth", unit="transcript", disable=not progress or None):
        p = folder / f"{transcript_id(s)}.json"
        if p in result.unchanged:
            continue
        try:
            save(generate(s), p)
        except OSError as exc:
            raise InputError(f"cannot write {p}: {exc.strerror or exc}") from None
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
