"""ProcedureRecorder: what it captures from a conversation, and what it does not."""

from __future__ import annotations

import pytest

from memlab.errors import InputError, StoreError
from memlab.memory import (
    HashEmbedder,
    InMemoryStore,
    MemoryKind,
    MemoryLayer,
    ProcedurePolicy,
    ProcedureRecorder,
    RecallQuery,
)
from tests.test_procedural import Clock, procedures


@pytest.fixture
def layer() -> MemoryLayer:
    return MemoryLayer(InMemoryStore(), HashEmbedder(256), clock=Clock())


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


@pytest.mark.parametrize(
    "reply",
    [
        # negated confirmations: CONFIRMATION found "fixed" / "resolved" / "back to
        # normal" and nothing read the negation
        "It isn't fixed.",
        "That hasn't fixed it.",
        "Nope, not resolved yet.",
        "It's not back to normal.",
        # read as neither, so the calls' "ok" counted as success
        "It still doesn't work.",
        "That never worked.",
        # a failure beside a confirming word ("fixed", "worked"), and failures in
        # words COMPLAINT lacked
        "I fixed the typo, but the webhooks still fail.",
        "That worked for one endpoint but not the other.",
        "It worked yesterday but fails today.",
        "Still fails.",
        "The error is still there.",
        "Nothing changed.",
        "It is worse now.",
    ],
)
def test_a_failure_the_user_reports_is_a_complaint(layer: MemoryLayer, reply: str) -> None:
    # Each was recorded as a success: a trusted procedure, or one more success on
    # the stored one.
    rec = ProcedureRecorder(layer)
    feed(rec, "alice", [*CONVERSATION, ("user", "That did it, thanks!")])
    feed(rec, "alice", [*CONVERSATION, ("user", reply)])
    (proc,) = procedures(layer, "alice")
    assert (proc.successes, proc.failures) == (1, 1)
    feed(rec, "bob", [*CONVERSATION, ("user", reply)])
    assert procedures(layer, "bob") == []  # a failure invents no procedure


@pytest.mark.parametrize(
    "reply",
    ["It works now, but thanks for checking the errors too.", "Fixed, but not sure why."],
)
def test_a_confirmation_with_but_is_still_a_confirmation(layer: MemoryLayer, reply: str) -> None:
    rec = ProcedureRecorder(layer)
    feed(rec, "alice", [*CONVERSATION, ("user", reply)])
    assert len(procedures(layer, "alice")) == 1


@pytest.mark.parametrize(
    "reply",
    ["That didn\u2019t work.", "It isn\u2019t fixed.", "It doesn\u2019t work."],
)
def test_a_complaint_with_a_typographic_apostrophe_is_a_complaint(
    layer: MemoryLayer, reply: str
) -> None:
    # The patterns spell "didn't" with "'": with "\u2019" the reply was no complaint
    # (or a confirmation, "fixed"), and the failed attempt was recorded as a success.
    rec = ProcedureRecorder(layer)
    feed(rec, "alice", [*CONVERSATION, ("user", reply)])
    assert procedures(layer, "alice") == []
    feed(rec, "bob", [*CONVERSATION, ("user", "It\u2019s back, thanks")])
    assert len(procedures(layer, "bob")) == 1


def test_recorder_needs_a_confirmation_when_the_policy_says_so() -> None:
    clock = Clock()
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


class _FailingPut:
    """Makes the layer's store fail its writes while on (a full disk)."""

    def __init__(self, layer: MemoryLayer) -> None:
        self.layer, self.put = layer, layer.store.put
        self.on = True

        def put(record: object) -> None:
            if self.on:
                raise StoreError("disk full")
            self.put(record)  # type: ignore[arg-type]

        layer.store.put = put  # type: ignore[method-assign]


@pytest.mark.parametrize("closing", ["confirmed", "finish"])
def test_a_failed_write_keeps_the_attempt(layer: MemoryLayer, closing: str) -> None:
    # The attempt was popped before the write: after the failure, the same
    # confirmation (or finish) recorded nothing and the procedure was lost.
    rec = ProcedureRecorder(layer)
    feed(rec, "alice", CONVERSATION)
    failing = _FailingPut(layer)

    def close() -> object:
        if closing == "finish":
            return rec.finish("alice")
        return rec.user("alice", "That did it, thanks!", "t6")

    with pytest.raises(StoreError, match="disk full"):
        close()
    assert procedures(layer, "alice") == []
    failing.on = False
    close()
    (proc,) = procedures(layer, "alice")
    assert proc.signature == ("webhooks.list_failed", "webhooks.replay", "webhooks.resume")
    record = layer.store.list("alice", kinds=[MemoryKind.PROCEDURAL])[0]
    want = ("t0", "t2", "t3", "t4", "t6") if closing == "confirmed" else ("t0", "t2", "t3", "t4")
    assert record.provenance == want


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda r: r.user("", "please replay the webhooks"), "scope"),
        (lambda r: r.user(5, "please replay the webhooks"), "scope"),
        (lambda r: r.user([1, 2], "please replay the webhooks"), "scope"),
        (lambda r: r.user("alice", None), "ProcedureRecorder: text"),
        (lambda r: r.user("alice", "please fix", 7), "turn_id"),
        (lambda r: r.tool("", "a.b() -> ok"), "scope"),
        (lambda r: r.tool("alice", 5), "ProcedureRecorder: text"),
        (lambda r: r.agent("alice", None), "ProcedureRecorder: text"),
    ],
)
def test_bad_arguments_are_refused_at_once(layer: MemoryLayer, call, named: str) -> None:  # type: ignore[no-untyped-def]
    # A bad scope was accepted until the attempt closed (the attempt was then
    # lost), an int scope and a None text were bare TypeErrors.
    rec = ProcedureRecorder(layer)
    with pytest.raises(InputError, match=named):
        call(rec)
    assert rec._open == {}
