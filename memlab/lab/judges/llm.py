"""``judge=llm``: a chat model grades each answer with a published judge prompt.

Prompts (kept verbatim; ``prompt_sha256`` hashes them, and the judge's ``name``
carries that hash, so results name exactly what graded them):

- **LongMemEval** (Wu et al., ICLR 2025; xiaowu0162/LongMemEval,
  ``src/evaluation/evaluate_qa.py``, ``get_anscheck_prompt``, MIT license): one
  template per question type (``single-session-user``,
  ``single-session-assistant`` and ``multi-session`` share one;
  ``temporal-reasoning`` forgives off-by-one day counts; ``knowledge-update``
  accepts earlier values next to the updated one; ``single-session-preference``
  grades against a rubric) and one for abstention questions. Upstream sends the
  prompt as the only user message at temperature 0 with ``max_tokens`` 10 and
  counts the answer correct when the reply contains "yes" (case-insensitive);
  so does memlab.
- **LoCoMo**, in the style the memory systems report (mem0's
  ``evaluation/metrics/llm_judge.py``, ``ACCURACY_PROMPT``, Apache-2.0, at
  commit 2352a44193bd0e36cd544fc5664cbee14e020bc2; Zep, Memobase, LangMem and
  MemMachine report LoCoMo with the same prompt): a generous CORRECT/WRONG
  label, asked as JSON ``{"label": ...}``. mem0 sends it at temperature 0 with
  a JSON response format; memlab sends no response format (local servers differ
  in supporting it) and reads the label from the JSON object in the reply, or,
  failing that, from the one of CORRECT / WRONG the reply contains. A reply with
  neither (or both, outside JSON) is left ungraded (NaN), its text kept. A reply
  cut at ``max_tokens`` (finish_reason ``length``) counts only by its JSON label:
  the words before it are reasoning, so without one it is ungraded.

- **LoCoMo, strict** (``locomo_strict``, memlab's own): the same labels, but an
  answer must state the gold answer's specific; a topical answer that commits to
  nothing, or that hedges between alternatives, is WRONG. Asked as JSON only.
  ``memlab judge calibrate`` measures how often each prompt accepts known-wrong
  answers.

An empty reply (whitespace only, e.g. a reasoning model that spent the budget
before answering) is left ungraded (NaN) in every family: it holds no "yes" and
no label, which is no verdict that the answer is wrong.

Prompt families are ``JudgePrompt`` entries of ``PROMPTS`` (``longmemeval``,
``locomo`` and ``locomo_strict``); ``register_prompt`` adds one, and its name
becomes a value of ``judge.prompt``. Which family grades a probe
(``prompt``): ``auto`` takes LoCoMo's for
transcripts of the ``locomo`` dataset and LongMemEval's for every other (by
question type; the synthetic transcripts' ``corrected`` probes use
``knowledge-update``, other categories the first template). Abstention
questions (LongMemEval's ``_abs`` questions, and LoCoMo's adversarial category,
which mem0's prompt does not cover) use LongMemEval's abstention template; for
LoCoMo the "explanation" it shows is that the conversation does not hold the
answer, followed by the adversarial answer the question baits.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from memlab.errors import ConfigError
from memlab.lab.judges import JUDGES, Question, Verdict
from memlab.lab.readers import Prices
from memlab.memory import CachedChat, Completion, ModelCache, OpenAIChat, estimate_tokens

_INTRO = "I will give you a question, a correct answer, and a response from a model. "
_CONTAINS = "Please answer yes if the response contains the correct answer. Otherwise, answer no. "
_STEPS = (
    "If the response is equivalent to the correct answer or contains all the intermediate "
    "steps to get the correct answer, you should also answer yes. If the response only "
    "contains a subset of the information required by the answer, answer no. "
)
_QA = (
    "\n\nQuestion: {question}\n\nCorrect Answer: {answer}\n\nModel Response: {response}"
    "\n\nIs the model response correct? Answer yes or no only."
)
LONGMEMEVAL_PROMPTS: dict[str, str] = {
    "default": _INTRO + _CONTAINS + _STEPS + _QA,
    "temporal-reasoning": _INTRO
    + _CONTAINS
    + _STEPS
    + "In addition, do not penalize off-by-one errors for the number of days. If the question "
    "asks for the number of days/weeks/months, etc., and the model makes off-by-one errors "
    "(e.g., predicting 19 days when the answer is 18), the model's response is still correct. "
    + _QA,
    "knowledge-update": _INTRO
    + _CONTAINS
    + "If the response contains some previous information along with an updated answer, the "
    "response should be considered as correct as long as the updated answer is the required "
    "answer." + _QA,
    "single-session-preference": "I will give you a question, a rubric for desired personalized "
    "response, and a response from a model. Please answer yes if the response satisfies the "
    "desired response. Otherwise, answer no. The model does not need to reflect all the points "
    "in the rubric. The response is correct as long as it recalls and utilizes the user's "
    "personal information correctly.\n\nQuestion: {question}\n\nRubric: {answer}\n\nModel "
    "Response: {response}\n\nIs the model response correct? Answer yes or no only.",
    "abstention": "I will give you an unanswerable question, an explanation, and a response from "
    "a model. Please answer yes if the model correctly identifies the question as unanswerable. "
    "The model could say that the information is incomplete, or some other information is given "
    "but the asked information is not.\n\nQuestion: {question}\n\nExplanation: {answer}\n\n"
    "Model Response: {response}\n\nDoes the model correctly identify the question as "
    "unanswerable? Answer yes or no only.",
}
"""LongMemEval's judge templates by question type (``default``: single-session-user,
single-session-assistant, multi-session and any other type)."""

LONGMEMEVAL_TYPES = {
    "temporal-reasoning": "temporal-reasoning",
    "knowledge-update": "knowledge-update",
    "corrected": "knowledge-update",  # the synthetic transcripts' corrected facts
    "single-session-preference": "single-session-preference",
}

LOCOMO_PROMPT = "\n".join(
    [
        "",
        "Your task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be "
        "given the following data:",
        "    (1) a question (posed by one user to another user), ",
        "    (2) a ’gold’ (ground truth) answer, ",
        "    (3) a generated answer",
        "which you will score as CORRECT/WRONG.",
        "",
        "The point of the question is to ask about something one user should know about the "
        "other user based on their prior conversations.",
        "The gold answer will usually be a concise and short answer that includes the referenced "
        "topic, for example:",
        "Question: Do you remember what I got the last time I went to Hawaii?",
        "Gold answer: A shell necklace",
        "The generated answer might be much longer, but you should be generous with your grading "
        "- as long as it touches on the same topic as the gold answer, it should be counted as "
        "CORRECT. ",
        "",
        "For time related questions, the gold answer will be a specific date, month, year, etc. "
        'The generated answer might be much longer or use relative time references (like "last '
        'Tuesday" or "next month"), but you should be generous with your grading - as long as it '
        "refers to the same date or time period as the gold answer, it should be counted as "
        'CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT '
        "if it's the same date.",
        "",
        "Now it's time for the real question:",
        "Question: {question}",
        "Gold answer: {gold_answer}",
        "Generated answer: {generated_answer}",
        "",
        "First, provide a short (one sentence) explanation of your reasoning, then finish with "
        "CORRECT or WRONG. ",
        "Do NOT include both CORRECT and WRONG in your response, or it will break the "
        "evaluation script.",
        "",
        'Just return the label CORRECT or WRONG in a json format with the key as "label".',
        "",
    ]
)
"""mem0's LoCoMo judge prompt (``ACCURACY_PROMPT``), verbatim."""

LOCOMO_ABSTENTION = "The conversation does not contain the answer to this question"
PARSE_VERSION = 4  # bump when the reading of a reply changes

_JSON = re.compile(r"\{.*\}", re.S)
_CORRECT = re.compile(r"\bCORRECT\b")
_NEGATED_CORRECT = re.compile(r"\b(?i:not|isn['’]t|never)\s+CORRECT\b")


def read_yes(text: str) -> float:
    """LongMemEval's rule: correct when the reply contains "yes" (any case)."""
    return 1.0 if "yes" in text.lower() else 0.0


def json_label(text: str) -> float:
    """The CORRECT/WRONG ``label`` of the JSON object in the reply; NaN without one."""
    found = _JSON.search(text)
    if found is not None:
        try:
            label = json.loads(found.group(0)).get("label")
        except (ValueError, AttributeError, RecursionError):  # too deep a nesting: no label
            label = None
        if isinstance(label, str) and label.strip().upper() in ("CORRECT", "WRONG"):
            return 1.0 if label.strip().upper() == "CORRECT" else 0.0
    return math.nan


def read_label(text: str) -> float:
    """mem0's CORRECT/WRONG label: from the JSON object in the reply (``label``), or
    the only one of CORRECT / WRONG the reply contains ("NOT CORRECT" counts as
    WRONG); NaN if neither decides."""
    label = json_label(text)
    if not math.isnan(label):
        return label
    # "NOT CORRECT" is a verdict of wrong, not a mention of CORRECT.
    negated = _NEGATED_CORRECT.search(text) is not None
    correct = _CORRECT.search(_NEGATED_CORRECT.sub(" ", text)) is not None
    wrong = negated or re.search(r"\bWRONG\b", text) is not None
    if correct != wrong:
        return 1.0 if correct else 0.0
    return math.nan


def abstention_prompt(q: Question) -> str:
    """LongMemEval's abstention template (for LoCoMo's adversarial questions, the
    "explanation" says the conversation does not hold the answer, and names the
    answer the question baits)."""
    gold = q.gold or ""
    if q.dataset == "locomo":
        gold = f"{LOCOMO_ABSTENTION} (it baits the answer: {gold})" if gold else LOCOMO_ABSTENTION
    template = LONGMEMEVAL_PROMPTS["abstention"]
    return template.format(question=q.question, answer=gold, response=q.answer)


@dataclass(frozen=True)
class JudgePrompt:
    """A family of judge prompts: how a question becomes the judge model's one user
    message, how its reply becomes a score, and the reply's token budget.

    Attributes:
        name: the family's name (``judge.prompt``).
        render: the message for a ``Question`` (abstention questions included).
        read: the score of a reply to it (1.0, 0.0, or NaN when it decides nothing).
        max_tokens: the reply's token budget (part of each request's cache key).
        texts: every template the family uses, for its hash.
        source: where the prompts come from.
        read_cut: the score of a reply cut at ``max_tokens`` (finish_reason
            ``length``); None: read as any reply.
    """

    name: str
    render: Callable[[Question], str]
    read: Callable[[Question, str], float]
    max_tokens: int
    texts: tuple[str, ...]
    source: str
    read_cut: Callable[[Question, str], float] | None = None

    def sha256(self) -> str:
        """SHA-256 of the family's templates, budget and reply-reading version."""
        blob = json.dumps([self.texts, self.max_tokens, PARSE_VERSION])
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _longmemeval(q: Question) -> str:
    if q.abstention:
        return abstention_prompt(q)
    template = LONGMEMEVAL_PROMPTS[LONGMEMEVAL_TYPES.get(q.category, "default")]
    return template.format(question=q.question, answer=q.gold or "", response=q.answer)


def _locomo(q: Question) -> str:
    if q.abstention:
        return abstention_prompt(q)
    return LOCOMO_PROMPT.format(
        question=q.question, gold_answer=q.gold or "", generated_answer=q.answer
    )


def _read_cut_label(q: Question, text: str) -> float:
    # Cut before its label, the reply's CORRECT or WRONG is a word of its reasoning
    # ("the date is WRONG, but the event..."), not its verdict: only a JSON label counts.
    return read_yes(text) if q.abstention else json_label(text)


PROMPTS: dict[str, JudgePrompt] = {}
"""Judge prompt families by name (``judge.prompt``); ``register_prompt`` adds one."""


def register_prompt(prompt: JudgePrompt) -> JudgePrompt:
    """Add a prompt family (e.g. a stricter LoCoMo prompt); its name becomes a value
    of ``judge.prompt``.

    Raises:
        ConfigError: the name is taken by another family, or is ``auto``.
    """
    current = PROMPTS.get(prompt.name)
    if prompt.name == "auto" or (current is not None and current != prompt):
        raise ConfigError(f"judge prompt {prompt.name!r} is taken; choose another name")
    PROMPTS[prompt.name] = prompt
    return prompt


register_prompt(
    JudgePrompt(
        "longmemeval",
        _longmemeval,
        lambda q, text: read_yes(text),
        10,  # upstream's budget: "yes" or "no"
        tuple(LONGMEMEVAL_PROMPTS.values()),
        "xiaowu0162/LongMemEval src/evaluation/evaluate_qa.py (get_anscheck_prompt)",
    )
)
register_prompt(
    JudgePrompt(
        "locomo",
        _locomo,
        lambda q, text: read_yes(text) if q.abstention else read_label(text),
        256,  # a sentence of reasoning, then the JSON label
        (LOCOMO_PROMPT, LONGMEMEVAL_PROMPTS["abstention"]),
        "mem0ai/mem0 evaluation/metrics/llm_judge.py (ACCURACY_PROMPT) at 2352a441",
        _read_cut_label,
    )
)


LOCOMO_STRICT_PROMPT = "\n".join(
    [
        "You grade an answer to a question about a conversation between two people, "
        "against the gold answer.",
        "",
        "Question: {question}",
        "Gold answer: {gold_answer}",
        "Answer to grade: {generated_answer}",
        "",
        "Label the answer CORRECT only if it states the specific information of the gold "
        "answer: the same person, thing, place, number or date. Other words for the same "
        "thing, another date format, a more precise date within the gold period, and extra "
        "detail that does not contradict the gold answer are all fine.",
        "Label the answer WRONG if any of these holds:",
        "- it states a different specific: another name, thing, place or number, or a date "
        "outside the gold period;",
        "- it stays on the topic but does not commit to the gold answer's specific, e.g. "
        '"some time last year" for "19 March 2021", "a sport" for "fencing", '
        '"mixed feelings" for "homesick";',
        "- it offers several alternatives and leaves open which one holds;",
        "- the gold answer lists several items and the answer gives fewer than half of them.",
        "Judge only the answer's content against the gold answer, not its style or length.",
        "",
        'Reply with one JSON object and nothing else: {{"label": "CORRECT"}} or '
        '{{"label": "WRONG"}}.',
    ]
)
"""memlab's strict LoCoMo judge prompt: a topical but vague answer is wrong.

mem0's prompt asks the judge to "be generous ... as long as it touches on the
same topic as the gold answer"; the public LoCoMo audit found that it accepts
most vague-but-topical answers. This prompt asks for the gold answer's specific
instead, and lists the evasions that do not count; its examples are made up, not
taken from LoCoMo or the audit's answers (the data it is calibrated on).
``memlab judge calibrate`` measures both (docs/trust.md)."""


def _locomo_strict(q: Question) -> str:
    if q.abstention:
        return abstention_prompt(q)
    return LOCOMO_STRICT_PROMPT.format(
        question=q.question, gold_answer=q.gold or "", generated_answer=q.answer
    )


register_prompt(
    JudgePrompt(
        "locomo_strict",
        _locomo_strict,
        lambda q, text: read_yes(text) if q.abstention else read_label(text),
        32,  # the JSON label only
        (LOCOMO_STRICT_PROMPT, LONGMEMEVAL_PROMPTS["abstention"]),
        "memlab (memlab.lab.judges.llm.LOCOMO_STRICT_PROMPT): a strict LoCoMo judge",
        _read_cut_label,
    )
)


def prompt_sha256(names: Iterable[str] | None = None) -> str:
    """SHA-256 over the hashes of the named families (default: every registered one)."""
    chosen = sorted(PROMPTS if names is None else names)
    blob = json.dumps({n: PROMPTS[n].sha256() for n in chosen}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


AUTO_FAMILIES = ("locomo", "longmemeval")
"""The families ``prompt: auto`` chooses from (``family_of``)."""


def family_of(q: Question, prompt: str) -> str:
    """The prompt family that grades ``q`` (``prompt``: auto, or a family's name):
    auto takes ``locomo`` for LoCoMo's questions and ``longmemeval`` for others."""
    if prompt != "auto":
        return prompt
    return "locomo" if q.dataset == "locomo" else "longmemeval"


def judge_prompt(q: Question, family: str) -> str:
    """The single user message that asks the judge model about ``q``."""
    return PROMPTS[family].render(q)


def _gradable(q: Question) -> bool:
    """Whether the judge model is asked about ``q``: an abstention question, or one
    with a gold answer."""
    return q.abstention or bool((q.gold or "").strip())


@JUDGES.register("llm")
class LLMJudge:
    """A chat model that grades answers with the published prompts (see the module
    docstring), at temperature 0, through the persistent model cache.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1``.
        model: the judge model (LongMemEval's paper used gpt-4o-2024-08-06, mem0
            gpt-4o-mini).
        prompt: ``auto`` (by dataset), ``longmemeval``, ``locomo`` or
            ``locomo_strict``.
        price_per_1k_input: US dollars per 1,000 prompt tokens (gpt-4o-mini's by
            default).
        price_per_1k_output: US dollars per 1,000 completion tokens.
        api_key_env: NAME of the environment variable holding the key.
        api_key_header: ``Authorization`` (Bearer) or e.g. ``api-key`` (Azure).
        timeout: seconds per connect/read/write.
        max_retries: retries of a 429, 5xx or timeout.
        backoff: base backoff delay in seconds.
        max_delay: cap on one wait, and on an honoured Retry-After.
        cache: the persistent model cache (the lab passes it; None: no caching).
        client: an httpx.Client to use (not closed by us).
        transport: an httpx transport for the clients we create (tests).
        sleep: replaces ``time.sleep`` between retries (tests).
        seed: seeds the backoff jitter.
    """

    def __init__(
        self,
        base_url: str = "https://api.openai.com/v1",
        model: str = "gpt-4o-mini",
        *,
        prompt: str = "auto",
        price_per_1k_input: float = 0.00015,
        price_per_1k_output: float = 0.0006,
        api_key_env: str | None = "OPENAI_API_KEY",
        api_key_header: str = "Authorization",
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_delay: float = 60.0,
        cache: ModelCache | None = None,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        seed: int | None = None,
    ) -> None:
        if prompt != "auto" and prompt not in PROMPTS:
            raise ConfigError(f"prompt must be auto or one of {sorted(PROMPTS)}, got {prompt!r}")
        self.prompt = prompt
        self.prices: Prices | None = Prices(price_per_1k_input, price_per_1k_output)
        self._own_client = client is None
        # One connection pool for the judge's clients.
        self._client = client or httpx.Client(timeout=httpx.Timeout(timeout), transport=transport)
        settings: dict[str, Any] = dict(
            api_key_env=api_key_env,
            api_key_header=api_key_header,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_delay=max_delay,
            client=self._client,
            sleep=sleep,
            seed=seed,
            who="judge",
        )
        # One client per family: the reply budget is part of each request's cache key.
        families = list(AUTO_FAMILIES) if prompt == "auto" else [prompt]
        self._endpoints = {
            family: OpenAIChat(base_url, model, max_tokens=PROMPTS[family].max_tokens, **settings)
            for family in families
        }
        self._chats: dict[str, OpenAIChat | CachedChat] = {
            family: chat if cache is None else CachedChat(chat, cache)
            for family, chat in self._endpoints.items()
        }
        first = self._endpoints[families[0]]
        self._check = first.check
        self.model = model
        self.prompt_sha256 = prompt_sha256(families)
        self.name = f"llm:{first.name}:{prompt}:prompts-{self.prompt_sha256[:12]}"

    def __repr__(self) -> str:
        return f"LLMJudge({self.name!r})"

    @property
    def requests(self) -> int:
        """HTTP requests sent (the endpoint check and retries included)."""
        return sum(e.requests for e in self._endpoints.values())

    def grade(self, q: Question) -> Verdict:
        if not _gradable(q):
            return Verdict.of(math.nan, "no gold answer")
        family = family_of(q, self.prompt)
        messages = [{"role": "user", "content": judge_prompt(q, family)}]
        return self._verdict(q, family, self._chats[family].complete(messages))

    def lookup(self, q: Question) -> Verdict | None:
        """The verdict on ``q`` from the cache, or None; sends nothing."""
        family = family_of(q, self.prompt)
        chat = self._chats[family]
        if not isinstance(chat, CachedChat):
            return None
        found = chat.lookup([{"role": "user", "content": judge_prompt(q, family)}])
        return None if found is None else self._verdict(q, family, found)

    def _verdict(self, q: Question, family: str, completion: Completion) -> Verdict:
        if not completion.text.strip():
            # An empty reply (e.g. a reasoning model that spent max_tokens before
            # answering) says neither yes nor no: "yes" not in it is no verdict of wrong.
            return Verdict.of(math.nan, completion.text, completion)
        prompt = PROMPTS[family]
        read = prompt.read
        if completion.finish_reason == "length" and prompt.read_cut is not None:
            read = prompt.read_cut
        return Verdict.of(read(q, completion.text), completion.text, completion)

    def cost_bound(self, q: Question, answer_tokens: int) -> float:
        """0.0 for a question ``grade`` leaves ungraded without a call (no gold answer)."""
        assert self.prices is not None
        if not _gradable(q):
            return 0.0
        family = family_of(q, self.prompt)
        # The answer is counted by answer_tokens, so the prompt is rendered without it
        # (grading a finished answer would otherwise count it twice).
        prompt = estimate_tokens(judge_prompt(replace(q, answer=""), family)) + answer_tokens
        return self.prices.cost(prompt, PROMPTS[family].max_tokens)

    def check(self) -> None:
        self._check()

    def stats(self) -> Any:
        """Hits and misses of the judge's cache (None without a cache)."""
        cached = [c for c in self._chats.values() if isinstance(c, CachedChat)]
        if not cached:
            return None
        from memlab.memory import CacheStats

        parts = [c.stats for c in cached]
        return CacheStats(
            sum(p.hits for p in parts),
            sum(p.misses for p in parts),
            sum(p.model_seconds for p in parts),
            sum(p.cache_seconds for p in parts),
        )

    def close(self) -> None:
        for chat in self._chats.values():
            chat.close()
        if self._own_client:
            self._client.close()
