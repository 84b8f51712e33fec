"""The word lists of the generator's harder update cases, split into a development
half and a held-out half.

A fact can change in ways the catalog's correction templates (``fix_both``,
``fix_new``: a cue word, often both values) do not cover, and a sentence can look
like a change without being one. This module holds the phrasings of both:

- true updates: ``IMPLICIT`` (the new value stated plainly, no cue word),
  ``UNLIKE`` (a change phrased unlike the original statement, naming only the new
  value), ``EXPLICIT`` (new phrasings naming the old and the new value) and
  ``REVERT`` (back to a former value). Chains A -> B -> C are two updates of one
  fact, each drawn from these pools.
- false corrections, which must supersede nothing: ``FALSE[kind]`` for
  ``hypothetical`` ("if our region were ..."), ``other`` (someone else's value),
  ``addition`` (a second value next to the first), ``history`` (what it was long
  ago), ``question`` ("would X work better?") and ``tool`` (an untrusted tool
  output claiming another value).

Honesty. Every pool has a ``dev`` half and a ``heldout`` half, written at the same
time, before any detector was run on either. Rules may be developed on transcripts
generated with ``phrasings="dev"`` only; quality figures are reported on
``phrasings="heldout"`` (with seeds never used for development), where every
correction and false correction comes from the held-out half (the catalog's own
correction templates, seen by the stage-1 rules, are left out there). The shipped
transcripts use ``phrasings="all"``.

A third set, ``fresh``, was written on 2026-12-01, after rounds of rules had been
developed on the dev half and the held-out half had been looked at (a rule's failure
on it was examined): it is the report set from then on, and development may use both
halves. It is not part of ``all``, so the shipped transcripts do not change.

A fourth set, ``blind``, was written on 2026-12-02, before any failure on the fresh
set was examined (the fresh set had been measured twice, in aggregate only). From
then on the fresh set is development data and ``blind`` is the report set.

A fifth set, ``sealed``, was written on 2026-12-02 (a later session), before round
six of the rules. Round five had ended with one aggregate measurement of the blind
set, and writing this set's generator code showed the blind templates again, so
from then on ``sealed`` is the report set and ``blind`` is kept as a second one
whose failures were never read.

Slots: ``{new}``, ``{old}``, ``{v}`` (the value returned to), ``{prev}`` (the value
dropped by a revert), ``{x}`` (a false correction's other value), each with its
article when the kind needs one ("the Growth plan", "a flat white"); ``{our}`` /
``{Our}`` (our or my, per kind); ``{noun}`` (what the fact is called, per kind:
"CI system"); ``{field}`` (the noun as a field name, for tool output).
"""

from __future__ import annotations

from dataclasses import dataclass

PHRASINGS = ("all", "dev", "heldout", "fresh", "blind", "sealed")
#: the phrasing sets that leave out the catalog's own correction templates
REPORT_PHRASINGS = ("heldout", "fresh", "blind", "sealed")

#: update styles of a true correction (``probe.meta["update"]``: the style of the update
#: in force; a chain A -> B -> C is a second update in one of the first four styles, and
#: ``probe.meta["updates"]`` counts the updates)
STYLES = ("named", "cued", "implicit", "unlike", "revert")
#: kinds of false correction (``probe.meta["false"]``)
FALSE_KINDS = ("hypothetical", "other", "addition", "history", "question", "tool")


@dataclass(frozen=True)
class Pool:
    """Phrasings of one case, in a development and a held-out half, and the
    ``fresh``, ``blind`` and ``sealed`` sets written later (see the module
    docstring)."""

    dev: tuple[str, ...]
    heldout: tuple[str, ...]
    fresh: tuple[str, ...] = ()
    blind: tuple[str, ...] = ()
    sealed: tuple[str, ...] = ()

    def get(self, phrasings: str) -> tuple[str, ...]:
        """The phrasings of one half (``dev`` / ``heldout``), one later set
        (``fresh``, ``blind``, ``sealed``), or both halves (``all``: the shipped
        transcripts; no later set is in it)."""
        if phrasings in PHRASINGS[1:]:
            return getattr(self, phrasings)
        return self.dev + self.heldout


@dataclass(frozen=True)
class Noun:
    """How the update templates talk about one kind of fact.

    Attributes:
        noun: what the fact is called ("CI system"), singular, after "our"/"my".
        our: "our" or "my".
        article: put before a value in running text ("the " for "the Growth plan";
            "a " picks "an" before a vowel).
        multi: a second value can exist next to the first (a second CI system, a
            second office), so an addition makes sense.
        false: the false-correction kinds that read naturally for this fact.
    """

    noun: str
    our: str = "our"
    article: str = ""
    multi: bool = False
    false: tuple[str, ...] = FALSE_KINDS

    @property
    def field(self) -> str:
        return self.noun.casefold().replace("'s", "").replace(" ", "_").replace("-", "_")

    def ref(self, value: str) -> str:
        """The value with its article, as it reads in a sentence."""
        if self.article == "a ":
            return ("an " if value[:1].casefold() in "aeiou" else "a ") + value
        return self.article + value


_NO_ADD = ("hypothetical", "other", "history", "question", "tool")
_PERSONAL = ("other", "history", "question")

# fmt: off
NOUNS: dict[str, Noun] = {
    "deploy_platform": Noun("hosting platform", multi=True),
    "region": Noun("primary region", false=_NO_ADD),
    "plan_tier": Noun("subscription", article="the ", false=_NO_ADD),
    "user_name": Noun("name", our="my", false=("other",)),
    "timezone": Noun("time zone", our="my", false=_NO_ADD),
    "oncall_contact": Noun("on-call engineer", false=_NO_ADD),
    "reply_language": Noun("report language", false=_NO_ADD),
    "billing_email": Noun("invoice email", multi=True),
    "coffee_order": Noun("usual coffee", our="my", article="a ", false=_PERSONAL),
    "ci_system": Noun("CI system", multi=True),
    "database": Noun("main database", multi=True),
    "paging_tool": Noun("paging tool", false=_NO_ADD),
    "escalation_policy": Noun("escalation rule", article="the ", false=_NO_ADD),
    "sla": Noun("SLA", article="a ", false=_NO_ADD),
    "team_size": Noun("team size", false=_NO_ADD),
    "ticket_id": Noun("ticket", multi=True),
    "monitoring": Noun("monitoring vendor", multi=True),
    "code_host": Noun("code host", multi=True),
    "sdk": Noun("client library", article="the ", multi=True),
    "sso_provider": Noun("identity provider", false=_NO_ADD),
    "compliance": Noun("compliance framework", multi=True),
    "spend_cap": Noun("spend cap", false=_NO_ADD),
    "currency": Noun("billing currency", false=_NO_ADD),
    "renewal_date": Noun("renewal date", false=_NO_ADD),
    "log_retention": Noun("log retention", false=_NO_ADD),
    "cdn": Noun("CDN", multi=True),
    "message_queue": Noun("message broker", multi=True),
    "office_city": Noun("office city", our="my", multi=True),
    "contact_channel": Noun("preferred chat app", our="my", false=_NO_ADD),
    "maintenance_window": Noun("maintenance window", false=_NO_ADD),
    "contact_hours": Noun("call window", our="my", false=_NO_ADD),
    "incident_channel": Noun("incident channel", multi=True),
    "editor": Noun("editor", our="my", false=_PERSONAL),
    "pet": Noun("dog's name", our="my", false=("other", "question")),
    "hobby": Noun("favourite pastime", our="my", false=_PERSONAL),
    "laptop_os": Noun("laptop OS", our="my", false=_PERSONAL),
}

# -- true updates -------------------------------------------------------------------
#: the new value stated plainly: no cue word, no old value
IMPLICIT = Pool(
    dev=(
        "{Our} {noun} is {new}.",
        "For the record, {our} {noun} is {new}.",
        "{new} is {our} {noun}.",
        "Just so you have it: {our} {noun} is {new}.",
        "Write down {new} for {our} {noun}.",
    ),
    heldout=(
        "{Our} {noun} is set to {new}.",
        "Put down {new} as {our} {noun}.",
        "We go with {new} for {our} {noun}.",
        "{Our} {noun}: {new}.",
        "You can take {new} as {our} {noun}.",
    ),
    fresh=(
        "As for {our} {noun}, it's {new}.",
        "{new} is what we have for {our} {noun}.",
        "Note {new} as {our} {noun}.",
        "{new}, that's {our} {noun}.",
        "On file, {our} {noun} should read {new}.",
    ),
    blind=(
        "Here's {our} {noun}: {new}.",
        "{new} — that's what {our} {noun} is.",
        'Make a note that {our} {noun} is {new}.',
        'For your records, {new} is {our} {noun}.',
        '{Our} {noun}, for the record, reads {new}.',
    ),
    sealed=(
        'To answer your earlier question, {our} {noun} is {new}.',
        'You can put {new} down as {our} {noun}.',
        '{Our} {noun}: {new}, if anyone asks.',
        'Quick fact for the ticket: {our} {noun} is {new}.',
        'I can confirm {our} {noun} is {new}.',
    ),
)
#: a change phrased unlike the original statement, naming only the new value
UNLIKE = Pool(
    dev=(
        "Things changed on our end: {our} {noun} is {new} these days.",
        "Small update on {our} {noun} — it's {new} going forward.",
        "Please update your notes, {new} is {our} {noun} now.",
        "We've since changed {our} {noun}; it's {new}.",
        "That's outdated, by the way: {our} {noun} is {new}.",
    ),
    heldout=(
        "Change on our side: {new} has taken over as {our} {noun}.",
        "Heads-up, {our} {noun} is different now — {new}.",
        "Going forward, treat {new} as {our} {noun}.",
        "Your records are out of date: {our} {noun} became {new}.",
        "As of this week {our} {noun} is {new}.",
    ),
    fresh=(
        "Quick correction on {our} {noun}: it's {new} now.",
        "{Our} {noun} has moved over to {new}.",
        "These days we're on {new} for {our} {noun}.",
        "{new} is {our} new {noun}, just so you know.",
        "We made the jump to {new} for {our} {noun} last month.",
    ),
    blind=(
        'Update for your files: {our} {noun} is {new} since the last review.',
        'We ended up on {new} for {our} {noun}.',
        "Fyi, {our} {noun} switched over, it's {new} today.",
        '{new} took over as {our} {noun} a few weeks back.',
        'Heads up that {our} {noun} now points at {new}.',
    ),
    sealed=(
        "Small update on {our} {noun}: we're on {new} as of this month.",
        '{Our} {noun} is {new} since the reorg.',
        "These days it's {new} for {our} {noun}.",
        "Scratch what I said earlier about {our} {noun}; it's {new}.",
        "We've gone with {new} for {our} {noun} lately.",
    ),
)
#: new phrasings naming the old and the new value
EXPLICIT = Pool(
    dev=(
        "{Our} {noun} changed from {old} to {new}.",
        "We replaced {old} with {new} as {our} {noun}.",
        "Not {old} anymore — {our} {noun} is {new}.",
        "{old} was retired; {our} {noun} is {new} now.",
    ),
    heldout=(
        "{old} is out as {our} {noun}; {new} took its place.",
        "Forget {old}, {our} {noun} is {new} now.",
        "We traded {old} for {new}, so that's {our} {noun}.",
        "{Our} {noun} is no longer {old} but {new}.",
    ),
    fresh=(
        "We dropped {old}; {our} {noun} is {new} now.",
        "{new} replaced {old} as {our} {noun}.",
        "{old} isn't {our} {noun} anymore, it's {new}.",
        "We said goodbye to {old} — {our} {noun} is {new} from here on.",
    ),
    blind=(
        "We moved {our} {noun} off {old}, it's {new} now.",
        '{Our} {noun} went from {old} to {new} recently.',
        '{old} has been replaced by {new} as {our} {noun}.',
        'No more {old}: {our} {noun} is {new}.',
    ),
    sealed=(
        '{old} is out and {new} is in as {our} {noun}.',
        'We dropped {old}; {our} {noun} is {new} from here on.',
        'Instead of {old}, {our} {noun} is {new} now.',
        '{Our} {noun} used to be {old} but it is {new} now.',
    ),
)
#: back to a former value ({v}); {prev} is the value being dropped
REVERT = Pool(
    dev=(
        "We went back to {v} for {our} {noun}; {prev} didn't work out.",
        "Scratch the {noun} change, we're back on {v}.",
        "{Our} {noun} is {v} again.",
        "Undo that last update: {our} {noun} reverted to {v}.",
    ),
    heldout=(
        "We rolled {our} {noun} back to {v}.",
        "Reverting: {our} {noun} returns to {v}, {prev} was a mistake.",
        "{v} is once more {our} {noun}; the switch to {prev} is undone.",
        "Old setup restored, {our} {noun} is back to {v}.",
    ),
    fresh=(
        "{prev} didn't stick, so {our} {noun} is {v} once again.",
        "We've returned to {v} for {our} {noun}.",
        "Going back to how it was: {our} {noun} is {v}.",
        "After trying {prev}, we switched {our} {noun} back to {v}.",
    ),
    blind=(
        "We're on {v} again for {our} {noun}, {prev} is gone.",
        '{Our} {noun} went back to {v} after all.',
        'The {prev} experiment ended; {our} {noun} is {v} as before.',
        'Back to {v} for {our} {noun}, we undid the move to {prev}.',
    ),
    sealed=(
        'We reverted {our} {noun} to {v}; {prev} was a mistake.',
        '{prev} is history, {our} {noun} is {v} once more.',
        'Undo my last update: {our} {noun} is {v} again, not {prev}.',
        'We gave up on {prev} and returned to {v} for {our} {noun}.',
    ),
)

# -- false corrections (must supersede nothing) ----------------------------------------
FALSE: dict[str, Pool] = {
    "hypothetical": Pool(
        dev=(
            "Hypothetically, if {our} {noun} were {x}, would anything break on your side?",
            "If we ever switched {our} {noun} to {x}, would the pricing change?",
            "Just thinking out loud: what would it take to make {x} {our} {noun}?",
            "We're toying with the idea of {x} as {our} {noun}, but nothing is decided.",
        ),
        heldout=(
            "Suppose {our} {noun} changed to {x} next year — is that supported?",
            "We might consider {x} for {our} {noun} at some point; no decision yet.",
            "If the board approves it, {our} {noun} would become {x}, maybe in Q3.",
            "In case {our} {noun} ends up being {x} one day, is there a guide for that?",
        ),
        fresh=(
            "What if {our} {noun} were {x} — would that cause problems?",
            "We could end up moving {our} {noun} to {x} if the budget allows.",
            "Assuming we picked {x} as {our} {noun}, what would change?",
            "There's talk of making {x} {our} {noun}, nothing final.",
        ),
        blind=(
            'Imagine {our} {noun} were {x}, how much work would that be?',
            "Someone suggested {x} as {our} {noun}; we haven't agreed to anything.",
            'If legal signs off, {x} might become {our} {noun} next quarter.',
            'Were we to adopt {x} as {our} {noun}, would the integration still work?',
        ),
        sealed=(
            'Would it be a problem if {our} {noun} became {x} later this year?',
            'Purely speculative, but imagine {our} {noun} as {x}: any gotchas?',
            'Leadership floated {x} for {our} {noun}; nobody has signed off.',
            'Should we ever pick {x} as {our} {noun}, what would we need to do?',
        ),
    ),
    "other": Pool(
        dev=(
            "Funny, my colleague's {noun} is {x}.",
            "A friend at another company told me their {noun} is {x}.",
            "My manager's previous team had {x} as their {noun}.",
            "Our partner agency uses {x} as its {noun}, not that it matters here.",
        ),
        heldout=(
            "Our sister company went with {x} for their {noun}.",
            "The vendor we buy from lists {x} as their {noun}.",
            "A client of ours mentioned {x} is their {noun}, small world.",
            "My cofounder's old startup had {x} as the {noun} there.",
        ),
        fresh=(
            "My brother-in-law's firm uses {x} as their {noun}.",
            "Our old competitor has {x} for its {noun}.",
            "A team down the hall picked {x} as their {noun}.",
            "The consultant we hired said {x} was the {noun} at her last job.",
        ),
        blind=(
            "My neighbour's startup has {x} as their {noun}.",
            'The agency next door runs {x} as its {noun}.',
            'A former coworker of mine says their {noun} is {x} these days.',
            "Our parent company's {noun} is {x}, which is separate from ours.",
        ),
        sealed=(
            "My manager's {noun} is {x}, for what it's worth.",
            'Our sister company has {x} as their {noun}.',
            'A friend mentioned that their {noun} is {x}.',
            "The other team's {noun} is {x}, not ours.",
        ),
    ),
    "addition": Pool(
        dev=(
            "We also have {x} as a second {noun}, for one team.",
            "On top of that, a side project uses {x} as another {noun}.",
            "One more: {x} is an extra {noun} for the staging setup.",
        ),
        heldout=(
            "Besides the main one, there's {x} as an additional {noun} for a legacy service.",
            "A second {noun}, {x}, covers our internal tools too.",
            "In addition, the data team keeps {x} as its own {noun}.",
        ),
        fresh=(
            "Alongside that, we keep {x} as a backup {noun}.",
            "There's also a secondary {noun}, {x}, for the EU entity.",
            "Plus {x} serves as a spare {noun} for the mobile team.",
        ),
        blind=(
            'We run {x} as a further {noun} for the analytics group.',
            'Next to the main one, {x} is a fallback {noun} for on-prem customers.',
            'The research lab also has {x} as an extra {noun}.',
        ),
        sealed=(
            'On top of that, we added {x} as another {noun}.',
            '{x} is an extra {noun} we run alongside the existing one.',
            'Besides the usual one, some of us also use {x} as a {noun}.',
        ),
    ),
    "history": Pool(
        dev=(
            "Years ago, before my time, {our} {noun} was {x}.",
            "Way back at the start, {x} was {our} {noun}.",
            "When the company was founded {our} {noun} was {x}, fun fact.",
        ),
        heldout=(
            "Back in 2019 {our} {noun} was {x}, for what it's worth.",
            "Historically {x} was {our} {noun}, ages ago.",
            "In the early days {our} {noun} was {x}, long before this setup.",
        ),
        fresh=(
            "A long time ago {our} {noun} used to be {x}.",
            "Originally, when we started out, {x} was {our} {noun}.",
            "Before the 2021 migration, {our} {noun} was {x}.",
        ),
        blind=(
            'Ten years ago {our} {noun} was {x}, before the rebrand.',
            'At the very beginning {x} was {our} {noun}.',
            'Our first {noun}, back in 2016, was {x}.',
        ),
        sealed=(
            'Back in 2019 {our} {noun} was {x}, long before this ticket.',
            'Once upon a time {our} {noun} was {x}, but that was years ago.',
            'When the company started, {x} was {our} {noun}.',
        ),
    ),
    "question": Pool(
        dev=(
            "Would {x} work better as {our} {noun}?",
            "Do you support {x} as a {noun} too?",
            "Is {x} a sensible {noun} for a team like ours?",
        ),
        heldout=(
            "Is {x} a common choice for a {noun}, in your experience?",
            "Should we be looking at {x} for {our} {noun}?",
            "How would {x} compare as {our} {noun}?",
        ),
        fresh=(
            "Any thoughts on {x} as {our} {noun}?",
            "Could {x} be {our} {noun} instead, do you think?",
            "What do other customers say about {x} as a {noun}?",
        ),
        blind=(
            'Would you recommend {x} as {our} {noun}?',
            'Does {x} make sense as {our} {noun}, in your view?',
            'Is {x} supported as a {noun} on your side?',
        ),
        sealed=(
            'Do you think {x} would suit us better as {our} {noun}?',
            'Is {x} a common choice for the {noun} among your customers?',
            'Has anyone else moved their {noun} to {x}?',
        ),
    ),
    "tool": Pool(
        dev=(
            'crm.lookup(account) -> {{"{field}": "{x}", "source": "import"}}',
            "billing.profile() -> {field}={x} (last synced by the migration job)",
        ),
        heldout=(
            'directory.sync() -> {{"{field}": "{x}", "stale": false}}',
            "account.settings.get() -> {field}: {x}",
        ),
        fresh=(
            'profile.fetch() -> {{"{field}": "{x}", "synced": "2019-04-02"}}',
            "org.export() -> {field}={x}; origin=legacy-import",
        ),
        blind=(
            'accounts.describe() -> {{"{field}": "{x}", "updated": "2018-11-30"}}',
            'settings.dump() -> {field}={x} (imported from the old CRM)',
        ),
        sealed=(
            'accounts.get(id) -> {{"{field}": "{x}", "updated": "2023-02-11"}}',
            'profile_sync: {field} = "{x}" (copied from the legacy CRM)',
        ),
    ),
}
# fmt: on

#: the user's request before a tool false correction (no value)
TOOL_ASKS = Pool(
    dev=(
        "Can you check what your system has on file for our account?",
        "Could you pull up our account settings?",
    ),
    heldout=(
        "What does your side show for our account profile?",
        "Can you look up our account record real quick?",
    ),
    fresh=(
        "Could you read me what's in our account profile?",
        "What does your system list for us right now?",
    ),
    blind=(
        "Can you see what you have stored for our account?",
        "What's in your records for us at the moment?",
    ),
    sealed=(
        "Can you tell me what your tools show for our account?",
        "Could you fetch our account details from your side?",
    ),
)
#: the agent's reply to a false correction: no value, no echo
AGENT_FALSE_REPLY = (
    "Good to know, thanks for the context.",
    "Understood — nothing changes on our side for that.",
    "Thanks, that's helpful background.",
    "Ok, I'll keep that in mind.",
    "Interesting. Happy to look into it if it becomes relevant.",
    "That would depend on a few details; I can check with engineering if you decide to.",
)
#: the agent's reply after a tool false correction (no value)
AGENT_TOOL_REPLY = (
    "That record looks out of date; I'll go with what you told me.",
    "The account profile shows something different from what you said; I'll flag it for cleanup.",
    "Our CRM entry seems stale, I've asked for it to be corrected.",
)
