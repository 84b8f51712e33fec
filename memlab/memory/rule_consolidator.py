"""The LLM-free default consolidator: similarity and BM25 pick a few neighbours of a
new record, text rules decide which of them it supersedes.

The rules for one pair of clauses (and ``RulePolicy``) are in
``memlab.memory.clause_rules``; the protocol, ``Supersession`` and ``ScopeReader`` are in
``memlab.memory.consolidate``; the word tables are in ``memlab.memory.update_cues``
and the clause analysis in ``memlab.memory.update_text``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from memlab.errors import InputError
from memlab.memory.clause_rules import (
    Candidate,
    RulePolicy,
    explicit,
    keys_of,
    may_be_explicit,
    may_differ,
    value_diff,
)
from memlab.memory.consolidate import (
    CONSOLIDATORS,
    ECHO,
    EXPLICIT,
    ScopeReader,
    Supersession,
    eligible_rows,
    neighbour_rows,
)
from memlab.memory.records import (
    SOURCE_CODES,
    UNTRUSTED_SOURCES,
    MemoryRecord,
    Source,
    id_list,
    same_speaker,
    speaker_of,
)
from memlab.memory.stores.base import Candidates
from memlab.memory.update_cues import ACK_WORDS, RETIRING_WORDS
from memlab.memory.update_text import Clause, Parsed, contains, parse_said
from memlab.memory.update_tokens import key, loose


@CONSOLIDATORS.register("rules")
class RuleConsolidator:
    """The LLM-free default: similarity and BM25 pick a few neighbours, text rules
    decide (see ``memlab.memory.update_text`` for the word tables).

    For a new record N (trusted, from a source in ``supersede_from``):

    1. N's clauses are read. A clause that is a question, a hypothetical, about
       someone else, an addition, history or hearsay states no current fact of the
       speaker's own and supersedes nothing, unless the old clause carries the same
       marker ("if" against "if": a conditional rule replacing a conditional rule).
    2. Candidates: the ``neighbours`` most similar earlier trusted active records,
       the ``lexical_neighbours`` best by BM25 on N's text, and, for every value N
       names as old, the records that contain it. Only these are read in full.
    3. For each candidate O and each pair of (N clause, O clause), the first rule
       that holds decides:

       - ``explicit-old-value`` (0.9): N names a value as old ("from X to Y",
         "off X", "X is out", "instead of X", "no longer X", "used to X, now ...")
         and O's clause states X (not as old itself) and not N's new value. A
         clause that names its old value supersedes only records that state it.
       - ``cue+value-diff`` (0.8): N has a change cue ("actually", "now",
         "switched", ...) and either both clauses hold a distinctive value of the
         same kind that the other lacks (two e-mails of one domain, two ticket ids
         with one prefix, two #channels), or they share a frame (``cue_frame``)
         and each states a value the other lacks (at most ``max_value_words``).
       - ``value-diff`` (0.6): no cue, but the same statement with another value:
         a stronger frame (``implicit_frame``, two shared words) and short values,
         or the same words around one replaced span (``memlab.memory.frames``:
         "Code's all in Azure Repos." -> "Code's all in Gitea."; 0.8 with a cue).
         Two identifiers (INV-5321, INV-7790) are two things, never one slot
         without a cue.
       - ``cue+similar`` (0.6): a change cue, O is N's nearest user statement by
         embedding (``similar_rank``, ``min_similar``) and each states a value the
         other lacks (a correction phrased unlike the original).

       Rules other than the first only retire user statements: an agent's record
       is superseded when it states the named old value, or as an echo.
       In cased text the two differing values must look alike: both names or
       numbers, or both plain words ("Azure AD" does not replace "new hires").
    4. Echoes (0.9 x the parent's confidence): a record that repeats a superseded
       value and little else ("Noted: Heroku.", "Heroku, as you mentioned.") is
       superseded with it.

    A chain A -> B -> C needs nothing special: A is no longer active when C
    arrives, so C supersedes B. A revert ("back to X") states X as new: it
    supersedes the record stating the value in force, never an older X.

    Args:
        policy: the knobs (RulePolicy).
    """

    #: the dataclass of its knobs (a config's ``consolidator`` node has its fields)
    settings = RulePolicy

    def __init__(self, policy: RulePolicy | None = None) -> None:
        # value_diff's verdicts on the pairs judge() compared: a recall's second
        # packing pass, and the recalls after it, compare mostly the same hits
        self._verdicts: dict[tuple[object, ...], _Verdict] = {}
        self.policy = policy or RulePolicy()

    @property
    def policy(self) -> RulePolicy:
        """The knobs; setting new ones forgets the verdicts decided under the old."""
        return self._policy

    @policy.setter
    def policy(self, policy: RulePolicy) -> None:
        self._policy = policy
        self._verdicts.clear()

    @property
    def name(self) -> str:
        return "rules-v1"

    def __repr__(self) -> str:
        return f"RuleConsolidator({self.policy})"

    # -- the decision -------------------------------------------------------------
    def decide(self, new: MemoryRecord, reader: ScopeReader) -> list[Supersession]:
        """The earlier active records of ``new.scope`` that ``new`` supersedes."""
        policy = self.policy
        if new.scope != reader.scope:
            raise InputError(
                f"record {new.id} is in scope {new.scope!r} but the reader reads {reader.scope!r}"
            )
        claims = self._claims(new)
        if claims is None:
            return []
        parsed, clauses = claims
        cands = reader.candidates(new.embedding, text=new.content)
        if len(cands) == 0:
            return []
        eligible = self._eligible(cands, new)
        if not eligible.any():
            return []
        # Only the cue rules can link statements that share no word, so only a
        # record with a change cue pays for a similarity scan of the scope; the
        # others are compared with the records BM25 finds.
        cued = any(c.cues for c in clauses)
        named = any(may_be_explicit(c) for c in clauses)
        rows = self._neighbours(cands, eligible, new, scan=cued)
        if policy.read_all:
            for row in np.flatnonzero(eligible):
                rows.setdefault(int(row), float(cands.embeddings[row] @ new.embedding))
        olds = list(dict.fromkeys(v for c in clauses for v in c.olds))
        common: set[str] = set()
        for value in olds:
            holding, n_found = self._containing(reader, new, value)
            rows.update(holding)
            if n_found > policy.common_value_records:
                common.add(value)
        first_pending = len(cands) - len(reader.pending)  # pending rows come last
        for j, r in enumerate(reader.pending):  # a batch's earlier items: always compare
            if r.id != new.id and cands.mask[first_pending + j]:
                rows.setdefault(first_pending + j, float(r.embedding @ new.embedding))
        if not named:
            # an agent's record is retired only by a value named as old (or as an
            # echo, read below): without one it is neither read nor parsed (long
            # assistant turns cost the most to parse)
            rows = {r: s for r, s in rows.items() if cands.source[r] not in _ECHO_ONLY_CODES}
        sims = {cands.ids[row]: sim for row, sim in rows.items()}
        row_of = {cands.ids[row]: row for row in rows}
        found = [
            Candidate(rec, _parsed(rec), sims.get(rec.id, 0.0))
            for rec in reader.get_many(list(sims))
            if rec.id != new.id and self._may_supersede(new, rec)
        ]
        folded = self._folded(new, reader, found, named)
        decided = self._judge_all(new, clauses, [*found, *folded], common)
        decided = _onto_notes(decided)
        decisions = [_with_restatements(c.best, c.parsed) for c in decided.values() if c.best]
        decisions += self._echoes(new, parsed, reader, cands, eligible, decided, row_of)
        out = [d for d in decisions if d.confidence >= policy.min_confidence]
        out.sort(key=lambda d: (-d.confidence, d.old_id))
        return out

    def _folded(
        self, new: MemoryRecord, reader: ScopeReader, found: list[Candidate], named: bool
    ) -> list[Candidate]:
        """The episodes that the summary notes among ``found`` folded, as candidates
        of their own (their words and embedding, not the note's): a statement folded
        before its correction came is judged as the statement it was, and a decision
        on it becomes one on the note's sentence (``_onto_notes``)."""
        notes = {
            c.record.id: c for c in found
            if _folded_ids(c.record) and c.record.source not in _ECHO_ONLY
        }  # fmt: skip
        if not notes:
            return []
        wanted = {i: n for n in notes.values() for i in _folded_ids(n.record)}
        out = []
        for ep in reader.get_many(list(wanted)):
            if ep.invalid_at is not None or not self._may_supersede(new, ep):
                continue
            if not named and ep.source in _ECHO_ONLY:
                continue  # nothing but a named old value retires it (see decide)
            sim = float(ep.embedding @ new.embedding)
            out.append(Candidate(ep, _parsed(ep), sim, note=wanted[ep.id].record))
        return out

    def judge(self, new: MemoryRecord, olds: Sequence[MemoryRecord]) -> list[Supersession]:
        """The rules on given records only (no store, no echoes): which of ``olds``
        ``new`` supersedes. The recall guard uses this on the records a recall
        packed, and picks which ones are compared (those of ``new``'s scope and of
        the broader layers of the recall)."""
        policy = self.policy
        claims = self._claims(new)
        if claims is None:
            return []
        clauses = claims[1]
        named = any(may_be_explicit(c) for c in clauses)
        found = [
            Candidate(o, _parsed(o), float(o.embedding @ new.embedding))
            for o in olds
            if o.id != new.id
            and (named or o.source not in _ECHO_ONLY)  # see decide
            and self._may_supersede(new, o)
        ]
        decided = self._judge_all(new, clauses, found, set(), self._verdicts)
        out = [
            c.best
            for c in decided.values()
            if c.best is not None and c.best.confidence >= policy.min_confidence
        ]
        out.sort(key=lambda d: (-d.confidence, d.old_id))
        return out

    def _judge_all(
        self,
        new: MemoryRecord,
        clauses: list[Clause],
        found: list[Candidate],
        common: set[str],
        verdicts: dict[tuple[object, ...], _Verdict] | None = None,
    ) -> dict[str, Candidate]:
        statements = [
            c for c in found
            if c.record.source not in _ECHO_ONLY and c.parsed.stating
        ]  # fmt: skip
        by_kind: dict[str, int] = {}
        for rank, c in enumerate(sorted(statements, key=lambda c: -c.similarity), start=1):
            c.rank = rank
            for k in {vt for cl in c.parsed.stating for vt, _ in cl.typed}:
                by_kind[k] = c.kind_ranks[k] = by_kind.get(k, 0) + 1
        decided: dict[str, Candidate] = {}
        for cand in found:
            self._judge(new, clauses, cand, common, verdicts)
            if cand.best is not None:
                decided[cand.record.id] = cand
        return decided

    def _claims(self, new: MemoryRecord) -> tuple[Parsed, list[Clause]] | None:
        """``new``'s analysis and the clauses that may supersede something; None
        when nothing can: an untrusted source or one not in ``supersede_from``, a
        pasted document (more than ``max_clauses`` clauses), or no clause that
        states a value or names an old one."""
        policy = self.policy
        if new.source in UNTRUSTED_SOURCES or new.source not in policy.supersede_from:
            return None
        parsed = _parsed(new)
        if policy.max_clauses is not None and len(parsed.clauses) > policy.max_clauses:
            return None  # a pasted document, not a statement
        clauses = [c for c in parsed.clauses if c.states or c.olds]
        return (parsed, clauses) if clauses else None

    def _may_supersede(self, new: MemoryRecord, old: MemoryRecord) -> bool:
        if old.source in UNTRUSTED_SOURCES and not self.policy.supersede_untrusted:
            return False
        if not same_speaker(new, old):
            return False  # one person's statement never retires another's
        return old.created_at <= new.created_at

    def _eligible(self, cands: Candidates, new: MemoryRecord) -> np.ndarray:
        return eligible_rows(cands, new, untrusted=self.policy.supersede_untrusted)

    def _neighbours(
        self, cands: Candidates, eligible: np.ndarray, new: MemoryRecord, *, scan: bool
    ) -> dict[int, float]:
        p = self.policy
        return neighbour_rows(
            cands, eligible, new,
            similar=p.neighbours if scan else 0, lexical=p.lexical_neighbours,
            min_similarity=p.min_similarity, scan_rows=p.scan_rows,
        )  # fmt: skip

    def _containing(
        self, reader: ScopeReader, new: MemoryRecord, value: str, limit: int = 0
    ) -> tuple[dict[int, float], int]:
        """Rows (of a fresh candidates view) that may contain ``value``, best BM25
        first, and how many active records match any of its words."""
        # Row numbers of this view equal those of the main view: both come from the
        # same store state (a consolidator does not write).
        cands = reader.candidates(None, text=value)
        if cands.lexical is None or len(cands) == 0:
            return {}, 0
        eligible = self._eligible(cands, new)
        lex = np.where(eligible, cands.lexical, 0.0)
        hits = np.flatnonzero(lex > 0)
        n = int(hits.size)
        k = min(max(limit, self.policy.old_value_matches), n)
        if k == 0:
            return {}, 0
        top = hits[np.argpartition(-lex[hits], k - 1)[:k]] if n > k else hits
        return {int(r): float(cands.embeddings[r] @ new.embedding) for r in top}, n

    def _judge(
        self,
        new: MemoryRecord,
        clauses: list[Clause],
        cand: Candidate,
        common: set[str],
        verdicts: dict[tuple[object, ...], _Verdict] | None = None,
    ) -> None:
        old = cand.record
        statement = old.source not in _ECHO_ONLY
        old_clauses = cand.parsed.stating
        best: tuple[Supersession, frozenset[str], frozenset[str], frozenset[str]] | None = None
        best_strength = (0.0, False, False)
        for nc in clauses:
            named = may_be_explicit(nc)  # most clauses of a conversation: no
            marked = bool(nc.markers)
            for oc in old_clauses:
                # a marker the old clause lacks: this pair is no update (most pairs
                # have no markers on either side, and blocks() is a lookup)
                if (marked or oc.markers) and nc.blocks(oc):
                    continue
                hit = explicit(new, nc, old, oc, common) if named else None
                if hit is None and statement and not nc.olds and may_differ(nc, oc):
                    hit = self._value_diff(new, nc, old, oc, cand, verdicts)
                if hit is None:
                    continue
                strength = _strength(hit[0], oc)
                if best is None or strength > best_strength:
                    best = (*hit, frozenset(oc.keys))
                    best_strength = strength
        if best is None:
            return
        decision, old_keys, new_keys, frame = best
        span = decision.span
        at = (
            None if span is None
            else next((i for i, c in enumerate(old_clauses) if c.start == span[0]), None)
        )  # fmt: skip
        retired: list[Clause] = []
        if at is not None:
            # a clause that only names a value as retired ("X was retired;" before "our
            # tool is Y now") is no claim of its own: it goes with the replaced clause
            if at and _only_retires(old_clauses[at - 1]):
                retired.append(old_clauses[at - 1])
            # and the other way round: a replaced clause that names a value only as
            # old ("$50,000 a month is out as our spend cap;") takes along the clause
            # after it that states its replacement by a back reference ("$800 a month
            # took its place."), which a revert to $50,000 retires too
            replaced = old_clauses[at]
            after = old_clauses[at + 1] if at + 1 < len(old_clauses) else None
            if (
                after is not None and replaced.olds and not replaced.news
                and not after.olds and _BACK_REFERENCE.search(after.text)
            ):  # fmt: skip
                retired.append(after)
        partial = any(
            len(c.keys) >= 2 and (span is None or c.start != span[0]) and c not in retired
            for c in old_clauses
        )
        cand.best = replace(decision, partial=partial)
        if partial and retired:
            cand.best = replace(
                cand.best,
                more_spans=(*cand.best.more_spans, *((c.start, c.end) for c in retired)),
            )
        cand.old_keys, cand.new_keys, cand.frame = old_keys, new_keys, frame

    def _value_diff(
        self,
        new: MemoryRecord,
        nc: Clause,
        old: MemoryRecord,
        oc: Clause,
        cand: Candidate,
        verdicts: dict[tuple[object, ...], _Verdict] | None,
    ) -> _Hit | None:
        """``value_diff``, remembered in ``verdicts`` (None: not remembered). Its
        verdict depends on the two clauses, the records' ids (the decision names
        them) and, for a cued clause only, the candidate's ranks and cosine: the
        key holds those, and the clause objects themselves (parse caches them per
        text) are kept and compared, so another text never reads this verdict."""
        if verdicts is None:
            return value_diff(self.policy, new, nc, old, oc, cand)
        k: tuple[object, ...] = (old.id, new.id, id(oc), id(nc))
        if nc.cues:
            k += (cand.rank, cand.similarity, tuple(cand.kind_ranks.items()))
        seen = verdicts.get(k)
        if seen is not None and seen[0] is oc and seen[1] is nc:
            return seen[2]
        hit = value_diff(self.policy, new, nc, old, oc, cand)
        if len(verdicts) >= _VERDICTS:
            verdicts.clear()
        verdicts[k] = (oc, nc, hit)
        return hit

    def _echoes(
        self,
        new: MemoryRecord,
        parsed: Parsed,
        reader: ScopeReader,
        cands: Candidates,
        eligible: np.ndarray,
        decided: dict[str, Candidate],
        row_of: dict[str, int],
    ) -> list[Supersession]:
        """Records that only repeat a value just superseded."""
        policy = self.policy
        parents = [c for c in decided.values() if c.best is not None and c.old_keys]
        if not parents:
            return []
        rows: dict[int, float] = {}
        order: np.ndarray | None = None
        # one BM25 pass for every value just superseded (not one per value)
        values = " ".join(dict.fromkeys(p.best.old_value for p in parents if p.best))
        if values.strip():
            rows.update(self._containing(reader, new, values, limit=4 * len(parents))[0])
        for parent in parents:
            assert parent.best is not None
            if policy.echo_after:
                i = row_of.get(parent.record.id)
                if i is not None:
                    if order is None:
                        order = np.flatnonzero(eligible)
                    later = order[cands.created_at[order] >= cands.created_at[i]]
                    later = later[later != i]
                    nearest = np.argsort(cands.created_at[later], kind="stable")
                    for r in later[nearest[: policy.echo_after]]:
                        rows.setdefault(int(r), 0.0)
        ids = [cands.ids[r] for r in rows]
        ids = [i for i in ids if i not in decided and i != new.id]
        out = []
        new_keys = parsed.keys
        for rec in reader.get_many(ids):
            if not self._may_supersede(new, rec):
                continue
            p = _parsed(rec)
            if not p.clauses:
                continue
            keys = {k for k in p.keys if k not in _ACK_KEYS}
            echo = not any(c.question for c in p.clauses)
            for parent in parents:
                best = parent.best
                assert best is not None
                if echo and self._is_echo(best, parent, keys, new_keys, rec):
                    out.append(
                        Supersession(
                            rec.id,
                            new.id,
                            ECHO,
                            round(0.9 * best.confidence, 4),
                            f'repeats "{best.old_value}" of {parent.record.id}',
                            old_value=best.old_value,
                            new_value=best.new_value,
                        )
                    )
                    break
                restated = _restated(best, p)
                if restated:  # it states more: only its claims of the old value go
                    out.append(
                        Supersession(
                            rec.id, new.id, ECHO, round(0.9 * best.confidence, 4),
                            f'restates "{best.old_value}" of {parent.record.id}',
                            old_value=best.old_value, new_value=best.new_value,
                            partial=True, span=restated[0], more_spans=tuple(restated[1:]),
                        )
                    )  # fmt: skip
                    break
        return out

    def _is_echo(
        self,
        best: Supersession,
        parent: Candidate,
        keys: set[str],
        new_keys: frozenset[str],
        rec: MemoryRecord,
    ) -> bool:
        """Whether a record with ``keys`` repeats ``best``'s old value and little else."""
        overlap = keys & parent.old_keys
        if not overlap or keys & parent.new_keys:
            return False
        # it must repeat the value, not only name the topic ("I'll keep your
        # CDN in mind" is no echo of "Bunny CDN"): a value named as old must
        # occur whole; otherwise at least half of the value's words must, of
        # those that look like a value if any do
        if best.reason == EXPLICIT and best.old_value:
            if not contains(loose(rec.content), best.old_value):
                return False
        else:
            wanted = parent.old_keys & parent.parsed.valuey or parent.old_keys
            if 2 * len(overlap & wanted) < len(wanted):
                return False
        extra = keys - parent.old_keys - parent.frame - new_keys
        return len(extra) <= self.policy.echo_extra_words


_Hit = tuple[Supersession, frozenset[str], frozenset[str]]
#: a remembered value_diff verdict: the two clauses it was given, and its answer
_Verdict = tuple[Clause, Clause, _Hit | None]
#: at most this many verdicts are remembered (then they are forgotten at once)
_VERDICTS = 8192

#: Markers of a clause that does not state the speaker's value in force: such a
#: clause keeps a superseded value without restating it ("we used to use X").
_NOT_STATED = frozenset({"question", "request", "hypothetical", "other", "history", "reported"})


def _restated(best: Supersession, p: Parsed) -> list[tuple[int, int]]:
    """The spans of ``p``'s clauses that state ``best``'s replaced value whole, and
    not its new value: in a summary note or a multi-fact message, the sentences that
    restate a superseded value ("Ok, July 31." folded next to "renewal is July 31")."""
    value = best.old_value
    if not value or not keys_of(value) or len(value) < 3:
        return []
    return [
        (c.start, c.end)
        for c in p.clauses
        if c.keys
        and not _NOT_STATED & set(c.markers)
        and contains(c.loose, value)
        and not (best.new_value and contains(c.loose, best.new_value))
    ]


def _parsed(record: MemoryRecord) -> Parsed:
    """A record's clauses, without its speaker tag (``update_text.parse_said``)."""
    return parse_said(record.content, speaker_of(record))


def _onto_notes(decided: dict[str, Candidate]) -> dict[str, Candidate]:
    """Decisions on folded episodes moved onto the notes that hold them: the
    episode's replaced clause, found verbatim in the note, becomes a stale span of
    the note (a note decided on its own keeps that decision; a clause the
    summarizer did not keep verbatim is not moved)."""
    out = {k: c for k, c in decided.items() if c.note is None}
    for c in decided.values():
        note = c.note
        if note is None or c.best is None or c.best.span is None or note.id in out:
            continue
        a, b = c.best.span
        claim = c.record.content[a:b].strip().rstrip(".!?;,").strip()
        at = note.content.find(claim) if claim else -1
        if at < 0:
            continue
        end = at + len(claim)
        while end < len(note.content) and note.content[end] in ".!?;":
            end += 1
        best = replace(c.best, old_id=note.id, partial=True, span=(at, end), more_spans=())
        out[note.id] = Candidate(
            note, _parsed(note), c.similarity, best=best,
            old_keys=c.old_keys, new_keys=c.new_keys, frame=c.frame,
        )  # fmt: skip
    return out


def _strength(decision: Supersession, oc: Clause) -> tuple[float, bool, bool]:
    """How a decision ranks among one old record's clauses: by confidence, then
    whether the replaced words look like a value ("billing@x.io", not "read"): in
    "I don't read email at night. Our billing email is a@x.io", the e-mail is the
    claim an e-mail correction replaces."""
    return (
        decision.confidence,
        # a clause that names a value only as old ("we said goodbye to X —") is no
        # claim of its own: the record's clause that states a value is the one replaced
        not (oc.olds and not oc.news),
        bool(keys_of(decision.old_value) & oc.valuey),
    )


def _with_restatements(best: Supersession, p: Parsed) -> Supersession:
    """``best`` with the old record's other clauses that restate the same value."""
    if best.span is None or not best.partial:
        return best
    more = tuple(
        dict.fromkeys(s for s in (*best.more_spans, *_restated(best, p)) if s != best.span)
    )
    return replace(best, more_spans=more) if more else best


def _only_retires(c: Clause) -> bool:
    """A clause that only names values as old ("X was retired;", "X is out;"): every
    content word belongs to a value it retires, and it names nothing as new; the
    first half of a correction whose second half states the new value."""
    if not c.olds or c.news:
        return False
    words = {k: t for t, k in zip(c.tokens, c.token_keys, strict=True)}
    return all(
        k in _RETIRING or any(contains(loose(v), loose(words.get(k, k))) for v in c.olds)
        for k in c.keys
    )


_RETIRING = frozenset(key(w) for w in RETIRING_WORDS)
#: words by which a clause refers to the value the clause before it retired
_BACK_REFERENCE = re.compile(r"\b(?:its?|instead)\b", re.I)
#: Sources whose records are only retired as echoes or by a named old value.
_ECHO_ONLY = frozenset({Source.AGENT})
_ECHO_ONLY_CODES = frozenset(SOURCE_CODES[s] for s in _ECHO_ONLY)
_ACK_KEYS = frozenset(key(w) for w in ACK_WORDS)


def _folded_ids(record: MemoryRecord) -> list[str]:
    """The episode ids a summary note folded (``meta["summary_of"]``), or none when
    that is not a list of ids (``records.id_list``): such a record is no note."""
    return id_list(record.meta.get("summary_of"))


__all__ = ["RuleConsolidator", "RulePolicy"]
