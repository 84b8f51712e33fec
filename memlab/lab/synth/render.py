"""Rendering planned blocks as turns: text, mentions, probes, tool output, time."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from random import Random
from typing import Any

from memlab.lab.synth import catalog as cat
from memlab.lab.synth import updates as upd
from memlab.lab.synth.plan import _Block, _User, _weighted
from memlab.lab.synth.words import PARAPHRASE_MAX_OVERLAP, word_overlap
from memlab.lab.transcripts import format_ts

N_TURNS = 60


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
    def __init__(self, rng: Random, users: list[_User], phrasings: str = "all") -> None:
        self.rng = rng
        self.users = users
        self.phrasings = phrasings
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
        noun = upd.NOUNS[k]
        step, style = b.extra["step"], b.extra["style"]
        old, new = user.values[k][step - 1], user.values[k][step]
        slots = {
            "old": noun.ref(old), "new": noun.ref(new), "v": noun.ref(new),
            "prev": noun.ref(old), "noun": noun.noun, "our": noun.our, "Our": _cap(noun.our),
        }  # fmt: skip
        catalog = self.phrasings not in upd.REPORT_PHRASINGS
        lead = ""
        if style == "named":
            pool = tuple(kind.fix_both) if catalog else ()
            pool += upd.EXPLICIT.get(self.phrasings)
        elif style == "cued":
            pool = kind.fix_new
        elif style == "implicit":
            pool = (tuple(kind.state) if catalog else ()) + upd.IMPLICIT.get(self.phrasings)
        elif style == "unlike":
            pool = upd.UNLIKE.get(self.phrasings)
        else:
            pool = upd.REVERT.get(self.phrasings)
        tpl = self.pick(pool, f"fix:{k}:{style}")
        if tpl in kind.state:  # a catalog statement template: {v} is the new value
            text = tpl.format(v=new)
        elif tpl in kind.fix_both or tpl in kind.fix_new:
            # the catalog's correction templates (and only they) take a cue lead
            if user.style.leads:
                lead = rng.choice(cat.FIX_LEADS)
            text = _lead(lead, tpl).format(old=old, new=new)
        else:
            text = _cap(tpl.format(**slots))
        act = "correction"
        self.user_line(
            user, b, text, act, greeting, mentions=[(k, new)], salience=self.salience([k]),
        )  # fmt: skip
        if "A" in b.shape:
            if style == "implicit":  # nothing told the agent it was a change
                self.emit(user, "agent", self.pick(cat.AGENT_ACK, "ack").format(topic=kind.topic),
                          "ack")  # fmt: skip
            elif rng.random() < 0.3:
                text = self.pick(cat.AGENT_FIX_ECHO, "fix_echo").format(new=new)
                self.emit(user, "agent", text, "ack", mentions=[(k, new)])
            else:
                text = self.pick(cat.AGENT_FIX, "fix_ack").format(topic=kind.topic)
                self.emit(user, "agent", text, "ack")

    def _b_false(self, user: _User, b: _Block, greeting: str | None) -> None:
        """A sentence that names another value of a fact without changing it."""
        k = b.kinds[0]
        noun = upd.NOUNS[k]
        how, other = user.false[k]
        slots = {
            "x": noun.ref(other), "noun": noun.noun, "our": noun.our, "Our": _cap(noun.our),
            "field": noun.field,
        }  # fmt: skip
        text = _cap(self.pick(upd.FALSE[how].get(self.phrasings), f"false:{how}").format(**slots))
        if how == "tool":
            ask = self.pick(upd.TOOL_ASKS.get(self.phrasings), "tool_ask")
            self.user_line(user, b, ask, "request", greeting, salience=self.rng.uniform(0.3, 0.5))
            self.emit(user, "tool", text, "false_tool")
            if "A" in b.shape:
                self.emit(user, "agent", self.pick(upd.AGENT_TOOL_REPLY, "tool_reply"), "reply")
            return
        self.user_line(user, b, text, "false", greeting, salience=self.rng.uniform(0.3, 0.5))
        if "A" in b.shape:
            self.emit(user, "agent", self.pick(upd.AGENT_FALSE_REPLY, "false_reply"), "reply")

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
        if k in user.corrected:
            category = "corrected"
        elif k in user.false:
            category = "false_correction"
        else:
            category = kind.cls
        meta: dict[str, Any] = {
            "overlap": round(overlap, 3),
            "paraphrased": overlap <= PARAPHRASE_MAX_OVERLAP,
            "distance": distance,
        }
        if k in user.corrected:
            meta["update"] = user.steps[k][-1]  # the style of the update in force
            meta["updates"] = len(user.steps[k])
        if k in user.false:
            meta["false"] = user.false[k][0]
        probe = {
            "needs": [k],
            "evidence": evidence,
            "answer": value,
            "category": category,
            "meta": meta,
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
