"""The agent loop: recall -> model -> remember -> maintain."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memlab.errors import ChatModelError, InputError, MemlabError, TurnMaintenanceError
from memlab.memory.checks import check_bool, check_number, check_strings, check_text
from memlab.memory.gating import ContextOrigin, GateDecision, ToolGate, reply_tool_calls
from memlab.memory.layer import MaintenanceReport, MemoryInput, MemoryLayer
from memlab.memory.procedural import ToolCall
from memlab.memory.prompt import MEMORY_HEADER, format_memory
from memlab.memory.query import Hit, RecallQuery
from memlab.memory.quotes import Untrusted, find_quotes, quoted_source
from memlab.memory.records import Source, check_scope
from memlab.memory.salience import estimate_salience

__all__ = [
    "MEMORY_HEADER",
    "AgentDeps",
    "ChatModel",
    "Message",
    "TurnResult",
    "format_memory",
    "gate_calls",
    "prompt_messages",
    "run_turn",
    "turn_context",
]

Message = dict[str, str]


class ChatModel(Protocol):
    """Anything that answers a list of chat messages with a string."""

    def __call__(self, messages: list[Message]) -> str: ...


def prompt_messages(system_prompt: str, hits: Sequence[Hit], user_input: str) -> list[Message]:
    """The messages an agent turn sends to its model: the system prompt and the
    memory block (``format_memory``) as the system message, then the user input.

    The one place the prompt is built: ``run_turn`` uses it, and so does the lab's
    reader (so a measured answer comes from the very prompt an agent would send).

    Raises:
        InputError: ``system_prompt`` or ``user_input`` is not a string, or
            ``hits`` is not a list of hits.
    """
    # a None system prompt was a bare TypeError, and a None or int input went into
    # the messages as the user's content
    check_text(system_prompt, "prompt_messages: system_prompt", empty=True)
    check_text(user_input, "prompt_messages: user_input", empty=True)
    return [
        {"role": "system", "content": system_prompt + "\n\n" + format_memory(hits)},
        {"role": "user", "content": user_input},
    ]


@dataclass
class AgentDeps:
    """What run_turn needs.

    Args:
        layer: the memory layer.
        model: the chat model (called with OpenAI-style messages).
        token_budget: recall budget in tokens.
        system_prompt: the system message before the memory block.
        salience: estimates the salience of what is remembered.
        maintain: run summarization and eviction after each turn.
        quote_words: a reply that shares a run of this many words with untrusted
            context (the turn's tool results, the untrusted memory it was shown)
            is stored with the untrusted source, so it is capped and never
            summarized (see ``memlab.memory.quotes``). None: replies are always
            stored as the agent's (trusted).
        tool_gate: decides, for every tool call the reply states, whether it may
            run given where its justification came from (``memlab.memory.gating``;
            e.g. ``ConfirmUntrustedMemory``). A reply stating a call the gate did not
            allow is stored untrusted (``web`` if web memory justified the call, else
            ``tool``; the held tools in ``meta["gated"]``), so it never justifies
            the call later. None: calls are listed, all allowed.
        tool_calls: reads the tool calls out of a reply (default: lines written
            as ``name(key=value, ...)``).

    Raises:
        InputError: a field has the wrong type or range.
    """

    layer: MemoryLayer
    model: ChatModel
    token_budget: int = 800
    system_prompt: str = "You are a helpful assistant with long-term memory."
    salience: Callable[[str], float] = estimate_salience
    maintain: bool = True
    quote_words: int | None = 6
    tool_gate: ToolGate | None = None
    tool_calls: Callable[[str], list[ToolCall]] = reply_tool_calls

    def __post_init__(self) -> None:
        if not isinstance(self.layer, MemoryLayer):
            raise InputError(
                f"AgentDeps.layer must be a MemoryLayer, got {type(self.layer).__name__}"
            )
        if not callable(self.model):
            raise InputError(f"AgentDeps.model must be callable, got {type(self.model).__name__}")
        check_number(self.token_budget, "AgentDeps.token_budget", lo=1, integer=True)
        check_text(self.system_prompt, "AgentDeps.system_prompt", empty=True)
        if not callable(self.salience):
            raise InputError("AgentDeps.salience must be a function of the text")
        check_bool(self.maintain, "AgentDeps.maintain")
        check_number(self.quote_words, "AgentDeps.quote_words", lo=2, integer=True, none=True)
        if self.tool_gate is not None and not isinstance(self.tool_gate, ToolGate):
            raise InputError(
                "AgentDeps.tool_gate must have decide(call, context), e.g. "
                f"ConfirmUntrustedMemory(); got {type(self.tool_gate).__name__}"
            )
        if not callable(self.tool_calls):
            raise InputError("AgentDeps.tool_calls must be a function of the reply")


@dataclass
class TurnResult:
    """What one turn did.

    Attributes:
        reply: the model's reply.
        hits: the recalled memories it was shown.
        messages: the messages sent to the model.
        maintenance: the maintenance report (None without maintenance).
        remembered: ids of the records the turn stored.
        context: every item the model was shown, marked with where it came from
            (the user's input, each recalled memory, each tool result).
        tool_calls: the gate's decision on each tool call the reply states (all
            ``allow`` without a gate); run_turn runs none of them.
    """

    reply: str
    hits: list[Hit]
    messages: list[Message]
    maintenance: MaintenanceReport | None = None
    remembered: list[str] = field(default_factory=list)
    context: list[ContextOrigin] = field(default_factory=list)
    tool_calls: list[GateDecision] = field(default_factory=list)


def turn_context(user_input: str, hits: Sequence[Hit], tools: Sequence[str]) -> list[ContextOrigin]:
    """The items a turn's model is shown, marked by origin: the input, then each
    recalled memory (with its record's source and id), then each tool result.

    A memory item's text is the hit's text, as the memory block shows it: the
    record's content without its superseded claims. (The content let a stale
    claim, "Refunds go to account 99-1234.", justify a call the model was shown
    no trusted reason for.)"""
    out = [ContextOrigin("user", user_input, Source.USER)]
    out += [ContextOrigin("memory", h.text, h.record.source, h.record.id) for h in hits]
    out += [ContextOrigin("tool_result", t, Source.TOOL) for t in tools]
    return out


def gate_calls(reply: str, context: Sequence[ContextOrigin], deps: AgentDeps) -> list[GateDecision]:
    """The decision on every tool call in ``reply`` (``deps.tool_gate``; all allowed
    without one).

    Raises:
        InputError: ``deps.tool_calls`` returned something other than a list of
            ToolCall, or ``deps.tool_gate`` something other than a GateDecision.
    """
    calls = deps.tool_calls(reply)
    # Checked here, before anything of the turn is stored: a parser returning None
    # was a TypeError, and non-ToolCall items reached the gate.
    if isinstance(calls, str | bytes) or not isinstance(calls, Sequence):
        raise InputError(
            "AgentDeps.tool_calls must return a list of ToolCall, got "
            f"{type(calls).__name__}; nothing of this turn was stored"
        )
    for i, c in enumerate(calls):
        if not isinstance(c, ToolCall):
            raise InputError(
                f"AgentDeps.tool_calls returned {type(c).__name__} at [{i}], not a ToolCall; "
                "nothing of this turn was stored"
            )
    if deps.tool_gate is None:
        return [GateDecision(c, "allow", "no tool gate") for c in calls]
    decisions = [deps.tool_gate.decide(c, context) for c in calls]
    for c, d in zip(calls, decisions, strict=True):
        # A string such as "allow" passed for a decision: the caller reading
        # d.action failed later, or (before) every reply stored as trusted.
        if not isinstance(d, GateDecision):
            raise InputError(
                f"AgentDeps.tool_gate.decide returned {type(d).__name__} {d!r:.40} for "
                f"{c.tool}, not a GateDecision; nothing of this turn was stored. Return "
                "GateDecision(call, 'allow' | 'confirm' | 'deny', reason)"
            )
        # run_turn reads context[i] for each: (7,) in a turn of two items was a
        # bare IndexError after the model had answered
        bad = [
            i
            for i in d.justified_by
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(context)
        ]
        if bad:
            raise InputError(
                f"AgentDeps.tool_gate.decide justified {c.tool} by {bad[0]!r:.20}, not an "
                f"index into the turn's {len(context)} context items; nothing of this "
                "turn was stored"
            )
    return decisions


def _salience(deps: AgentDeps, text: str) -> float:
    """``deps.salience(text)``, checked here: remember_many's "salience must be a
    number in 0..1" named an argument the caller never passed."""
    value = deps.salience(text)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InputError(
            f"AgentDeps.salience returned {value!r:.40} for {text!r:.40}, not a number in "
            "0..1; nothing of this turn was stored. Make the function return a salience "
            "in 0..1"
        )
    return float(value)


def run_turn(
    scope: str,
    user_input: str,
    deps: AgentDeps,
    *,
    tool_results: Sequence[str] = (),
    turn_id: str | None = None,
) -> TurnResult:
    """One agent turn.

    1. The arguments are checked (before the model is called, so a bad turn costs
       nothing and loses no reply).
    2. Recall fully resolves (ranked, packed into ``deps.token_budget``).
    3. The model is called with the memory delimited as data, then the user input.
       Every tool call the reply states is put to ``deps.tool_gate`` with the
       context marked by origin (``TurnResult.context`` and ``tool_calls``).
    4. The user input, any tool results (untrusted, salience capped) and the reply
       are remembered in one batch. A reply that quotes untrusted context (see
       ``AgentDeps.quote_words``) is stored with that untrusted source, its
       quoted spans in ``meta["quotes"]``.
    5. Maintenance (summarize, evict) runs on the scope.

    Raises:
        InputError: a bad scope, an empty ``user_input``, ``tool_results`` that is
            not a list of strings (a bare string is refused), a bad ``turn_id``;
            or ``deps.tool_calls`` or ``deps.tool_gate`` returned something unusable
            (nothing of the turn is stored).
        ChatModelError: the model returned something other than a string, or a
            string with a lone surrogate; nothing of the turn is stored.
        TurnMaintenanceError: the turn was stored but maintenance failed (a
            summarizer down, a full disk); its ``result`` holds the turn.
    """
    if not isinstance(deps, AgentDeps):
        raise InputError(f"run_turn needs AgentDeps, got {type(deps).__name__}")
    check_scope(scope)
    check_text(user_input, "user_input")
    tools = check_strings(tool_results, "tool_results")
    if turn_id is not None:
        check_text(turn_id, "turn_id")
    layer = deps.layer
    # Touched only once the turn succeeds: a failed turn leaves no trace.
    result = layer.recall(
        RecallQuery(scope, user_input, token_budget=deps.token_budget), touch=False
    )
    messages = prompt_messages(deps.system_prompt, result.hits, user_input)
    reply = deps.model(messages)
    if not isinstance(reply, str):
        raise ChatModelError(
            f"the chat model returned {type(reply).__name__} {reply!r:.60}, not a string; "
            "nothing of this turn was stored. Make the model return the reply text"
        )
    if not reply.isascii():
        try:
            reply.encode("utf-8")
        except UnicodeEncodeError as exc:
            # Checked here, not by remember_many: that InputError would blame the
            # caller's "text" for what the model returned.
            raise ChatModelError(
                f"the chat model returned a reply that is not valid unicode (a lone "
                f"surrogate at character {exc.start}); nothing of this turn was stored. "
                "Make the model client decode the response properly"
            ) from None
    # Decided before anything is stored: a gate that fails leaves no trace.
    context = turn_context(user_input, result.hits, tools)
    decisions = gate_calls(reply, context, deps)
    prov = (turn_id,) if turn_id else ()
    items = [MemoryInput(scope, user_input, salience=_salience(deps, user_input), provenance=prov)]
    items += [
        MemoryInput(scope, t, salience=_salience(deps, t), source=Source.TOOL, provenance=prov)
        for t in tools
        if t.strip()
    ]
    if reply.strip():
        source, meta = Source.AGENT, None
        if deps.quote_words is not None:
            shown = [Untrusted(t, Source.TOOL, f"tool_results[{i}]") for i, t in enumerate(tools)]
            shown += [
                Untrusted(h.record.content, h.record.source, h.record.id)
                for h in result.hits
                if not h.record.source.trusted
            ]
            quotes = find_quotes(reply, shown, min_words=deps.quote_words)
            if quotes:
                source = quoted_source(quotes) or Source.TOOL
                meta = {"role": "agent", "quotes": [q.as_dict() for q in quotes]}
        held = [d for d in decisions if d.action != "allow"]
        if held:
            # Stored as the agent's, the reply would be trusted memory that names the
            # call: the next turn's gate would find it justified by trusted memory
            # and allow the very call it held back.
            why = {context[i].source for d in held for i in d.justified_by}
            source = Source.WEB if Source.WEB in why or source is Source.WEB else Source.TOOL
            meta = {**(meta or {"role": "agent"}), "gated": [d.call.tool for d in held]}
        items.append(
            MemoryInput(
                scope,
                reply,
                salience=_salience(deps, reply),
                source=source,
                provenance=prov,
                meta=meta,
            )
        )
    stored = layer.remember_many(items)
    if result.hits:
        layer.store.touch(scope, [h.record.id for h in result.hits], result.now)
    turn = TurnResult(
        reply, result.hits, messages, None, [r.id for r in stored], context, decisions
    )
    if deps.maintain:
        try:
            turn.maintenance = layer.maintain(scope)
        except MemlabError as exc:
            # The turn is stored and the model paid for: raising without it would
            # make a retry store the turn twice and call the model again.
            raise TurnMaintenanceError(
                f"the turn was stored ({len(turn.remembered)} records) and its reply is in "
                f"this error's result, but maintenance of scope {scope!r} failed: {exc}. "
                "Do not run the turn again; call maintain() once the cause is fixed",
                turn,
            ) from exc
    return turn
