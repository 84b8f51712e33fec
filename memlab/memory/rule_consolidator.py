"""The LLM-free default consolidator: similarity and BM25 pick a few neighbours of a
new record, text rules decide which of them it supersedes.

The protocol, ``Supersession`` and ``ScopeReader`` are in
``memlab.memory.consolidate``; the word tables are in ``memlab.memory.update_cues``
and the clause analysis in ``memlab.memory.update_text``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from memlab.errors import InputError
from memlab.memory.consolidate import (
    CONSOLIDATORS,
    CUE_DIFF,
    CUE_SIMILAR,
    ECHO,
    EXPLICIT,
    VALUE_DIFF,
    ScopeReader,
    Supersession,
    eligible_rows,
    neighbour_rows,
)
from memlab.memory.frames import same_frame, symbolic
from memlab.memory.records import UNTRUSTED_SOURCES, MemoryRecord, Source
from memlab.memory.stores.base import Candidates
from memlab.memory.update_cues import ACK_WORDS, BROAD_KINDS, FUNCTION_WORDS
from memlab.memory.update_text import (
    Clause,
    Parsed,
    contains,
    diff,
    key,
    loose,
    parse,
    tokens,
)


@dataclass(frozen=True)
class RulePolicy:
    """The knobs of ``RuleConsolidator``.

    Args:
        neighbours: the new record is compared with this many nearest earlier
            records by embedding similarity ...
        lexical_neighbours: ... and this many by BM25 over the new text.
        old_value_matches: records looked up per value the new text names as old.
        min_similarity: neighbours by similarity need at least this cosine.
        cue_frame: with a change cue, the two statements must share at least this
            share of content words (``Diff.frame``) ...
        implicit_frame: ... and without a cue at least this share, and two words,
        implicit_max_words: ... in clauses of at most this many content words.
        max_value_words: a differing value may span at most this many content words
            on either side; more means the statements are about different things.
        common_value_records: a value named as old that occurs in more active
            records than this is a common word, not a value: it then supersedes
            only records that share the new statement's frame too.
        echo_extra_words: an echo may hold this many words besides the value,
            acknowledgement words and the words of the statements it echoes.
        echo_after: records made right after a superseded one that are checked as
            its echo, besides those found by the value.
        similar_rank: with a change cue, the nearest ``similar_rank`` user
            statements by embedding may be superseded without a shared word ...
        min_similar: ... if their cosine is at least this (embedder-dependent:
            MiniLM puts paraphrases around 0.5, the hash embedder rarely does).
        min_confidence: decisions below this are dropped.
        supersede_from: sources whose records may supersede others (a list of
            source names; tool and web never do). The default, the user only: an agent's statements repeat the user's or the model's
            own, and a model's slip must not retire what the user said.
        supersede_untrusted: whether trusted records may supersede tool/web ones.
        scan_rows: similarity is computed over at most this many of the scope's
            newest rows (the last rows of the store's columns, which stores append in
            write order; None: all); BM25 still covers the whole scope. A cost cap
            for very large scopes.
        read_all: read every eligible record instead of the neighbours (O(scope):
            for measuring what the neighbour preselection misses, not for use).
    """

    neighbours: int = 8
    lexical_neighbours: int = 8
    old_value_matches: int = 8
    min_similarity: float = 0.05
    cue_frame: float = 0.25
    implicit_frame: float = 0.5
    implicit_max_words: int = 8
    max_value_words: int = 4
    common_value_records: int = 6
    echo_extra_words: int = 1
    echo_after: int = 2
    similar_rank: int = 1
    min_similar: float = 0.45
    min_confidence: float = 0.5
    supersede_from: tuple[str, ...] = (Source.USER.value,)
    supersede_untrusted: bool = False
    scan_rows: int | None = None
    read_all: bool = False

    def __post_init__(self) -> None:
        for name in (
            "neighbours", "lexical_neighbours", "old_value_matches", "max_value_words",
            "similar_rank", "implicit_max_words",
        ):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"consolidate.{name} must be an integer >= 1, got {value!r}")
        for name in ("common_value_records", "echo_extra_words", "echo_after"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise InputError(f"consolidate.{name} must be an integer >= 0, got {value!r}")
        for name in ("cue_frame", "implicit_frame", "min_confidence"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise InputError(f"consolidate.{name} must be in 0..1, got {value!r}")
        if not -1.0 <= self.min_similar <= 1.0:
            raise InputError(f"consolidate.min_similar must be in -1..1, got {self.min_similar!r}")
        if not -1.0 <= self.min_similarity <= 1.0:
            raise InputError(
                f"consolidate.min_similarity must be in -1..1, got {self.min_similarity!r}"
            )
        if self.scan_rows is not None and (
            not isinstance(self.scan_rows, int) or self.scan_rows < 1
        ):
            raise InputError(f"consolidate.scan_rows must be >= 1 or None, got {self.scan_rows!r}")
        if isinstance(self.supersede_from, str):
            raise InputError(
                f"consolidate.supersede_from must be a list of sources, e.g. "
                f"[{self.supersede_from!r}], not a string"
            )
        try:
            sources = tuple(dict.fromkeys(Source(s) for s in self.supersede_from))
        except (TypeError, ValueError):
            raise InputError(
                f"consolidate.supersede_from must be a list of sources "
                f"({[s.value for s in Source]}), got {self.supersede_from!r}"
            ) from None
        object.__setattr__(self, "supersede_from", sources)


@dataclass
class _Candidate:
    record: MemoryRecord
    parsed: Parsed
    similarity: float
    rank: int = 0  # by similarity among the user statements read (1 = nearest)
    kind_ranks: dict[str, int] = field(default_factory=dict)  # the same, per value kind
    best: Supersession | None = None
    old_keys: frozenset[str] = frozenset()  # the replaced value's keys (for echoes)
    new_keys: frozenset[str] = frozenset()
    frame: frozenset[str] = frozenset()  # the old clause's keys
    blocked: list[str] = field(default_factory=list)
    note: MemoryRecord | None = None  # a folded episode: the summary note holding it


# source code -> trusted (a lookup table: faster than np.isin on every write)
#: value kinds (``update_text.value_type``) that name one slot of a fact, so two
#: values of one kind with a topic word in common replace each other without a cue
SLOT_KINDS = ("email@", "channel", "area/city", "url:")


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
        self.policy = policy or RulePolicy()

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
        if new.source in UNTRUSTED_SOURCES or new.source not in policy.supersede_from:
            return []
        parsed = parse(new.content)
        clauses = [c for c in parsed.clauses if c.states or c.olds]
        if not clauses:
            return []
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
        sims = {cands.ids[row]: sim for row, sim in rows.items()}
        row_of = {cands.ids[row]: row for row in rows}
        found = [
            _Candidate(rec, parse(rec.content), sims.get(rec.id, 0.0))
            for rec in reader.get_many(list(sims))
            if rec.id != new.id and self._may_supersede(new, rec)
        ]
        folded = self._folded(new, reader, found)
        decided = self._judge_all(new, clauses, [*found, *folded], common)
        decided = _onto_notes(decided)
        decisions = [_with_restatements(c.best, c.parsed) for c in decided.values() if c.best]
        decisions += self._echoes(new, parsed, reader, cands, eligible, decided, row_of)
        out = [d for d in decisions if d.confidence >= policy.min_confidence]
        out.sort(key=lambda d: (-d.confidence, d.old_id))
        return out

    def _folded(
        self, new: MemoryRecord, reader: ScopeReader, found: list[_Candidate]
    ) -> list[_Candidate]:
        """The episodes that the summary notes among ``found`` folded, as candidates
        of their own (their words and embedding, not the note's): a statement folded
        before its correction came is judged as the statement it was, and a decision
        on it becomes one on the note's sentence (``_onto_notes``)."""
        notes = {
            c.record.id: c for c in found
            if c.record.meta.get("summary_of") and c.record.source not in _ECHO_ONLY
        }  # fmt: skip
        if not notes:
            return []
        wanted = {i: n for n in notes.values() for i in n.record.meta["summary_of"]}
        out = []
        for ep in reader.get_many(list(wanted)):
            if ep.invalid_at is not None or not self._may_supersede(new, ep):
                continue
            sim = float(ep.embedding @ new.embedding)
            out.append(_Candidate(ep, parse(ep.content), sim, note=wanted[ep.id].record))
        return out

    def judge(self, new: MemoryRecord, olds: Sequence[MemoryRecord]) -> list[Supersession]:
        """The rules on given records only (no store, no echoes): which of ``olds``
        (older records of ``new``'s scope) ``new`` supersedes. The recall guard uses
        this on the records a recall packed."""
        policy = self.policy
        if new.source in UNTRUSTED_SOURCES or new.source not in policy.supersede_from:
            return []
        clauses = [c for c in parse(new.content).clauses if c.states or c.olds]
        if not clauses:
            return []
        found = [
            _Candidate(o, parse(o.content), float(o.embedding @ new.embedding))
            for o in olds
            if o.id != new.id and o.scope == new.scope and self._may_supersede(new, o)
        ]
        decided = self._judge_all(new, clauses, found, set())
        out = [
            c.best
            for c in decided.values()
            if c.best is not None and c.best.confidence >= policy.min_confidence
        ]
        out.sort(key=lambda d: (-d.confidence, d.old_id))
        return out

    def _judge_all(
        self, new: MemoryRecord, clauses: list[Clause], found: list[_Candidate], common: set[str]
    ) -> dict[str, _Candidate]:
        statements = [
            c for c in found
            if c.record.source not in _ECHO_ONLY and any(cl.states for cl in c.parsed.clauses)
        ]  # fmt: skip
        by_kind: dict[str, int] = {}
        for rank, c in enumerate(sorted(statements, key=lambda c: -c.similarity), start=1):
            c.rank = rank
            for k in {vt for cl in c.parsed.clauses if cl.states for vt, _ in cl.typed}:
                by_kind[k] = c.kind_ranks[k] = by_kind.get(k, 0) + 1
        decided: dict[str, _Candidate] = {}
        for cand in found:
            self._judge(new, clauses, cand, common)
            if cand.best is not None:
                decided[cand.record.id] = cand
        return decided

    def _may_supersede(self, new: MemoryRecord, old: MemoryRecord) -> bool:
        if old.source in UNTRUSTED_SOURCES and not self.policy.supersede_untrusted:
            return False
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
        self, new: MemoryRecord, clauses: list[Clause], cand: _Candidate, common: set[str]
    ) -> None:
        old = cand.record
        statement = old.source not in _ECHO_ONLY
        old_clauses = [c for c in cand.parsed.clauses if c.states]
        best: tuple[Supersession, frozenset[str], frozenset[str], frozenset[str]] | None = None
        best_strength = (0.0, False)
        for nc in clauses:
            for oc in old_clauses:
                blocked = nc.blocked_against(oc)
                if blocked:
                    cand.blocked.extend(blocked)
                    continue
                hit = self._explicit(new, nc, old, oc, common)
                if hit is None and statement and not nc.olds:
                    hit = self._value_diff(new, nc, old, oc, cand)
                if hit is not None and (best is None or _strength(hit[0], oc) > best_strength):
                    best = (*hit, frozenset(oc.keys))
                    best_strength = _strength(hit[0], oc)
        if best is None:
            return
        decision, old_keys, new_keys, frame = best
        span = decision.span
        # a clause that only names a value as retired ("X was retired;" before "our
        # tool is Y now") is no claim of its own: it goes with the replaced clause
        retired = [
            c for i, c in enumerate(old_clauses)
            if span is not None and i + 1 < len(old_clauses)
            and old_clauses[i + 1].start == span[0] and _only_retires(c)
        ]  # fmt: skip
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

    def _explicit(
        self, new: MemoryRecord, nc: Clause, old: MemoryRecord, oc: Clause, common: set[str]
    ) -> tuple[Supersession, frozenset[str], frozenset[str]] | None:
        low = oc.loose
        for value in nc.olds:
            if not contains(low, value) or any(contains(loose(v), value) for v in oc.olds):
                continue  # O does not state it, or names it as old itself
            if any(contains(low, v) for v in nc.news):
                continue  # O already states the new value (an earlier correction)
            plain = " " not in value and value not in nc.valuey and value.isalpha()
            if (value in common or plain) and not diff(oc, nc).shared:
                continue  # a common or plain word ("action"): needs the frame too
            new_value = nc.news[0] if nc.news else ""
            why = f'names "{value}" as old ({", ".join(nc.patterns) or "cue"})'
            return _named(old, new, oc, 0.9, why, value, new_value)
        if nc.cues:
            # a revert: N states a value O named as the one it replaced ("back to GKE"
            # after "we moved off GKE to EKS"), so O's value is what N replaces
            new_low = nc.loose
            for value in oc.olds:
                if contains(new_low, value) and not any(contains(new_low, v) for v in oc.news):
                    replaced = oc.news[0] if oc.news else ""
                    why = f'reverts to "{value}", which it had replaced' + (
                        f' with "{replaced}"' if replaced else ""
                    )
                    return _named(old, new, oc, 0.8, why, replaced, value)
        return None

    def _value_diff(
        self, new: MemoryRecord, nc: Clause, old: MemoryRecord, oc: Clause, cand: _Candidate
    ) -> tuple[Supersession, frozenset[str], frozenset[str]] | None:
        policy = self.policy
        framed = same_frame(oc, nc, policy.max_value_words)
        if framed is not None:
            # the same words around one replaced span: the clearest shape of an update
            reason, conf = (CUE_DIFF, 0.8) if nc.cues else (VALUE_DIFF, 0.6)
            frame = " ".join(framed.frame[:6])
            decision = Supersession(
                old.id,
                new.id,
                reason,
                conf,
                f'same words around one value ({frame}): "{framed.old_value}" -> '
                f'"{framed.new_value}"',
                old_value=framed.old_value,
                new_value=framed.new_value,
                span=(oc.start, oc.end),
            )
            return decision, framed.old_keys, framed.new_keys
        d = diff(oc, nc)
        if not d.old_only or not d.new_only:
            return None  # nothing differs, or N adds nothing: no new value
        reason = ""
        why = ""
        topic = [k for k in d.shared if k.isalpha()]
        if nc.cues or topic:
            old_low, new_low = oc.loose, nc.loose
            kinds = {vt for vt, t in nc.typed if not contains(old_low, t)} & {
                vt for vt, t in oc.typed if not contains(new_low, t)
            }
            if nc.cues:
                # a kind many facts share (money, a duration, a date) needs more: O must
                # be the nearest statement holding that kind, and alike in words or meaning
                kinds = {
                    k for k in kinds
                    if k not in BROAD_KINDS
                    or (cand.kind_ranks.get(k) == 1 and d.shared)
                }  # fmt: skip
            else:
                # no cue: a kind that names one slot (two e-mails of one domain, two
                # #channels, two time zones, two URLs of one host) and a topic word in
                # common ("invoice": "send invoices to a@x" -> "b@x as our invoice
                # email"); never two identifiers or two codes (k3s-prod, k3s-staging:
                # two environments)
                kinds = {k for k in kinds if k.startswith(SLOT_KINDS)}
            if kinds:
                reason, conf = (CUE_DIFF, 0.8) if nc.cues else (VALUE_DIFF, 0.6)
                why = (
                    f"cue {', '.join(nc.cues[:3])}; " if nc.cues else
                    f"no cue, a shared topic ({' '.join(topic[:3])}); "
                ) + f"two values of one kind ({sorted(kinds)[0]})"  # fmt: skip
                olds = [t for vt, t in oc.typed if vt in kinds and not contains(new_low, t)]
                news = [t for vt, t in nc.typed if vt in kinds and not contains(old_low, t)]
                decision = Supersession(
                    old.id,
                    new.id,
                    reason,
                    conf,
                    f'{why}: "{olds[0]}" -> "{news[0]}"',
                    old_value=olds[0],
                    new_value=news[0],
                    span=(oc.start, oc.end),
                )
                return decision, _keys(" ".join(olds)), _keys(" ".join(news))
        if not _shapes_agree(oc, nc, d.old_only, d.new_only):
            return None
        if len(d.shared) < 2 and symbolic(_words_of(oc, d.old_only)) != symbolic(
            _words_of(nc, d.new_only)
        ):
            # digits and symbols show in any casing: on one shared word or none, a
            # value written with them is only replaced by one of its class ("the
            # primary database is aurora postgres" is not "our primary region is
            # different now — ap-southeast-2")
            return None
        # the kinds of the values must agree; where words look like values, those
        # are the values ("logs stay for 30 days" -> "logs are kept for 7 days")
        old_vals = (set(d.old_only) & oc.valuey) or set(d.old_only)
        new_vals = (set(d.new_only) & nc.valuey) or set(d.new_only)
        old_classes = {oc.classes[k] for k in old_vals if k in oc.classes}
        new_classes = {nc.classes[k] for k in new_vals if k in nc.classes}
        if old_classes and new_classes and not old_classes & new_classes:
            return None  # a number does not replace a #channel
        if len(d.shared) < 2 and old_classes - {"name"} and not new_classes:
            # one shared word is weak evidence of one statement: a value written with
            # digits or symbols (a date, an address) always looks like a value, so a
            # replacement that looks like none is another fact ("the subscription is
            # up on december 31" is not replaced by "our subscription returns to the
            # enterprise plan")
            return None
        # a statement that differs in more words than a value's is another statement
        short = (
            len(d.old_only) <= policy.max_value_words
            and len(d.new_only) <= policy.max_value_words + 1
        )
        if d.shared and short and nc.cues and d.frame >= policy.cue_frame:
            reason, conf = CUE_DIFF, 0.8
            why = f"cue {', '.join(nc.cues[:3])}; same statement ({' '.join(d.shared[:4])})"
        elif (
            d.shared
            and short
            and d.frame >= policy.implicit_frame
            # without a cue only a short statement can be "the same with another
            # value"; long conversational sentences share words by chance
            and max(len(oc.keys), len(nc.keys)) <= policy.implicit_max_words
            and (len(d.shared) >= 2 or (len(d.old_only) == 1 and len(d.new_only) <= 2))
            # in cased text both differing parts must look like values (names,
            # numbers): "glad" -> "tips" is chat, "Tekton" -> "CircleCI" a value
            and (not (oc.cased and nc.cased) or (old_vals & oc.valuey and new_vals & nc.valuey))
            # two identifiers name two things (INV-5321, INV-7790): without a cue a
            # statement about the other one is another fact
            and not (old_classes & new_classes & {"id"})
            # two separate value-looking spans changed on either side is another
            # subject, not another value ("the EU team deploys to eu-west-1" -> "the
            # US team deploys to us-east-1")
            and max(_value_runs(oc, d.old_only), _value_runs(nc, d.new_only)) < 2
        ):
            # two shared words, or one shared word and a one-word old value:
            # "builds run on Tekton" -> "builds run on CircleCI"
            reason, conf = VALUE_DIFF, 0.6
            why = f"same statement ({' '.join(d.shared[:4])}), no cue"
        elif (
            nc.cues
            and (not nc.cased or set(d.new_only) & nc.valuey)  # N names a value
            and (not oc.cased or set(d.old_only) & oc.valuey)  # and so does O
            and 0 < cand.rank <= policy.similar_rank
            and cand.similarity >= policy.min_similar
            and len(d.old_only) <= 2 * policy.max_value_words
        ):
            reason, conf = CUE_SIMILAR, 0.6
            why = (
                f"cue {', '.join(nc.cues[:3])}; nearest statement "
                f"(cosine {cand.similarity:.2f}, rank {cand.rank})"
            )
        else:
            return None
        decision = Supersession(
            old.id,
            new.id,
            reason,
            conf,
            f'{why}: "{d.old_value}" -> "{d.new_value}"',
            old_value=d.old_value,
            new_value=d.new_value,
            span=(oc.start, oc.end),
        )
        # echoes are found by the value's words: those that look like a value if any
        # do ("Okta", "$7,500"; not "logins")
        old_keys = (set(d.old_only) & oc.valuey) or set(d.old_only)
        return decision, frozenset(old_keys), frozenset(d.new_only)

    def _echoes(
        self,
        new: MemoryRecord,
        parsed: Parsed,
        reader: ScopeReader,
        cands: Candidates,
        eligible: np.ndarray,
        decided: dict[str, _Candidate],
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
            p = parse(rec.content)
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
        parent: _Candidate,
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


#: Markers of a clause that does not state the speaker's value in force: such a
#: clause keeps a superseded value without restating it ("we used to use X").
_NOT_STATED = frozenset({"question", "request", "hypothetical", "other", "history", "reported"})


def _restated(best: Supersession, p: Parsed) -> list[tuple[int, int]]:
    """The spans of ``p``'s clauses that state ``best``'s replaced value whole, and
    not its new value: in a summary note or a multi-fact message, the sentences that
    restate a superseded value ("Ok, July 31." folded next to "renewal is July 31")."""
    value = best.old_value
    if not value or not _keys(value) or len(value) < 3:
        return []
    return [
        (c.start, c.end)
        for c in p.clauses
        if c.keys
        and not _NOT_STATED & set(c.markers)
        and contains(c.loose, value)
        and not (best.new_value and contains(c.loose, best.new_value))
    ]


def _onto_notes(decided: dict[str, _Candidate]) -> dict[str, _Candidate]:
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
        out[note.id] = _Candidate(
            note, parse(note.content), c.similarity, best=best,
            old_keys=c.old_keys, new_keys=c.new_keys, frame=c.frame,
        )  # fmt: skip
    return out


def _strength(decision: Supersession, oc: Clause) -> tuple[float, bool]:
    """How a decision ranks among one old record's clauses: by confidence, then
    whether the replaced words look like a value ("billing@x.io", not "read"): in
    "I don't read email at night. Our billing email is a@x.io", the e-mail is the
    claim an e-mail correction replaces."""
    return decision.confidence, bool(_keys(decision.old_value) & oc.valuey)


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
    return all(any(contains(loose(v), loose(words.get(k, k))) for v in c.olds) for k in c.keys)


#: Sources whose records are only retired as echoes or by a named old value.
_ECHO_ONLY = frozenset({Source.AGENT})
_ACK_KEYS = frozenset(key(w) for w in ACK_WORDS)


def _named(
    old: MemoryRecord,
    new: MemoryRecord,
    oc: Clause,
    confidence: float,
    why: str,
    old_value: str,
    new_value: str,
) -> tuple[Supersession, frozenset[str], frozenset[str]]:
    """An ``explicit-old-value`` decision, with the keys of the two values."""
    decision = Supersession(
        old.id, new.id, EXPLICIT, confidence, why,
        old_value=old_value, new_value=new_value, span=(oc.start, oc.end),
    )  # fmt: skip
    return decision, _keys(old_value), _keys(new_value)


def _value_runs(clause: Clause, keys: Sequence[str]) -> int:
    """How many separate runs of adjacent tokens with keys in ``keys`` hold a
    value-looking word (cased text: a name or number; any casing: digits, symbols,
    number words)."""
    wanted = set(keys)
    runs, inside, valued = 0, False, False
    for t, k in zip(clause.tokens, clause.token_keys, strict=True):
        if k in wanted:
            inside = True
            valued = valued or k in clause.valuey or bool(symbolic([t]))
            continue
        if inside and valued:
            runs += 1
        inside = valued = False
    return runs + int(inside and valued)


def _words_of(clause: Clause, keys: Sequence[str]) -> list[str]:
    """The clause's tokens whose keys are ``keys`` (keys cut words to five letters)."""
    wanted = set(keys)
    return [t for t, k in zip(clause.tokens, clause.token_keys, strict=True) if k in wanted]


def _keys(value: str) -> frozenset[str]:
    return frozenset(key(t) for t in tokens(value) if t not in FUNCTION_WORDS)


def _shapes_agree(
    old: Clause, new: Clause, old_only: Sequence[str], new_only: Sequence[str]
) -> bool:
    """The differing words must be the values: a clause that holds value-looking
    words (names, numbers, symbols) must hold one among its differing words, so
    "new hires can't log in through Okta" does not replace "logins go through Okta"
    (the value is the same, the frame differs). In cased text the two values must
    look alike too: each holds such a word, or neither does."""
    old_v = bool(set(old_only) & old.valuey)
    new_v = bool(set(new_only) & new.valuey)
    if (old.valuey and not old_v) or (new.valuey and not new_v):
        return False
    if not (old.cased and new.cased):
        return True
    return old_v == new_v


__all__ = ["RuleConsolidator", "RulePolicy"]
