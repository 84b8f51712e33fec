"""The ``sessions`` scenario: multi-session conversations with repeated tasks.

``generate(seed)`` returns a validated transcript in which one user (two, in
separate scopes, for even seeds) talks to an ops assistant over five or six
sessions (``session`` ids ``<scope-initial>1``, ``...2``; one to three days
apart). It exercises what the support scenario does not:

- **procedures**: two tasks per user (of ``TASKS``), each solved in two early
  sessions by the same tool sequence with different arguments (tool turns
  written ``name(key=value) -> result``; the first solve sometimes hits a failing
  call that a retry fixes), each solve confirmed by the user. A later session asks
  for the task again with new arguments: a ``procedure`` probe whose
  ``meta["steps"]`` lists the tool names in order (``procedure_recall``).
- **cross-session facts** (``cross_session`` probes): facts about the user's
  setup stated in an early session and asked about in a later one (paraphrased).
  Some are restated in several sessions in other words, one may be corrected, and
  preferences use "always"/"never"/"prefer": the ``reflect`` probes ask for one
  of these repeated or preference facts (``meta["repeated"]``: how often it was
  stated), which reflection can keep as one compact record.
- **session-local facts** (``session`` probes): a value that matters only in the
  session it is stated in (today's ticket number), asked about later in the same
  session.

Around them: greetings, small talk and unrelated tool output. Ground truth as in
the support scenario: ``mentions`` on stating turns, ``salience_hint`` on user
turns, and each probe's ``needs``, ``evidence`` (turn ids), ``answer``,
``category`` and ``evidence_sessions``. The same seed gives the same bytes on
every machine (a seeded ``random.Random`` and choices from tuples only);
``VERSION`` changes whenever the output for a seed changes. The shipped set is
``transcripts/sessions`` (``memlab synth --scenario sessions --n 12 --seed 1``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from random import Random
from typing import Any

from memlab.errors import InputError, MemlabError
from memlab.lab.synth.generator import _check
from memlab.lab.synth.plan import _Retry
from memlab.lab.transcripts import Transcript, format_ts

GENERATOR = "memlab.synth.sessions"
VERSION = 1
SCENARIO = "sessions"
MAX_ATTEMPTS = 25
START = 1_790_000_000.0  # 2026-09-21, a Monday


def transcript_id(seed: int) -> str:
    """The id (and file stem) of the sessions transcript made from ``seed``."""
    return f"sessions-{seed:04d}"


# -- the catalog ------------------------------------------------------------------
@dataclass(frozen=True)
class FactKind:
    """A fact about a user's setup: values, how it is stated (first, restated,
    corrected) and how it is asked about later (paraphrased)."""

    id: str
    description: str
    cls: str
    values: tuple[str, ...]
    states: tuple[str, ...]
    restates: tuple[str, ...]
    corrects: tuple[str, ...]
    asks: tuple[str, ...]


FACTS = (
    FactKind(
        "deploy_target",
        "where the user's services are deployed",
        "account",
        ("Fly.io", "Railway", "Nomad", "Kubernetes on GKE", "Elastic Beanstalk"),
        ("All our services are deployed on {v}.", "We deploy everything to {v}."),
        ("Like I said before, our deploys go to {v}.", "Reminder: everything still runs on {v}."),
        ("We finished moving our services off {old}; we deploy on {v} now.",),
        ("Where do our services run these days?", "What platform do we ship to?"),
    ),
    FactKind(
        "ci_system",
        "the user's CI system",
        "account",
        ("Buildkite", "CircleCI", "Jenkins", "Drone", "GitLab CI"),
        ("Our CI pipelines run on {v}.",),
        ("Again, the pipelines are all in {v}.", "Our builds still run on {v}, for the record."),
        ("We switched the pipelines from {old} to {v} this week.",),
        ("Which CI do our builds use?", "Remind me what runs our pipelines?"),
    ),
    FactKind(
        "pager_tool",
        "the user's on-call paging tool",
        "account",
        ("Opsgenie", "PagerDuty", "Squadcast", "Grafana OnCall"),
        ("Our on-call rotation lives in {v}.",),
        ("On-call is still handled in {v}.",),
        ("We moved on-call from {old} to {v}.",),
        ("Who pages our on-call engineers?", "What paging tool do we use?"),
    ),
    FactKind(
        "database",
        "the user's main database",
        "account",
        ("Postgres 16", "MySQL 8", "CockroachDB", "MariaDB 11"),
        ("Our main database is {v}.",),
        ("The main database is {v}, as I mentioned.",),
        ("We migrated the main database from {old} to {v}.",),
        ("Which database engine backs our product?", "What's our primary datastore?"),
    ),
    FactKind(
        "office_city",
        "the city of the user's office",
        "personal",
        ("Lisbon", "Oslo", "Denver", "Osaka", "Tallinn"),
        ("I work out of our {v} office.",),
        ("I'm in the {v} office again this week.",),
        ("I relocated from {old} to the {v} office.",),
        ("Which office am I based in?", "Where do I work from?"),
    ),
    FactKind(
        "report_format",
        "how the user wants reports written",
        "preference",
        ("bullet points", "a single short paragraph", "a table"),
        ("Please always write incident summaries as {v}.",),
        ("I prefer incident summaries as {v}, always.",),
        ("From now on write incident summaries as {v}, not {old}.",),
        ("How should my incident write-ups be formatted?",),
    ),
    FactKind(
        "quiet_hours",
        "when the user must not be paged",
        "preference",
        ("before 8am", "after 7pm", "on Sundays"),
        ("Never page me {v} unless prod is down.",),
        ("As always: no pages {v}, please.",),
        ("Change of plan: never page me {v} instead of {old}.",),
        ("When am I off-limits for pages?",),
    ),
    FactKind(
        "deploy_window",
        "when the user's team deploys",
        "preference",
        ("Tuesday mornings", "Thursday afternoons", "weekday evenings"),
        ("We prefer to deploy on {v}.",),
        ("Deploys should happen on {v}, as usual.",),
        ("We now deploy on {v} rather than {old}.",),
        ("When does my team like to ship?",),
    ),
)
FACTS_BY_ID = {f.id: f for f in FACTS}

SESSION_FACTS = (
    ("ticket", "today's ticket number", "Today's work is tracked in ticket {v}.",
     "Which ticket are we logging this under?"),
    ("branch", "the branch being worked on today", "I'm working on the {v} branch today.",
     "What branch am I on right now?"),
    ("host", "the host being debugged today", "The box acting up today is {v}.",
     "Which machine were we poking at?"),
)  # fmt: skip


def _session_value(rng: Random, kind: str) -> str:
    """A value that matters for one session only (fresh each time)."""
    if kind == "ticket":
        return f"T-{rng.randint(1000, 9999)}"
    if kind == "branch":
        return f"{rng.choice(('fix', 'feat', 'chore'))}/{rng.choice(('retry', 'sso', 'deps', 'cache', 'queue', 'audit'))}-{rng.randint(10, 99)}"
    return f"{rng.choice(('web', 'db', 'worker', 'edge'))}-{rng.randint(10, 99)}"


@dataclass(frozen=True)
class Task:
    """A task solved by a fixed tool sequence; ``{x}`` is the argument that varies."""

    id: str
    asks: tuple[str, ...]
    values: tuple[str, ...]
    steps: tuple[tuple[str, str, str], ...]  # tool, args ({x} varies), result
    again: str


TASKS = (
    Task("replay_webhooks",
         ("The webhooks to {x} have been failing since last night, can you replay them?",
          "Deliveries to {x} are failing again; please replay the failed webhooks."),
         ("/v1/orders", "/v1/refunds", "/v1/invoices", "/v1/shipments"),
         (("webhooks.list_failed", "endpoint={x}, since=24h", "ok, {n} failed deliveries"),
          ("webhooks.replay", "endpoint={x}, order=oldest_first", "ok, replayed {n}"),
          ("webhooks.resume", "endpoint={x}", "ok, endpoint active")),
         "Webhooks to {x} are failing now. Can you replay them the way we did last time?"),
    Task("rotate_key",
         ("Can you rotate the API key for the {x} service?",
          "The {x} key leaked into a log, rotate it please."),
         ("billing", "search", "notifications", "analytics"),
         (("keys.create", "service={x}, scope=prod", "ok, key created"),
          ("secrets.set", "service={x}, name=API_KEY", "ok, secret updated"),
          ("deploy.restart", "service={x}", "ok, restarted {n} pods"),
          ("keys.revoke", "service={x}, which=previous", "ok, revoked")),
         "We need a fresh API key for {x}. Same procedure as before?"),
    Task("restore_snapshot",
         ("Please restore the {x} database from last night's snapshot.",
          "Someone dropped a table in {x}; restore it from the snapshot."),
         ("orders-db", "users-db", "ledger-db", "catalog-db"),
         (("db.list_snapshots", "db={x}, last=3", "ok, {n} snapshots"),
          ("db.restore", "db={x}, snapshot=latest, target=staging", "ok, restored"),
          ("db.verify", "db={x}, target=staging", "ok, checksums match"),
          ("db.promote", "db={x}, from=staging", "ok, promoted")),
         "The {x} database needs restoring too. How did we do it last time?"),
    Task("purge_cache",
         ("The CDN is serving a stale {x}, can you purge it?",
          "Users still see the old {x}; please clear the CDN cache."),
         ("pricing page", "logo", "checkout script", "docs index"),
         (("cdn.find_zone", "asset={x}", "ok, zone main"),
          ("cdn.purge", "zone=main, asset={x}", "ok, purged"),
          ("cdn.verify", "asset={x}, regions=all", "ok, fresh everywhere")),
         "The {x} is stale on the CDN now. Do what you did last time?"),
)  # fmt: skip

NAMES = ("Maya", "Jonas", "Priya", "Tomás", "Aiko", "Leon", "Zara", "Emil")
COMPANIES = ("Quillstack", "Brightwave", "Northpine", "Corvid Labs", "Tidal Forge")
GREETINGS = ("Hi again!", "Morning!", "Hello, back with more.", "Hey, it's me again.")
SMALL_TALK = (
    "Busy week over here.",
    "Coffee first, then ops.",
    "The team offsite went well.",
    "It's raining again, as usual.",
    "Thanks for the help so far.",
)
ACKS = ("Noted.", "Got it.", "Understood, I'll keep that in mind.", "Thanks, noted.")
CONFIRMS = ("That did it, thanks!", "Works now, thank you.", "Perfect, thanks, it's back.")
COMPLAINT = "Still failing, same error."
NOISE_TOOLS = (
    "status.page() -> ok, all systems operational",
    "metrics.query(name=p95_latency) -> ok, 212 ms",
    "logs.tail(service=gateway, lines=20) -> ok, 20 lines, no errors",
)


# -- building ---------------------------------------------------------------------
@dataclass
class _User:
    scope: str
    name: str
    facts: dict[str, str]  # kind -> first value
    later: dict[str, str] = field(default_factory=dict)  # kind -> corrected value
    tasks: tuple[Task, ...] = ()


class _Builder:
    def __init__(self, rng: Random) -> None:
        self.rng = rng
        self.turns: list[dict[str, Any]] = []
        self.t = START + rng.randint(0, 6) * 3600
        self.stated: dict[tuple[str, str], list[str]] = {}  # (scope, kind) -> turn ids
        self.values: dict[tuple[str, str], str] = {}  # value in force
        self.statements: dict[tuple[str, str], int] = {}
        self.solves: dict[tuple[str, str], list[str]] = {}  # (scope, task) -> tool turn ids

    def add(self, user: _User, session: str, role: str, text: str, **extra: Any) -> str:
        self.t += self.rng.randint(20, 90)
        tid = f"t{len(self.turns):03d}"
        turn: dict[str, Any] = {
            "id": tid, "ts": format_ts(self.t), "scope": user.scope, "role": role,
            "source": "tool" if role == "tool" else role, "text": text, "session": session,
        }  # fmt: skip
        turn.update(extra)
        self.turns.append(turn)
        return tid

    def user(self, u: _User, s: str, text: str, hint: float, **extra: Any) -> str:
        return self.add(u, s, "user", text, salience_hint=hint, **extra)

    def state(
        self, u: _User, s: str, kind: FactKind, template: str, old: str | None = None
    ) -> None:
        key = (u.scope, kind.id)
        value = u.later[kind.id] if old is not None else u.facts[kind.id]
        text = template.format(v=value, old=old or "")
        tid = self.user(u, s, text, 0.9 if kind.cls == "preference" else 0.7,
                        mentions=[{"fact": kind.id, "value": value}])  # fmt: skip
        if old is not None or self.values.get(key) != value:
            self.stated[key] = []
        self.stated.setdefault(key, []).append(tid)
        self.values[key] = value
        self.statements[key] = self.statements.get(key, 0) + 1
        self.add(u, s, "agent", self.rng.choice(ACKS))

    def filler(self, u: _User, s: str) -> None:
        r = self.rng.random()
        if r < 0.5:
            self.user(u, s, self.rng.choice(SMALL_TALK), 0.1)
            self.add(u, s, "agent", "Glad to hear it.")
        else:
            self.add(u, s, "tool", self.rng.choice(NOISE_TOOLS))

    def solve(self, u: _User, s: str, task: Task, value: str, fail_first: bool) -> None:
        self.user(u, s, self.rng.choice(task.asks).format(x=value), 0.5)
        self.add(u, s, "agent", "On it.")
        ids = []
        for i, (tool, args, result) in enumerate(task.steps):
            if fail_first and i == len(task.steps) - 1:
                self.add(u, s, "tool", f"{tool}({args.format(x=value)}, mode=fast) -> error 429 "
                                       "rate limited")  # fmt: skip
            n = self.rng.randint(2, 60)
            ids.append(self.add(u, s, "tool", f"{tool}({args.format(x=value)}) -> "
                                              f"{result.format(n=n)}"))  # fmt: skip
        self.add(u, s, "agent", "Done: all steps reported success.")
        self.user(u, s, self.rng.choice(CONFIRMS), 0.3)
        self.solves[(u.scope, task.id)] = ids

    def probe(self, u: _User, s: str, text: str, probe: dict[str, Any]) -> None:
        self.user(u, s, text, 0.2, probe=probe)
        self.add(u, s, "agent", "Let me check my notes.")

    def fact_probe(self, u: _User, s: str, kind: FactKind, category: str) -> None:
        key = (u.scope, kind.id)
        evidence = list(self.stated[key])
        sessions = sorted({self.turns[int(e[1:])]["session"] for e in evidence})
        meta = {"repeated": self.statements[key], "class": kind.cls}
        self.probe(u, s, self.rng.choice(kind.asks), {
            "needs": [kind.id], "evidence": evidence, "answer": self.values[key],
            "category": category, "evidence_sessions": sessions, "meta": meta,
        })  # fmt: skip


def _users(rng: Random, two: bool) -> list[_User]:
    names = rng.sample(NAMES, 2)
    companies = rng.sample(COMPANIES, 2)
    kinds = list(FACTS)
    out = []
    for i in range(2 if two else 1):
        facts = {k.id: rng.choice(k.values) for k in kinds}
        scope = f"{companies[i].lower().replace(' ', '-')}:{names[i].lower()}"
        out.append(_User(scope, names[i], facts, tasks=tuple(rng.sample(TASKS, 2))))
    if two:  # the same kinds with different values: a leak surfaces a wrong value
        a, b = out
        for k in FACTS:
            if a.facts[k.id] == b.facts[k.id]:
                b.facts[k.id] = next(v for v in k.values if v != a.facts[k.id])
    return out


def _attempt(rng: Random, seed: int) -> dict[str, Any]:
    two = seed % 2 == 0
    users = _users(rng, two)
    b = _Builder(rng)
    n_sessions = rng.randint(5, 6)
    plans = []
    for u in users:
        order = list(FACTS)
        rng.shuffle(order)
        early = order[:5]  # stated in sessions 1-2
        repeated = early[:3]  # restated in sessions 2-3
        corrected = early[3] if rng.random() < 0.6 else None
        if corrected is not None:
            taken = {w.facts[corrected.id] for w in users} | set(
                v for w in users for k, v in w.later.items() if k == corrected.id
            )
            u.later[corrected.id] = next(v for v in corrected.values if v not in taken)
        plans.append((u, early, repeated, corrected))
    for sn in range(1, n_sessions + 1):
        if sn > 1:
            b.t += rng.randint(1, 3) * 86400 + rng.randint(-7200, 7200)
        for u, early, repeated, corrected in plans:
            s = f"{u.name[0].lower()}{sn}"
            b.user(u, s, rng.choice(GREETINGS), 0.1)
            b.add(u, s, "agent", f"Welcome back, {u.name}.")
            local_kind = rng.choice(SESSION_FACTS)
            local_value = _session_value(rng, local_kind[0])
            local_id = b.user(u, s, local_kind[2].format(v=local_value), 0.6,
                              mentions=[{"fact": f"{local_kind[0]}_{sn}", "value": local_value}])  # fmt: skip
            b.add(u, s, "agent", rng.choice(ACKS))
            if sn == 1:
                for kind in early[:3]:
                    b.state(u, s, kind, rng.choice(kind.states))
                    b.filler(u, s)
            elif sn == 2:
                for kind in early[3:]:
                    b.state(u, s, kind, rng.choice(kind.states))
                b.state(u, s, repeated[0], rng.choice(repeated[0].restates))
            elif sn == 3:
                for kind in repeated[1:]:
                    b.state(u, s, kind, rng.choice(kind.restates))
                if corrected is not None:
                    b.state(u, s, corrected, rng.choice(corrected.corrects),
                            old=u.facts[corrected.id])  # fmt: skip
            if sn <= 2 or (sn == 3 and rng.random() < 0.5):
                for task in u.tasks[: 2 if sn <= 2 else 1]:
                    value = task.values[(sn - 1 + (task is u.tasks[1])) % len(task.values)]
                    b.solve(u, s, task, value, fail_first=sn == 1 and rng.random() < 0.5)
                    b.filler(u, s)
            for _ in range(rng.randint(1, 3)):
                b.filler(u, s)
            # session-local probe: the value of this session, a few turns later
            b.probe(u, s, local_kind[3], {
                "needs": [f"{local_kind[0]}_{sn}"], "evidence": [local_id],
                "answer": local_value, "category": "session", "evidence_sessions": [s],
            })  # fmt: skip
            if sn >= 4:
                asked = early[sn - 4 :: 2][:2] if sn < n_sessions else early[1::2]
                for kind in asked:
                    b.fact_probe(u, s, kind, "cross_session")
                reflect = [repeated[sn % len(repeated)]]
                prefs = [k for k in early if k.cls == "preference"]
                if prefs and sn == n_sessions:
                    reflect.append(prefs[0])
                for kind in dict.fromkeys(k for k in reflect if k not in asked):
                    b.fact_probe(u, s, kind, "reflect")
                task = u.tasks[sn % 2]
                if sn >= n_sessions - 1:
                    fresh = task.values[-1 - (sn % 2)]
                    b.probe(u, s, task.again.format(x=fresh), {
                        "evidence": b.solves[(u.scope, task.id)], "category": "procedure",
                        "meta": {"steps": [t for t, _, _ in task.steps], "task": task.id},
                    })  # fmt: skip
                    b.solve(u, s, task, fresh, fail_first=False)
            b.user(u, s, "That's all for today, thanks.", 0.1)
            b.add(u, s, "agent", "Talk soon!")
    facts: dict[str, Any] = {k.id: {"description": k.description, "class": k.cls} for k in FACTS}
    for sn in range(1, n_sessions + 1):
        for kid, desc, *_ in SESSION_FACTS:
            facts[f"{kid}_{sn}"] = {"description": f"{desc} (session {sn})", "class": "session"}
    return {
        "format": "memlab.transcript/1",
        "id": transcript_id(seed),
        "meta": {
            "generator": GENERATOR, "version": VERSION, "seed": seed, "scenario": SCENARIO,
            "scopes": [u.scope for u in users], "sessions": n_sessions,
        },
        "facts": facts,
        "turns": b.turns,
    }  # fmt: skip


def generate(seed: int) -> Transcript:
    """One ``sessions`` transcript from ``seed`` (same seed, same bytes).

    Raises:
        InputError: ``seed`` is not a non-negative integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"synth seed must be a non-negative integer, got {seed!r}")
    for attempt in range(MAX_ATTEMPTS):
        rng = Random(f"{GENERATOR}/{VERSION}:{seed}:{attempt}")
        data = _attempt(rng, seed)
        try:
            _check(data)
        except _Retry:
            continue
        if attempt:
            data["meta"]["attempt"] = attempt
        return Transcript.from_dict(data, f"synth sessions seed {seed}")
    raise MemlabError(  # pragma: no cover - would be a generator bug
        f"synth --scenario sessions found no unambiguous transcript for seed {seed}; "
        "this is a bug in memlab.lab.synth.sessions, please report it"
    )


__all__ = ["FACTS", "GENERATOR", "SCENARIO", "TASKS", "VERSION", "generate", "transcript_id"]
