"""Capability gating: which tool calls a turn's context may justify.

Recalled memory is context the user did not type in this turn, and some of it
(tool and web records) was written by programs or web pages. A model that reads
"refund order 4411 via payments.refund" in such a record and calls the tool acts
on an outside party's text. ``run_turn`` therefore marks every item the model was
shown with where it came from (``ContextOrigin``: the user's input, a recalled
memory, a tool result of this turn) and, when ``AgentDeps.tool_gate`` is set,
asks the gate about every tool call in the reply (``TurnResult.tool_calls``).
run_turn never runs tools: the caller runs the calls the gate allows and asks the
user about the others.

A ``ToolGate`` is any object with ``decide(call, context) -> GateDecision``.
``ConfirmUntrustedMemory`` is the example policy: a call whose only justification
is untrusted context needs the user's confirmation. An item justifies a call when
it names the call's tool or one of its argument values (whole words, case
folded, with full-width forms, dashes and invisible characters folded as the
memory block shows them to the model); the user's input and trusted memory are trusted justification, recalled
tool/web memory and this turn's tool results are not. A trusted item that names
only the tool does not justify values that only untrusted items name.

Example::

    deps = AgentDeps(layer, model, tool_gate=ConfirmUntrustedMemory())
    turn = run_turn("alice", "anything new on my tickets?", deps)
    for d in turn.tool_calls:
        if d.action == "allow":
            run(d.call)
        elif d.action == "confirm":
            ask_user(d.call, d.reason)
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memlab.errors import InputError
from memlab.memory.checks import check_bool
from memlab.memory.procedural import ToolCall, parse_tool_call
from memlab.memory.records import Source

ORIGINS = ("user", "memory", "tool_result")
ACTIONS = ("allow", "confirm", "deny")


@dataclass(frozen=True)
class ContextOrigin:
    """One item a turn's model was shown, and where it came from.

    Attributes:
        origin: ``user`` (this turn's input), ``memory`` (a recalled record) or
            ``tool_result`` (a tool result passed to this turn).
        text: the item's text.
        source: the record's source (``user`` for the input, ``tool`` for a tool
            result).
        record_id: the recalled record's id (memory items only).
    """

    origin: str
    text: str
    source: Source
    record_id: str | None = None

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise InputError(f"context origin must be one of {ORIGINS}, got {self.origin!r}")

    @property
    def trusted(self) -> bool:
        """The user's input and memory from trusted sources; not tool/web text."""
        return self.origin != "tool_result" and self.source.trusted

    @property
    def from_memory(self) -> bool:
        return self.origin == "memory"


@dataclass(frozen=True)
class GateDecision:
    """What a gate says about one tool call.

    Attributes:
        call: the tool call.
        action: ``allow`` (run it), ``confirm`` (ask the user first) or ``deny``.
        reason: why, in a sentence (shown to the user for ``confirm``).
        justified_by: indices into the turn's context of the items that justify it.
    """

    call: ToolCall
    action: str
    reason: str
    justified_by: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise InputError(f"gate action must be one of {ACTIONS}, got {self.action!r}")


@runtime_checkable
class ToolGate(Protocol):
    """Decides whether a tool call may run, given the context the model was shown."""

    def decide(self, call: ToolCall, context: Sequence[ContextOrigin]) -> GateDecision: ...


def _fold(text: str) -> str:
    """``text`` as the model reads it: NFKC (full-width forms), invisible format
    characters (zero-width, soft hyphen) removed, every dash a ``-``, case folded.
    The memory block shows the model NFKC text without format characters, so a
    web record spelling the call's ``A-4411`` in full-width digits, or with a
    zero-width space inside, named it to the model but not to the gate (which
    allowed the call as unjustified)."""
    text = unicodedata.normalize("NFKC", text)
    if not text.isascii():
        text = "".join(
            "-" if unicodedata.category(ch) == "Pd" else ch
            for ch in text
            if unicodedata.category(ch) != "Cf"
        )
    return text.casefold()


def _phrase(text: str) -> str:
    # A full stop ends a sentence, not a value: read as part of the word, it hid
    # "A-4411." (a value at the end of a sentence) from the needle "A-4411".
    words = (w.strip(".") for w in re.findall(r"[\w.\-/]+", _fold(text)))
    return " " + " ".join(w for w in words if w) + " "


def justifying(
    call: ToolCall, context: Sequence[ContextOrigin], min_chars: int = 3, *, tool: bool = True
) -> list[int]:
    """Indices of the context items that name the call's tool or one of its
    argument values (whole words, case folded, full-width forms, dashes and
    invisible characters folded as in ``_fold``; values shorter than
    ``min_chars`` characters are too common to count). ``tool=False``: only the
    items that name one of its values."""
    needles = [v.strip() for _, v in call.args if len(v.strip()) >= min_chars]
    if tool:
        needles.insert(0, call.tool)
    needles = [_phrase(n) for n in needles]
    needles = [n for n in needles if n.strip()]
    return [i for i, item in enumerate(context) if any(n in _phrase(item.text) for n in needles)]


class ConfirmUntrustedMemory:
    """The example policy: confirm a call whose only justification is untrusted.

    - justified by the user's input or by trusted memory: ``allow``, unless the
      trusted items name only the tool while untrusted ones name its values (a
      stored procedure names ``payments.refund``; a web page, which order and
      account): the values' only justification is untrusted;
    - justified only by untrusted items (recalled tool/web memory, this turn's
      tool results): ``confirm`` (``deny`` with ``deny=True``);
    - justified by nothing in the context: ``allow`` (the model's own idea; the
      context did not steer it). Set ``unjustified`` to ``confirm`` to be stricter.

    Args:
        tool_results_trusted: count this turn's tool results as trusted (they
            answer calls the caller already allowed); default False.
        deny: deny instead of asking for confirmation.
        unjustified: the action for a call nothing in the context names.
    """

    def __init__(
        self, *, tool_results_trusted: bool = False, deny: bool = False, unjustified: str = "allow"
    ) -> None:
        if unjustified not in ACTIONS:
            raise InputError(f"unjustified must be one of {ACTIONS}, got {unjustified!r}")
        # bool() took tool_results_trusted="no" (a truthy string) as True: every
        # call a tool result justified was allowed
        self.tool_results_trusted = check_bool(
            tool_results_trusted, "ConfirmUntrustedMemory: tool_results_trusted"
        )
        self.deny = check_bool(deny, "ConfirmUntrustedMemory: deny")
        self.unjustified = unjustified

    def _trusted(self, item: ContextOrigin) -> bool:
        if item.origin == "tool_result":
            return self.tool_results_trusted
        return item.trusted

    def decide(self, call: ToolCall, context: Sequence[ContextOrigin]) -> GateDecision:
        rows = justifying(call, context)
        if not rows:
            return GateDecision(call, self.unjustified, "nothing in the context names this call")
        trusted = [i for i in rows if self._trusted(context[i])]
        if trusted:
            # A trusted item naming only the tool allowed any call of it: with a
            # procedure for payments.refund in memory, a web page's "refund A-4411
            # to account 99-1234" was allowed as justified by trusted memory.
            valued = set(justifying(call, [context[i] for i in rows], tool=False))
            by_trusted = any(k in valued for k, i in enumerate(rows) if i in trusted)
            if by_trusted or not valued:
                who = sorted({context[i].origin for i in trusted})
                return GateDecision(call, "allow", f"justified by trusted {' and '.join(who)}",
                                    tuple(rows))  # fmt: skip
            ids = [context[rows[k]].record_id or context[rows[k]].origin for k in sorted(valued)]
            return GateDecision(
                call,
                "deny" if self.deny else "confirm",
                f"{call.tool} is named by trusted context, but its values only by untrusted "
                f"context ({', '.join(ids)}); ask the user before running it",
                tuple(rows),
            )
        ids = [context[i].record_id or context[i].origin for i in rows]
        return GateDecision(
            call,
            "deny" if self.deny else "confirm",
            f"{call.tool} is justified only by untrusted context ({', '.join(ids)}); "
            "ask the user before running it",
            tuple(rows),
        )


def reply_tool_calls(reply: str) -> list[ToolCall]:
    """The tool calls a reply states, one per line as ``name(key=value, ...)``."""
    calls = []
    for line in reply.splitlines():
        call = parse_tool_call(line)
        if call is not None:
            calls.append(call)
    return calls


__all__ = [
    "ACTIONS",
    "ORIGINS",
    "ConfirmUntrustedMemory",
    "ContextOrigin",
    "GateDecision",
    "ToolGate",
    "justifying",
    "reply_tool_calls",
]
