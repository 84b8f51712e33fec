"""ProcedureRecorder: captures successful tool-use sequences from a conversation as
procedures (``memlab.memory.procedural`` holds the records, merging and rating)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memlab.memory.checks import check_text
from memlab.memory.procedural import (
    Procedure,
    ToolCall,
    _embed,
    _near_duplicate,
    generalize,
    parse_tool_call,
    remember_procedure,
)
from memlab.memory.records import MemoryKind, MemoryRecord, check_scopes
from memlab.memory.salience import PLEASANTRY

if TYPE_CHECKING:
    from memlab.memory.layer import MemoryLayer

CONFIRMATION = re.compile(
    r"\b(that (worked|did it|fixed it|does it|helped)|it worked|works now|working now|"
    r"(is|are|looks?) (fixed|resolved|good now)|fixed( it| now)?\b|all good|back to normal|"
    r"resolved|problem solved|that'?s done it|perfect,? (thanks|thank you)|it'?s back)\b",
    re.I,
)
GO_AHEAD = re.compile(
    r"^\W*(yes|yeah|yep|sure|go ahead|please do|do it|proceed|sounds good|ok(ay)?,? (go|do it|"
    r"please)|please go ahead)\b[\w\s,!.]{0,20}$",
    re.I,
)
REQUEST = re.compile(
    r"\?|\b(please|pls|can you|could you|would you|need(s|ed)? (to|you)|help|fix|how (do|did|can)|"
    r"let'?s|go ahead|make sure|set up|restore|rotate|replay|purge|clear|restart|deploy|"
    r"create|delete|remove|add|update|reset|migrate|rollback|roll back|check)\b",
    re.I,
)
COMPLAINT = re.compile(
    r"\b(still (broken|failing|down|seeing|getting|not)|didn'?t (work|help|fix)|did not (work|"
    r"help|fix)|not (working|fixed)|same (error|problem|issue)|no (change|luck)|still the same|"
    r"made it worse)\b"
    # A negated confirmation ("it isn't fixed", "that hasn't fixed it", "not back to
    # normal", "it doesn't work"): CONFIRMATION finds "fixed" / "back to normal" in
    # it, and the failed attempt was recorded as a success.
    r"|\b(not|never|isn'?t|aren'?t|wasn'?t|weren'?t|hasn'?t|haven'?t|doesn'?t|don'?t|"
    r"won'?t|can'?t)\s+(\w+\s+)?(fix(ed|es)?|resolved|work(s|ed|ing)?|help(s|ed)?|back|"
    r"good|normal)\b"
    # A failure beside a word that confirms ("I fixed the typo, but the webhooks
    # still fail", "it worked for one endpoint but not the other"), or in words the
    # first list lacks ("still fails", "nothing changed"): recorded as a success,
    # by CONFIRMATION or by the calls' "ok".
    r"|\bstill (fails?|failed|erroring|errors?|there|happening|crashing|timing out)\b"
    r"|\bbut ((it|they|that) )?(still )?(fails?|failed|failing|not (for|on|in|the others?))\b"
    r"|\bnothing changed\b|\b(is|are|it'?s|got) worse\b",
    re.I,
)

# right single quotation mark, modifier letter apostrophe, prime, full-width
_APOSTROPHES = str.maketrans(dict.fromkeys("\u2019\u02bc\u2032\uff07", "'"))


# -- capturing from a conversation --------------------------------------------------
@dataclass
class _Attempt:
    task: str
    provenance: list[str]
    calls: list[ToolCall] = field(default_factory=list)
    call_turns: list[str] = field(default_factory=list)


class ProcedureRecorder:
    """Captures successful tool-use sequences from a conversation as procedures.

    Feed it every message of a scope in order: ``user``, ``tool`` and ``agent``. A
    user message that asks for something (``REQUEST``: a question, "please", "can
    you", a task verb) starts an attempt (the task); tool calls after it are its
    steps (calls after small talk belong to no attempt);
    the attempt ends at the next user message, which decides its outcome:

    - a confirmation ("that did it, thanks") -> success;
    - a complaint ("still failing") -> failure (counted on the matching stored
      procedure, if any);
    - anything else -> success if every call reported success and
      ``require_confirmation`` is off, otherwise nothing is recorded.

    Calls that failed are dropped from the steps of a successful attempt (they did
    not contribute). ``finish(scope)`` ends a scope's open attempt by its calls'
    outcomes alone. Each scope (or list of layered scopes) has its own attempt.

    Args:
        layer: where procedures are written (``layer.procedures`` is the policy).
    """

    def __init__(self, layer: MemoryLayer) -> None:
        self.layer = layer
        self._open: dict[tuple[str, ...], _Attempt] = {}

    @staticmethod
    def _key(scope: str | Sequence[str]) -> tuple[str, ...]:
        # Checked on every message: a bad scope was only refused when the attempt
        # closed (and the attempt was lost with it), a list of ints a bare TypeError.
        return check_scopes(scope)

    @staticmethod
    def _check(text: object, turn_id: object) -> None:
        check_text(text, "ProcedureRecorder: text", empty=True)
        if turn_id is not None:
            check_text(turn_id, "ProcedureRecorder: turn_id")

    def user(
        self, scope: str | Sequence[str], text: str, turn_id: str | None = None
    ) -> list[MemoryRecord]:
        """A user message: ends the open attempt (see the class docs), or starts one.

        A go-ahead ("yes, please do") keeps the open attempt going. Returns the
        procedure records written or updated. If writing the procedure fails, the
        attempt stays open as it was, so the same message can be given again.

        Raises:
            InputError: a bad scope, text or turn id (nothing changes).
        """
        key = self._key(scope)
        self._check(text, turn_id)
        attempt = self._open.get(key)
        try:
            return self._user(key, text, turn_id)
        except BaseException:
            # nothing is lost: a failed write (a full disk, a closed store) leaves
            # the attempt as it was before this message
            if attempt is None:
                self._open.pop(key, None)
            else:
                self._open[key] = attempt
            raise

    def _user(self, key: tuple[str, ...], text: str, turn_id: str | None) -> list[MemoryRecord]:
        attempt = self._open.pop(key, None)
        prov = [turn_id] if turn_id is not None else []
        # The patterns spell "didn't" with "'": a phone's or an editor's "didn’t
        # work" was no complaint, and the attempt's "ok" calls counted as a success.
        said = text.translate(_APOSTROPHES)
        if attempt is not None and GO_AHEAD.match(said):
            attempt.provenance += prov
            self._open[key] = attempt
            return []
        confirmed = bool(CONFIRMATION.search(said))
        complained = bool(COMPLAINT.search(said))
        written: list[MemoryRecord] = []
        if attempt is not None and attempt.calls:
            verdict: bool | None = None
            if complained:
                verdict = False
            elif confirmed or (
                not self.layer.procedures.require_confirmation
                and all(c.ok is True for c in attempt.calls)
            ):
                verdict = True
            if verdict is not None:
                closing = attempt
                if complained or confirmed:
                    closing = dataclasses.replace(attempt, provenance=attempt.provenance + prov)
                record = self._close(key, closing, verdict)
                if record is not None:
                    written.append(record)
        if complained and attempt is not None:
            # the agent will try again: the task is the same
            self._open[key] = _Attempt(attempt.task, [*attempt.provenance[:1], *prov])
        elif not confirmed and REQUEST.search(said) and not PLEASANTRY.match(said.strip()):
            self._open[key] = _Attempt(text.strip(), prov)
        elif attempt is not None and not attempt.calls:
            self._open[key] = attempt  # "thanks" before any call: the task stays open
        return written

    def tool(
        self, scope: str | Sequence[str], call: ToolCall | str, turn_id: str | None = None
    ) -> ToolCall | None:
        """A tool call (a ``ToolCall`` or a ``name(args) -> result`` line); returns
        the parsed call, or None when the text is not a call (it is then ignored).

        Raises:
            InputError: a bad scope or turn id, or ``call`` neither a ToolCall nor
                a string.
        """
        key = self._key(scope)
        if not isinstance(call, ToolCall):
            self._check(call, turn_id)
        elif turn_id is not None:
            check_text(turn_id, "ProcedureRecorder: turn_id")
        parsed = parse_tool_call(call) if isinstance(call, str) else call
        attempt = self._open.get(key)
        if parsed is None or attempt is None:
            return parsed
        attempt.calls.append(parsed)
        if turn_id is not None:
            attempt.call_turns.append(turn_id)
        return parsed

    def agent(self, scope: str | Sequence[str], text: str, turn_id: str | None = None) -> None:
        """An agent reply: part of the open attempt (nothing to read from it).

        Raises:
            InputError: a bad scope, text or turn id.
        """
        self._key(scope)
        self._check(text, turn_id)

    def finish(self, scope: str | Sequence[str]) -> MemoryRecord | None:
        """End the scope's open attempt by its calls' outcomes alone. If writing the
        procedure fails, the attempt stays open."""
        key = self._key(scope)
        attempt = self._open.pop(key, None)
        if attempt is None or not attempt.calls:
            return None
        if self.layer.procedures.require_confirmation or not all(
            c.ok is True for c in attempt.calls
        ):
            return None
        try:
            return self._close(key, attempt, True)
        except BaseException:
            self._open[key] = attempt
            raise

    def _close(self, key: tuple[str, ...], attempt: _Attempt, success: bool) -> MemoryRecord | None:
        calls = [c for c in attempt.calls if c.ok is not False] if success else attempt.calls
        if len(calls) < self.layer.procedures.min_steps:
            return None
        scope: str | Sequence[str] = key[0] if len(key) == 1 else list(key)
        if not success:
            # A failure only teaches something about a procedure we already have.
            fresh = Procedure(attempt.task, generalize(calls, attempt.task))
            target = self.layer.write_scope(scope, MemoryKind.PROCEDURAL)
            if (
                _near_duplicate(
                    self.layer, target, fresh, _embed(self.layer, fresh.render()), trusted=True
                )
                is None  # remember_procedure below writes as the agent: trusted
            ):
                return None
        provenance = [*attempt.provenance[:1], *attempt.call_turns, *attempt.provenance[1:]]
        return remember_procedure(
            self.layer, scope, attempt.task, calls, success=success, provenance=provenance
        )


__all__ = ["COMPLAINT", "CONFIRMATION", "GO_AHEAD", "REQUEST", "ProcedureRecorder"]
