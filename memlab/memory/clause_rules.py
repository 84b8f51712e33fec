"""The rules that decide one pair of clauses for ``RuleConsolidator``: does a new
record's clause supersede an earlier record's clause, by which rule, with which
confidence, and which value keys does the decision replace (for echoes).

``explicit`` handles a new clause that names the value it replaces ("from X to Y",
"no longer X", a revert); ``value_diff`` the same statement with another value (a
change cue and two values of one kind, one frame with one replaced span, or the
nearest statement with a cue). ``RulePolicy`` holds their knobs; the consolidator
(``memlab.memory.rule_consolidator``) finds the candidates and applies the decisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memlab.errors import InputError
from memlab.memory.clause_slots import named_apart, shared_slot, slot_topic
from memlab.memory.consolidate import (
    CUE_DIFF,
    CUE_SIMILAR,
    EXPLICIT,
    VALUE_DIFF,
    Supersession,
)
from memlab.memory.frames import same_frame, symbolic
from memlab.memory.records import MemoryRecord, Source
from memlab.memory.update_cues import (
    BROAD_KINDS,
    FUNCTION_WORDS,
)
from memlab.memory.update_text import Clause, Parsed, contains, diff, span_of
from memlab.memory.update_tokens import key, loose, tokens


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
        max_clauses: a new record of more clauses than this is a document (a pasted
            article, a transcript to translate), not the speaker's own statement,
            and supersedes nothing (None: no limit).
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
    max_clauses: int | None = 12

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
        if self.max_clauses is not None and (
            not isinstance(self.max_clauses, int) or self.max_clauses < 1
        ):
            raise InputError(
                f"consolidate.max_clauses must be >= 1 or None, got {self.max_clauses!r}"
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
class Candidate:
    """An earlier record read for a decision, with what the rules found on it."""

    record: MemoryRecord
    parsed: Parsed
    similarity: float
    rank: int = 0  # by similarity among the user statements read (1 = nearest)
    kind_ranks: dict[str, int] = field(default_factory=dict)  # the same, per value kind
    best: Supersession | None = None
    old_keys: frozenset[str] = frozenset()  # the replaced value's keys (for echoes)
    new_keys: frozenset[str] = frozenset()
    frame: frozenset[str] = frozenset()  # the old clause's keys
    note: MemoryRecord | None = None  # a folded episode: the summary note holding it


#: value kinds an owner has one of, whatever the statement calls it: "my calendar is
#: set to America/New_York" and "my time zone is America/Sao_Paulo" name one setting
ONE_PER_OWNER = frozenset({"area/city"})
#: value kinds (``update_text.value_type``) that name one slot of a fact, so two
#: values of one kind with a topic word in common replace each other without a cue
SLOT_KINDS = ("email@", "channel", "area/city", "url:")


def may_be_explicit(nc: Clause) -> bool:
    """Whether ``explicit`` can find anything for the new clause ``nc``: it reads only
    the values ``nc`` names as old and, for a revert, its cues (callers skip the call
    for the many clauses with neither; keep the two in step)."""
    return bool(nc.olds or nc.cues)


def may_differ(nc: Clause, oc: Clause) -> bool:
    """Whether ``value_diff`` can find anything for the pair: without a change cue
    each of its rules needs a word the two clauses share (a frame, a topic, a slot
    or a slot's word), so an uncued pair with no word in common is decided without
    the call (a quarter of the pairs a recall guard compares; keep the two in step)."""
    return bool(nc.cues) or not nc.word_keys.isdisjoint(oc.word_keys)


def explicit(
    new: MemoryRecord, nc: Clause, old: MemoryRecord, oc: Clause, common: set[str]
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
        return named(old, new, oc, 0.9, why, value, new_value)
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
                return named(old, new, oc, 0.8, why, replaced, value)
    return None


def value_diff(
    policy: RulePolicy,
    new: MemoryRecord,
    nc: Clause,
    old: MemoryRecord,
    oc: Clause,
    cand: Candidate,
) -> tuple[Supersession, frozenset[str], frozenset[str]] | None:
    framed = same_frame(oc, nc, policy.max_value_words)
    if framed is not None:
        # the same words around one replaced span: the clearest shape of an update
        reason, conf = (CUE_DIFF, 0.8) if nc.cues else (VALUE_DIFF, 0.6)
        frame = " ".join(framed.frame[:6])
        why = f"same words around one value ({frame})"
        decision = _on_clause(old, new, oc, reason, conf, why, framed.old_value, framed.new_value)
        return decision, framed.old_keys, framed.new_keys
    if named_apart(oc, nc) and not _differing_kinds(oc, nc) & ONE_PER_OWNER:
        return None  # "my call window is ..." is not "our maintenance window is ..."
    d = diff(oc, nc)
    if not d.old_only or not d.new_only:
        return None  # nothing differs, or N adds nothing: no new value
    reason = ""
    why = ""
    topic = [k for k in d.shared if k.isalpha()]
    if nc.cues or topic:
        old_low, new_low = oc.loose, nc.loose
        kinds = _differing_kinds(oc, nc)
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
            decision = _on_clause(old, new, oc, reason, conf, why, olds[0], news[0])
            return decision, keys_of(" ".join(olds)), keys_of(" ".join(news))
    slot = shared_slot(oc, nc)
    if slot:
        hit = _slot_values(policy, new, nc, old, oc, d.old_only, d.new_only, slot)
        if hit is not None:
            return hit
    else:
        spoken = slot_topic(oc, nc)
        if spoken and _typed_alike(oc, nc):
            named_slot, held = spoken
            why = f"names {' '.join(named_slot)}, which the statement speaks of ({' '.join(held)})"
            hit = _slot_values(policy, new, nc, old, oc, d.old_only, d.new_only, named_slot, why)
            if hit is not None:
                return hit
    # a statement that differs in more words than a value's is another statement
    short = (
        len(d.old_only) <= policy.max_value_words and len(d.new_only) <= policy.max_value_words + 1
    )
    # the three shapes that can rule a pair in at the end, as far as they can be told
    # before the value classes; the checks between here and there only rule pairs
    # out, so a pair none of the three can take (most pairs a recall guard compares)
    # is decided now
    cue_same = uncued_same = cue_nearest = False
    if d.shared and short:
        cue_same = bool(nc.cues) and d.frame >= policy.cue_frame
        uncued_same = (
            d.frame >= policy.implicit_frame
            # without a cue only a short statement can be "the same with another
            # value"; long conversational sentences share words by chance
            and max(len(oc.keys), len(nc.keys)) <= policy.implicit_max_words
            and (len(d.shared) >= 2 or (len(d.old_only) == 1 and len(d.new_only) <= 2))
        )
    if nc.cues:
        cue_nearest = (
            0 < cand.rank <= policy.similar_rank
            and cand.similarity >= policy.min_similar
            and len(d.old_only) <= 2 * policy.max_value_words
        )
    if not (cue_same or uncued_same or cue_nearest):
        return None
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
    if cue_same:
        reason, conf = CUE_DIFF, 0.8
        why = f"cue {', '.join(nc.cues[:3])}; same statement ({' '.join(d.shared[:4])})"
    elif (
        uncued_same
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
        cue_nearest
        and (not nc.cased or set(d.new_only) & nc.valuey)  # N names a value
        and (not oc.cased or set(d.old_only) & oc.valuey)  # and so does O
    ):
        reason, conf = CUE_SIMILAR, 0.6
        why = (
            f"cue {', '.join(nc.cues[:3])}; nearest statement "
            f"(cosine {cand.similarity:.2f}, rank {cand.rank})"
        )
    else:
        return None
    # where words look like values, the values named are those words: in "Hard cap
    # on spend: $50,000 a month" -> "$800 a month ... our spend cap" the old value
    # is "$50,000", not the first differing word ("hard"), so the note's other
    # sentences that restate it ("Noted: $50,000 a month.") are found and marked too
    old_value = span_of(oc, tuple(k for k in d.old_only if k in old_vals)) or d.old_value
    new_value = span_of(nc, tuple(k for k in d.new_only if k in new_vals)) or d.new_value
    decision = _on_clause(old, new, oc, reason, conf, why, old_value, new_value)
    # echoes are found by the value's words: those that look like a value if any
    # do ("Okta", "$7,500"; not "logins")
    return decision, frozenset(old_vals), frozenset(d.new_only)


def _slot_values(
    policy: RulePolicy,
    new: MemoryRecord,
    nc: Clause,
    old: MemoryRecord,
    oc: Clause,
    old_only: Sequence[str],
    new_only: Sequence[str],
    slot: tuple[str, ...],
    why: str = "",
) -> tuple[Supersession, frozenset[str], frozenset[str]] | None:
    """Two statements of one named fact, each with its own value ("$7,500 a month
    isn't our spend cap anymore, it's $1,200 a month" -> "on file, our spend cap
    should read $30,000 a month"): the values must look alike (in cased text both
    look like values of one class; otherwise typed values of one kind, or a change
    cue and a short new value) and never be two identifiers."""
    skip = set(slot) | {k for c in nc.cues for k in keys_of(c)}
    olds = [k for k in old_only if k not in skip]
    news = [k for k in new_only if k not in skip]
    if not olds or not news:
        return None
    if oc.cased and nc.cased:
        ov, nv = set(olds) & oc.valuey, set(news) & nc.valuey
        if not ov or not nv:
            return None
    else:
        kinds = _differing_kinds(oc, nc)
        if kinds:
            ov = set(keys_of(" ".join(tok for vt, tok in oc.typed if vt in kinds))) & set(olds)
            nv = set(keys_of(" ".join(tok for vt, tok in nc.typed if vt in kinds))) & set(news)
            ov, nv = ov or set(olds), nv or set(news)
        elif (
            nc.cues
            and len(news) <= policy.max_value_words
            and len(olds) <= 2 * policy.max_value_words
        ):
            ov, nv = set(olds), set(news)
        else:
            return None
    oclass = {oc.classes.get(k) for k in ov}
    nclass = {nc.classes.get(k) for k in nv}
    if oc.cased and nc.cased and not (oclass & nclass) - {None}:
        return None  # in cased text both sides look like values of one class
    if "id" in oclass & nclass and not nc.cues:
        # two identifiers name two things (INV-5321, INV-7790), unless the new one
        # is said to replace ("SUP-81973 is our new ticket")
        return None
    reason, conf = (CUE_DIFF, 0.8) if nc.cues else (VALUE_DIFF, 0.6)
    why = why or f"both name {' '.join(slot)}, each with its value"
    old_value = span_of(oc, tuple(k for k in old_only if k in ov)) or " ".join(sorted(ov))
    new_value = span_of(nc, tuple(k for k in new_only if k in nv)) or " ".join(sorted(nv))
    decision = _on_clause(old, new, oc, reason, conf, why, old_value, new_value)
    return decision, frozenset(ov), frozenset(nv)


def _unstated_kinds(oc: Clause, nc: Clause) -> tuple[set[str], set[str]]:
    """The kinds of distinctive value (e-mail, #channel, money, ...) each clause holds
    with a value the other does not state: (the old clause's, the new clause's)."""
    return (
        {vt for vt, t in oc.typed if not contains(nc.loose, t)},
        {vt for vt, t in nc.typed if not contains(oc.loose, t)},
    )


def _typed_alike(oc: Clause, nc: Clause) -> bool:
    """Neither clause holds a distinctive value (a date, money, an e-mail) that the
    other does not, unless the other holds one of that kind too: "the subscription
    is up on April 15" does not hold the value of "the Starter plan is our
    subscription"."""
    olds, news = _unstated_kinds(oc, nc)
    return not (olds or news) or bool(olds & news)


def _differing_kinds(oc: Clause, nc: Clause) -> set[str]:
    """The kinds of distinctive value both clauses hold with a value the other does
    not state."""
    olds, news = _unstated_kinds(oc, nc)
    return olds & news


def named(
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
    return decision, keys_of(old_value), keys_of(new_value)


def _on_clause(
    old: MemoryRecord,
    new: MemoryRecord,
    oc: Clause,
    reason: str,
    confidence: float,
    why: str,
    old_value: str,
    new_value: str,
) -> Supersession:
    """A decision that ``new`` replaces old clause ``oc``'s value, explained as
    ``why: "old" -> "new"``."""
    return Supersession(
        old.id, new.id, reason, confidence, f'{why}: "{old_value}" -> "{new_value}"',
        old_value=old_value, new_value=new_value, span=(oc.start, oc.end),
    )  # fmt: skip


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


def keys_of(value: str) -> frozenset[str]:
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


__all__ = [
    "SLOT_KINDS",
    "Candidate",
    "RulePolicy",
    "explicit",
    "keys_of",
    "may_be_explicit",
    "may_differ",
    "named",
    "value_diff",
]
