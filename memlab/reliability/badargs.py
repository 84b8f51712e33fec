# mypy: disable-error-code="arg-type,list-item,misc,return-value,call-overload,dict-item"
"""The bad-argument corpus: calls of the public API that must be refused.

Every case calls one public entry point of ``memlab.memory`` with one wrong
argument (wrong type, out of range, NaN, a bare string where a list is
expected, unencodable unicode, ...). A case passes when the call raises a
``MemlabError`` whose message names the argument, and the stores it could reach
are unchanged afterwards (validate before you mutate). A raw Python exception,
a silent acceptance, an unnamed argument or a changed store is a failure.

The corpus runs against every store (``memory``, ``jsonl``, ``sqlite``, and
``pgvector`` when a DSN is given).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memlab.errors import MemlabError
from memlab.memory import (
    AgentDeps,
    HashEmbedder,
    InMemoryStore,
    JsonlStore,
    MemoryInput,
    MemoryKind,
    MemoryLayer,
    MemoryRecord,
    RecallQuery,
    SqliteStore,
    run_turn,
)
from memlab.memory.stores.base import MemoryStore
from memlab.reliability import make_record

DIMS = 16
NAN = float("nan")
INF = float("inf")
SURROGATE = "bad\udc80text"


@dataclass(frozen=True)
class Case:
    """One refused call: ``call(env)`` must raise a MemlabError naming ``arg``."""

    name: str
    arg: str
    call: Callable[[Env], object]


@dataclass
class Outcome:
    case: str
    ok: bool
    what: str  # "refused", "raw TypeError: ...", "accepted", "unnamed: ...", "mutated"


@dataclass
class Env:
    """The stores and layers the cases call, with one record each."""

    folder: Path
    stores: dict[str, MemoryStore]
    layers: dict[str, MemoryLayer] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, folder: Path, dsn: str | None = None) -> Env:
        stores: dict[str, MemoryStore] = {
            "memory": InMemoryStore(),
            "jsonl": JsonlStore(folder / "m.jsonl"),
            "sqlite": SqliteStore(folder / "m.db"),
        }
        if dsn is not None:
            from memlab.memory.stores.pg import PgVectorStore

            stores["pgvector"] = PgVectorStore(
                dsn, schema=f"badargs_{folder.name[-12:]}".lower().replace("-", "_")
            )
        env = cls(folder, stores)
        for name, store in stores.items():
            layer = MemoryLayer(store, HashEmbedder(DIMS), clock=lambda: 1.78e9)
            env.layers[name] = layer
            env.ids[name] = layer.remember("alice", "We deploy on GKE.", salience=0.6).id
        return env

    def state(self) -> list[object]:
        """Everything a refused call must leave unchanged."""
        out: list[object] = []
        for store in self.stores.values():
            for r in store.list("alice", include_archived=True):
                out.append((r.id, r.content, r.salience, r.access_count, r.archived_at, r.scope))
            out.append(store.count(include_archived=True))
        return out

    def close(self) -> None:
        for layer in self.layers.values():
            layer.close()


def _record(**change: Any) -> MemoryRecord:
    r = make_record(
        "new-record",
        "a new fact",
        "alice",
        np.full(DIMS, 0.25),
        at=1.78e9,
        kind=MemoryKind.SEMANTIC,
    )
    for k, v in change.items():
        object.__setattr__(r, k, v)
    return r


def _store_cases(name: str) -> Iterator[Case]:
    def s(env: Env) -> MemoryStore:
        return env.stores[name]

    def rid(env: Env) -> str:
        return env.ids[name]

    p = f"{name}."
    bad_records: list[tuple[str, str, dict[str, Any]]] = [
        ("id=None", "record id", {"id": None}),
        ("id=''", "record id", {"id": ""}),
        ("id=3", "record id", {"id": 3}),
        ("id too long", "record id", {"id": "x" * 300}),
        ("id surrogate", "record id", {"id": SURROGATE}),
        ("content=''", "content", {"content": ""}),
        ("content=None", "content", {"content": None}),
        ("content surrogate", "content", {"content": SURROGATE}),
        ("scope=''", "scope", {"scope": ""}),
        ("scope=None", "scope", {"scope": None}),
        ("salience=2", "salience", {"salience": 2.0}),
        ("salience=nan", "salience", {"salience": NAN}),
        ("salience='high'", "salience", {"salience": "high"}),
        ("tokens=-1", "tokens", {"tokens": -1}),
        ("tokens='3'", "tokens", {"tokens": "3"}),
        ("access_count=-2", "access_count", {"access_count": -2}),
        ("created_at=nan", "created_at", {"created_at": NAN}),
        ("last_accessed_at=inf", "last_accessed_at", {"last_accessed_at": INF}),
        ("archived_at=nan", "archived_at", {"archived_at": NAN}),
        ("archived_at='later'", "archived_at", {"archived_at": "later"}),
        ("provenance=[1]", "provenance", {"provenance": (1,)}),
        ("meta=object", "meta", {"meta": {"k": object()}}),
        ("meta=nan", "meta", {"meta": {"k": NAN}}),
        ("meta int key", "meta", {"meta": {1: "x"}}),
        ("meta='x'", "meta", {"meta": "x"}),
        ("embedding nan", "embedding", {"embedding": np.full(DIMS, NAN, dtype=np.float32)}),
        ("embedding dims", "dimensions", {"embedding": np.ones(DIMS + 1, dtype=np.float32)}),
    ]
    for label, arg, change in bad_records:
        yield Case(
            f"{p}put({label})",
            arg,
            lambda env, c=change: s(env).put(_record(**c)),
        )
    yield Case(f"{p}put_many(None)", "records", lambda env: s(env).put_many(None))
    yield Case(f"{p}put_many('x')", "records", lambda env: s(env).put_many("x"))
    yield Case(f"{p}put_many([None])", "records[0]", lambda env: s(env).put_many([None]))
    yield Case(f"{p}put_many(record)", "list", lambda env: s(env).put_many(_record()))
    yield Case(f"{p}put(None)", "MemoryRecord", lambda env: s(env).put(None))
    yield Case(
        f"{p}put_many(dup ids)",
        "same record id",
        lambda env: s(env).put_many([_record(), _record()]),
    )
    yield Case(
        f"{p}put(takeover)",
        "another scope",
        lambda env: s(env).put(_record(id=rid(env), scope="mallory")),
    )
    yield Case(f"{p}get(None, id)", "scope", lambda env: s(env).get(None, rid(env)))
    yield Case(f"{p}get(scope, None)", "ids", lambda env: s(env).get("alice", None))
    yield Case(f"{p}get(scope, 3)", "record ids", lambda env: s(env).get("alice", 3))
    yield Case(f"{p}get_many(scope, None)", "ids", lambda env: s(env).get_many("alice", None))
    yield Case(f"{p}get_many(scope, [1])", "record ids", lambda env: s(env).get_many("alice", [1]))
    yield Case(f"{p}list(None)", "scope", lambda env: s(env).list(None))
    yield Case(
        f"{p}list(kinds='semantic')", "kinds", lambda env: s(env).list("alice", kinds="semantic")
    )
    yield Case(
        f"{p}list(kinds=['dream'])", "kind", lambda env: s(env).list("alice", kinds=["dream"])
    )
    yield Case(f"{p}list(kinds=3)", "kinds", lambda env: s(env).list("alice", kinds=3))
    yield Case(
        f"{p}list(include_archived='yes')",
        "include_archived",
        lambda env: s(env).list("alice", include_archived="yes"),
    )
    yield Case(f"{p}delete(None, ids)", "scope", lambda env: s(env).delete(None, [rid(env)]))
    yield Case(f"{p}delete(scope, None)", "ids", lambda env: s(env).delete("alice", None))
    yield Case(f"{p}delete(scope, {{}})", "ids", lambda env: s(env).delete("alice", {"a": 1}))
    for at in (NAN, INF, "soon", None, True):
        yield Case(
            f"{p}mark_archived(at={at!r})",
            "mark_archived",
            lambda env, at=at: s(env).mark_archived("alice", [rid(env)], at),
        )
        yield Case(
            f"{p}touch(at={at!r})",
            "touch",
            lambda env, at=at: s(env).touch("alice", [rid(env)], at),
        )
    yield Case(f"{p}touch(ids=3)", "ids", lambda env: s(env).touch("alice", 3, 1.0))
    yield Case(f"{p}count(scope=3)", "scope", lambda env: s(env).count(3))
    yield Case(f"{p}count(scope='')", "scope", lambda env: s(env).count(""))
    yield Case(
        f"{p}count(include_archived=1)",
        "include_archived",
        lambda env: s(env).count("alice", include_archived=1),
    )
    yield Case(f"{p}candidates(None)", "scope", lambda env: s(env).candidates(None))
    yield Case(
        f"{p}candidates(query='x')",
        "query",
        lambda env: s(env).candidates("alice", "x"),
    )
    yield Case(
        f"{p}candidates(query dims)",
        "dimensions",
        lambda env: s(env).candidates("alice", np.ones(DIMS + 3, dtype=np.float32)),
    )
    yield Case(
        f"{p}candidates(query 2-D)",
        "query",
        lambda env: s(env).candidates("alice", np.ones((2, DIMS), dtype=np.float32)),
    )
    yield Case(
        f"{p}candidates(kinds='episodic')",
        "kinds",
        lambda env: s(env).candidates("alice", kinds="episodic"),
    )
    yield Case(f"{p}candidates(pool=0)", "pool", lambda env: s(env).candidates("alice", pool=0))
    yield Case(
        f"{p}candidates(pool='x')",
        "pool",
        lambda env: s(env).candidates("alice", pool="x"),
    )
    yield Case(
        f"{p}candidates(text=3)",
        "text",
        lambda env: s(env).candidates("alice", text=3),
    )
    yield Case(
        f"{p}candidates(weights='x')",
        "weights",
        lambda env: s(env).candidates("alice", weights="x"),
    )
    yield Case(
        f"{p}candidates(weights nan)",
        "weights",
        lambda env: s(env).candidates("alice", weights={"similarity": NAN}),
    )


def _layer_cases(name: str) -> Iterator[Case]:
    def layer(env: Env) -> MemoryLayer:
        return env.layers[name]

    p = f"{name}.layer."
    remember_bad: list[tuple[str, str, dict[str, Any]]] = [
        ("scope=None", "scope", {"scope": None}),
        ("scope=''", "scope", {"scope": ""}),
        ("scope=3", "scope", {"scope": 3}),
        ("scope surrogate", "scope", {"scope": SURROGATE}),
        ("content=''", "content", {"content": ""}),
        ("content=None", "content", {"content": None}),
        ("content=3", "content", {"content": 3}),
        ("content surrogate", "content", {"content": SURROGATE}),
        ("kind='dream'", "kind", {"kind": "dream"}),
        ("kind=None", "kind", {"kind": None}),
        ("kind=[...]", "kind", {"kind": ["semantic"]}),
        ("salience=-1", "salience", {"salience": -1}),
        ("salience=2", "salience", {"salience": 2}),
        ("salience='high'", "salience", {"salience": "high"}),
        ("salience=nan", "salience", {"salience": NAN}),
        ("salience=None", "salience", {"salience": None}),
        ("salience=True", "salience", {"salience": True}),
        ("source='oracle'", "source", {"source": "oracle"}),
        ("source=None", "source", {"source": None}),
        ("provenance='t1'", "provenance", {"provenance": "t1"}),
        ("provenance=[1]", "provenance", {"provenance": [1]}),
        ("provenance=None", "provenance", {"provenance": None}),
        ("meta='x'", "meta", {"meta": "x"}),
        ("meta=[1]", "meta", {"meta": [1]}),
        ("meta=object", "meta", {"meta": {"k": object()}}),
        ("meta=nan", "meta", {"meta": {"k": NAN}}),
        ("meta int key", "meta", {"meta": {1: "x"}}),
        ("created_at='now'", "created_at", {"created_at": "now"}),
        ("created_at=nan", "created_at", {"created_at": NAN}),
        ("created_at=inf", "created_at", {"created_at": INF}),
        ("id=''", "id", {"id": ""}),
        ("id=3", "id", {"id": 3}),
        ("id too long", "id", {"id": "x" * 300}),
    ]
    for label, arg, change in remember_bad:
        kw = {"scope": "alice", "content": "a fact", **change}
        yield Case(
            f"{p}remember({label})",
            arg,
            lambda env, kw=kw: layer(env).remember(**kw),
        )
    yield Case(
        f"{p}remember(takeover)",
        "another scope",
        lambda env: layer(env).remember("mallory", "mine", id=env.ids[name]),
    )
    yield Case(f"{p}remember_many(None)", "MemoryInput", lambda env: layer(env).remember_many(None))
    yield Case(f"{p}remember_many('x')", "MemoryInput", lambda env: layer(env).remember_many("x"))
    yield Case(
        f"{p}remember_many([None])", "MemoryInput", lambda env: layer(env).remember_many([None])
    )
    yield Case(
        f"{p}remember_many(item)",
        "MemoryInput",
        lambda env: layer(env).remember_many(MemoryInput("alice", "x")),
    )
    yield Case(
        f"{p}remember_many([dict])",
        "MemoryInput",
        lambda env: layer(env).remember_many([{"scope": "alice", "content": "x"}]),
    )
    yield Case(
        f"{p}remember_many(one bad of two)",
        "salience",
        lambda env: layer(env).remember_many(
            [MemoryInput("alice", "fine"), MemoryInput("alice", "bad", salience=9)]
        ),
    )
    yield Case(f"{p}recall('text')", "RecallQuery", lambda env: layer(env).recall("where?"))
    yield Case(f"{p}recall(None)", "RecallQuery", lambda env: layer(env).recall(None))
    yield Case(
        f"{p}recall(touch='yes')",
        "touch",
        lambda env: layer(env).recall(RecallQuery("alice", "GKE"), touch="yes"),
    )
    yield Case(f"{p}explain('text')", "RecallQuery", lambda env: layer(env).explain("where?"))
    yield Case(
        f"{p}explain(width=0)",
        "width",
        lambda env: layer(env).explain(RecallQuery("alice", "GKE"), width=0),
    )
    yield Case(
        f"{p}explain(width='x')",
        "width",
        lambda env: layer(env).explain(RecallQuery("alice", "GKE"), width="x"),
    )
    yield Case(
        f"{p}approve(salience=2)",
        "salience",
        lambda env: layer(env).approve("alice", env.ids[name], salience=2, reviewer="ann"),
    )
    yield Case(
        f"{p}approve(salience='x')",
        "salience",
        lambda env: layer(env).approve("alice", env.ids[name], salience="x", reviewer="ann"),
    )
    yield Case(
        f"{p}approve(reviewer='')",
        "reviewer",
        lambda env: layer(env).approve("alice", env.ids[name], salience=0.9, reviewer=""),
    )
    yield Case(
        f"{p}approve(reviewer=3)",
        "reviewer",
        lambda env: layer(env).approve("alice", env.ids[name], salience=0.9, reviewer=3),
    )
    yield Case(
        f"{p}approve(scope=None)",
        "scope",
        lambda env: layer(env).approve(None, env.ids[name], salience=0.9, reviewer="ann"),
    )
    yield Case(
        f"{p}approve(other scope)",
        "no memory",
        lambda env: layer(env).approve("mallory", env.ids[name], salience=0.9, reviewer="m"),
    )
    yield Case(f"{p}forget(None, ids)", "scope", lambda env: layer(env).forget(None, ["x"]))
    yield Case(f"{p}forget(scope, None)", "ids", lambda env: layer(env).forget("alice", None))
    yield Case(f"{p}maintain(None)", "scope", lambda env: layer(env).maintain(None))
    yield Case(f"{p}maintain(now='x')", "now", lambda env: layer(env).maintain("alice", now="x"))
    yield Case(f"{p}maintain(now=nan)", "now", lambda env: layer(env).maintain("alice", now=NAN))
    yield Case(f"{p}maybe_summarize('')", "scope", lambda env: layer(env).maybe_summarize(""))
    yield Case(f"{p}embed_query(None)", "text", lambda env: layer(env).embed_query(None))
    yield Case(f"{p}embed_query(3)", "text", lambda env: layer(env).embed_query(3))


def _query_cases() -> Iterator[Case]:
    bad: list[tuple[str, str, dict[str, Any]]] = [
        ("scope=None", "scope", {"scope": None}),
        ("scope=''", "scope", {"scope": ""}),
        ("text=None", "text", {"text": None}),
        ("text=3", "text", {"text": 3}),
        ("text surrogate", "text", {"text": SURROGATE}),
        ("token_budget=0", "token_budget", {"token_budget": 0}),
        ("token_budget=1.5", "token_budget", {"token_budget": 1.5}),
        ("token_budget='800'", "token_budget", {"token_budget": "800"}),
        ("token_budget=True", "token_budget", {"token_budget": True}),
        ("max_hits=0", "max_hits", {"max_hits": 0}),
        ("max_hits='3'", "max_hits", {"max_hits": "3"}),
        ("min_score='x'", "min_score", {"min_score": "x"}),
        ("min_score=nan", "min_score", {"min_score": NAN}),
        ("min_score_ratio=2", "min_score_ratio", {"min_score_ratio": 2}),
        ("min_score_ratio=nan", "min_score_ratio", {"min_score_ratio": NAN}),
        ("min_score_ratio='x'", "min_score_ratio", {"min_score_ratio": "x"}),
        ("kinds='semantic'", "kinds", {"kinds": "semantic"}),
        ("kinds=['dream']", "kind", {"kinds": ["dream"]}),
        ("kinds=3", "kinds", {"kinds": 3}),
        ("include_untrusted='no'", "include_untrusted", {"include_untrusted": "no"}),
        ("now='soon'", "now", {"now": "soon"}),
        ("now=nan", "now", {"now": NAN}),
    ]
    for label, arg, change in bad:
        kw = {"scope": "alice", "text": "where?", **change}
        yield Case(f"RecallQuery({label})", arg, lambda env, kw=kw: RecallQuery(**kw))


def _agent_cases() -> Iterator[Case]:
    def deps(env: Env, **kw: Any) -> AgentDeps:
        return AgentDeps(env.layers["memory"], lambda messages: "Noted.", maintain=False, **kw)

    bad_turns: list[tuple[str, str, dict[str, Any]]] = [
        ("scope=None", "scope", {"scope": None}),
        ("user_input=''", "user_input", {"user_input": ""}),
        ("user_input=None", "user_input", {"user_input": None}),
        ("user_input=3", "user_input", {"user_input": 3}),
        ("tool_results='HTTP 200'", "tool_results", {"tool_results": "HTTP 200"}),
        ("tool_results=[3]", "tool_results[0]", {"tool_results": [3]}),
        ("tool_results=None", "tool_results", {"tool_results": None}),
        ("tool_results={}", "tool_results", {"tool_results": {"a": "b"}}),
        ("turn_id=3", "turn_id", {"turn_id": 3}),
    ]
    for label, arg, change in bad_turns:
        kw = {"scope": "alice", "user_input": "Check the refund.", **change}
        yield Case(
            f"run_turn({label})",
            arg,
            lambda env, kw=kw: run_turn(
                kw["scope"],
                kw["user_input"],
                deps(env),
                **{k: v for k, v in kw.items() if k not in ("scope", "user_input")},
            ),
        )
    yield Case(
        "run_turn(model returns None)",
        "model",
        lambda env: run_turn(
            "alice",
            "hi",
            AgentDeps(env.layers["memory"], lambda messages: None, maintain=False),
        ),
    )
    yield Case("run_turn(deps='x')", "AgentDeps", lambda env: run_turn("alice", "hi", "x"))
    yield Case("AgentDeps(token_budget=0)", "token_budget", lambda env: deps(env, token_budget=0))
    yield Case("AgentDeps(quote_words='x')", "quote_words", lambda env: deps(env, quote_words="x"))
    yield Case("AgentDeps(model=None)", "model", lambda env: AgentDeps(env.layers["memory"], None))


def cases(stores: list[str]) -> list[Case]:
    """The corpus for these store backends."""
    # Imported here: the constructor cases are built on this module's Case and Env.
    from memlab.reliability.badargs_constructors import construction_cases

    out: list[Case] = []
    for name in stores:
        out += list(_store_cases(name))
        out += list(_layer_cases(name))
    out += list(_query_cases())
    out += list(construction_cases())
    out += list(_agent_cases())
    return out


def check(case: Case, env: Env) -> Outcome:
    """Run one case and judge it."""
    before = env.state()
    try:
        case.call(env)
    except MemlabError as exc:
        after = env.state()
        if after != before:
            return Outcome(case.name, False, "mutated: the store changed although the call failed")
        message = str(exc)
        if case.arg.lower() not in message.lower():
            return Outcome(case.name, False, f"unnamed: {type(exc).__name__}: {message[:120]}")
        return Outcome(case.name, True, f"refused: {type(exc).__name__}")
    except Exception as exc:  # what the corpus exists to find
        return Outcome(case.name, False, f"raw {type(exc).__name__}: {str(exc)[:120]}")
    return Outcome(case.name, False, "accepted")


def run(dsn: str | None = None, folder: Path | None = None) -> list[Outcome]:
    """Run the whole corpus (against pgvector too when ``dsn`` is given)."""
    with tempfile.TemporaryDirectory(prefix="memlab-badargs-", dir=folder) as tmp:
        env = Env.open(Path(tmp), dsn)
        try:
            return [check(case, env) for case in cases(list(env.stores))]
        finally:
            env.close()
            pg = env.stores.get("pgvector")
            if pg is not None:
                _drop_schema(pg)


def _drop_schema(store: MemoryStore) -> None:
    import contextlib

    with contextlib.suppress(Exception):
        import psycopg

        dsn, schema = getattr(store, "dsn", ""), getattr(store, "schema", "")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


__all__ = ["Case", "Env", "Outcome", "cases", "check", "run"]
