"""The word tables of supersession detection: change cues, the patterns that name
an old value, the markers of statements that are no correction, and the word
classes the comparison ignores. The only place cue words live, so the rules can be
read, audited and extended here; ``memlab.memory.update_text`` applies them, and
each decision of the consolidator names the entries that fired.
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    """A word list written as text (reads better than a list literal)."""
    return frozenset(text.split())


#: Words that say a statement replaces an earlier one. Matched as whole words or
#: phrases, case-insensitively. Words that also carry everyday meanings are only
#: listed in the phrases that make them a change ("is back to", not "back to the
#: topic"; "effective immediately", not "an effective way"). "new" only counts in
#: "new X is" / "new X:" ("new cap is", not "my new bike"), see NEW_CUE.
CHANGE_CUES: tuple[str, ...] = (
    "actually", "now", "these days", "nowadays", "currently", "anymore", "any more",
    "instead", "from now on", "going forward", "as of", "effective immediately",
    "effective today", "starting today", "starting tomorrow", "starting next week",
    "from today", "correction", "correct that", "to correct", "update", "updated", "changed",
    "policy change", "change of plans", "switched", "switching", "moved to", "moved from",
    "moved off", "moved over", "moved away", "moved into", "moved out", "moved back",
    "moved the", "moved our", "moved my", "moved us", "moved everything", "migrated",
    "migration", "renegotiated", "scratch that", "scratch what", "scratch",
    "ignore the earlier", "ignore what i said", "ignore my earlier", "disregard", "i meant",
    "typo", "by mistake", "mistake", "wrong", "no longer", "not anymore", "became",
    "replaced", "swapped", "rather", "took over", "covering", "is out", "is gone",
    "made the jump", "made the switch", "made the move", "switched over",
    "went from", "raised", "lowered", "bumped", "increased", "decreased", "reduced",
    "dropped", "ditched", "upgraded", "downgraded", "transferred", "relocated", "rewrote",
    "finished the migration", "contract ended", "retired", "deprecated", "just got",
    "right now", "oh wait", "renamed", "is back to", "are back to", "'s back to",
    "'re back to", "went back to", "going back to", "switched back to", "moved back to",
    "changed back to", "back on",
)  # fmt: skip

#: "new" is a cue only before a noun phrase it renews, not in "new york" or
#: "brand new laptop" (a description of a thing, not of a change).
_NOT_A_PLACE = r"(?!york|zealand|delhi|orleans|jersey|mexico)"  # "new york" is no renewal
NEW_CUE = re.compile(
    rf"\b(?:the |a |our |my )?new {_NOT_A_PLACE}[\w-]+(?: [\w-]+)?(?: is| are|:)"
    # "X is our new Y": the owner's new one replaces the old ("webex is my new chat app")
    rf"|\b(?:is|are|'s) (?:our|my) new {_NOT_A_PLACE}[\w-]+"
)

#: Patterns that name the old value (group ``old``) and often the new one
#: (group ``new``). Order matters: the first match on a span wins.
# A value: up to 60 characters without clause punctuation, except a dot, colon or
# comma inside a token ("fly.io", "9:30", "$15,000").
_V = r"(?P<{g}>(?:[^,;:.!?()]|[.:](?=\w)|,(?=\d)){{1,60}}?)"
_OLD = _V.format(g="old")
_NEW = _V.format(g="new")
# What ends a value: clause punctuation, or a word that starts what follows it; "and"
# does, except inside a range of numbers ("between 09:00 and 12:00").
_VALUE_ENDS = (
    r"\s*(?:,(?!\d)|[;!?()]|[.:](?!\w)|$|\s(?:now|instead|last|this|next|and(?! \d)|"
    r"from now on|going forward|for (?:good|now)|recently|today|yesterday|effective|"
    r"starting)\b)"
)
_END = rf"(?={_VALUE_ENDS})"
#: ... or " as our Z" after it ("akamai replaced cloudflare as our cdn")
_END_OR_AS = rf"(?= as (?:the |our |my )?\w|{_VALUE_ENDS})"
#: ... or a dash or colon ending the clause ("we said goodbye to X — ...")
_END_OR_CLAUSE = rf"(?=,(?!\d)|;| —| –|:(?!\w)|\.(?!\w)|$|{_VALUE_ENDS})"
CHANGE_VERBS = (
    "moved|move|moving|switched|switch|switching|changed|change|changing|went|go|going|"
    "migrated|migrate|migrating|migration|raised|lowered|bumped|cut|increased|decreased|"
    "reduced|upgraded|downgraded|swapped|transferred|shifted|relocated|updated|update|"
    "converted|renamed|ported|rewrote|grew|jumped|rose|fell|dropped|got|get|been|"
    "transitioned|transition|changeover|renegotiated"
)
OLD_VALUE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("from X to Y", re.compile(
        rf"\b(?:{CHANGE_VERBS})\b[^.;!?]{{0,40}}?\bfrom (?:the |our |my |a |an )?{_OLD}"
        rf" (?:to|into|onto|over to) (?:the |a |an )?{_NEW}{_END}")),
    ("off X (to Y)", re.compile(
        rf"\b(?:moved|moving|move|got|get|switched|migrated|came|off of)\s+off (?:of )?"
        rf"(?:the |our )?{_OLD}(?: (?:to|onto|for|in favou?r of) (?:the |a )?{_NEW})?{_END}")),
    # a negated verb changes nothing ("I won't quit on my dreams", "we never left X")
    ("left X for Y", re.compile(
        rf"(?<!n't )(?<!not )(?<!never )\b(?:left|ditched|dropped|abandoned|quit|dumped) "
        rf"(?:the |our |my )?{_OLD}"
        rf"(?: (?:for|in favou?r of) (?:the |a )?{_NEW})?{_END}")),
    # the passive: "x has been replaced by y", "x was replaced with y"
    ("X was replaced by Y", re.compile(
        rf"(?:^|[,;:—–-] )(?!(?:our|my|your|their) )(?:the |our |my )?{_OLD} "
        rf"(?:has been|have been|was|were|got|is being) (?:replaced|swapped out|superseded) "
        rf"(?:by|with|for) (?:the |a |an )?{_NEW}{_END_OR_AS}")),
    ("replaced X with Y", re.compile(
        rf"\b(?:replaced|swapped|traded|exchanged|substituted) (?:the |our |my )?{_OLD}"
        rf" (?:with|for|by) (?:the |a )?{_NEW}{_END}")),
    # the new value as the subject: "akamai replaced cloudflare as our cdn"
    ("Y replaced X", re.compile(
        rf"(?:^|[,;:—–-] )(?!(?:our|my|your|their) )(?:the |a |an )?{_NEW} "
        rf"(?:replaced|replaces|has replaced|have replaced|took over from) "
        rf"(?:the |our |my )?{_OLD}{_END_OR_AS}")),
    ("said goodbye to X", re.compile(
        rf"\b(?:said|say|saying|bid|bade|waved) (?:goodbye|farewell|bye) to "
        rf"(?:the |our |my )?{_OLD}{_END_OR_CLAUSE}")),
    ("renamed X to Y", re.compile(
        rf"\b(?:renamed|rebranded|retitled) (?:the |our |my )?{_OLD} (?:to|as|into) "
        rf"(?:the |a )?{_NEW}{_END}")),
    ("X swapped with Y", re.compile(
        rf"(?:^|[,;:—–-] ){_OLD} (?:swapped|traded|switched|handed over|handed off) "
        rf"(?:shifts |places |roles |the rotation )?(?:with|to) {_NEW}{_END}")),
    ("forget X", re.compile(
        rf"(?:^|[,;:—–-] )(?:forget(?: about)?|disregard) (?:the |our |my )?"
        rf"{_OLD}(?=,(?!\d)|;| —| –|:(?!\w))")),
    ("instead of X", re.compile(rf"\b(?:instead of|rather than|in place of) (?:the |our |my )?{_OLD}{_END}")),
    ("no longer X but Y", re.compile(
        rf"\bno longer (?:the |our |my )?{_OLD},? but (?:rather )?(?:the |a |an )?{_NEW}{_END}")),
    ("no longer X", re.compile(
        r"\bno longer (?:use|using|on|in|at|with|run|running|have|having|go|going|be|"
        rf"send|sending|work|working|live|living|based in|located in)? ?(?:the |our |my )?{_OLD}{_END}")),
    # before "not X anymore", which would take the fact's name for the old value
    ("X isn't our Y anymore", re.compile(
        rf"(?:^|[,;:—–-] )(?!(?:our|my|your|their) ){_OLD} (?:is not|isn't|are not|aren't|"
        r"was not|wasn't) (?:the |our |my )[^,;.!?]{1,40}? any ?more\b")),
    ("not X anymore", re.compile(
        r"(?:\bnot|n't|\bno) (?:use |using |run |running |have |on |in |at |with |using |go to "
        rf"|send to )?(?:the |our |my )?{_OLD} any ?more\b")),
    ("not X but Y", re.compile(rf"\bnot (?!sure\b)(?:the |our |my )?{_OLD},? but (?:the |a )?{_NEW}{_END}")),
    # not after "our"/"my": "our code host became Sourcehut" names the fact, not its
    # old value (the change cue "became" still applies)
    # "went to" after a person ("last week I went to a parade") is a trip, not a change
    ("X became Y", re.compile(rf"(?:^|[,;:—–-] )(?!(?:our|my|your|their) ){_OLD} (?:became|becomes|turned into|is now|are now|changed to|(?<!\bi )(?<!\bwe )(?<!\byou )(?<!\bthey )(?<!\bhe )(?<!\bshe )went to) (?:the |a )?{_NEW}{_END}")),
    ("X -> Y", re.compile(rf"{_OLD} (?:->|→|=>) {_NEW}{_END}")),
    ("the switch to X is undone", re.compile(
        rf"\b(?:the )?(?:switch|move|change) to {_OLD} (?:is|was|has been|got) "
        r"(?:undone|reversed|rolled back|cancell?ed|off)\b")),
    ("X is out", re.compile(
        rf"(?:^|[,;:—–-] |\b(?:the|our|my) ){_OLD} (?:is|are|was|were|has been|have been) "
        r"(?:out(?! of)|gone|over|done|closed|retired|deprecated|decommissioned|shut down|dead|"
        r"cancell?ed|no more|a mistake|undone)\b")),
    ("X contract ended", re.compile(rf"(?:^|[,;:—–-] ){_OLD} (?:contract|subscription|plan|account|deal) (?:ended|expired|lapsed|was cancell?ed)\b")),
    ("used to X, now", re.compile(rf"\bused to (?:be |use |run |have |live |work |go )?(?:on |in |at |with |to )?(?:the |our |my )?{_OLD}{_END}(?=.*\b(?:now|these days|currently|instead|today)\b)")),
    # a revert names what was tried and dropped ("after trying X, ... back to Y",
    # "X didn't stick, so ...")
    ("after trying X, back to Y", re.compile(
        rf"\bafter trying (?:out )?(?:the |our |my )?{_OLD}(?=,)(?=.*\bback (?:to|on)\b)")),
    ("X didn't stick", re.compile(
        rf"(?:^|[,;:—–-] ){_OLD} (?:didn't|did not|never) (?:stick|work out|last|take)\b")),
    ("back to Y", re.compile(rf"\b(?:back to|revert(?:s|ed|ing)? to|return(?:s|ed|ing)? to) (?:the |using |our )?{_NEW}{_END}")),
)  # fmt: skip

#: Markers of a clause that states no current fact of the speaker's own, by kind.
#: A new clause with a marker supersedes nothing, unless the old clause has the
#: same marker (both hypothetical, both about the colleague): then the two are
#: statements of the same kind and may replace each other.
MARKERS: dict[str, tuple[str, ...]] = {
    "hypothetical": (
        "if", "what if", "suppose", "supposing", "imagine", "hypothetically", "in theory",
        "thinking about", "thinking of", "think about", "considering", "consider", "might",
        "maybe", "perhaps", "possibly", "could", "would", "wondering", "wonder",
        "in case", "whether", "not sure", "unless", "someday", "one day", "eventually",
        "planning to", "plan to", "planning on", "hoping to", "hope to", "dreaming",
        "debating", "tempted", "toying with", "weighing", "looking into", "in the future",
        "may move", "may switch", "we may", "i may", "potentially", "thinking we",
        "want to", "wanted to", "wants to", "'d like to", "would like to", "'d love to",
        "would love to", "wish", "trying to", "try to", "goal is", "aiming to",
        # talk of a change that is not decided ("there's talk of making X our Y,
        # nothing final")
        "talk of", "nothing final", "nothing's final", "nothing is final", "not final",
        "not decided", "undecided",
    ),
    # asking for something (advice, ideas) states no fact either
    "request": (
        "looking for", "recommend", "recommendation", "recommendations", "suggest",
        "suggestions", "any ideas", "ideas for", "help me", "can you", "could you",
        "tips on", "tips for", "advice on", "advice for",
    ),
    "other": (
        "someone else", "somebody else", "a friend", "another team", "the other team",
        "other team", "my colleague", "my coworker", "my co-worker", "my wife", "my husband",
        "my partner", "my friend", "my boss", "my brother", "my sister", "my mom",
        "my mother", "my dad", "my father", "my son", "my daughter", "my cousin",
        "my neighbor", "my neighbour", "my roommate", "my flatmate", "my teammate",
        "my landlord", "my uncle", "my aunt", "my girlfriend", "my boyfriend", "my kid",
        "my parents", "my client", "a colleague", "a coworker", "his", "she", "he",
        "colleague's", "coworker's", "co-worker's", "friend's", "wife's", "husband's",
        "partner's", "boss's", "manager's", "brother's", "sister's", "mom's", "dad's",
        "client's", "customer's", "neighbor's", "neighbour's", "teammate's", "cousin's",
        "my cofounder", "my co-founder", "cofounder's", "co-founder's",
    ),
    "addition": (
        "also", "as well", "too", "another", "additionally", "in addition", "a second",
        "second", "plus", "on top of", "besides", "along with", "alongside", "extra",
        "one more", "both", "opened", "added", "adding", "hired", "expanded", "new branch",
        "new office", "as a backup", "backup",
    ),
    "history": (
        "used to", "previously", "formerly", "historically", "ages ago", "back in", "way back",
        "back then", "before that", "in the past",
        "originally", "at first", "at the time", "years ago", "once", "growing up",
        "as a kid", "in college", "when i was", "when we were", "until last", "till last",
        "we were in", "i was in", "ex-", "former", "old office", "last job", "previous job",
        "previous company",
    ),
    "reported": (
        "according to", "apparently", "rumor", "rumour", "heard that", "i heard",
        "they say", "someone said", "supposedly", "allegedly", "claims",
    ),
    # a report of something failing names a symptom, not a value in force; only ever
    # counted on the old side (see Clause.blocked_against)
    "problem": (
        "fails", "failing", "failed", "error", "errors", "broken", "can't", "cannot",
        "isn't working", "doesn't work", "not working", "crashed", "crashing", "stuck",
        "timing out", "times out", "locked out", "invalid", "denied", "missing",
    ),
}  # fmt: skip

#: History told by an event it came before ("before the 2021 migration, our log
#: retention was 45 days"): "before" an event, and a past tense, in one clause; a
#: clause that also says what holds now ("..., now it's Y") is a correction.
PAST_BEFORE = re.compile(
    r"^(?!.*\b(?:now|these days|currently|today|anymore|any more)\b)"
    r"(?=.*\bbefore (?:the|our|my|we|that|\d{4})\b)(?=.*\b(?:was|were|had)\b)"
)

#: Marker phrases that do not count where they are followed by these words
#: ("would like" states a preference; "too many" is not an addition).
MARKER_EXCEPTIONS: dict[str, str] = {
    "would": r"\bwould (?:like|love|prefer|rather|appreciate)\b(?! to)",
    "could": r"\bcould (?:you|u)\b",
    "too": r"\btoo (?:many|much|few|little|long|big|small|late|early|slow|fast|high|low|"
    r"often|soon|far|old|expensive|busy|hard)\b",
    "once": r"\b(?:at|all at|once a|once an|once per|once every|once you|once we|once i|once it|"
    r"once more|once again)\b",
    "if": r"\bif (?:(?:a|an|the|any|anything|something|it|you|they)\b[^.?!]*\b(?:page|alert|"
    r"fails|down|breaks|isn't|is not|doesn't|goes|needed|possible|urgent)\b|nobody|no one|"
    r"not|unacked|unacknowledged|needed|necessary|possible|urgent|in doubt)",
    "not sure": r"\bnot sure (?:if|whether) (?:it|this|that) (?:matters|helps|is relevant)",
    "she": r"\bshe\b(?=[^.?!]*\bmy\b)",
    "he": r"\bhe\b(?=[^.?!]*\bmy\b)",
    "plus": r"\bplus\b(?= ?\d)",
    # "back in 2019" is history; "back in the office", "back in business" are not
    "back in": r"\bback in (?!(?:19|20)\d\d\b|the day\b|the days\b)",
    "extra": r"\bextra (?:cost|charge|fee)",
}

#: A clause that starts with "please" asks for an action ("please kill the contractor's
#: tokens now"), which states no fact, unless it sets a standing rule with one of these.
STANDING = re.compile(
    r"\b(?:from now on|going forward|from here on|in future|in the future|always|never|only|"
    r"instead|should|every|any ?more|no longer|until further notice)\b"
)

#: A "please" clause that also states the speaker's own fact ("please update your
#: notes, X is our CI system now", "please note my time zone is Y") states it: a
#: possessive first person joined to a copula. "whether"/"if" make it a check.
OWN_STATEMENT = re.compile(
    r"\b(?:my|our)\s+(?:[\w/.&'-]+\s+){0,3}(?:is|are)\b|\b(?:is|are)\s+(?:now\s+)?(?:my|our)\b"
)
NOT_OWN_STATEMENT = re.compile(r"\b(?:whether|if)\b")

#: Sentence openers that make a clause a question or a request for information.
QUESTION_STARTS: frozenset[str] = _words(
    """
    are is am was were do does did can could would will should shall may might have has had
    what what's whats which where where's when who who's whom whose why how how's remind
    tell any anything isn't aren't don't doesn't didn't won't wouldn't can't couldn't
    shouldn't
    """
)

#: Discourse words skipped at the start of a clause before looking for a question
#: opener ("Quick one: what's ...", "Sorry, remind me ...").
LEADS: frozenset[str] = _words(
    """
    quick sorry hmm wait ok okay so and but also oh hey hi hello well btw fyi actually
    update correction unrelated sanity check yes no right sure um uh again
    """
)

#: Words of an agent's acknowledgement or answer. A short record whose other
#: words are all in here (or in the statement it echoes) is an echo of the value
#: it repeats ("Noted: Heroku.", "Heroku, as you mentioned.").
ACK_WORDS: frozenset[str] = _words(
    """
    noted note got it ok okay saved save thanks thank understood updated update changed
    change set recorded record file on from now using have told mentioned according my
    notes that was is you your as the a an to i've i ll i'll keep mind in sure done
    confirmed confirm will go with new one there we we're our us
    """
)

#: Function words, pleasantries and light verbs: never a value, never a frame.
FUNCTION_WORDS: frozenset[str] = _words(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do
    does doesn't doing don't down during since each few for from further had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out
    over own same shan't she she'd she'll she's should shouldn't so some such than that
    that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those through to too under until up very was wasn't we we'd we'll
    we're we've were weren't what what's when when's where where's which while who who's
    whom why why's with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves it'll that'll there'll us also just really still yet ever even
    please thanks thank ok okay yes yeah hi hello hey oh wait sorry hmm well btw fyi quick
    thing side note context sure right got get gets getting make made use uses using used
    last ago yesterday today tomorrow recently lately run runs running is lives live living
    sit sits sitting set put keep kept via per like need needs want wants wanted should
    everything anything something things stuff lot bit way whole every go goes going gone
    matters matter forget heads great cool awesome perfect nice brilliant star appreciate
    appreciated help helps helped sense cheers bye ah ha haha lol anyway alright must come
    comes came coming always never let ask asks asking asked tell tells telling say says
    saying think thinking thought know knew see seeing look looking try trying tried check
    checking checked wonder guess one good fine rush
    """
)

#: Units belong to a value ("25 minutes", "$7,500 a month") but are no evidence that
#: two statements are about the same thing, so they are not comparison keys.
UNIT_WORDS: frozenset[str] = _words(
    """
    second seconds sec secs minute minutes min mins hour hours hr hrs day days week weeks
    month months year years ms gb mb tb kb percent
    """
)

#: Cue words are removed from the comparison keys (they signal the change, they
#: are not the fact). Multi-word cues contribute their words.
CUE_WORDS: frozenset[str] = frozenset(w for cue in CHANGE_CUES for w in cue.split()) | _words(
    "correction quick scratch ignore earlier said told mention mentioned"
)

# ---------------------------------------------------------------------------

MONTHS = _words(
    "january february march april may june july august september october november "
    "december jan feb mar apr jun jul aug sep sept oct nov dec"
)

WEEKDAYS = _words(
    "monday tuesday wednesday thursday friday saturday sunday "
    "mondays tuesdays wednesdays thursdays fridays saturdays sundays"
)

DURATION_UNITS = _words(
    "second seconds minute minutes hour hours day days week weeks month months year years"
)

#: Value kinds that many facts share (a sum of money, a duration, a date, a time of
#: day, a percentage): two of them are one fact's values only if the statements are
#: otherwise alike (see the consolidator's per-kind nearest rule).
BROAD_KINDS = frozenset({"money", "duration", "date", "clock", "percent"})

#: Numbers written as words are values too ("two years", "twenty engineers"); "one"
#: is left out (a pronoun as often as a number), except before a unit.
NUMBER_WORDS: frozenset[str] = _words(
    """
    zero two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy
    eighty ninety hundred thousand million dozen half quarter single double
    """
)

#: Words trimmed from either end of a value a pattern captured ("the CTO" -> "cto").
VALUE_TRIM: frozenset[str] = _words(
    """
    the a an our my your their its this that to of for on in at with we i it is are was
    were be been using use now so and but then just also
    """
)

#: A sentence longer than this (in tokens) is not read: facts are stated in short
#: sentences, and tool output or pasted logs would only cost time.
MAX_CLAUSE_TOKENS = 60

#: Discourse leads removed before a clause is read: they frame the message, not the
#: fact ("Not sure if it matters, but ..." is not a hypothetical).
LEAD_PHRASES = re.compile(
    r"^(?:(?:not sure (?:if |whether )?(?:it|this|that) (?:matters|helps|is relevant),? but|"
    r"side note|for context|before i forget|one more thing|heads up|btw|fyi|also|oh,? and|"
    r"quick one|hey|hi|hello|ok|okay|so|well|anyway)\b[\s,:;—–-]*)+"
)

#: Words a clause that only retires a value may hold besides the value ("we said
#: goodbye to X", "X was dropped").
RETIRING_WORDS = _words("said goodbye farewell bye retired dropped ditched gone out")

#: A fact named by its owner: "our spend cap", "my call window". The words after
#: "our"/"my" name the slot, up to three of them, until a function word, a verb, an
#: adverb or a token that is no word; a word in SLOT_SKIP is passed over first ("our
#: new maintenance window").
SLOT_OWNERS = frozenset({"our", "my"})
SLOT_SKIP = frozenset({"new", "current", "usual", "actual", "official"})
#: after these the owner's words place something, they do not name the fact ("on our
#: side", "in our dashboard")
SLOT_PLACES = frozenset(
    {"on", "in", "at", "from", "with", "by", "of", "about", "into", "onto", "under", "over",
     "through", "behind", "inside", "within", "across", "throughout"}
)  # fmt: skip
#: one-word "slots" that name no fact of their own
GENERIC_SLOTS = frozenset(
    {"side", "end", "account", "team", "company", "behalf", "own", "part", "records",
     "notes", "setup", "stuff", "way", "folks", "people", "org", "business", "case", "plan",
     "thing", "things", "list", "job", "work", "time", "project", "product", "data"}
)  # fmt: skip
#: words of a slot that tie no other statement to it alone: the heads that name a
#: category many facts share ("our maintenance window" and "during our window", which
#: may be the call window) and the adjectives that rank one of several ("our primary
#: region" and "the primary DB"); ``clause_slots.slot_topic`` passes over them
CATEGORY_WORDS = frozenset(
    {"window", "date", "time", "name", "rule", "policy", "tool", "app", "system",
     "platform", "vendor", "provider", "language", "size", "city", "address", "email",
     "channel", "number", "engineer", "person", "contact", "framework", "library",
     "service", "server", "setting", "settings", "level", "type", "version", "format",
     "primary", "main", "secondary", "preferred", "default", "favourite", "favorite",
     "usual", "first", "second", "billing", "incident"}
)  # fmt: skip
#: words that end a slot: verbs ("our cdn became akamai", "my editor runs in a
#: terminal"; words that are also nouns, "host", "read", "migration", are left out)
#: and adverbs ("our spend cap anymore")
SLOT_STOPS = _words(
    """is are was were be been being became becomes reads runs lives stays sits uses
    points needs goes says shows lists sends gets works looks takes starts ends handles
    means should must will would can could may might moved moving switched switching
    changed changing went going migrated migrating raised lowered bumped increased
    decreased reduced upgraded downgraded swapped transferred shifted relocated updated
    converted renamed ported rewrote grew jumped rose fell dropped got been transitioned
    replaced replaces isn't aren't wasn't weren't hasn't haven't anymore now again
    instead today recently lately currently still also though please"""
)
