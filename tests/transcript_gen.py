"""Small seeded support transcripts for the sweep, tuning and gate tests.

Not the shipped generator (memlab.lab.synth): a compact one the tests own, so
they do not depend on the shipped data. Each transcript has two users; each
states a handful of facts (some corrected later), chats, runs tools, and asks
probes whose wording overlaps the fact they need. Distractor turns share words
with the probes, so ranking weights change what fits a small budget: a run
that ignores similarity recalls fewer facts.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memlab.lab.transcripts import FORMAT, Transcript, save

# fact id -> (statement, question, values)
FACTS: dict[str, tuple[str, str, list[str]]] = {
    "cluster": (
        "We deploy everything on {v} in the main region.",
        "Where do we deploy everything again?",
        ["GKE", "EKS", "Nomad", "AKS", "OpenShift"],
    ),
    "pager": (
        "Always page me on {v} when production breaks.",
        "How should you page me when production breaks?",
        ["PagerDuty", "Opsgenie", "Slack", "SMS"],
    ),
    "database": (
        "Our primary database is {v}.",
        "Which primary database do we run?",
        ["Postgres", "MySQL", "CockroachDB", "MongoDB"],
    ),
    "language": (
        "The backend services are written in {v}.",
        "What language are the backend services written in?",
        ["Go", "Rust", "Kotlin", "Elixir"],
    ),
    "builds": (
        "Our builds run on {v} for every merge.",
        "Which system runs our builds for every merge?",
        ["Jenkins", "CircleCI", "Buildkite", "Drone"],
    ),
    "office": (
        "I work from the {v} office most weeks.",
        "Which office do I work from most weeks?",
        ["Berlin", "Lisbon", "Toronto", "Osaka"],
    ),
    "escalation": (
        "Escalations should go to {v} on my team.",
        "Who on my team should escalations go to?",
        ["Priyanka", "Tomasz", "Amara", "Lucas"],
    ),
}
CORRECTION = "Actually we switched: {s}"
DISTRACTORS = [
    "The deploy dashboard in the main region looks slow today.",
    "Production had a short blip this morning but it recovered.",
    "The database migration ticket is still open, no rush.",
    "Can you check why the merge queue is long?",
    "Our team lunch moved to Thursday.",
    "The backend latency graph has a weird spike again.",
    "Someone asked which services we run on weekends.",
    "The office coffee machine is broken again.",
]
CHATTER = ["thanks!", "ok", "sounds good", "got it, thanks", "cool"]
AGENT = ["Noted.", "Understood, I will keep that in mind.", "Thanks, got it.", "Sure."]
TOOLS = ["tool returned 200 OK", "tool: 3 open tickets, none urgent", "tool: build #4411 passed"]


def make_transcript(seed: int, *, turns: int = 70, users: int = 2) -> Transcript:
    """One seeded transcript with ``users`` scopes and about ``turns`` turns."""
    rng = random.Random(seed)
    start = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
    now = start
    scopes = [f"user{u}-{seed}:support" for u in range(users)]
    state: dict[str, dict[str, tuple[str, str]]] = {s: {} for s in scopes}
    out: list[dict[str, Any]] = []

    def add(scope: str, role: str, text: str, **extra: Any) -> str:
        nonlocal now
        now += timedelta(minutes=rng.choice([1, 2, 5, 30, 240, 900]))
        tid = f"t{len(out)}"
        out.append(
            {
                "id": tid,
                "ts": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "scope": scope,
                "role": role,
                "source": "tool" if role == "tool" else role,
                "text": text,
                **extra,
            }
        )
        return tid

    while len(out) < turns:
        scope = rng.choice(scopes)
        known = state[scope]
        r = rng.random()
        if r < 0.28:
            fact = rng.choice(list(FACTS))
            statement, _, values = FACTS[fact]
            old = known.get(fact)
            value = rng.choice([v for v in values if old is None or v != old[0]])
            text = statement.format(v=value)
            if old is not None:
                text = CORRECTION.format(s=text)
            tid = add(
                scope,
                "user",
                text,
                mentions=[{"fact": fact, "value": value}],
                salience_hint=0.9,
            )
            known[fact] = (value, tid)
            if rng.random() < 0.6:
                add(scope, "agent", rng.choice(AGENT))
        elif r < 0.5 and len(known) >= 2 and len(out) > 12:
            fact = rng.choice(sorted(known))
            value, tid = known[fact]
            add(
                scope,
                "user",
                FACTS[fact][1],
                probe={"needs": [fact], "evidence": [tid], "answer": value},
            )
        elif r < 0.75:
            add(scope, "user", rng.choice(DISTRACTORS), salience_hint=0.2)
        elif r < 0.87:
            add(scope, "user", rng.choice(CHATTER), salience_hint=0.05)
        elif r < 0.95:
            add(scope, "agent", rng.choice(AGENT))
        else:
            add(scope, "tool", rng.choice(TOOLS))
    data = {
        "format": FORMAT,
        "id": f"gen-{seed:03d}",
        "meta": {"generator": "tests.transcript_gen", "seed": seed},
        "facts": {f: {"description": f} for f in FACTS},
        "turns": out,
    }
    return Transcript.from_dict(data, f"<gen {seed}>")


def write_transcripts(folder: Path, seeds: range | list[int], **kw: Any) -> Path:
    """Write one transcript per seed into ``folder``; return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for s in seeds:
        t = make_transcript(s, **kw)
        save(t, folder / f"{t.id}.json")
    return folder
