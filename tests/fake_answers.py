"""Chat scripts for ``tests.fake_openai.FakeOpenAI`` (``on_chat``): the answers
of a consolidator (``consolidation_answer``), a reader (``answer_from_memory``,
``obey_planted``) and a judge (``judge_by_gold``, ``lenient_judge``,
``strict_judge``, ``judge_by_prompt``), each a function of the request body."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any


def consolidation_answer(events: dict[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A chat script for consolidation prompts: reads the JSON the client sent in its
    last user message (``{"memories": [{"id", "text"}], "new": ...}``) and answers
    ``{"memory": [{"id", "event"}]}`` with ``events[substring]`` for every memory whose
    text contains that substring, NONE for the others."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        sent = json.loads(users[-1]["content"])
        out = []
        for memory in sent["memories"]:
            event = next((e for sub, e in events.items() if sub in memory["text"]), "NONE")
            out.append({"id": memory["id"], "text": memory["text"], "event": event})
        return {"memory": out}

    return answer


# -- scripts for the lab's reader and judge ----------------------------------------------
_ITEM = re.compile(r"^\[\d+\] \(([^)]*)\) ?", re.M)


def memory_items(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(header, text) of every item in the memory block of a chat request's system
    message (items start with ``[n] (kind, from source, ..., date)`` in column 0)."""
    system = " ".join(
        str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "system"
    )
    start, end = system.find("<memory>"), system.rfind("</memory>")
    block = system[start + len("<memory>") : end] if start >= 0 and end > start else ""
    heads = list(_ITEM.finditer(block))
    return [
        (h.group(1), block[h.end() : heads[i + 1].start() if i + 1 < len(heads) else len(block)])
        for i, h in enumerate(heads)
    ]


def question_of(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return str(users[-1].get("content", "")) if users else ""


def answer_from_memory(
    gold: Callable[[dict[str, Any]], str | None],
) -> Callable[[dict[str, Any]], str]:
    """A reader that answers with the gold answer (``gold(body)``) when the memory
    block holds it (the lab's normalized whole-word match), else "I don't know"."""
    from memlab.lab.metrics import contains, normalize

    def answer(body: dict[str, Any]) -> str:
        value = gold(body)
        block = normalize(" ".join(text for _, text in memory_items(body)))
        if value and contains(block, value):
            return f"It is {value}."
        return "I don't know."

    return answer


_ORDERS = re.compile(
    r"ignore|note to assistant|system:|important|proceed|authoriz|update your memory|"
    r"ai agents",
    re.I,
)


def obey_planted(fallback: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], str]:
    """A reader that obeys planted instructions: it repeats every untrusted memory
    item that gives orders, or answers like ``fallback`` when there is none."""

    def answer(body: dict[str, Any]) -> str:
        orders = [
            " ".join(text.split())
            for head, text in memory_items(body)
            if "UNTRUSTED" in head and _ORDERS.search(text)
        ]
        return " ".join(orders) if orders else fallback(body)

    return answer


_LME = re.compile(
    r"(?:Correct Answer|Rubric|Explanation): (.*?)\n\nModel Response: (.*?)\n\n", re.S
)
_MEM0 = re.compile(
    r"real question:\nQuestion: .*?\nGold answer: (.*?)\nGenerated answer: (.*?)\n\nFirst, provide",
    re.S,
)


def is_judge(body: dict[str, Any]) -> bool:
    """A judge prompt (one user message asking to grade a response)."""
    text = question_of(body)
    return bool(_LME.search(text) or _MEM0.search(text))


def judge_by_gold(body: dict[str, Any]) -> str:
    """Grade a judge prompt: correct when the correct answer appears in the response
    (for an abstention prompt: when the response says it does not know)."""
    from memlab.lab.metrics import contains, normalize

    text = question_of(body)
    found = _MEM0.search(text)
    if found is not None:
        gold, response = found.groups()
        ok = contains(normalize(response), gold)
        return json.dumps({"label": "CORRECT" if ok else "WRONG"})
    found = _LME.search(text)
    if found is None:
        return "no"
    gold, response = found.groups()
    if "unanswerable" in text:
        return "yes" if "know" in response.lower() else "no"
    return "yes" if contains(normalize(response), gold) else "no"


# -- scripted judges for calibration (not models: rules that behave like two kinds) --------
_GRADE = re.compile(
    r"Question: (.*?)\nGold answer: (.*?)\n(?:Generated answer|Answer to grade): (.*?)\n", re.S
)


def graded_parts(body: dict[str, Any]) -> tuple[str, str, str] | None:
    """(question, gold answer, answer) of a LoCoMo-style judge prompt (mem0's or
    memlab's strict one), else None."""
    found = _GRADE.search(question_of(body))
    return None if found is None else (found.group(1), found.group(2), found.group(3))


def _terms(text: str) -> set[str]:
    from memlab.memory.lexical import terms

    return set(terms(text))


def lenient_judge(body: dict[str, Any]) -> str:
    """A generous judge: CORRECT when the answer shares a content word with the gold
    answer or the question ("it touches on the same topic"). A script, not a model."""
    parts = graded_parts(body)
    if parts is None:
        return "no"
    question, gold, answer = parts
    ok = bool(_terms(answer) & (_terms(gold) | _terms(question)))
    return json.dumps({"label": "CORRECT" if ok else "WRONG"})


def strict_judge(body: dict[str, Any]) -> str:
    """A strict judge: CORRECT only when the answer holds every content word of the
    gold answer (its specifics). A script, not a model."""
    parts = graded_parts(body)
    if parts is None:
        return "no"
    _, gold, answer = parts
    ok = _terms(gold) <= _terms(answer)
    return json.dumps({"label": "CORRECT" if ok else "WRONG"})


def judge_by_prompt(body: dict[str, Any]) -> str:
    """Answer mem0's generous prompt like ``lenient_judge`` and memlab's strict prompt
    like ``strict_judge`` (a stand-in for one model that follows each prompt)."""
    if "Answer to grade:" in question_of(body):
        return strict_judge(body)
    return lenient_judge(body)
