"""Procedural memory: capture, generalize, merge, failures lower salience, recall."""

from __future__ import annotations

import pytest

from memlab.errors import InputError
from memlab.memory import (
    EvictionPolicy,
    HashEmbedder,
    InMemoryStore,
    MemoryKind,
    MemoryLayer,
    ProcedurePolicy,
    ProcedureRecorder,
    RecallQuery,
    ToolCall,
    record_outcome,
)
from memlab.memory.procedural import (
    Procedure,
    Step,
    generalize,
    merge_steps,
    outcome_ok,
    parse_tool_call,
    procedure_of,
)

HOUR = 3600.0


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def layer(clock: Clock) -> MemoryLayer:
    return MemoryLayer(InMemoryStore(), HashEmbedder(256), clock=clock)


REPLAY = [
    ToolCall("webhooks.list_failed", {"endpoint": "/v1/orders", "since": "2024-05-01"}, ok=True),
    ToolCall("webhooks.replay", {"endpoint": "/v1/orders", "mode": "oldest_first"}, ok=True),
    ToolCall("webhooks.resume", {"endpoint": "/v1/orders"}, ok=True),
]


def procedures(layer: MemoryLayer, scope: str) -> list[Procedure]:
    out = []
    for r in layer.store.list(scope, kinds=[MemoryKind.PROCEDURAL]):
        p = procedure_of(r)
        assert p is not None
        out.append(p)
    return out


def test_parse_tool_call_reads_the_call_and_classifies_the_result() -> None:
    call = parse_tool_call("billing.refund(order='A-17', amount=20, reason) -> ok, refunded")
    assert call is not None
    assert call.tool == "billing.refund"
    assert call.args == (("order", "A-17"), ("amount", "20"), ("arg2", "reason"))
    assert call.ok is True
    assert parse_tool_call("db.query(sql=x) -> ERROR: permission denied").ok is False  # type: ignore[union-attr]
    assert parse_tool_call("db.query(sql=x)").ok is None  # type: ignore[union-attr]
    assert parse_tool_call("Sure, I will look into it.") is None
    assert parse_tool_call("") is None
    assert outcome_ok("  ") is None
    assert outcome_ok("202 Accepted") is True
    assert outcome_ok("the request timed out") is False
    assert outcome_ok("three rows") is None


def test_tool_call_checks_its_input() -> None:
    with pytest.raises(InputError, match="not a name"):
        ToolCall("rm -rf /")
    with pytest.raises(InputError, match="named twice"):
        ToolCall("a", [("x", 1), ("x", 2)])
    with pytest.raises(InputError, match="name/value pairs"):
        ToolCall("a", ["x"])  # type: ignore[list-item]


def test_generalize_makes_varying_values_placeholders() -> None:
    steps = generalize(REPLAY, "replay the failed webhook deliveries for /v1/orders")
    assert steps[0].args == (("endpoint", "<endpoint>"), ("since", "<since>"))
    assert steps[1].args == (("endpoint", "<endpoint>"), ("mode", "oldest_first"))
    merged = merge_steps(
        [Step("a", (("x", "1"), ("y", "same")))], [Step("a", (("y", "same"), ("z", "q")))]
    )
    assert merged == (Step("a", (("x", "<x>"), ("y", "same"), ("z", "<z>"))),)


def test_remember_procedure_stores_task_steps_outcome_and_provenance(layer: MemoryLayer) -> None:
    r = layer.remember_procedure(
        "alice", "replay the failed webhooks for /v1/orders", REPLAY, provenance=["t1", "t2"]
    )
    assert r.kind is MemoryKind.PROCEDURAL and r.scope == "alice"
    assert r.provenance == ("t1", "t2")
    lines = r.content.splitlines()
    assert lines[0] == "Procedure for: replay the failed webhooks for /v1/orders"
    assert lines[1].startswith("1. webhooks.list_failed(") and lines[3].startswith("3. ")
    assert "worked 1 of 1 time" in lines[-1]
    proc = procedure_of(r)
    assert proc is not None and proc.signature == tuple(c.tool for c in REPLAY)
    assert proc.successes == 1 and proc.failures == 0


def test_recall_returns_the_procedure_for_a_similar_task(layer: MemoryLayer) -> None:
    layer.remember_procedure("alice", "replay the failed webhook deliveries", REPLAY)
    layer.remember("alice", "My favourite colour is teal.")
    layer.remember("alice", "The quarterly report is due Friday.")
    hits = layer.recall(
        RecallQuery("alice", "how do I replay failed webhook deliveries again?", max_hits=1)
    ).hits
    assert hits and hits[0].record.kind is MemoryKind.PROCEDURAL


def test_near_duplicates_merge_and_keep_counts(layer: MemoryLayer) -> None:
    layer.remember_procedure("alice", "replay failed webhooks for /v1/orders", REPLAY)
    other = [ToolCall(c.tool, {**dict(c.args), "endpoint": "/v1/refunds"}, ok=True) for c in REPLAY]
    layer.remember_procedure("alice", "replay failed webhooks for /v1/refunds", other)
    (proc,) = procedures(layer, "alice")
    assert proc.successes == 2 and proc.failures == 0
    assert proc.task == "replay failed webhooks for /v1/refunds"
    assert set(proc.tasks) == {
        "replay failed webhooks for /v1/orders",
        "replay failed webhooks for /v1/refunds",
    }
    # a different tool sequence is another procedure
    layer.remember_procedure("alice", "replay failed webhooks", REPLAY[:2])
    assert len(procedures(layer, "alice")) == 2
    # another scope's identical procedure is never merged into
    layer.remember_procedure("bob", "replay failed webhooks for /v1/orders", REPLAY)
    assert [p.successes for p in procedures(layer, "bob")] == [1]
    assert sorted(p.successes for p in procedures(layer, "alice")) == [1, 2]


def test_merging_can_be_switched_off(clock: Clock) -> None:
    layer = MemoryLayer(
        InMemoryStore(), HashEmbedder(256), clock=clock, procedures=ProcedurePolicy(merge=False)
    )
    layer.remember_procedure("alice", "replay failed webhooks", REPLAY)
    layer.remember_procedure("alice", "replay failed webhooks", REPLAY)
    assert len(procedures(layer, "alice")) == 2


def test_a_procedure_that_later_fails_loses_salience(layer: MemoryLayer) -> None:
    r = layer.remember_procedure("alice", "replay failed webhooks", REPLAY)
    first = r.salience
    r2 = layer.remember_procedure("alice", "replay failed webhooks", REPLAY, success=False)
    assert r2.id == r.id and r2.salience < first
    r3 = record_outcome(layer, "alice", r.id, success=False)
    assert r3.salience < r2.salience
    proc = procedure_of(r3)
    assert proc is not None and (proc.successes, proc.failures) == (1, 2)
    assert "worked 1 of 3 times" in r3.content
    # and a success brings it back up
    assert record_outcome(layer, "alice", r.id, success=True).salience > r3.salience
    with pytest.raises(InputError, match="no procedure"):
        record_outcome(layer, "bob", r.id, success=True)  # another scope's id


def test_salience_follows_the_laplace_success_rate() -> None:
    policy = ProcedurePolicy(min_salience=0.2, max_salience=1.0)
    assert policy.salience(0, 0) == pytest.approx(0.6)
    assert policy.salience(8, 0) == pytest.approx(0.2 + 0.8 * 0.9)
    assert policy.salience(0, 8) == pytest.approx(0.2 + 0.8 * 0.1)
    with pytest.raises(InputError, match="min_steps"):
        ProcedurePolicy(min_steps=0)
    with pytest.raises(InputError, match="min_salience"):
        ProcedurePolicy(min_salience=0.9, max_salience=0.5)


def test_bad_procedures_are_refused_and_nothing_is_written(layer: MemoryLayer) -> None:
    with pytest.raises(InputError, match="task"):
        layer.remember_procedure("alice", "  ", REPLAY)
    with pytest.raises(InputError, match="at least one step"):
        layer.remember_procedure("alice", "x", [])
    with pytest.raises(InputError, match="not a mix"):
        layer.remember_procedure("alice", "x", [REPLAY[0], Step("a")])
    with pytest.raises(InputError, match="scope"):
        layer.remember_procedure("", "x", REPLAY)
    assert layer.store.count("alice") == 0


def test_untrusted_procedures_are_capped(layer: MemoryLayer) -> None:
    r = layer.remember_procedure("alice", "replay failed webhooks", REPLAY, source="tool")
    assert r.salience <= layer.untrusted_salience_cap


def test_procedures_never_expire_on_a_clock(clock: Clock) -> None:
    layer = MemoryLayer(
        InMemoryStore(),
        HashEmbedder(256),
        clock=clock,
        eviction=EvictionPolicy(episodic_ttl=24, salience_floor=None, untrusted_ttl=24),
    )
    proc = layer.remember_procedure("alice", "replay failed webhooks", REPLAY)
    from_tool = layer.remember_procedure("alice", "rotate the keys", REPLAY[:2], source="tool")
    ep = layer.remember("alice", "something said once", salience=0.1)
    clock.t += 500 * HOUR
    layer.maintain("alice")
    assert layer.store.get("alice", proc.id) is not None
    assert layer.store.get("alice", from_tool.id) is not None
    assert layer.store.get("alice", ep.id) is None


# -- the recorder ------------------------------------------------------------------
def feed(rec: ProcedureRecorder, scope: str, turns: list[tuple[str, str]]) -> list[object]:
    written: list[object] = []
    for i, (role, text) in enumerate(turns):
        if role == "user":
            written += rec.user(scope, text, f"t{i}")
        elif role == "tool":
            rec.tool(scope, text, f"t{i}")
        else:
            rec.agent(scope, text, f"t{i}")
    return written


CONVERSATION = [
    ("user", "The webhooks to /v1/orders are failing since yesterday, can you replay them?"),
    ("agent", "Let me look."),
    ("tool", "webhooks.list_failed(endpoint=/v1/orders, since=2024-05-01) -> ok, 41 failed"),
    ("tool", "webhooks.replay(endpoint=/v1/orders) -> ok, replayed 41"),
    ("tool", "webhooks.resume(endpoint=/v1/orders) -> ok"),
    ("agent", "Replayed 41 deliveries and resumed the endpoint."),
]


def test_recorder_captures_a_confirmed_attempt(layer: MemoryLayer) -> None:
    rec = ProcedureRecorder(layer)
    written = feed(rec, "alice", [*CONVERSATION, ("user", "That did it, thanks!")])
    assert len(written) == 1
    (proc,) = procedures(layer, "alice")
    assert proc.signature == ("webhooks.list_failed", "webhooks.replay", "webhooks.resume")
    assert proc.task.startswith("The webhooks to /v1/orders are failing")
    record = layer.store.list("alice", kinds=[MemoryKind.PROCEDURAL])[0]
    # the task, the calls and the confirmation, in that order
    assert record.provenance == ("t0", "t2", "t3", "t4", "t6")
    # the tool's result text is never copied into the procedure
    assert "replayed 41" not in record.content and "41 failed" not in record.content


def test_recorder_records_a_complaint_as_a_failure_of_the_known_procedure(
    layer: MemoryLayer,
) -> None:
    rec = ProcedureRecorder(layer)
    feed(rec, "alice", [*CONVERSATION, ("user", "That did it, thanks!")])
    before = procedures(layer, "alice")[0]
    feed(rec, "alice", [*CONVERSATION, ("user", "Still failing, same error.")])
    (after,) = procedures(layer, "alice")
    assert (after.successes, after.failures) == (before.successes, 1)


def test_recorder_does_not_invent_a_procedure_from_a_failure(layer: MemoryLayer) -> None:
    rec = ProcedureRecorder(layer)
    feed(rec, "alice", [*CONVERSATION, ("user", "It didn't work.")])
    assert procedures(layer, "alice") == []


def test_recorder_needs_a_confirmation_when_the_policy_says_so(clock: Clock) -> None:
    layer = MemoryLayer(
        InMemoryStore(),
        HashEmbedder(256),
        clock=clock,
        procedures=ProcedurePolicy(require_confirmation=True),
    )
    rec = ProcedureRecorder(layer)
    feed(rec, "alice", [*CONVERSATION, ("user", "Next question: what is our SLA?")])
    assert procedures(layer, "alice") == []
    assert rec.finish("alice") is None
    feed(rec, "alice", [*CONVERSATION, ("user", "Perfect, thanks! It's back.")])
    assert len(procedures(layer, "alice")) == 1


def test_recorder_without_confirmation_uses_the_calls_outcomes(layer: MemoryLayer) -> None:
    rec = ProcedureRecorder(layer)
    feed(rec, "alice", [*CONVERSATION, ("user", "Next: what's our SLA for refunds?")])
    assert len(procedures(layer, "alice")) == 1
    failing = [*CONVERSATION[:3], ("tool", "webhooks.replay(endpoint=/v1/orders) -> error 503")]
    feed(rec, "bob", failing)
    assert rec.finish("bob") is None  # a failed call: not a success by outcomes
    assert procedures(layer, "bob") == []


def test_recorder_keeps_the_attempt_through_a_go_ahead_and_drops_failed_calls(
    layer: MemoryLayer,
) -> None:
    rec = ProcedureRecorder(layer)
    turns = [
        CONVERSATION[0],
        ("tool", "webhooks.list_failed(endpoint=/v1/orders) -> ok, 41 failed"),
        ("agent", "Shall I replay them?"),
        ("user", "Yes, please do."),
        ("tool", "webhooks.replay(endpoint=/v1/orders, mode=fast) -> error 429 rate limited"),
        ("tool", "webhooks.replay(endpoint=/v1/orders, mode=slow) -> ok"),
        ("user", "Works now, thank you!"),
    ]
    feed(rec, "alice", turns)
    (proc,) = procedures(layer, "alice")
    assert proc.signature == ("webhooks.list_failed", "webhooks.replay")
    assert proc.steps[1].args == (("endpoint", "<endpoint>"), ("mode", "slow"))


def test_recorder_attempts_are_per_scope(layer: MemoryLayer) -> None:
    rec = ProcedureRecorder(layer)
    rec.user("alice", CONVERSATION[0][1])
    rec.tool("bob", CONVERSATION[2][1])  # bob has no open attempt: ignored
    rec.tool("alice", CONVERSATION[2][1])
    rec.tool("alice", CONVERSATION[3][1])
    rec.user("bob", "That did it!")
    assert procedures(layer, "bob") == []
    rec.user("alice", "That did it!")
    assert len(procedures(layer, "alice")) == 1


def test_procedures_go_to_the_broader_layer_of_a_layered_scope(layer: MemoryLayer) -> None:
    rec = ProcedureRecorder(layer)
    feed(rec, "x", [])
    layered = ["alice:s1", "alice"]
    for i, (role, text) in enumerate([*CONVERSATION, ("user", "That did it!")]):
        if role == "user":
            rec.user(layered, text, f"t{i}")
        elif role == "tool":
            rec.tool(layered, text, f"t{i}")
    assert len(procedures(layer, "alice")) == 1
    assert procedures(layer, "alice:s1") == []
    # a later session of the same user finds it through its own layered scope
    hits = layer.recall(
        RecallQuery(["alice:s2", "alice"], "replay the failing webhooks for /v1/orders")
    ).hits
    assert any(h.record.kind is MemoryKind.PROCEDURAL for h in hits)


def test_tool_calls_after_small_talk_are_no_procedure(layer: MemoryLayer) -> None:
    rec = ProcedureRecorder(layer)
    noise = "logs.tail(service=gateway, lines=20) -> ok, 20 lines"
    feed(rec, "alice", [("user", "Coffee first, then ops."), ("tool", noise), ("tool", noise),
                        ("user", "The team offsite went well.")])  # fmt: skip
    assert rec.finish("alice") is None
    assert procedures(layer, "alice") == []
